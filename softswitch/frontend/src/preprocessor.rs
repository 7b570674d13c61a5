//! Preprocessor: `#include` (the built-in `core.p4` and `v1model.p4`, and, when the caller
//! allows it, files relative to the including file), object-like and function-like `#define`
//! with `#` (stringizing) and `##` (token pasting) as in C, `#undef`,
//! `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else`/`#endif`, `#line`, `#error` and `#warning`. It
//! works on tokens, so every token keeps its own file:line:col (a pasted token spans its two
//! halves). It keeps within the [`limits`](crate::limits) on source bytes, include depth, tokens
//! and macro expansion (pasted and stringized text counts a unit per byte).

use crate::diagnostic::{fail, Diagnostic, Diagnostics, Result};
use crate::lexer::{lex, lex_range, Tok, Token};
use crate::limits::{
    MAX_INCLUDE_DEPTH, MAX_MACRO_EXPANSION, MAX_NESTING, MAX_SOURCE_BYTES, MAX_TOKENS,
};
use crate::source::{SourceMap, Span};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The built-in standard headers: `(name, text)`.
pub const BUILTIN_HEADERS: [(&str, &str); 2] = [
    ("core.p4", include_str!("p4include/core.p4")),
    ("v1model.p4", include_str!("p4include/v1model.p4")),
];

/// What `#include` may read besides the built-in headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Includes {
    /// Nothing: the program must be self-contained. For a device config received over
    /// P4Runtime, which must never read the switch's files.
    BuiltinOnly,
    /// Files on this machine, relative to the including file: for a program the user names.
    Files,
}

/// The preprocessed program.
struct Preprocessed {
    /// Its tokens, ending in `Eof`.
    tokens: Vec<Token>,
    /// Every `#include` of a file that was read: the directive and the file it brought in.
    included: Vec<(Span, u32)>,
    /// `#warning`s, in order.
    warnings: Vec<Diagnostic>,
}

/// Preprocesses file `file` of `map` (which receives every included file) into tokens ending in
/// `Eof`, reading included files as `includes` allows.
pub fn preprocess(map: &mut SourceMap, file: u32, includes: Includes) -> Result<Vec<Token>> {
    preprocess_reporting(map, file, includes, &mut Diagnostics::default())
}

/// [`preprocess`], recording `#warning`s in `diags`.
pub fn preprocess_reporting(
    map: &mut SourceMap,
    file: u32,
    includes: Includes,
    diags: &mut Diagnostics,
) -> Result<Vec<Token>> {
    let done = run(map, file, includes)?;
    for w in done.warnings {
        diags.warn(w);
    }
    Ok(done.tokens)
}

/// File `file` of `map` with each local `#include` that preprocessing takes replaced by the
/// included text (the built-in headers' `#include`s stay): one self-contained program, as a
/// device config must be. The text is what preprocessing of `file` reads, so it is within
/// [`MAX_SOURCE_BYTES`], and the program must preprocess without error.
pub fn inline_includes(map: &mut SourceMap, file: u32) -> Result<String> {
    let done = run(map, file, Includes::Files)?;
    let mut out = String::new();
    write_inlined(map, file, &done.included, &mut out);
    Ok(out)
}

/// Appends file `file`'s text to `out` with its includes in `included` replaced by their texts.
fn write_inlined(map: &SourceMap, file: u32, included: &[(Span, u32)], out: &mut String) {
    let text = &map.file(file).text;
    let mut at = 0;
    for &(directive, inner) in included.iter().filter(|(d, _)| d.file == file) {
        out.push_str(&text[at..directive.lo as usize]);
        write_inlined(map, inner, included, out);
        if !out.ends_with('\n') {
            out.push('\n');
        }
        at = directive.hi as usize;
        // The directive's own newline: the included text ended with one.
        if text[at..].starts_with('\n') {
            at += 1;
        }
    }
    out.push_str(&text[at..]);
}

