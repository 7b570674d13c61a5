//! Lexer: turns one source text into tokens. Preprocessor directives come out as one
//! [`Tok::Directive`] token per line; the preprocessor interprets them.

use crate::diagnostic::{fail, Result};
use crate::source::{SourceMap, Span};

/// An integer literal: its value and, when written as `8w5` or `8s5`, its width and signedness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLit {
    /// The magnitude.
    pub value: u128,
    /// `Some((width, signed))` for `Ww`/`Ws` literals, `None` for an arbitrary-precision one.
    pub width: Option<(u16, bool)>,
}

/// What a token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal.
    Int(IntLit),
    /// A string literal, without quotes.
    Str(String),
    /// An operator or punctuation mark.
    Punct(&'static str),
    /// A preprocessor line starting with `#`; its span covers the whole line.
    Directive,
    /// The end of the input.
    Eof,
}

/// A token and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Where it is.
    pub span: Span,
}

/// Operators, longest first so that the first match is the longest.
/// `>>=` is not one: it lexes as `>` and `>=`, as `>>` is two `>` (they close type arguments).
/// `#` and `##` are the preprocessor's, in macro bodies (`#` first on a line starts a directive).
const PUNCTS: &[&str] = &[
    "|+|=", "|-|=", "&&&", "|+|", "|-|", "<<=", "..", "++", "&&", "||", "==", "!=", "<=", ">=",
    "<<", "+=", "-=", "*=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!",
    "<", ">", "=", "?", ":", ";", ",", ".", "(", ")", "{", "}", "[", "]", "@", "##", "#",
];

/// Lexes the whole of file `file` into at most `max_tokens` tokens (the end not counted).
pub fn lex(map: &SourceMap, file: u32, max_tokens: usize) -> Result<Vec<Token>> {
    let len = map.file(file).text.len() as u32;
    lex_range(map, file, 0, len, true, max_tokens)
}

/// Lexes bytes `lo..hi` of file `file` into at most `max_tokens` tokens; with `directives`, a
/// `#` first on a line starts a directive.
pub fn lex_range(
    map: &SourceMap,
    file: u32,
    lo: u32,
    hi: u32,
    directives: bool,
    max_tokens: usize,
) -> Result<Vec<Token>> {
    let text = &map.file(file).text.as_bytes()[..hi as usize];
    let mut lexer = Lexer {
        text,
        pos: lo as usize,
        file,
        line_start: true,
        out: Vec::new(),
        max_tokens,
    };
    lexer.run(directives)?;
    Ok(lexer.out)
}

struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
    file: u32,
    line_start: bool,
    out: Vec<Token>,
    max_tokens: usize,
}

