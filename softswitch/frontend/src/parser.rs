//! Parser: tokens (after preprocessing) to the [`ast`](crate::ast), by recursive descent.
//! Type names are tracked as they are declared, so `(T) e` parses as a cast.

use crate::ast::*;
use crate::diagnostic::{fail, Result};
use crate::lexer::{Tok, Token};
use crate::limits::MAX_NESTING;
use crate::source::Span;
use std::collections::HashSet;

/// Parses a whole program.
pub fn parse(tokens: Vec<Token>) -> Result<Vec<Decl>> {
    let mut p = Parser {
        tokens,
        pos: 0,
        type_names: HashSet::new(),
        depth: 0,
    };
    let mut decls = Vec::new();
    while !p.at_eof() {
        if p.eat(";") {
            continue;
        }
        decls.push(p.declaration()?);
    }
    Ok(decls)
}

/// How many tokens [`Parser::generic_call_follows`] reads ahead: more than any type argument
/// list of a call needs.
const TYPE_ARGS_LOOKAHEAD: usize = 64;

const RESERVED: [&str; 40] = [
    "action",
    "apply",
    "bit",
    "bool",
    "const",
    "control",
    "default",
    "else",
    "entries",
    "enum",
    "error",
    "exit",
    "extern",
    "false",
    "header",
    "header_union",
    "if",
    "in",
    "inout",
    "int",
    "match_kind",
    "out",
    "package",
    "parser",
    "return",
    "select",
    "state",
    "string",
    "struct",
    "switch",
    "table",
    "transition",
    "true",
    "tuple",
    "type",
    "typedef",
    "varbit",
    "void",
    "list",
    "abstract",
];