fn run(map: &mut SourceMap, file: u32, includes: Includes) -> Result<Preprocessed> {
    let start = Span { file, lo: 0, hi: 0 };
    let bytes = map.file(file).text.len();
    if bytes > MAX_SOURCE_BYTES {
        return fail(start, source_limit());
    }
    let mut pp = Preprocessor {
        macros: HashMap::new(),
        out: Vec::new(),
        depth: 0,
        includes,
        source_bytes: bytes,
        lexed: 0,
        expanded: Cell::new(0),
        expanding: Cell::new(start),
        included: Vec::new(),
        warnings: Vec::new(),
    };
    pp.file(map, file)?;
    let end = pp.out.last().map_or(start, |t| t.span);
    pp.out.push(Token {
        tok: Tok::Eof,
        span: Span { lo: end.hi, ..end },
    });
    Ok(Preprocessed {
        tokens: pp.out,
        included: pp.included,
        warnings: pp.warnings,
    })
}

fn source_limit() -> String {
    format!(
        "the program and its included files have more than {MAX_SOURCE_BYTES} bytes \
         (limits::MAX_SOURCE_BYTES)"
    )
}

/// A macro: its parameters (for a function-like macro) and its body.
#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: Vec<Token>,
}

struct Preprocessor {
    macros: HashMap<String, Macro>,
    out: Vec<Token>,
    /// How deep `#include`s nest at this point.
    depth: usize,
    includes: Includes,
    /// Bytes of source read so far (the built-in headers not counted).
    source_bytes: usize,
    /// Tokens lexed so far.
    lexed: usize,
    /// Tokens macro expansion has written so far (see [`MAX_MACRO_EXPANSION`]).
    expanded: Cell<usize>,
    /// The outermost macro being expanded, where an expansion past the limit is reported.
    expanding: Cell<Span>,
    /// Local includes read: the directive and the file.
    included: Vec<(Span, u32)>,
    /// `#warning`s so far.
    warnings: Vec<Diagnostic>,
}

/// One open `#if` group.
struct Group {
    /// Whether the enclosing text is being kept.
    outer: bool,
    /// Whether a branch of this group was already taken.
    taken: bool,
    /// Whether the current branch is kept.
    active: bool,
    /// Where the group started, for "unterminated" errors.
    span: Span,
    seen_else: bool,
}