impl Lexer<'_> {
    fn span(&self, lo: usize) -> Span {
        Span {
            file: self.file,
            lo: lo as u32,
            hi: self.pos as u32,
        }
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.text.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn push(&mut self, tok: Tok, lo: usize) {
        self.out.push(Token {
            tok,
            span: self.span(lo),
        });
        self.line_start = false;
    }

    fn run(&mut self, directives: bool) -> Result<()> {
        while self.pos < self.text.len() {
            let c = self.peek(0);
            let lo = self.pos;
            if self.out.len() >= self.max_tokens {
                return fail(
                    Span {
                        file: self.file,
                        lo: lo as u32,
                        hi: lo as u32 + 1,
                    },
                    format!(
                        "the program has more than {} tokens (limits::MAX_TOKENS)",
                        crate::limits::MAX_TOKENS
                    ),
                );
            }
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.line_start = true;
                }
                b' ' | b'\t' | b'\r' | 0x0c => self.pos += 1,
                b'\\' if self.peek(1) == b'\n' => self.pos += 2,
                b'/' if self.peek(1) == b'/' => self.skip_line(),
                b'/' if self.peek(1) == b'*' => self.skip_block_comment()?,
                b'#' if directives && self.line_start => self.directive(),
                b'"' => self.string()?,
                b'0'..=b'9' => self.number()?,
                c if c == b'_' || c.is_ascii_alphabetic() => {
                    while self.peek(0) == b'_' || self.peek(0).is_ascii_alphanumeric() {
                        self.pos += 1;
                    }
                    let word = String::from_utf8_lossy(&self.text[lo..self.pos]).into_owned();
                    let tok = if word == "_" {
                        Tok::Punct("_")
                    } else {
                        Tok::Ident(word)
                    };
                    self.push(tok, lo);
                }
                _ => self.punct()?,
            }
        }
        let end = self.text.len();
        self.out.push(Token {
            tok: Tok::Eof,
            span: Span {
                file: self.file,
                lo: end as u32,
                hi: end as u32,
            },
        });
        Ok(())
    }

    fn skip_line(&mut self) {
        while self.pos < self.text.len() && self.peek(0) != b'\n' {
            self.pos += 1;
        }
    }

    fn skip_block_comment(&mut self) -> Result<()> {
        let lo = self.pos;
        self.pos += 2;
        while self.pos < self.text.len() {
            if self.peek(0) == b'*' && self.peek(1) == b'/' {
                self.pos += 2;
                return Ok(());
            }
            self.pos += 1;
        }
        self.pos = lo + 2;
        fail(self.span(lo), "unterminated comment")
    }

    fn directive(&mut self) {
        let lo = self.pos;
        while self.pos < self.text.len() && self.peek(0) != b'\n' {
            if self.peek(0) == b'\\' && self.peek(1) == b'\n' {
                self.pos += 1;
            }
            self.pos += 1;
        }
        self.push(Tok::Directive, lo);
        self.line_start = true;
    }

    fn string(&mut self) -> Result<()> {
        let lo = self.pos;
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            match self.peek(0) {
                b'"' => break,
                b'\n' | 0 => {
                    self.pos = lo + 1;
                    return fail(self.span(lo), "unterminated string literal");
                }
                b'\\' => {
                    s.push(match self.peek(1) {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                    self.pos += 2;
                }
                c => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        self.push(Tok::Str(String::from_utf8_lossy(&s).into_owned()), lo);
        Ok(())
    }

    fn digits(&mut self) -> &[u8] {
        let lo = self.pos;
        while self.peek(0) == b'_' || self.peek(0).is_ascii_alphanumeric() {
            self.pos += 1;
        }
        &self.text[lo..self.pos]
    }

    fn number(&mut self) -> Result<()> {
        let lo = self.pos;
        let mut first: Vec<u8> = self.digits().to_vec();
        let mut width = None;
        // `8w255`, `16s0x10`: a decimal width, then `w` or `s`, then the value.
        if let Some(p) = first.iter().position(|&b| b == b'w' || b == b's') {
            let prefix = &first[..p];
            let is_hex = first.len() > 1 && first[0] == b'0' && matches!(first[1], b'x' | b'X');
            if !is_hex && !prefix.is_empty() && prefix.iter().all(u8::is_ascii_digit) {
                let w: u16 = std::str::from_utf8(prefix)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|&w| w > 0)
                    .ok_or_else(|| {
                        crate::diagnostic::Diagnostic::new(self.span(lo), "invalid literal width")
                    })?;
                width = Some((w, first[p] == b's'));
                first = first[p + 1..].to_vec();
            }
        }
        let (radix, body) = match (first.first(), first.get(1)) {
            (Some(b'0'), Some(b'x' | b'X')) => (16, &first[2..]),
            (Some(b'0'), Some(b'b' | b'B')) => (2, &first[2..]),
            (Some(b'0'), Some(b'o' | b'O')) => (8, &first[2..]),
            (Some(b'0'), Some(b'd' | b'D')) => (10, &first[2..]),
            _ => (10, &first[..]),
        };
        let mut value: u128 = 0;
        let mut any = false;
        for &b in body {
            if b == b'_' {
                continue;
            }
            let d = (b as char).to_digit(radix).ok_or_else(|| {
                crate::diagnostic::Diagnostic::new(
                    self.span(lo),
                    format!("invalid digit '{}' in integer literal", b as char),
                )
            })?;
            value = value
                .checked_mul(radix as u128)
                .and_then(|v| v.checked_add(d as u128))
                .ok_or_else(|| {
                    crate::diagnostic::Diagnostic::new(
                        self.span(lo),
                        "integer literal does not fit in 128 bits",
                    )
                })?;
            any = true;
        }
        if !any {
            return fail(self.span(lo), "integer literal has no digits");
        }
        self.push(Tok::Int(IntLit { value, width }), lo);
        Ok(())
    }

    fn punct(&mut self) -> Result<()> {
        let lo = self.pos;
        let rest = &self.text[self.pos..];
        match PUNCTS.iter().find(|p| rest.starts_with(p.as_bytes())) {
            Some(p) => {
                self.pos += p.len();
                self.push(Tok::Punct(p), lo);
                Ok(())
            }
            _ => {
                self.pos += 1;
                while self.pos < self.text.len() && (self.text[self.pos] & 0xc0) == 0x80 {
                    self.pos += 1;
                }
                let c = String::from_utf8_lossy(&self.text[lo..self.pos]).into_owned();
                fail(self.span(lo), format!("unexpected character '{c}'"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        let (map, f) = SourceMap::of("t.p4", src);
        lex(&map, f, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn width_prefixed_literals() {
        assert_eq!(
            toks("8w255 4s0x7 0b1_01 32w0xFFFF_FFFF"),
            vec![
                Tok::Int(IntLit {
                    value: 255,
                    width: Some((8, false))
                }),
                Tok::Int(IntLit {
                    value: 7,
                    width: Some((4, true))
                }),
                Tok::Int(IntLit {
                    value: 5,
                    width: None
                }),
                Tok::Int(IntLit {
                    value: 0xffff_ffff,
                    width: Some((32, false))
                }),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn longest_operator_wins_and_comments_vanish() {
        assert_eq!(
            toks("a &&& b /* x */ |+| // y\n.."),
            vec![
                Tok::Ident("a".into()),
                Tok::Punct("&&&"),
                Tok::Ident("b".into()),
                Tok::Punct("|+|"),
                Tok::Punct(".."),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn directive_only_at_line_start() {
        assert_eq!(
            toks("  #define X 1\nX"),
            vec![Tok::Directive, Tok::Ident("X".into()), Tok::Eof]
        );
    }

    #[test]
    fn bad_character_is_located() {
        let (map, f) = SourceMap::of("t.p4", "a\n  `");
        let err = lex(&map, f, usize::MAX).unwrap_err();
        assert_eq!(err.location(&map), "t.p4:2:3");
    }
}