/// Keywords the P4_16 grammar (1.2.x, its `nonTypeName` and `name` productions) also takes as
/// names of fields, parameters, variables, constants and instances: `apply`, `key`, `actions`,
/// `state`, `entries`, `type`, `priority` and `list`. (`key`, `actions` and `priority` are not
/// in [`RESERVED`] at all: their keyword meaning is only in a table.)
const CONTEXTUAL: [&str; 5] = ["apply", "state", "entries", "type", "list"];

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    type_names: HashSet<String>,
    /// The depth of the syntax tree at the cursor: expressions, statements, declarations and
    /// types (bounded by [`MAX_NESTING`], so no input overflows the stack of any phase).
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek_at(&self, n: usize) -> &Token {
        &self.tokens[(self.pos + n).min(self.tokens.len() - 1)]
    }

    fn at_eof(&self) -> bool {
        self.peek().tok == Tok::Eof
    }

    fn span(&self) -> Span {
        self.peek().span
    }

    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn is(&self, p: &str) -> bool {
        self.peek().tok == Tok::Punct(str_punct(p)) || self.is_kw(p)
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s == kw)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn describe(&self) -> String {
        match &self.peek().tok {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Int(_) => "an integer".into(),
            Tok::Str(_) => "a string".into(),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Directive => "a directive".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }

    fn expect(&mut self, p: &str) -> Result<Span> {
        if self.eat(p) {
            Ok(self.prev_span())
        } else {
            fail(
                self.span(),
                format!("expected '{p}', found {}", self.describe()),
            )
        }
    }

    fn ident(&mut self) -> Result<Ident> {
        match &self.peek().tok {
            Tok::Ident(s) if !RESERVED.contains(&s.as_str()) => {
                let t = self.bump();
                let Tok::Ident(name) = t.tok else {
                    unreachable!("matched an identifier")
                };
                Ok(Ident { name, span: t.span })
            }
            _ => fail(
                self.span(),
                format!("expected a name, found {}", self.describe()),
            ),
        }
    }

    /// A name of a field, parameter, variable, constant, instance or function: an identifier
    /// or one of the [`CONTEXTUAL`] keywords (the grammar's `name` production).
    fn name(&mut self) -> Result<Ident> {
        if matches!(&self.peek().tok, Tok::Ident(s) if CONTEXTUAL.contains(&s.as_str())) {
            return self.member_name();
        }
        self.ident()
    }

    /// A name where some keywords are allowed (`apply`, `key`, members like `.apply`).
    fn member_name(&mut self) -> Result<Ident> {
        match &self.peek().tok {
            Tok::Ident(_) => {
                let t = self.bump();
                let Tok::Ident(name) = t.tok else {
                    unreachable!("matched an identifier")
                };
                Ok(Ident { name, span: t.span })
            }
            _ => fail(
                self.span(),
                format!("expected a name, found {}", self.describe()),
            ),
        }
    }

    fn annotations(&mut self) -> Result<Vec<Annotation>> {
        let mut out = Vec::new();
        while self.eat("@") {
            let name = self.member_name()?;
            let mut body = Vec::new();
            if self.is("(") && self.span().lo == name.span.hi {
                let open = self.bump().span;
                let mut depth = 1;
                loop {
                    let t = self.bump();
                    match t.tok {
                        Tok::Eof => return fail(open, "unclosed '(' in annotation"),
                        Tok::Punct("(") => depth += 1,
                        Tok::Punct(")") => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    body.push(t);
                }
            } else if self.is("[") {
                // Structured annotations `@name[...]`.
                let open = self.bump().span;
                loop {
                    let t = self.bump();
                    match t.tok {
                        Tok::Eof => return fail(open, "unclosed '[' in annotation"),
                        Tok::Punct("]") => break,
                        _ => body.push(t),
                    }
                }
            }
            out.push(Annotation { name, body });
        }
        Ok(out)
    }

    fn type_params(&mut self) -> Result<Vec<Ident>> {
        let mut out = Vec::new();
        if self.eat("<") {
            loop {
                let id = self.ident()?;
                self.type_names.insert(id.name.clone());
                out.push(id);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(">")?;
        }
        Ok(out)
    }

    fn declaration(&mut self) -> Result<Decl> {
        self.nested(Self::declaration_inner)
    }

    fn declaration_inner(&mut self) -> Result<Decl> {
        let annotations = self.annotations()?;
        let start = self.span();
        let Tok::Ident(kw) = &self.peek().tok else {
            return fail(
                start,
                format!("expected a declaration, found {}", self.describe()),
            );
        };
        match kw.as_str() {
            "const" => {
                self.bump();
                let ty = self.type_ref()?;
                let name = self.name()?;
                self.expect("=")?;
                let value = self.expr()?;
                self.expect(";")?;
                Ok(Decl::Const {
                    annotations,
                    ty,
                    name,
                    value,
                })
            }
            "typedef" | "type" => {
                self.bump();
                let new_type = kw_is(&self.tokens[self.pos - 1], "type");
                let ty = self.type_ref()?;
                let name = self.ident()?;
                self.type_names.insert(name.name.clone());
                self.expect(";")?;
                Ok(Decl::Typedef {
                    annotations,
                    ty,
                    name,
                    new_type,
                })
            }
            "header" | "header_union" | "struct" => {
                let kind = match self.bump().tok {
                    Tok::Ident(k) if k == "header" => AggregateKind::Header,
                    Tok::Ident(k) if k == "struct" => AggregateKind::Struct,
                    _ => AggregateKind::HeaderUnion,
                };
                let name = self.ident()?;
                self.type_names.insert(name.name.clone());
                let type_params = self.type_params()?;
                self.expect("{")?;
                let mut fields = Vec::new();
                while !self.eat("}") {
                    let annotations = self.annotations()?;
                    let ty = self.type_ref()?;
                    let name = self.name()?;
                    self.expect(";")?;
                    fields.push(Field {
                        annotations,
                        ty,
                        name,
                    });
                }
                Ok(Decl::Aggregate {
                    annotations,
                    kind,
                    name,
                    type_params,
                    fields,
                })
            }
            "enum" => {
                self.bump();
                let repr = if self.is_kw("bit") || self.is_kw("int") {
                    Some(self.type_ref()?)
                } else {
                    None
                };
                let name = self.ident()?;
                self.type_names.insert(name.name.clone());
                self.expect("{")?;
                let mut members = Vec::new();
                while !self.eat("}") {
                    let m = self.ident()?;
                    let value = if self.eat("=") {
                        Some(self.expr()?)
                    } else {
                        None
                    };
                    members.push((m, value));
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(Decl::Enum {
                    annotations,
                    repr,
                    name,
                    members,
                })
            }
            "error" | "match_kind" => {
                let is_error = kw == "error";
                self.bump();
                self.expect("{")?;
                let mut names = Vec::new();
                while !self.eat("}") {
                    names.push(self.ident()?);
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                Ok(if is_error {
                    Decl::Error(names)
                } else {
                    Decl::MatchKind(names)
                })
            }
            "extern" => self.extern_decl(annotations),
            "parser" | "control" | "package" => self.block_decl(annotations),
            "action" => Ok(Decl::Action(self.action(annotations)?)),
            "table" => self.table(annotations),
            _ => self.typed_declaration(annotations),
        }
    }

    /// A declaration starting with a type: a function, an instantiation or a variable.
    fn typed_declaration(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let ty = self.type_ref()?;
        if self.is("(") {
            let args = self.args()?;
            let name = self.name()?;
            self.expect(";")?;
            return Ok(Decl::Instance(Instance {
                annotations,
                ty,
                args,
                name,
            }));
        }
        let name = self.name()?;
        if self.is("<") || self.is("(") {
            let type_params = self.type_params()?;
            let params = self.params()?;
            let body = self.block()?;
            let proto = Prototype {
                annotations,
                ret: Some(ty),
                name,
                type_params,
                params,
            };
            return Ok(Decl::Function { proto, body });
        }
        let init = if self.eat("=") {
            Some(self.expr()?)
        } else {
            None
        };
        self.expect(";")?;
        Ok(Decl::Var(VarDecl {
            annotations,
            ty,
            name,
            init,
        }))
    }

    fn extern_decl(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        self.bump();
        // `extern Name {` or `extern Name<T> {` is an object; anything else is a function.
        let is_object = matches!(self.peek().tok, Tok::Ident(_))
            && (self.peek_at(1).tok == Tok::Punct("{")
                || self.peek_at(1).tok == Tok::Punct("<") && {
                    let mut i = 2;
                    while !matches!(self.peek_at(i).tok, Tok::Punct(">") | Tok::Eof) {
                        i += 1;
                    }
                    self.peek_at(i + 1).tok == Tok::Punct("{")
                });
        if !is_object {
            let proto = self.prototype(annotations, None)?;
            self.expect(";")?;
            return Ok(Decl::ExternFunction(proto));
        }
        let name = self.ident()?;
        self.type_names.insert(name.name.clone());
        let type_params = self.type_params()?;
        self.expect("{")?;
        let mut methods = Vec::new();
        while !self.eat("}") {
            let m_annotations = self.annotations()?;
            self.eat("abstract");
            methods.push(self.prototype(m_annotations, Some(&name.name))?);
            self.expect(";")?;
        }
        Ok(Decl::ExternObject {
            annotations,
            name,
            type_params,
            methods,
        })
    }

    /// `[R] name<T>(params)`; in an extern object named `ctor`, `ctor(params)` is the constructor.
    fn prototype(&mut self, annotations: Vec<Annotation>, ctor: Option<&str>) -> Result<Prototype> {
        let is_ctor = ctor.is_some_and(|c| self.is_kw(c) && self.peek_at(1).tok == Tok::Punct("("));
        let ret = if is_ctor {
            None
        } else {
            Some(self.type_ref()?)
        };
        let name = self.member_name()?;
        let type_params = self.type_params()?;
        let params = self.params()?;
        Ok(Prototype {
            annotations,
            ret,
            name,
            type_params,
            params,
        })
    }

    fn params(&mut self) -> Result<Vec<Param>> {
        self.expect("(")?;
        let mut out = Vec::new();
        if self.eat(")") {
            return Ok(out);
        }
        loop {
            let annotations = self.annotations()?;
            let direction = if self.eat("in") {
                Direction::In
            } else if self.eat("out") {
                Direction::Out
            } else if self.eat("inout") {
                Direction::InOut
            } else {
                Direction::None
            };
            let ty = self.type_ref()?;
            let name = self.member_name()?;
            let default = if self.eat("=") {
                Some(self.expr()?)
            } else {
                None
            };
            out.push(Param {
                annotations,
                direction,
                ty,
                name,
                default,
            });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(out)
    }

    fn block_decl(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let kind = match self.bump().tok {
            Tok::Ident(k) if k == "parser" => BlockKind::Parser,
            Tok::Ident(k) if k == "control" => BlockKind::Control,
            _ => BlockKind::Package,
        };
        let name = self.ident()?;
        self.type_names.insert(name.name.clone());
        let type_params = self.type_params()?;
        let params = self.params()?;
        if self.eat(";") {
            return Ok(Decl::BlockType {
                annotations,
                kind,
                name,
                type_params,
                params,
            });
        }
        if kind == BlockKind::Package {
            return fail(
                self.span(),
                format!("expected ';', found {}", self.describe()),
            );
        }
        let ctor_params = if self.is("(") {
            self.params()?
        } else {
            Vec::new()
        };
        self.expect("{")?;
        let mut locals = Vec::new();
        let mut states = Vec::new();
        loop {
            if self.eat("}") {
                if kind == BlockKind::Control {
                    return fail(
                        self.prev_span(),
                        format!("control '{}' has no apply block", name.name),
                    );
                }
                let parser = ParserDecl {
                    annotations,
                    name,
                    params,
                    ctor_params,
                    locals,
                    states,
                };
                return Ok(Decl::Parser(Box::new(parser)));
            }
            let local_annotations = self.annotations()?;
            if kind == BlockKind::Parser && self.is_kw("state") {
                states.push(self.state(local_annotations)?);
            } else if kind == BlockKind::Control && self.is_kw("apply") {
                self.bump();
                let apply = self.block()?;
                self.expect("}")?;
                let control = ControlDecl {
                    annotations,
                    name,
                    params,
                    ctor_params,
                    locals,
                    apply,
                };
                return Ok(Decl::Control(Box::new(control)));
            } else {
                locals.push(self.declaration_with(local_annotations)?);
            }
        }
    }

    fn declaration_with(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        let mut decl = self.declaration()?;
        if !annotations.is_empty() {
            if let Decl::Var(VarDecl { annotations: a, .. })
            | Decl::Instance(Instance { annotations: a, .. })
            | Decl::Action(ActionDecl { annotations: a, .. })
            | Decl::Table(TableDecl { annotations: a, .. })
            | Decl::Const { annotations: a, .. } = &mut decl
            {
                let mut all = annotations;
                all.append(a);
                *a = all;
            }
        }
        Ok(decl)
    }

    fn state(&mut self, annotations: Vec<Annotation>) -> Result<State> {
        self.bump();
        let name = self.ident()?;
        self.expect("{")?;
        let mut body = Vec::new();
        let mut transition = None;
        while !self.eat("}") {
            if self.is_kw("transition") {
                self.bump();
                transition = Some(self.transition()?);
                self.expect("}")?;
                break;
            }
            body.push(self.statement()?);
        }
        Ok(State {
            annotations,
            name,
            body,
            transition,
        })
    }

    fn transition(&mut self) -> Result<Transition> {
        if !self.is_kw("select") {
            let target = self.ident_or_kw_state()?;
            self.expect(";")?;
            return Ok(Transition::Goto(target));
        }
        let start = self.bump().span;
        self.expect("(")?;
        let mut exprs = vec![self.expr()?];
        while self.eat(",") {
            exprs.push(self.expr()?);
        }
        self.expect(")")?;
        self.expect("{")?;
        let mut cases = Vec::new();
        while !self.eat("}") {
            let case_start = self.span();
            let keyset = self.keyset_tuple()?;
            self.expect(":")?;
            let target = self.ident_or_kw_state()?;
            self.expect(";")?;
            cases.push(SelectCase {
                keyset,
                target,
                span: case_start.to(self.prev_span()),
            });
        }
        Ok(Transition::Select {
            exprs,
            cases,
            span: start.to(self.prev_span()),
        })
    }

    /// State names `accept` and `reject` are ordinary identifiers.
    fn ident_or_kw_state(&mut self) -> Result<Ident> {
        self.ident()
    }

    /// `(k1, k2)` or a single keyset element.
    fn keyset_tuple(&mut self) -> Result<Vec<Keyset>> {
        if self.is("(") && self.paren_is_tuple() {
            self.bump();
            let mut out = vec![self.keyset()?];
            while self.eat(",") {
                out.push(self.keyset()?);
            }
            self.expect(")")?;
            Ok(out)
        } else {
            Ok(vec![self.keyset()?])
        }
    }

    /// Whether the `(` at the cursor opens a tuple of keysets (a top-level comma before its `)`).
    fn paren_is_tuple(&self) -> bool {
        let mut depth = 0;
        let mut i = 0;
        loop {
            match self.peek_at(i).tok {
                Tok::Punct("(" | "{" | "[") => depth += 1,
                Tok::Punct(")" | "}" | "]") => {
                    depth -= 1;
                    if depth == 0 {
                        return false;
                    }
                }
                Tok::Punct(",") if depth == 1 => return true,
                Tok::Eof => return false,
                _ => {}
            }
            i += 1;
        }
    }

    fn keyset(&mut self) -> Result<Keyset> {
        if self.eat("default") {
            return Ok(Keyset::Default(self.prev_span()));
        }
        if self.eat("_") {
            return Ok(Keyset::DontCare(self.prev_span()));
        }
        let value = self.expr()?;
        if self.eat("&&&") {
            return Ok(Keyset::Mask(value, self.expr()?));
        }
        if self.eat("..") {
            return Ok(Keyset::Range(value, self.expr()?));
        }
        Ok(Keyset::Value(value))
    }

    fn action(&mut self, annotations: Vec<Annotation>) -> Result<ActionDecl> {
        self.bump();
        let name = self.member_name()?;
        let params = self.params()?;
        let body = self.block()?;
        Ok(ActionDecl {
            annotations,
            name,
            params,
            body,
        })
    }

    fn table(&mut self, annotations: Vec<Annotation>) -> Result<Decl> {
        self.bump();
        let name = self.ident()?;
        // The old `table t() { ... }` form.
        if self.is("(") && self.peek_at(1).tok == Tok::Punct(")") {
            self.pos += 2;
        }
        self.expect("{")?;
        let mut props = Vec::new();
        while !self.eat("}") {
            self.annotations()?;
            let is_const = self.eat("const");
            let prop = self.member_name()?;
            match prop.name.as_str() {
                "key" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut keys = Vec::new();
                    while !self.eat("}") {
                        let expr = self.expr()?;
                        self.expect(":")?;
                        let match_kind = self.member_name()?;
                        let annotations = self.annotations()?;
                        self.expect(";")?;
                        keys.push(KeyElement {
                            expr,
                            match_kind,
                            annotations,
                        });
                    }
                    props.push(TableProp::Key(keys));
                }
                "actions" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut actions = Vec::new();
                    while !self.eat("}") {
                        let annotations = self.annotations()?;
                        actions.push(self.action_ref(annotations)?);
                        self.expect(";")?;
                    }
                    props.push(TableProp::Actions(actions));
                }
                "default_action" => {
                    self.expect("=")?;
                    let action = self.action_ref(Vec::new())?;
                    self.expect(";")?;
                    props.push(TableProp::DefaultAction { action, is_const });
                }
                "entries" => {
                    self.expect("=")?;
                    self.expect("{")?;
                    let mut entries = Vec::new();
                    while !self.eat("}") {
                        entries.push(self.table_entry()?);
                    }
                    props.push(TableProp::Entries { entries, is_const });
                }
                _ => {
                    self.expect("=")?;
                    let value = self.expr()?;
                    self.expect(";")?;
                    props.push(TableProp::Other {
                        name: prop,
                        value,
                        is_const,
                    });
                }
            }
        }
        Ok(Decl::Table(TableDecl {
            annotations,
            name,
            props,
        }))
    }

    /// One entry of `entries`: `[priority = N :] keyset : action [annotations] ;` (p4c takes
    /// an entry's annotations, such as BMv2's `@priority(N)`, after its action).
    fn table_entry(&mut self) -> Result<Entry> {
        let start = self.span();
        let mut priority = None;
        if self.is_kw("priority") && self.peek_at(1).tok == Tok::Punct("=") {
            self.bump();
            self.bump();
            priority = Some(self.expr()?);
            self.expect(":")?;
        }
        let keyset = self.keyset_tuple()?;
        self.expect(":")?;
        let action = self.action_ref(Vec::new())?;
        let annotations = self.annotations()?;
        self.expect(";")?;
        Ok(Entry {
            keyset,
            action,
            priority,
            annotations,
            span: start.to(self.prev_span()),
        })
    }

    fn action_ref(&mut self, annotations: Vec<Annotation>) -> Result<ActionRef> {
        let start = self.span();
        self.eat(".");
        let name = self.member_name()?;
        let args = if self.is("(") {
            self.args()?
        } else {
            Vec::new()
        };
        Ok(ActionRef {
            annotations,
            name,
            args,
            span: start.to(self.prev_span()),
        })
    }

    fn block(&mut self) -> Result<Block> {
        let start = self.expect("{")?;
        let mut stmts = Vec::new();
        while !self.eat("}") {
            if self.at_eof() {
                return fail(start, "unclosed '{'");
            }
            stmts.push(self.statement()?);
        }
        Ok(Block {
            stmts,
            span: start.to(self.prev_span()),
        })
    }

    fn statement(&mut self) -> Result<Stmt> {
        self.nested(Self::statement_inner)
    }

    fn statement_inner(&mut self) -> Result<Stmt> {
        let start = self.span();
        if self.is("@") {
            let annotations = self.annotations()?;
            return if self.is("{") {
                Ok(Stmt::Block(self.block()?))
            } else {
                Ok(Stmt::Decl(Box::new(self.declaration_with(annotations)?)))
            };
        }
        if self.is("{") {
            return Ok(Stmt::Block(self.block()?));
        }
        if self.eat(";") {
            return Ok(Stmt::Empty(start));
        }
        if self.eat("if") {
            self.expect("(")?;
            let cond = self.expr()?;
            self.expect(")")?;
            let then = Box::new(self.statement()?);
            let otherwise = if self.eat("else") {
                Some(Box::new(self.statement()?))
            } else {
                None
            };
            return Ok(Stmt::If {
                cond,
                then,
                otherwise,
                span: start.to(self.prev_span()),
            });
        }
        if self.eat("exit") {
            self.expect(";")?;
            return Ok(Stmt::Exit(start));
        }
        if self.eat("return") {
            let value = if self.is(";") {
                None
            } else {
                Some(self.expr()?)
            };
            self.expect(";")?;
            return Ok(Stmt::Return(value, start.to(self.prev_span())));
        }
        if self.eat("switch") {
            return self.switch(start);
        }
        if self.is_kw("const") {
            return Ok(Stmt::Decl(Box::new(self.declaration()?)));
        }
        if self.is_kw("for") && self.peek_at(1).tok == Tok::Punct("(") {
            return self.for_loop(start);
        }
        for (kw, stmt) in [
            ("break", Stmt::Break(start)),
            ("continue", Stmt::Continue(start)),
        ] {
            if self.is_kw(kw) && self.peek_at(1).tok == Tok::Punct(";") {
                self.pos += 2;
                return Ok(stmt);
            }
        }
        let stmt = self.simple_statement()?;
        self.expect(";")?;
        Ok(stmt)
    }

    /// A variable declaration, an assignment (plain or compound) or a call, without its `;`
    /// (the statements a `for` loop's clauses hold).
    fn simple_statement(&mut self) -> Result<Stmt> {
        let start = self.span();
        if self.looks_like_var_decl() {
            let ty = self.type_ref()?;
            let name = self.name()?;
            let init = if self.eat("=") {
                Some(self.expr()?)
            } else {
                None
            };
            return Ok(Stmt::Decl(Box::new(Decl::Var(VarDecl {
                annotations: Vec::new(),
                ty,
                name,
                init,
            }))));
        }
        let lhs = self.expr()?;
        if self.eat("=") {
            let rhs = self.expr()?;
            return Ok(Stmt::Assign {
                lhs,
                rhs,
                span: start.to(self.prev_span()),
            });
        }
        if let Some(op) = self.compound_assignment() {
            let rhs = self.expr()?;
            let span = start.to(self.prev_span());
            // `a op= b` is `a = a op b` (P4_16 1.2.x): the l-value is read, then written.
            let value = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs.clone()), Box::new(rhs)),
                span,
            };
            return Ok(Stmt::Assign {
                lhs,
                rhs: value,
                span,
            });
        }
        if !matches!(lhs.kind, ExprKind::Call { .. }) {
            return fail(
                self.span(),
                format!("expected '=' or '(', found {}", self.describe()),
            );
        }
        Ok(Stmt::Call(lhs))
    }

    /// Consumes a compound assignment operator (`+=` ... `|-|=`) and gives its operator.
    /// `>>=` is the two tokens `>` `>=`, adjacent.
    fn compound_assignment(&mut self) -> Option<BinOp> {
        let Tok::Punct(p) = self.peek().tok else {
            return None;
        };
        let op = match p {
            "+=" => BinOp::Add,
            "-=" => BinOp::Sub,
            "*=" => BinOp::Mul,
            "&=" => BinOp::BitAnd,
            "|=" => BinOp::BitOr,
            "^=" => BinOp::BitXor,
            "<<=" => BinOp::Shl,
            "|+|=" => BinOp::AddSat,
            "|-|=" => BinOp::SubSat,
            ">" => {
                let next = self.peek_at(1);
                if next.tok != Tok::Punct(">=") || next.span.lo != self.peek().span.hi {
                    return None;
                }
                self.pos += 1;
                BinOp::Shr
            }
            _ => return None,
        };
        self.pos += 1;
        Some(op)
    }

    /// `for (init; cond; update) body` or `for ([annotations] T x in collection) body`, from
    /// `for`.
    fn for_loop(&mut self, start: Span) -> Result<Stmt> {
        self.bump();
        self.expect("(")?;
        if self.for_in_follows() {
            self.annotations()?;
            let ty = self.type_ref()?;
            let var = self.name()?;
            self.expect("in")?;
            let first = self.expr()?;
            let collection = if self.eat("..") {
                ForCollection::Range(first, self.expr()?)
            } else {
                ForCollection::Expr(first)
            };
            self.expect(")")?;
            let body = self.statement()?;
            return Ok(Stmt::ForIn(Box::new(ForInLoop {
                ty,
                var,
                collection,
                body,
                span: start.to(self.prev_span()),
            })));
        }
        let init = self.for_clause(";")?;
        let cond = self.expr()?;
        self.expect(";")?;
        let update = self.for_clause(")")?;
        let body = self.statement()?;
        Ok(Stmt::For(Box::new(ForLoop {
            init,
            cond,
            update,
            body,
            span: start.to(self.prev_span()),
        })))
    }

    /// The simple statements of a `for` clause, separated by commas, through `end`.
    fn for_clause(&mut self, end: &str) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        if self.eat(end) {
            return Ok(out);
        }
        loop {
            out.push(self.nested(Self::simple_statement)?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect(end)?;
        Ok(out)
    }

    /// Whether `[annotations] T x in` follows the cursor (a `for`-`in` loop); reads without
    /// consuming.
    fn for_in_follows(&mut self) -> bool {
        let (save, depth) = (self.pos, self.depth);
        let found = self.annotations().is_ok()
            && self.type_ref().is_ok()
            && self.name().is_ok()
            && self.is_kw("in");
        (self.pos, self.depth) = (save, depth);
        found
    }

    /// Tries to read `Type name` at the cursor without consuming anything.
    fn looks_like_var_decl(&mut self) -> bool {
        let Tok::Ident(first) = &self.peek().tok else {
            return false;
        };
        if ["bit", "int", "varbit", "bool", "tuple", "error", "string"].contains(&first.as_str()) {
            return true;
        }
        // `list` is also an identifier: `list<T> l` declares, `list < x` compares.
        let list_type = first == "list" && self.peek_at(1).tok == Tok::Punct("<");
        if !self.type_names.contains(first) && !list_type {
            return false;
        }
        let save = self.pos;
        let ok = self.type_ref().is_ok() && matches!(&self.peek().tok, Tok::Ident(_));
        self.pos = save;
        ok
    }

    fn switch(&mut self, start: Span) -> Result<Stmt> {
        self.expect("(")?;
        let expr = self.expr()?;
        self.expect(")")?;
        self.expect("{")?;
        let mut cases = Vec::new();
        while !self.eat("}") {
            let label = if self.eat("default") {
                SwitchLabel::Default(self.prev_span())
            } else {
                SwitchLabel::Expr(self.expr()?)
            };
            self.expect(":")?;
            let body = if self.is("{") {
                Some(self.block()?)
            } else {
                None
            };
            cases.push(SwitchCase { label, body });
        }
        Ok(Stmt::Switch {
            expr,
            cases,
            span: start.to(self.prev_span()),
        })
    }

    fn type_ref(&mut self) -> Result<TypeRef> {
        self.nested(Self::type_ref_inner)
    }

    fn type_ref_inner(&mut self) -> Result<TypeRef> {
        let start = self.span();
        let base = match &self.peek().tok {
            Tok::Punct("_") => {
                self.bump();
                TypeRef::DontCare(start)
            }
            Tok::Ident(kw) => match kw.as_str() {
                "bit" | "int" | "varbit" => {
                    let kw = kw.clone();
                    self.bump();
                    if !self.is("<") {
                        match kw.as_str() {
                            "bit" => {
                                let one = crate::lexer::IntLit {
                                    value: 1,
                                    width: None,
                                };
                                let width = Box::new(Expr {
                                    kind: ExprKind::Int(one),
                                    span: start,
                                });
                                TypeRef::Bits {
                                    width,
                                    signed: false,
                                    span: start,
                                }
                            }
                            "int" => TypeRef::Int(start),
                            _ => {
                                return fail(self.span(), "varbit needs a maximum width: varbit<W>")
                            }
                        }
                    } else {
                        self.bump();
                        let width = Box::new(self.width_expr()?);
                        self.expect(">")?;
                        let span = start.to(self.prev_span());
                        if kw == "varbit" {
                            TypeRef::VarBit { width, span }
                        } else {
                            TypeRef::Bits {
                                width,
                                signed: kw == "int",
                                span,
                            }
                        }
                    }
                }
                "bool" => {
                    self.bump();
                    TypeRef::Bool(start)
                }
                "error" => {
                    self.bump();
                    TypeRef::Error(start)
                }
                "void" => {
                    self.bump();
                    TypeRef::Void(start)
                }
                "string" => {
                    self.bump();
                    TypeRef::String(start)
                }
                "match_kind" => {
                    self.bump();
                    TypeRef::MatchKind(start)
                }
                "list" => {
                    self.bump();
                    self.expect("<")?;
                    let elem = Box::new(self.type_ref()?);
                    self.expect(">")?;
                    TypeRef::List {
                        elem,
                        span: start.to(self.prev_span()),
                    }
                }
                "tuple" => {
                    self.bump();
                    self.expect("<")?;
                    let mut elems = vec![self.type_ref()?];
                    while self.eat(",") {
                        elems.push(self.type_ref()?);
                    }
                    self.expect(">")?;
                    TypeRef::Tuple {
                        elems,
                        span: start.to(self.prev_span()),
                    }
                }
                _ => {
                    self.eat(".");
                    let name = self.ident()?;
                    let mut args = Vec::new();
                    if self.is("<") {
                        self.bump();
                        loop {
                            args.push(self.type_ref()?);
                            if !self.eat(",") {
                                break;
                            }
                        }
                        self.expect(">")?;
                    }
                    TypeRef::Named { name, args }
                }
            },
            _ => return fail(start, format!("expected a type, found {}", self.describe())),
        };
        if self.is("[") && !matches!(self.peek_at(1).tok, Tok::Punct("]")) {
            self.bump();
            let size = Box::new(self.expr()?);
            self.expect("]")?;
            return Ok(TypeRef::Stack {
                elem: Box::new(base),
                size,
                span: start.to(self.prev_span()),
            });
        }
        Ok(base)
    }

    /// The width inside `bit<...>`: a literal, a name, or a parenthesized expression.
    fn width_expr(&mut self) -> Result<Expr> {
        if self.is("(") {
            self.bump();
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        self.primary()
    }

    fn args(&mut self) -> Result<Vec<Arg>> {
        self.expect("(")?;
        let mut out = Vec::new();
        if self.eat(")") {
            return Ok(out);
        }
        loop {
            let name = if matches!(self.peek().tok, Tok::Ident(_))
                && self.peek_at(1).tok == Tok::Punct("=")
            {
                let n = self.member_name()?;
                self.bump();
                Some(n)
            } else {
                None
            };
            let value = if self.eat("_") {
                Expr {
                    kind: ExprKind::DontCare,
                    span: self.prev_span(),
                }
            } else {
                self.expr()?
            };
            out.push(Arg { name, value });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(out)
    }

    /// An expression.
    pub fn expr(&mut self) -> Result<Expr> {
        self.nested(Self::conditional)
    }

    /// Runs `f` one nesting level deeper, refusing input nested deeper than [`MAX_NESTING`].
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.deeper()?;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// Goes one level deeper in the syntax tree, refusing more than [`MAX_NESTING`] levels.
    fn deeper(&mut self) -> Result<()> {
        if self.depth >= MAX_NESTING {
            return fail(
                self.span(),
                format!("nested more than {MAX_NESTING} levels deep (limits::MAX_NESTING)"),
            );
        }
        self.depth += 1;
        Ok(())
    }

    /// The `?:` level.
    fn conditional(&mut self) -> Result<Expr> {
        let cond = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            let span = cond.span.to(b.span);
            return Ok(Expr {
                kind: ExprKind::Cond(Box::new(cond), Box::new(a), Box::new(b)),
                span,
            });
        }
        Ok(cond)
    }

    /// The binary operator at the cursor and its precedence (`>>` is two adjacent `>`).
    fn binary_op(&self) -> Option<(BinOp, u8, usize)> {
        let Tok::Punct(p) = self.peek().tok else {
            return None;
        };
        let op = match p {
            "||" => (BinOp::Or, 1),
            "&&" => (BinOp::And, 2),
            "==" => (BinOp::Eq, 3),
            "!=" => (BinOp::Ne, 3),
            "<" => (BinOp::Lt, 4),
            ">" => {
                let next = self.peek_at(1);
                let adjacent = next.span.lo == self.peek().span.hi;
                if next.tok == Tok::Punct(">=") && adjacent {
                    // `>>=`, a compound assignment, ends the expression.
                    return None;
                }
                if next.tok == Tok::Punct(">") && adjacent {
                    return Some((BinOp::Shr, 8, 2));
                }
                if next.tok == Tok::Punct("=") && adjacent {
                    return Some((BinOp::Ge, 4, 2));
                }
                (BinOp::Gt, 4)
            }
            "<=" => (BinOp::Le, 4),
            ">=" => (BinOp::Ge, 4),
            "|" => (BinOp::BitOr, 5),
            "^" => (BinOp::BitXor, 6),
            "&" => (BinOp::BitAnd, 7),
            "<<" => (BinOp::Shl, 8),
            "++" => (BinOp::Concat, 9),
            "+" => (BinOp::Add, 9),
            "-" => (BinOp::Sub, 9),
            "|+|" => (BinOp::AddSat, 9),
            "|-|" => (BinOp::SubSat, 9),
            "*" => (BinOp::Mul, 10),
            "/" => (BinOp::Div, 10),
            "%" => (BinOp::Mod, 10),
            _ => return None,
        };
        Some((op.0, op.1, 1))
    }

    fn binary(&mut self, min: u8) -> Result<Expr> {
        let outer = self.depth;
        let chain = self.binary_chain(min);
        self.depth = outer;
        chain
    }

    /// `binary` without restoring the depth: each operator of a chain puts the expression so
    /// far one level deeper, under the new operator's node.
    fn binary_chain(&mut self, min: u8) -> Result<Expr> {
        let mut lhs = self.unary()?;
        while let Some((op, prec, len)) = self.binary_op() {
            if prec <= min {
                break;
            }
            self.deeper()?;
            self.pos += len;
            let rhs = self.binary(prec)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr> {
        self.nested(Self::unary_inner)
    }

    fn unary_inner(&mut self) -> Result<Expr> {
        let start = self.span();
        let op = match self.peek().tok {
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::Complement),
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let e = self.unary()?;
            let span = start.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(e)),
                span,
            });
        }
        if self.is("(") && self.paren_is_cast() {
            self.bump();
            let ty = self.type_ref()?;
            self.expect(")")?;
            let e = self.unary()?;
            let span = start.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Cast(ty, Box::new(e)),
                span,
            });
        }
        self.postfix()
    }

    fn paren_is_cast(&self) -> bool {
        match &self.peek_at(1).tok {
            Tok::Ident(s) if ["bit", "int", "bool", "varbit"].contains(&s.as_str()) => true,
            // `(list<T>) { ... }`, `(tuple<T, U>) { ... }`.
            Tok::Ident(s) if s == "list" || s == "tuple" => self.peek_at(2).tok == Tok::Punct("<"),
            Tok::Ident(s) if self.type_names.contains(s) => {
                matches!(self.peek_at(2).tok, Tok::Punct(")" | "<"))
            }
            _ => false,
        }
    }

    fn postfix(&mut self) -> Result<Expr> {
        let outer = self.depth;
        let chain = self.postfix_chain();
        self.depth = outer;
        chain
    }

    /// `postfix` without restoring the depth: each member, index, slice or call puts the
    /// expression so far one level deeper.
    fn postfix_chain(&mut self) -> Result<Expr> {
        let mut e = self.primary()?;
        loop {
            let extends = self.is(".")
                || self.is("[")
                || self.is("(")
                || (self.is("<") && self.generic_call_follows());
            if !extends {
                return Ok(e);
            }
            self.deeper()?;
            if self.eat(".") {
                let m = self.member_name()?;
                let span = e.span.to(m.span);
                e = Expr {
                    kind: ExprKind::Member(Box::new(e), m),
                    span,
                };
            } else if self.is("[") {
                self.bump();
                let first = self.expr()?;
                if self.eat(":") {
                    let lo = self.expr()?;
                    self.expect("]")?;
                    let span = e.span.to(self.prev_span());
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(first), Box::new(lo)),
                        span,
                    };
                } else {
                    self.expect("]")?;
                    let span = e.span.to(self.prev_span());
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), Box::new(first)),
                        span,
                    };
                }
            } else {
                let mut type_args = Vec::new();
                if self.eat("<") {
                    loop {
                        type_args.push(self.type_ref()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(">")?;
                }
                let args = self.args()?;
                let span = e.span.to(self.prev_span());
                e = Expr {
                    kind: ExprKind::Call {
                        callee: Box::new(e),
                        type_args,
                        args,
                    },
                    span,
                };
            }
        }
    }

    /// Whether `<` at the cursor opens type arguments of a call (`lookahead<T>()`). It looks
    /// at most [`TYPE_ARGS_LOOKAHEAD`] tokens ahead, so that a chain of comparisons does not
    /// make parsing quadratic.
    fn generic_call_follows(&self) -> bool {
        let mut depth = 0;
        for i in 0..TYPE_ARGS_LOOKAHEAD {
            match &self.peek_at(i).tok {
                Tok::Punct("<") => depth += 1,
                Tok::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return self.peek_at(i + 1).tok == Tok::Punct("(");
                    }
                }
                Tok::Ident(_) | Tok::Int(_) | Tok::Punct(",") => {}
                _ => return false,
            }
        }
        false
    }

    fn primary(&mut self) -> Result<Expr> {
        let start = self.span();
        let t = self.peek().clone();
        let kind = match t.tok {
            Tok::Int(lit) => {
                self.bump();
                ExprKind::Int(lit)
            }
            Tok::Str(s) => {
                self.bump();
                ExprKind::Str(s)
            }
            Tok::Ident(s) if s == "true" || s == "false" => {
                self.bump();
                ExprKind::Bool(s == "true")
            }
            Tok::Ident(s)
                if s == "error"
                    || CONTEXTUAL.contains(&s.as_str())
                    || !RESERVED.contains(&s.as_str()) =>
            {
                self.bump();
                ExprKind::Name(s)
            }
            Tok::Punct(".") => {
                self.bump();
                let id = self.ident()?;
                ExprKind::Name(id.name)
            }
            Tok::Punct("_") => {
                self.bump();
                ExprKind::DontCare
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(Expr {
                    span: start.to(self.prev_span()),
                    ..e
                });
            }
            Tok::Punct("{") => {
                self.bump();
                let is_struct = matches!(self.peek().tok, Tok::Ident(_))
                    && self.peek_at(1).tok == Tok::Punct("=");
                if is_struct {
                    let mut fields = Vec::new();
                    while !self.eat("}") {
                        let f = self.member_name()?;
                        self.expect("=")?;
                        fields.push((f, self.expr()?));
                        if !self.eat(",") {
                            self.expect("}")?;
                            break;
                        }
                    }
                    ExprKind::StructInit(fields)
                } else {
                    let mut items = Vec::new();
                    while !self.eat("}") {
                        items.push(self.expr()?);
                        if !self.eat(",") {
                            self.expect("}")?;
                            break;
                        }
                    }
                    ExprKind::List(items)
                }
            }
            _ => {
                return fail(
                    start,
                    format!("expected an expression, found {}", self.describe()),
                )
            }
        };
        Ok(Expr {
            kind,
            span: start.to(self.prev_span()),
        })
    }
}