impl Preprocessor {
    fn file(&mut self, map: &mut SourceMap, file: u32) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_INCLUDE_DEPTH {
            return fail(
                Span { file, lo: 0, hi: 0 },
                format!(
                    "#include nested more than {MAX_INCLUDE_DEPTH} deep (limits::MAX_INCLUDE_DEPTH)"
                ),
            );
        }
        let tokens = lex(map, file, MAX_TOKENS - self.lexed)?;
        self.lexed += tokens.len();
        let mut groups: Vec<Group> = Vec::new();
        // Text between directives is expanded as one run, so a macro call may span lines.
        let mut run = Vec::new();
        for token in tokens {
            let active = groups.last().is_none_or(|g| g.active);
            match token.tok {
                Tok::Eof => break,
                Tok::Directive => {
                    self.expand_out(&std::mem::take(&mut run))?;
                    self.directive(map, token.span, &mut groups)?;
                }
                _ if !active => {}
                _ => run.push(token),
            }
        }
        self.expand_out(&run)?;
        if let Some(g) = groups.last() {
            return fail(g.span, "#if without #endif");
        }
        self.depth -= 1;
        Ok(())
    }

    /// Expands `tokens` onto the output, which stays within [`MAX_TOKENS`].
    fn expand_out(&mut self, tokens: &[Token]) -> Result<()> {
        let expanded = self.expand(tokens, &mut HashSet::new(), 0)?;
        if self.out.len() + expanded.len() > MAX_TOKENS {
            let at = expanded
                .get(MAX_TOKENS - self.out.len())
                .map_or(Span::default(), |t| t.span);
            return fail(
                at,
                format!("the program has more than {MAX_TOKENS} tokens after preprocessing (limits::MAX_TOKENS)"),
            );
        }
        self.out.extend(expanded);
        Ok(())
    }

    /// Counts `n` tokens written by macro expansion, refusing more than [`MAX_MACRO_EXPANSION`]
    /// in all (the error points at the outermost macro being expanded).
    fn spend(&self, n: usize) -> Result<()> {
        let total = self.expanded.get() + n;
        self.expanded.set(total);
        if total > MAX_MACRO_EXPANSION {
            return fail(
                self.expanding.get(),
                format!(
                    "macro expansion writes more than {MAX_MACRO_EXPANSION} tokens \
                     (limits::MAX_MACRO_EXPANSION)"
                ),
            );
        }
        Ok(())
    }

    /// Expands the macros in `tokens`; names in `hidden` are being expanded and stay as they
    /// are; `depth` is how many expansions enclose this one.
    fn expand(
        &self,
        tokens: &[Token],
        hidden: &mut HashSet<String>,
        depth: usize,
    ) -> Result<Vec<Token>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let token = &tokens[i];
            i += 1;
            if depth > 0 {
                self.spend(1)?;
            }
            let macro_def = match &token.tok {
                Tok::Ident(name) if !hidden.contains(name) => {
                    self.macros.get(name).map(|m| (name, m))
                }
                _ => None,
            };
            let Some((name, m)) = macro_def else {
                out.push(token.clone());
                continue;
            };
            if depth == 0 {
                self.expanding.set(token.span);
            }
            if depth >= MAX_NESTING {
                return fail(
                    token.span,
                    format!(
                        "macro expansion nested more than {MAX_NESTING} deep (limits::MAX_NESTING)"
                    ),
                );
            }
            let body = match &m.params {
                None => self.substitute(&m.body, None, &[], &[])?,
                Some(params) => {
                    if tokens.get(i).is_none_or(|t| t.tok != Tok::Punct("(")) {
                        // A function-like macro's name without arguments is an ordinary name.
                        out.push(token.clone());
                        continue;
                    }
                    let (args, next) = macro_args(tokens, i, token.span)?;
                    // The arguments are copies too: nested calls would copy them at each level.
                    self.spend(next - i)?;
                    i = next;
                    let no_args = params.is_empty() && args.len() == 1 && args[0].is_empty();
                    if args.len() != params.len() && !no_args {
                        return fail(
                            token.span,
                            format!(
                                "macro '{name}' takes {} arguments, {} given",
                                params.len(),
                                args.len()
                            ),
                        );
                    }
                    // As in C, arguments are expanded before they are substituted (but for
                    // operands of `#` and `##`, which take them as written).
                    let expanded = args
                        .iter()
                        .map(|a| self.expand(a, hidden, depth + 1))
                        .collect::<Result<Vec<_>>>()?;
                    self.spend(substituted_len(&m.body, params, &expanded))?;
                    self.substitute(&m.body, Some(params), &args, &expanded)?
                }
            };
            hidden.insert(name.clone());
            let expanded = self.expand(&body, hidden, depth + 1);
            hidden.remove(name);
            out.extend(expanded?);
        }
        Ok(out)
    }

    fn directive(
        &mut self,
        map: &mut SourceMap,
        span: Span,
        groups: &mut Vec<Group>,
    ) -> Result<()> {
        let text = map.snippet(span).to_string();
        let after_hash = text[1..].trim_start();
        let name_lo = text.len() - after_hash.len();
        let name: String = after_hash
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let rest_lo = span.lo + (name_lo + name.len()) as u32;
        let name_span = Span {
            file: span.file,
            lo: span.lo + name_lo as u32,
            hi: rest_lo,
        };
        let rest = lex_range(map, span.file, rest_lo, span.hi, false, MAX_TOKENS)?;
        let rest = &rest[..rest.len() - 1];
        let active = groups.last().is_none_or(|g| g.active);
        match name.as_str() {
            "if" | "ifdef" | "ifndef" => {
                let cond = active && self.condition(&name, rest, name_span)?;
                groups.push(Group {
                    outer: active,
                    taken: cond,
                    active: cond,
                    span,
                    seen_else: false,
                });
            }
            "elif" | "else" => {
                let Some(g) = groups.last_mut() else {
                    return fail(name_span, format!("#{name} without #if"));
                };
                if g.seen_else {
                    return fail(name_span, format!("#{name} after #else"));
                }
                g.seen_else = name == "else";
                let outer = g.outer;
                let taken = g.taken;
                let cond =
                    outer && !taken && (name == "else" || self.condition("if", rest, name_span)?);
                let g = groups.last_mut().expect("checked above");
                g.active = cond;
                g.taken |= cond;
            }
            "endif" => {
                if groups.pop().is_none() {
                    return fail(name_span, "#endif without #if");
                }
            }
            _ if !active => {}
            "include" => self.include(map, span, rest)?,
            "define" => {
                let Some(Token {
                    tok: Tok::Ident(m),
                    span: m_span,
                }) = rest.first()
                else {
                    return fail(name_span, "#define needs a macro name");
                };
                let function_like = rest
                    .get(1)
                    .is_some_and(|t| t.tok == Tok::Punct("(") && t.span.lo == m_span.hi);
                let (params, body) = if function_like {
                    macro_params(&rest[1..])?
                } else {
                    (None, &rest[1..])
                };
                self.macros.insert(
                    m.clone(),
                    Macro {
                        params,
                        body: body.to_vec(),
                    },
                );
            }
            "undef" => {
                if let Some(Token {
                    tok: Tok::Ident(m), ..
                }) = rest.first()
                {
                    self.macros.remove(m);
                }
            }
            "error" => return fail(span, format!("#error{}", &text[name_lo + name.len()..])),
            "warning" => self.warnings.push(Diagnostic::warning(
                span,
                format!("#warning{}", &text[name_lo + name.len()..]),
            )),
            "line" => line_directive(map, span, name_span, rest)?,
            "pragma" => {}
            _ => {
                return fail(
                    name_span,
                    format!("unknown preprocessor directive '#{name}'"),
                )
            }
        }
        Ok(())
    }

    fn include(&mut self, map: &mut SourceMap, span: Span, rest: &[Token]) -> Result<()> {
        let text = map.snippet(span).to_string();
        let (open, close) = match (text.find('<'), text.find('"')) {
            (Some(l), None) => (l, text[l..].find('>').map(|r| l + r)),
            (_, Some(q)) => (q, text[q + 1..].find('"').map(|r| q + 1 + r)),
            _ => {
                return fail(
                    rest.first().map_or(span, |t| t.span),
                    "#include needs <file> or \"file\"",
                )
            }
        };
        let Some(close) = close else {
            return fail(span, "unterminated #include file name");
        };
        let target = &text[open + 1..close];
        let builtin = BUILTIN_HEADERS.iter().find(|(n, _)| *n == target);
        let new_file = if let Some((name, body)) = builtin {
            map.add(format!("<{name}>"), *body)
        } else {
            let new_file = self.read_included(map, span, target)?;
            self.included.push((span, new_file));
            new_file
        };
        self.file(map, new_file)
    }

    /// Reads the file `#include` `target` names at `span`, within what is left of
    /// [`MAX_SOURCE_BYTES`], when [`Includes::Files`] allows it.
    fn read_included(&mut self, map: &mut SourceMap, span: Span, target: &str) -> Result<u32> {
        if self.includes == Includes::BuiltinOnly {
            let builtins: Vec<String> = BUILTIN_HEADERS
                .iter()
                .map(|(n, _)| format!("<{n}>"))
                .collect();
            return fail(
                span,
                format!(
                    "#include \"{target}\": a device config cannot include files; only the \
                     built-in {} may be included (inline the others into the program: \
                     `lossless p4 pipeline set --program` and `softswitch bundle` do)",
                    builtins.join(" and ")
                ),
            );
        }
        let base = Path::new(&map.file(span.file).name)
            .parent()
            .unwrap_or(Path::new(""));
        let path = base.join(target);
        match crate::source::read_regular_file(&path, MAX_SOURCE_BYTES - self.source_bytes) {
            Ok(body) => {
                self.source_bytes += body.len();
                Ok(map.add(path.display().to_string(), body))
            }
            Err(crate::source::ReadError::TooLong(_)) => fail(span, source_limit()),
            Err(e) => fail(
                span,
                format!("cannot read included file {}: {e}", path.display()),
            ),
        }
    }

    fn condition(&self, kind: &str, rest: &[Token], at: Span) -> Result<bool> {
        if kind != "if" {
            let Some(Token {
                tok: Tok::Ident(m), ..
            }) = rest.first()
            else {
                return fail(at, format!("#{kind} needs a macro name"));
            };
            return Ok(self.macros.contains_key(m) == (kind == "ifdef"));
        }
        // Resolve `defined X` / `defined(X)` first, then expand macros, then evaluate.
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            if rest[i].tok == Tok::Ident("defined".into()) {
                let paren = rest.get(i + 1).is_some_and(|t| t.tok == Tok::Punct("("));
                let at_name = if paren { i + 2 } else { i + 1 };
                let Some(Token {
                    tok: Tok::Ident(m),
                    span,
                }) = rest.get(at_name)
                else {
                    return fail(rest[i].span, "defined needs a macro name");
                };
                let value = u128::from(self.macros.contains_key(m));
                tokens.push(Token {
                    tok: Tok::Int(crate::lexer::IntLit { value, width: None }),
                    span: *span,
                });
                i = at_name + 1 + usize::from(paren);
            } else {
                tokens.push(rest[i].clone());
                i += 1;
            }
        }
        let tokens = self.expand(&tokens, &mut HashSet::new(), 0)?;
        let mut eval = CondEval {
            tokens: &tokens,
            pos: 0,
            at,
            depth: 0,
        };
        let v = eval.expr(0)?;
        if let Some(t) = tokens.get(eval.pos) {
            return fail(t.span, "unexpected token in #if expression");
        }
        Ok(v != 0)
    }
}

/// The parameter names of a function-like macro (`tokens` starts at its `(`) and its body.
fn macro_params(tokens: &[Token]) -> Result<(Option<Vec<String>>, &[Token])> {
    let mut params = Vec::new();
    let mut i = 1;
    loop {
        match tokens.get(i).map(|t| &t.tok) {
            Some(Tok::Punct(")")) if params.is_empty() => break,
            Some(Tok::Ident(p)) => params.push(p.clone()),
            _ => {
                return fail(
                    tokens.get(i).unwrap_or(&tokens[0]).span,
                    "expected a macro parameter name",
                )
            }
        }
        i += 1;
        match tokens.get(i).map(|t| &t.tok) {
            Some(Tok::Punct(",")) => i += 1,
            Some(Tok::Punct(")")) => break,
            _ => {
                return fail(
                    tokens.get(i).unwrap_or(&tokens[0]).span,
                    "expected ',' or ')' in the macro's parameters",
                )
            }
        }
    }
    Ok((Some(params), &tokens[i + 1..]))
}

/// The arguments of a macro call whose `(` is `tokens[open]`, split at top-level commas, and the
/// index after its `)`.
fn macro_args(tokens: &[Token], open: usize, at: Span) -> Result<(Vec<Vec<Token>>, usize)> {
    let mut args = vec![Vec::new()];
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open + 1) {
        match t.tok {
            Tok::Punct("(") => depth += 1,
            Tok::Punct(")") if depth == 0 => return Ok((args, i + 1)),
            Tok::Punct(")") => depth -= 1,
            Tok::Punct(",") if depth == 0 => {
                args.push(Vec::new());
                continue;
            }
            _ => {}
        }
        args.last_mut()
            .expect("one argument at least")
            .push(t.clone());
    }
    fail(at, "unterminated macro call")
}