fn kw_is(t: &Token, kw: &str) -> bool {
    matches!(&t.tok, Tok::Ident(s) if s == kw)
}

/// The static form of a punctuation string (so `Tok::Punct` can be compared).
fn str_punct(p: &str) -> &'static str {
    const ALL: [&str; 47] = [
        "&&&", "|+|", "|-|", "..", "++", "&&", "||", "==", "!=", "<=", ">=", "<<", "+", "-", "*",
        "/", "%", "&", "|", "^", "~", "!", "<", ">", "=", "?", ":", ";", ",", ".", "(", ")", "{",
        "}", "[", "]", "@", "_", "|+|=", "|-|=", "<<=", "+=", "-=", "*=", "&=", "|=", "^=",
    ];
    ALL.iter().find(|&&a| a == p).copied().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceMap;

    fn parse_src(src: &str) -> (SourceMap, Result<Vec<Decl>>) {
        let (mut map, f) = SourceMap::of("t.p4", src);
        let r = crate::preprocessor::preprocess(
            &mut map,
            f,
            crate::preprocessor::Includes::BuiltinOnly,
        )
        .and_then(parse);
        (map, r)
    }

    #[test]
    fn builtin_headers_parse() {
        let (_, r) = parse_src("#include <core.p4>\n#include <v1model.p4>\n");
        let decls = r.unwrap();
        assert!(decls
            .iter()
            .any(|d| matches!(d, Decl::BlockType { name, .. } if name.name == "V1Switch")));
    }

    #[test]
    fn shift_right_is_two_adjacent_greater_thans() {
        let (_, r) = parse_src("const bit<8> a = 8w4 >> 1; register<bit<32>>(4) r;");
        let decls = r.unwrap();
        match &decls[0] {
            Decl::Const { value, .. } => {
                assert!(matches!(value.kind, ExprKind::Binary(BinOp::Shr, ..)))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&decls[1], Decl::Instance(_)));
    }

    #[test]
    fn precedence_follows_the_specification() {
        let (_, r) = parse_src("const bool a = 1 + 2 * 3 == 7 && true;");
        let Decl::Const { value, .. } = &r.unwrap()[0] else {
            panic!("not a const")
        };
        let ExprKind::Binary(BinOp::And, lhs, _) = &value.kind else {
            panic!("{value:?}")
        };
        let ExprKind::Binary(BinOp::Eq, sum, _) = &lhs.kind else {
            panic!("{lhs:?}")
        };
        assert!(
            matches!(&sum.kind, ExprKind::Binary(BinOp::Add, _, m) if matches!(m.kind, ExprKind::Binary(BinOp::Mul, ..)))
        );
    }

    /// The statements of function `f`'s body in `src`.
    fn body_of(src: &str) -> Vec<Stmt> {
        let (map, r) = parse_src(src);
        let decls = r.unwrap_or_else(|e| panic!("{}", e.render(&map)));
        match decls.into_iter().last() {
            Some(Decl::Function { body, .. }) => body.stmts,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn compound_assignments_are_read_as_the_operation_then_the_store() {
        let ops = [
            ("+=", BinOp::Add),
            ("-=", BinOp::Sub),
            ("*=", BinOp::Mul),
            ("&=", BinOp::BitAnd),
            ("|=", BinOp::BitOr),
            ("^=", BinOp::BitXor),
            ("<<=", BinOp::Shl),
            (">>=", BinOp::Shr),
            ("|+|=", BinOp::AddSat),
            ("|-|=", BinOp::SubSat),
        ];
        for (text, op) in ops {
            let stmts = body_of(&format!("void f() {{ x {text} 1 + y; }}"));
            let [Stmt::Assign { lhs, rhs, .. }] = &stmts[..] else {
                panic!("{text}: {stmts:?}")
            };
            assert_eq!(lhs.kind, ExprKind::Name("x".into()), "{text}");
            let ExprKind::Binary(got, a, b) = &rhs.kind else {
                panic!("{text}: {rhs:?}")
            };
            assert_eq!((*got, &a.kind), (op, &lhs.kind), "{text}");
            assert!(matches!(b.kind, ExprKind::Binary(BinOp::Add, ..)), "{text}");
        }
        // `a > >= b` is not `>>=`.
        let (_, r) = parse_src("void f() { x > >= 1; }");
        assert!(r.is_err());
    }

    #[test]
    fn for_loops_in_both_forms_with_break_and_continue() {
        let stmts = body_of(
            "void f() { for (bit<8> i = 0, j = 1; i < 4; i = i + 1, j += 2) { break; } \
             for (; true;) { } \
             for (@x T e in s) continue; for (bit<8> k in 1 .. n) ; }",
        );
        let [Stmt::For(a), Stmt::For(b), Stmt::ForIn(c), Stmt::ForIn(d)] = &stmts[..] else {
            panic!("{stmts:?}")
        };
        assert_eq!((a.init.len(), a.update.len()), (2, 2));
        assert!(
            matches!(a.body, Stmt::Block(ref blk) if matches!(blk.stmts[..], [Stmt::Break(_)]))
        );
        assert!(b.init.is_empty() && b.update.is_empty());
        assert_eq!(c.var.name, "e");
        assert!(matches!(c.collection, ForCollection::Expr(_)));
        assert!(matches!(c.body, Stmt::Continue(_)));
        assert!(matches!(d.collection, ForCollection::Range(..)));
    }

    #[test]
    fn contextual_keywords_are_names() {
        let src = "header h_t { bit<8> type; bit<8> key; bit<8> apply; bit<8> state; \
                   bit<8> entries; bit<8> priority; bit<8> actions; bit<8> list; }\n\
                   bit<8> f(in bit<8> type, in bit<8> state) { bit<8> apply = type; return apply + state; }";
        let stmts = body_of(src);
        assert!(
            matches!(&stmts[0], Stmt::Decl(d) if matches!(&**d, Decl::Var(v) if v.name.name == "apply"))
        );
    }

    #[test]
    fn missing_semicolon_is_reported_at_the_next_token() {
        let (map, r) = parse_src("header h_t {\n  bit<8> a\n}\n");
        let e = r.unwrap_err();
        assert_eq!(e.location(&map), "t.p4:3:1");
        assert_eq!(e.message, "expected ';', found '}'");
    }
}