/// The number of tokens [`substitute`] gives.
fn substituted_len(body: &[Token], params: &[String], args: &[Vec<Token>]) -> usize {
    body.iter()
        .map(|t| match &t.tok {
            Tok::Ident(name) => params
                .iter()
                .position(|p| p == name)
                .map_or(1, |k| args[k].len()),
            _ => 1,
        })
        .sum()
}

impl Preprocessor {
    /// A macro's body (with `params`, a function-like macro's, each replaced by its argument:
    /// as written in `raw` next to `#` or `##`, else expanded in `expanded`), with `#param` made
    /// a string and the tokens on either side of each `##` pasted into one.
    fn substitute(
        &self,
        body: &[Token],
        params: Option<&Vec<String>>,
        raw: &[Vec<Token>],
        expanded: &[Vec<Token>],
    ) -> Result<Vec<Token>> {
        let param = |t: &Token| match (&t.tok, params) {
            (Tok::Ident(name), Some(ps)) => ps.iter().position(|p| p == name),
            _ => None,
        };
        let is_paste = |t: Option<&Token>| t.is_some_and(|t| t.tok == Tok::Punct("##"));
        if is_paste(body.first()) || is_paste(body.last()) {
            let at = if is_paste(body.first()) {
                &body[0]
            } else {
                &body[body.len() - 1]
            };
            return fail(at.span, "'##' cannot be at either end of a macro's body");
        }
        let mut out: Vec<Token> = Vec::new();
        // Whether a `##` waits for its right operand, and whether its left one was empty.
        let (mut pasting, mut last_empty) = (false, false);
        let mut j = 0;
        while j < body.len() {
            let t = &body[j];
            if t.tok == Tok::Punct("##") {
                pasting = true;
                j += 1;
                continue;
            }
            let piece = if t.tok == Tok::Punct("#") && params.is_some() {
                let Some(k) = body.get(j + 1).and_then(param) else {
                    return fail(t.span, "'#' is not followed by a macro parameter");
                };
                let text = stringized(&raw[k]);
                self.spend(text.len())?;
                j += 2;
                vec![Token {
                    tok: Tok::Str(text),
                    span: t.span.to(body[j - 1].span),
                }]
            } else if let Some(k) = param(t) {
                j += 1;
                if pasting || is_paste(body.get(j)) {
                    raw[k].clone()
                } else {
                    expanded[k].clone()
                }
            } else {
                j += 1;
                vec![t.clone()]
            };
            let empty = piece.is_empty();
            match (
                std::mem::take(&mut pasting),
                last_empty,
                piece.split_first(),
            ) {
                (true, false, Some((first, others))) => {
                    let left = out.pop().expect("a left operand was written");
                    let pasted = self.paste(&left, first)?;
                    out.push(pasted);
                    out.extend(others.iter().cloned());
                }
                _ => out.extend(piece),
            }
            last_empty = empty;
        }
        Ok(out)
    }

    /// The one token `a ## b` makes (as the lexer reads their spellings one after the other),
    /// spanning both; an error when they make no token, or several.
    fn paste(&self, a: &Token, b: &Token) -> Result<Token> {
        let (sa, sb) = (spelling(a), spelling(b));
        let text = format!("{sa}{sb}");
        self.spend(text.len())?;
        let (scratch, f) = SourceMap::of("", text);
        match lex(&scratch, f, 2).as_deref() {
            Ok([one, end]) if end.tok == Tok::Eof && one.tok != Tok::Directive => Ok(Token {
                tok: one.tok.clone(),
                span: a.span.to(b.span),
            }),
            _ => fail(
                a.span.to(b.span),
                format!("pasting '{sa}' and '{sb}' does not give a valid token"),
            ),
        }
    }
}

/// How a token is written, as the lexer reads it back.
fn spelling(t: &Token) -> String {
    match &t.tok {
        Tok::Ident(s) => s.clone(),
        Tok::Int(lit) => match lit.width {
            Some((w, signed)) => format!("{w}{}{}", if signed { 's' } else { 'w' }, lit.value),
            None => lit.value.to_string(),
        },
        Tok::Str(s) => {
            let escaped = s
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n")
                .replace('\t', "\\t");
            format!("\"{escaped}\"")
        }
        Tok::Punct(p) => (*p).to_string(),
        Tok::Directive | Tok::Eof => String::new(),
    }
}

/// The text `#` makes of a macro argument: its tokens' spellings, one space between two that
/// were apart in the source.
fn stringized(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 && tokens[i - 1].span.hi != t.span.lo {
            out.push(' ');
        }
        out.push_str(&spelling(t));
    }
    out
}

/// `#line N ["file"]` at `span`: the next line of the file is line N (of `file`).
fn line_directive(map: &mut SourceMap, span: Span, name_span: Span, rest: &[Token]) -> Result<()> {
    let (number, file) = match rest {
        [Token {
            tok: Tok::Int(n), ..
        }] => (n.value, None),
        [Token {
            tok: Tok::Int(n), ..
        }, Token {
            tok: Tok::Str(f), ..
        }] => (n.value, Some(f.clone())),
        _ => {
            return fail(
                name_span,
                "#line needs a line number and, optionally, a \"file name\"",
            )
        }
    };
    let Ok(number) = usize::try_from(number) else {
        return fail(name_span, "#line's line number is too large");
    };
    // The directive may continue over several lines (`\` at their ends).
    let (last, _) = map.line_col(Span {
        lo: span.hi,
        ..span
    });
    map.mark_line(span.file, last + 1, number, file);
    Ok(())
}

/// Evaluates an `#if` expression over integers (unknown identifiers are 0, as in C), with
/// wrapping arithmetic, nested at most [`MAX_NESTING`] deep.
struct CondEval<'a> {
    tokens: &'a [Token],
    pos: usize,
    at: Span,
    depth: usize,
}

impl CondEval<'_> {
    fn binary_prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            "==" | "!=" => 3,
            "<" | ">" | "<=" | ">=" => 4,
            "+" | "-" => 5,
            "*" | "/" | "%" => 6,
            _ => return None,
        })
    }

    /// An operand: a number, a name, or an operator or parentheses over another, one level
    /// deeper, refusing more than [`MAX_NESTING`] levels.
    fn atom(&mut self) -> Result<i128> {
        if self.depth >= MAX_NESTING {
            let at = self.tokens.get(self.pos).map_or(self.at, |t| t.span);
            return fail(
                at,
                format!("#if expression nested more than {MAX_NESTING} levels deep (limits::MAX_NESTING)"),
            );
        }
        self.depth += 1;
        let v = self.atom_inner();
        self.depth -= 1;
        v
    }

    /// An expression of operators binding tighter than `min` (recursion goes through
    /// [`Self::atom`], which counts the nesting, but for at most one level per precedence).
    fn expr(&mut self, min: u8) -> Result<i128> {
        let mut lhs = self.atom()?;
        while let Some(Token {
            tok: Tok::Punct(op),
            span,
        }) = self.tokens.get(self.pos)
        {
            let Some(prec) = Self::binary_prec(op).filter(|&p| p > min) else {
                break;
            };
            let span = *span;
            self.pos += 1;
            let rhs = self.expr(prec)?;
            lhs = match *op {
                "||" => i128::from(lhs != 0 || rhs != 0),
                "&&" => i128::from(lhs != 0 && rhs != 0),
                "==" => i128::from(lhs == rhs),
                "!=" => i128::from(lhs != rhs),
                "<" => i128::from(lhs < rhs),
                ">" => i128::from(lhs > rhs),
                "<=" => i128::from(lhs <= rhs),
                ">=" => i128::from(lhs >= rhs),
                "+" => lhs.wrapping_add(rhs),
                "-" => lhs.wrapping_sub(rhs),
                "*" => lhs.wrapping_mul(rhs),
                _ if rhs == 0 => return fail(span, "division by zero in #if"),
                "/" => lhs.wrapping_div(rhs),
                _ => lhs.wrapping_rem(rhs),
            };
        }
        Ok(lhs)
    }

    fn atom_inner(&mut self) -> Result<i128> {
        let Some(t) = self.tokens.get(self.pos) else {
            return Err(Diagnostic::new(self.at, "incomplete #if expression"));
        };
        self.pos += 1;
        match &t.tok {
            Tok::Int(lit) => Ok(lit.value as i128),
            Tok::Ident(_) => Ok(0),
            Tok::Punct("!") => Ok(i128::from(self.atom()? == 0)),
            Tok::Punct("-") => Ok(self.atom()?.wrapping_neg()),
            Tok::Punct("(") => {
                let v = self.expr(0)?;
                match self.tokens.get(self.pos) {
                    Some(Token {
                        tok: Tok::Punct(")"),
                        ..
                    }) => {
                        self.pos += 1;
                        Ok(v)
                    }
                    _ => fail(t.span, "unclosed '(' in #if expression"),
                }
            }
            _ => fail(t.span, "unexpected token in #if expression"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(src: &str) -> Result<Vec<String>> {
        let (mut map, f) = SourceMap::of("t.p4", src);
        Ok(preprocess(&mut map, f, Includes::Files)?
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(s) => Some(s),
                Tok::Int(i) => Some(i.value.to_string()),
                _ => None,
            })
            .collect())
    }

    /// Where preprocessing `src` (as `t.p4`) fails, and why.
    fn error(src: &str) -> (String, String) {
        let (mut map, f) = SourceMap::of("t.p4", src);
        let e = preprocess(&mut map, f, Includes::Files).unwrap_err();
        (e.location(&map), e.message)
    }

    #[test]
    fn defines_expand_and_conditionals_select() {
        let src = "#define N 4\n#define M N\n#if M > 3 && defined(N)\na M\n#else\nb\n#endif\n#ifdef Q\nc\n#elif 1\nd\n#endif\n";
        assert_eq!(idents(src).unwrap(), vec!["a", "4", "d"]);
    }

    #[test]
    fn function_like_macros_substitute_their_arguments() {
        let src = "#define SUM(a, b) a plus b\n#define TWICE(x) SUM(x, x)\n#define NONE() n\nTWICE(SUM(1,\n 2)) NONE() SUM\n";
        assert_eq!(
            idents(src).unwrap(),
            vec!["1", "plus", "2", "plus", "1", "plus", "2", "n", "SUM"]
        );
    }

    #[test]
    fn a_macro_call_with_the_wrong_arity_is_located() {
        assert_eq!(
            error("#define F(a, b) a\nx F(1)\n"),
            (
                "t.p4:2:3".to_string(),
                "macro 'F' takes 2 arguments, 1 given".to_string()
            )
        );
    }

    #[test]
    fn builtin_headers_are_found() {
        let toks = idents("#include <core.p4>\n#include <v1model.p4>\n").unwrap();
        assert!(toks.iter().any(|t| t == "V1Switch"));
    }

    #[test]
    fn unterminated_if_is_an_error_at_the_if() {
        assert_eq!(error("x\n#ifdef A\n").0, "t.p4:2:1");
    }

    /// The tokens of `src` preprocessed, as they are written.
    fn spelled(src: &str) -> Vec<String> {
        let (mut map, f) = SourceMap::of("t.p4", src);
        let tokens = preprocess(&mut map, f, Includes::Files).unwrap();
        tokens[..tokens.len() - 1].iter().map(spelling).collect()
    }

    #[test]
    fn hash_makes_a_string_of_the_argument_as_written() {
        let src = "#define S(x) #x\n#define N 4\nS(a+  b) S(N) S(\"q\") S()\n";
        assert_eq!(
            spelled(src),
            vec![r#""a+ b""#, r#""N""#, r#""\"q\"""#, r#""""#]
        );
    }

    #[test]
    fn hash_hash_pastes_tokens_then_rescans() {
        let src = "#define CAT(a, b) a ## b\n#define xy 9\n#define N 4\n\
                   #define OBJ x ## y\n#define W(n) n ## w3\n\
                   CAT(x, y) CAT(N, 2) CAT(, z) CAT(z, ) OBJ W(8) CAT(<, <)\n";
        assert_eq!(spelled(src), vec!["9", "N2", "z", "z", "9", "8w3", "<<"]);
    }

    #[test]
    fn a_paste_that_makes_no_token_is_an_error() {
        let (at, message) = error("#define CAT(a, b) a ## b\nCAT(x, +)\n");
        // At the call, where the left operand is written.
        assert_eq!(at, "t.p4:2:5");
        assert_eq!(message, "pasting 'x' and '+' does not give a valid token");
        assert_eq!(
            error("#define BAD(a) ## a\nBAD(1)\n").1,
            "'##' cannot be at either end of a macro's body"
        );
        assert_eq!(
            error("#define BAD(a) # b\nBAD(1)\n").1,
            "'#' is not followed by a macro parameter"
        );
    }

    #[test]
    fn pasting_that_doubles_at_every_level_stops_at_the_limit() {
        // Each level pastes its expanded argument to itself: 2^40 bytes unless bounded.
        let src = format!(
            "#define E(x) x ## x\n#define D(x) E(x)\n{}a{}\n",
            "D(".repeat(40),
            ")".repeat(40)
        );
        let (_, message) = error(&src);
        assert!(message.contains("limits::MAX_MACRO_EXPANSION"), "{message}");
    }

    #[test]
    fn line_renumbers_the_following_lines_and_may_name_a_file() {
        let (mut map, f) = SourceMap::of("t.p4", "a\n#line 100\nb\n#line 7 \"gen.p4\"\nc\nd\n");
        let tokens = preprocess(&mut map, f, Includes::Files).unwrap();
        let at: Vec<String> = tokens[..4]
            .iter()
            .map(|t| Diagnostic::new(t.span, "").location(&map))
            .collect();
        assert_eq!(at, ["t.p4:1:1", "t.p4:100:1", "gen.p4:7:1", "gen.p4:8:1"]);
        assert_eq!(
            error("#line x\n").1,
            "#line needs a line number and, optionally, a \"file name\""
        );
    }

    #[test]
    fn warning_is_recorded_and_error_stops() {
        let (mut map, f) = SourceMap::of("t.p4", "#warning check this\nx\n");
        let mut diags = Diagnostics::default();
        preprocess_reporting(&mut map, f, Includes::Files, &mut diags).unwrap();
        let (_, warnings) = diags.conclude(Ok(())).unwrap();
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            warnings[0].render(&map),
            "t.p4:1:1: warning: #warning check this\n  #warning check this\n  ^^^^^^^^^^^^^^^^^^^"
        );
        assert_eq!(
            error("#error no\n"),
            ("t.p4:1:1".to_string(), "#error no".to_string())
        );
    }

    #[test]
    fn missing_include_is_an_error() {
        let (_, message) = error("#include \"nope.p4\"\n");
        assert!(message.contains("cannot read included file"), "{message}");
    }
}
