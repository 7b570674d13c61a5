//! Checker: resolves names and types of the AST and lowers it to the [`ir`](softswitch_core::ir::Program) in one
//! pass (P4 requires declaration before use, so one pass suffices). Submodules: `expr`
//! (expressions, places, constants), `stmt` (statements and calls), `externs` (v1model and core
//! externs), `loops`, `table`, `parser`. This module holds the environment and the declarations.

mod cpinfo;
mod expr;
mod externs;
mod loops;
mod parser;
mod stmt;
mod table;
mod user_externs;

pub use user_externs::UserExtern;

use crate::ast::{self, AggregateKind, Decl, Direction, ExprKind, TypeRef};
use crate::diagnostic::{fail, Diagnostic, Diagnostics, Result};
use crate::limits::{
    MAX_BODIES, MAX_EXTERN_CELLS, MAX_LOWERED, MAX_RUN_DEPTH, MAX_SLOTS, MAX_TYPE_DEPTH,
    MAX_TYPE_PARTS,
};
use crate::source::Span;
use crate::types::{EnumDef, Type, Types};
use softswitch_core::ir::{self, Slot};
use std::collections::HashMap;

/// Checks `decls` (a whole program including the built-in headers, from the files of `map`)
/// and lowers it. An error in a declaration or a statement is recorded in `diags` and the
/// checker goes on with the next (so one run reports them all, up to `limits::MAX_ERRORS`);
/// the result is then an error too.
///
/// Beside the program, the calls it makes of extern functions it declares itself, which
/// softswitch cannot run (see [`UserExtern`]).
pub fn check(
    decls: &[Decl],
    map: &crate::source::SourceMap,
    diags: &mut Diagnostics,
) -> Result<(crate::Compiled, Vec<UserExtern>)> {
    let mut c = Checker::default();
    let shared = std::rc::Rc::clone(&c.diags);
    *shared.borrow_mut() = std::mem::take(diags);
    let mut stopped = None;
    for d in decls {
        if let Err(e) = c.top_level(d).or_else(|e| c.recover(e)) {
            stopped = Some(e);
            break;
        }
    }
    let no_main = !decls
        .iter()
        .any(|d| matches!(d, Decl::Instance(i) if i.name.name == "main"));
    let first_error = || shared.borrow().first_error();
    let r = match (stopped, first_error()) {
        (Some(stop), _) => Err(stop),
        // A program cut short by its errors has no `main` to report missing.
        (None, Some(first)) if no_main => Err(first),
        (None, _) => c.finish(decls, map),
    };
    *diags = shared.take();
    r
}

/// A parameter of a callable (action or function) as the checker binds it.
#[derive(Clone, Debug)]
struct CallParam {
    name: String,
    direction: Direction,
    ty: Type,
    slot: Slot,
}

/// An action or function.
#[derive(Clone, Debug)]
struct Callable {
    body: usize,
    params: Vec<CallParam>,
    ret: Option<(Type, Slot)>,
    action: Option<usize>,
}

/// What a name denotes.
#[derive(Clone, Debug)]
enum Sym<'a> {
    Type(Type),
    Const {
        ty: Type,
        value: u128,
    },
    /// An `int` constant.
    Int(num_bigint::BigInt),
    Var {
        ty: Type,
        slot: Slot,
    },
    Callable(usize),
    GenericFunction(&'a ast::Prototype, &'a ast::Block),
    Table(usize),
    Instance(usize),
    ControlInstance(usize),
    ParserInstance {
        parser: usize,
        callable: usize,
    },
    ExternFunction,
    ExternType,
    /// A generic header or struct, made into a type for each list of type arguments it is
    /// given ([`Checker::generic_aggregate`]).
    GenericAggregate {
        kind: AggregateKind,
        type_params: &'a [ast::Ident],
        fields: &'a [ast::Field],
    },
    Parser(&'a ast::ParserDecl),
    Control(&'a ast::ControlDecl),
    Packet {
        out: bool,
    },
    MatchKind(String),
    Package,
}

#[derive(Default)]
struct Checker<'a> {
    types: Types,
    scopes: Vec<HashMap<String, Sym<'a>>>,
    next_slot: Slot,
    /// The slots of local variables, zeroed where they are declared ([`ir::Program::locals`]).
    locals: Vec<(Slot, u32)>,
    layouts: Vec<Vec<ir::FieldLayout>>,
    errors: Vec<String>,
    /// Each error's code (its index in `errors`), by name.
    error_codes: HashMap<String, usize>,
    callables: Vec<Callable>,
    /// Each action's callable, by action index.
    action_callables: Vec<usize>,
    bodies: Vec<ir::Body>,
    actions: Vec<ir::Action>,
    tables: Vec<ir::Table>,
    instances: Vec<ir::Instance>,
    /// The enclosing control's name, to qualify table, action and instance names.
    prefix: String,
    /// Parser and control types `main` instantiated with constructor arguments so far, with
    /// how many times (see [`Checker::specialized_name`]).
    specialized: HashMap<String, usize>,
    /// The return slot of the function being lowered.
    ret: Option<(Type, Slot)>,
    /// Whether a parser is being lowered (`packet_in` methods allowed).
    in_parser: bool,
    /// How many loops enclose the statement being lowered (`break` and `continue` need one).
    loops: usize,
    /// User metadata slots per `@field_list(N)` index.
    user_field_lists: Vec<(u8, Vec<Slot>)>,
    /// Preserved field lists by id, as the program references them.
    field_lists: Vec<Vec<Slot>>,
    /// Generic functions lowered so far: name, type arguments, callable.
    instantiations: Vec<(String, Vec<Type>, usize)>,
    /// Parsers instantiated inside parsers.
    subparsers: Vec<ir::ParserIr>,
    /// The parser and control types being lowered, outermost first (to refuse recursion).
    blocks: Vec<String>,
    /// Generic functions being lowered (to refuse recursion).
    instantiating: Vec<(String, Vec<Type>)>,
    /// What the control plane sees (P4Info), recorded beside the IR.
    cp: crate::cpinfo::CpInfo,
    /// The work of lowering so far (see [`MAX_LOWERED`]).
    lowered: usize,
    /// How deep running each body, table and sub-parser recurses (see [`MAX_RUN_DEPTH`]).
    depths: Depths,
    /// Cells of the register, counter and meter instances so far (see [`MAX_EXTERN_CELLS`]).
    extern_cells: u64,
    /// The errors recorded so far, which the checker went on after (see [`Checker::recover`]).
    diags: std::rc::Rc<std::cell::RefCell<Diagnostics>>,
    /// Extern function declarations by name (overloads), for calls of the program's own.
    extern_functions: HashMap<String, Vec<&'a ast::Prototype>>,
    /// Calls of extern functions the program declares itself.
    user_externs: Vec<UserExtern>,
    /// The types generic headers and structs made so far: name, type arguments, type.
    generic_aggregates: Vec<(String, Vec<Type>, Type)>,
    /// The `if` conditions lowered so far, for the trace (their index is their `Stmt::If`'s).
    conditions: Vec<Span>,
    /// The slots of `in` and directionless parameters (first slot, size), which the program
    /// may read but not assign (slots are never reused, so the list only grows).
    read_only: Vec<(Slot, u32)>,
}

/// Bytes of a name (or a string) that count as one unit of lowering work (see [`MAX_LOWERED`]).
const NAME_BYTES_PER_UNIT: usize = 32;

/// What entering a parser or control instantiated inside another put aside
/// ([`Checker::enter_instance`]): the enclosing block's names' prefix and its scopes.
struct Outer<'a> {
    /// The enclosing block's prefix.
    prefix: String,
    /// The scopes above the top-level one.
    scopes: Vec<HashMap<String, Sym<'a>>>,
}

/// The run depths (see [`ir::RunDepth`]) of what the program has lowered so far, by index.
#[derive(Default)]
struct Depths {
    bodies: Vec<usize>,
    tables: Vec<usize>,
    subparsers: Vec<usize>,
}

impl<'a> Checker<'a> {
    /// Records `e`, an error of one declaration or statement, for the caller to go on with
    /// the next; `Err` when the checker must stop (`limits::MAX_ERRORS`).
    fn recover(&self, e: Diagnostic) -> Result<()> {
        self.diags.borrow_mut().error(e)
    }

    /// The statements of `r`, or none when it is an error, recorded (see [`Checker::recover`]).
    fn recovered(&self, r: Result<Vec<ir::Stmt>>) -> Result<Vec<ir::Stmt>> {
        r.or_else(|e| self.recover(e).map(|()| Vec::new()))
    }

    fn lookup(&self, name: &str) -> Option<&Sym<'a>> {
        if self.scopes.is_empty() {
            return None;
        }
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn declare(&mut self, name: &ast::Ident, sym: Sym<'a>) -> Result<()> {
        if self.scopes.is_empty() {
            self.scopes.push(HashMap::new());
        }
        let scope = self.scopes.last_mut().expect("a scope exists");
        let overloadable = matches!(sym, Sym::ExternFunction | Sym::MatchKind(_));
        if scope.contains_key(&name.name) && !overloadable {
            return fail(
                name.span,
                format!("'{}' is already declared in this scope", name.name),
            );
        }
        scope.insert(name.name.clone(), sym);
        Ok(())
    }

    /// Counts `n` units of lowering work for what is at `at`, refusing more than
    /// [`MAX_LOWERED`] in all.
    fn spend(&mut self, n: usize, at: Span) -> Result<()> {
        self.lowered = self.lowered.saturating_add(n);
        if self.lowered > MAX_LOWERED {
            return fail(
                at,
                format!(
                    "lowering the program takes more than {MAX_LOWERED} units of work \
                     (limits::MAX_LOWERED: expressions, statements, names and annotations kept; \
                     each instance of a control, parser or generic function counts its own)"
                ),
            );
        }
        Ok(())
    }

    /// How deep running IR of this program recurses, given what it has lowered so far.
    fn run_depth(&self) -> ir::RunDepth<'_> {
        ir::RunDepth {
            bodies: &self.depths.bodies,
            tables: &self.depths.tables,
            subparsers: &self.depths.subparsers,
        }
    }

    /// Refuses a block (`what`, named at `at`) whose run would recurse deeper than
    /// [`MAX_RUN_DEPTH`].
    fn check_run_depth(&self, depth: usize, what: &str, at: Span) -> Result<()> {
        if depth > MAX_RUN_DEPTH {
            return fail(
                at,
                format!(
                    "{what} nests more than {MAX_RUN_DEPTH} levels deep counted through its \
                     calls, tables and sub-parsers (limits::MAX_RUN_DEPTH)"
                ),
            );
        }
        Ok(())
    }

    /// Slots for a value of `ty` declared at `at`, within [`MAX_SLOTS`] in all.
    fn alloc(&mut self, ty: &Type, at: Span) -> Result<Slot> {
        let slot = self.next_slot;
        let size = self.types.size(ty);
        match slot.checked_add(size).filter(|&end| end <= MAX_SLOTS) {
            Some(end) => self.next_slot = end,
            None => {
                return fail(
                    at,
                    format!(
                        "the program needs more than {MAX_SLOTS} slots of per-packet state \
                         (limits::MAX_SLOTS)"
                    ),
                )
            }
        }
        Ok(slot)
    }

    /// Refuses a type `ty` written at `at` that nests deeper than [`MAX_TYPE_DEPTH`], takes
    /// more than [`MAX_SLOTS`] or has more than [`MAX_TYPE_PARTS`].
    fn bounded(&self, ty: Type, at: Span) -> Result<Type> {
        let too_big = if self.types.depth(&ty) > MAX_TYPE_DEPTH {
            format!("nests more than {MAX_TYPE_DEPTH} deep (limits::MAX_TYPE_DEPTH)")
        } else if self.types.size(&ty) > MAX_SLOTS {
            format!("takes more than {MAX_SLOTS} slots (limits::MAX_SLOTS)")
        } else if self.types.parts(&ty) > MAX_TYPE_PARTS {
            format!("has more than {MAX_TYPE_PARTS} parts (limits::MAX_TYPE_PARTS)")
        } else {
            return Ok(ty);
        };
        let t = self.types.show(&ty).to_string();
        fail(at, format!("type {t} {too_big}"))
    }

    /// The control-plane name of `name` declared at `at` in the current block (its `@name`, if
    /// any, relative to the block or absolute), counted as lowering work.
    fn qualified(
        &mut self,
        name: &str,
        annotations: &[ast::Annotation],
        at: Span,
    ) -> Result<String> {
        let n = name_annotation(annotations);
        let qualified = match n.as_deref().map(|n| n.strip_prefix('.').ok_or(n)) {
            Some(Ok(absolute)) => absolute.to_string(),
            Some(Err(n)) if !self.prefix.is_empty() => format!("{}.{n}", self.prefix),
            Some(Err(n)) => n.to_string(),
            None if !self.prefix.is_empty() => format!("{}.{name}", self.prefix),
            None => name.to_string(),
        };
        self.spend_name(&qualified, at)?;
        Ok(qualified)
    }

    /// Counts keeping `name` (declared at `at`) as lowering work: one unit and one per
    /// [`NAME_BYTES_PER_UNIT`] bytes, since a block instantiated many times keeps a copy each time.
    fn spend_name(&mut self, name: &str, at: Span) -> Result<()> {
        self.spend(1 + name.len() / NAME_BYTES_PER_UNIT, at)
    }

    /// Counts keeping a copy of `annotations` (at `at`) as lowering work: a unit per annotation
    /// and per token, and one per [`NAME_BYTES_PER_UNIT`] bytes of their names and strings.
    fn spend_annotations(&mut self, annotations: &[ast::Annotation], at: Span) -> Result<()> {
        let units = annotations
            .iter()
            .flat_map(|a| &a.body)
            .map(|t| match &t.tok {
                crate::lexer::Tok::Ident(s) | crate::lexer::Tok::Str(s) => {
                    1 + s.len() / NAME_BYTES_PER_UNIT
                }
                _ => 1,
            })
            .sum::<usize>()
            + annotations.len();
        self.spend(units, at)
    }

    /// Resolves a written type.
    fn resolve_type(&mut self, t: &TypeRef) -> Result<Type> {
        Ok(match t {
            TypeRef::Bits {
                width,
                signed,
                span,
            } => {
                let w = self.const_u128(width)?;
                if w == 0 || w > u128::from(ir::MAX_WIDTH) {
                    return fail(
                        *span,
                        format!(
                            "width {w} is not supported: softswitch supports 1 to {} bits, \
                             as p4c does",
                            ir::MAX_WIDTH
                        ),
                    );
                }
                Type::Bits {
                    width: w as u16,
                    signed: *signed,
                }
            }
            TypeRef::VarBit { width, span } => match self.const_u128(width)? {
                max @ 1..=65535 => Type::VarBit(max as u32),
                _ => {
                    return fail(
                        *span,
                        "a varbit's maximum width must be between 1 and 65535 bits",
                    )
                }
            },
            TypeRef::Int(_) => Type::Int,
            TypeRef::Bool(_) => Type::Bool,
            TypeRef::Error(_) => Type::Error,
            TypeRef::Void(_) => Type::Void,
            TypeRef::String(_) => Type::String,
            TypeRef::MatchKind(_) => Type::MatchKind,
            TypeRef::DontCare(_) => Type::Var,
            TypeRef::Tuple { elems, span } => {
                let elems = elems
                    .iter()
                    .map(|e| self.resolve_type(e))
                    .collect::<Result<_>>()?;
                self.bounded(Type::Tuple(elems), *span)?
            }
            TypeRef::List { span, .. } => {
                return fail(
                    *span,
                    "list<T> is only supported as a local variable's type, with its values \
                     given: list<T> l = (list<T>){ ... }",
                )
            }
            TypeRef::Stack { elem, size, span } => {
                let elem_ty = self.resolve_type(elem)?;
                let n = self.const_u128(size)?;
                let stackable = self.types.is_header(&elem_ty) || self.types.is_union(&elem_ty);
                match elem_ty {
                    Type::Aggregate(i) if stackable && (1..=1024).contains(&n) => {
                        self.bounded(Type::Stack(i, n as u32), *span)?
                    }
                    Type::Aggregate(_) if stackable => {
                        return fail(size.span, "a header stack has 1 to 1024 elements")
                    }
                    _ => return fail(*span, "a stack's elements must be headers or header unions"),
                }
            }
            TypeRef::Named { name, args } => match self.lookup(&name.name) {
                Some(&Sym::GenericAggregate {
                    kind,
                    type_params,
                    fields,
                }) => self.generic_aggregate(name, args, kind, type_params, fields)?,
                Some(Sym::Type(t)) => t.clone(),
                Some(_) => return fail(name.span, format!("'{}' is not a type", name.name)),
                None => return fail(name.span, format!("unknown type '{}'", name.name)),
            },
        })
    }

    fn top_level(&mut self, d: &'a Decl) -> Result<()> {
        match d {
            Decl::Const {
                ty, name, value, ..
            } => {
                let ty = self.resolve_type(ty)?;
                let sym = self.const_sym(ty, value)?;
                self.declare(name, sym)
            }
            Decl::Typedef { ty, name, .. } => {
                let t = self.resolve_type(ty)?;
                self.declare(name, Sym::Type(t))
            }
            Decl::Aggregate {
                kind,
                name,
                type_params,
                fields,
                ..
            } if !type_params.is_empty() => self.declare(
                name,
                Sym::GenericAggregate {
                    kind: *kind,
                    type_params,
                    fields,
                },
            ),
            Decl::Aggregate {
                annotations,
                kind,
                name,
                fields,
                ..
            } => {
                self.aggregate(*kind, name, fields)?;
                self.record_controller_header(annotations, name)
            }
            Decl::Enum {
                repr,
                name,
                members,
                ..
            } => self.enum_decl(repr.as_ref(), name, members),
            Decl::Error(names) => {
                for n in names {
                    if !self.error_codes.contains_key(&n.name) {
                        self.error_codes.insert(n.name.clone(), self.errors.len());
                        self.errors.push(n.name.clone());
                    }
                }
                Ok(())
            }
            Decl::MatchKind(names) => {
                for n in names {
                    self.declare(n, Sym::MatchKind(n.name.clone()))?;
                }
                Ok(())
            }
            Decl::ExternObject { name, .. } => self.declare(name, Sym::ExternType),
            Decl::ExternFunction(p) => {
                self.declare_extern_function(p);
                self.declare(&p.name, Sym::ExternFunction)
            }
            Decl::BlockType { name, kind, .. } => {
                if *kind == ast::BlockKind::Package {
                    self.declare(name, Sym::Package)
                } else {
                    self.declare(name, Sym::ExternType)
                }
            }
            Decl::Parser(p) => self.declare(&p.name, Sym::Parser(p)),
            Decl::Control(c) => self.declare(&c.name, Sym::Control(c)),
            Decl::Action(a) => {
                let idx = self.action(a)?;
                self.declare(&a.name, Sym::Callable(idx))
            }
            Decl::Function { proto, body } if !proto.type_params.is_empty() => {
                // Lowered once per set of type arguments, at the calls.
                self.declare(&proto.name, Sym::GenericFunction(proto, body))
            }
            Decl::Function { proto, body } => {
                let idx = self.function(proto, body)?;
                self.declare(&proto.name, Sym::Callable(idx))
            }
            Decl::Instance(i) => {
                if matches!(self.lookup(type_name(&i.ty)), Some(Sym::Package)) {
                    return Ok(());
                }
                let idx = self.instance(i)?;
                self.declare(&i.name, Sym::Instance(idx))
            }
            Decl::Var(v) => fail(v.name.span, "global variables are not allowed in P4_16"),
            Decl::Table(t) => fail(t.name.span, "a table must be declared inside a control"),
        }
    }

    fn aggregate(
        &mut self,
        kind: AggregateKind,
        name: &ast::Ident,
        fields: &[ast::Field],
    ) -> Result<()> {
        let mut out = Vec::new();
        let mut names = std::collections::HashSet::new();
        for f in fields {
            let ty = self.resolve_type(&f.ty)?;
            let ok = match (kind, &ty) {
                (AggregateKind::Header, Type::Bits { .. } | Type::Bool) => true,
                (AggregateKind::Header, Type::VarBit(_)) => {
                    !out.iter()
                        .any(|(_, t, _): &(String, Type, Vec<ast::Annotation>)| {
                            matches!(t, Type::VarBit(_))
                        })
                }
                (AggregateKind::Header, Type::Enum(i)) => self.types.enums[*i].repr.is_some(),
                (AggregateKind::Header, t @ Type::Aggregate(_)) => self.fixed_struct(t),
                (AggregateKind::Header, _) => false,
                (AggregateKind::HeaderUnion, t) => self.types.is_header(t),
                (
                    AggregateKind::Struct,
                    Type::Int | Type::Void | Type::String | Type::MatchKind,
                ) => false,
                (AggregateKind::Struct, _) => true,
            };
            if !ok {
                let t = self.types.show(&ty).to_string();
                return fail(
                    f.ty.span(),
                    format!("a field of type {t} is not allowed here"),
                );
            }
            if !names.insert(&f.name.name) {
                return fail(f.name.span, format!("duplicate field '{}'", f.name.name));
            }
            self.spend_name(&f.name.name, f.name.span)?;
            self.spend_annotations(&f.annotations, f.name.span)?;
            out.push((f.name.name.clone(), ty, f.annotations.clone()));
        }
        let layout = if kind == AggregateKind::Header {
            self.layouts.len()
        } else {
            usize::MAX
        };
        self.types
            .aggregates
            .push(self.types.aggregate(name.name.clone(), kind, out, layout));
        let index = self.types.aggregates.len() - 1;
        let ty = self.bounded(Type::Aggregate(index), name.span)?;
        if kind == AggregateKind::Header {
            let mut fields = Vec::new();
            for (_, t, _) in &self.types.aggregates[index].fields {
                self.field_layouts(t, &mut fields);
            }
            self.layouts.push(fields);
        }
        self.declare(name, Sym::Type(ty))
    }

    /// The type a generic header or struct `name` declared with `type_params` and `fields`
    /// makes with the type arguments `args`: made once per list of arguments, named as written
    /// (`pair_t<bit<8>>`), its fields resolved with each parameter standing for its argument.
    fn generic_aggregate(
        &mut self,
        name: &ast::Ident,
        args: &[TypeRef],
        kind: AggregateKind,
        type_params: &[ast::Ident],
        fields: &[ast::Field],
    ) -> Result<Type> {
        if args.len() != type_params.len() {
            return fail(
                name.span,
                format!(
                    "'{}' takes {} type arguments, found {}",
                    name.name,
                    type_params.len(),
                    args.len()
                ),
            );
        }
        let args: Vec<Type> = args
            .iter()
            .map(|a| self.resolve_type(a))
            .collect::<Result<_>>()?;
        if let Some((_, _, ty)) = self
            .generic_aggregates
            .iter()
            .find(|(n, a, _)| *n == name.name && *a == args)
        {
            return Ok(ty.clone());
        }
        let shown: Vec<String> = args.iter().map(|a| self.show(a)).collect();
        let instance = ast::Ident {
            name: format!("{}<{}>", name.name, shown.join(", ")),
            span: name.span,
        };
        let mut scope = HashMap::new();
        for (p, a) in type_params.iter().zip(&args) {
            scope.insert(p.name.clone(), Sym::Type(a.clone()));
        }
        self.scopes.push(scope);
        let made = self.aggregate(kind, &instance, fields);
        let ty = self.scopes.pop().and_then(|mut s| s.remove(&instance.name));
        made?;
        let Some(Sym::Type(ty)) = ty else {
            return fail(name.span, "the generic type could not be made");
        };
        self.generic_aggregates
            .push((name.name.clone(), args, ty.clone()));
        Ok(ty)
    }

    /// Whether `ty` is a struct a header may hold: its fields are `bit<W>`, `int<W>`, `bool`,
    /// serializable enums or such structs (P4_16 1.2.x, header types).
    fn fixed_struct(&self, ty: &Type) -> bool {
        let Type::Aggregate(i) = ty else { return false };
        self.types.aggregates[*i].kind == AggregateKind::Struct
            && self.types.aggregates[*i]
                .fields
                .iter()
                .all(|(_, t, _)| match t {
                    Type::Bits { .. } | Type::Bool => true,
                    Type::Enum(e) => self.types.enums[*e].repr.is_some(),
                    t => self.fixed_struct(t),
                })
    }

    /// The layout of a header field of type `ty`, in slot order: a struct in a header gives
    /// each of its fields, one after the other on the wire.
    fn field_layouts(&self, ty: &Type, out: &mut Vec<ir::FieldLayout>) {
        match ty {
            Type::VarBit(max) => out.push(ir::FieldLayout::VarBit { max: *max }),
            Type::Aggregate(i) => {
                for (_, t, _) in &self.types.aggregates[*i].fields {
                    self.field_layouts(t, out);
                }
            }
            Type::Bits { width, .. } => {
                out.extend(ir::slot_widths(*width).map(ir::FieldLayout::Fixed))
            }
            t => out.push(ir::FieldLayout::Fixed(
                self.types.scalar_width(t).unwrap_or(1),
            )),
        }
    }

    fn enum_decl(
        &mut self,
        repr: Option<&TypeRef>,
        name: &ast::Ident,
        members: &[(ast::Ident, Option<ast::Expr>)],
    ) -> Result<()> {
        let repr = match repr {
            Some(t) => match self.resolve_type(t)? {
                Type::Bits { width, signed } => Some((width, signed)),
                _ => {
                    return fail(
                        t.span(),
                        "an enum's underlying type must be bit<W> or int<W>",
                    )
                }
            },
            None => None,
        };
        let mut out = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, (m, value)) in members.iter().enumerate() {
            if !names.insert(&m.name) {
                return fail(m.span, format!("duplicate enum member '{}'", m.name));
            }
            self.spend_name(&m.name, m.span)?;
            let v = match (repr, value) {
                (Some((width, signed)), Some(e)) => {
                    self.const_value(e, &Type::Bits { width, signed })?
                }
                (Some(_), None) => return fail(m.span, "a serializable enum member needs a value"),
                (None, Some(e)) => {
                    return fail(e.span, "only serializable enums give members values")
                }
                (None, None) => i as u128,
            };
            out.push((m.name.clone(), v));
        }
        self.types
            .enums
            .push(EnumDef::new(name.name.clone(), repr, out));
        let ty = Type::Enum(self.types.enums.len() - 1);
        self.declare(name, Sym::Type(ty))
    }

    /// Declares parameters in the current scope with freshly allocated slots.
    fn params(&mut self, params: &[ast::Param]) -> Result<Vec<CallParam>> {
        let mut out = Vec::new();
        for p in params {
            let ty = self.resolve_type(&p.ty)?;
            if matches!(
                ty,
                Type::Int | Type::Void | Type::String | Type::Var | Type::Tuple(_)
            ) {
                return fail(p.ty.span(), "this parameter type is not supported");
            }
            let slot = self.alloc(&ty, p.name.span)?;
            if matches!(p.direction, Direction::In | Direction::None) {
                self.read_only.push((slot, self.types.size(&ty)));
            }
            self.spend_name(&p.name.name, p.name.span)?;
            self.declare(
                &p.name,
                Sym::Var {
                    ty: ty.clone(),
                    slot,
                },
            )?;
            out.push(CallParam {
                name: p.name.name.clone(),
                direction: p.direction,
                ty,
                slot,
            });
        }
        Ok(out)
    }

    fn action(&mut self, a: &'a ast::ActionDecl) -> Result<usize> {
        self.scopes.push(HashMap::new());
        let params = self.params(&a.params)?;
        let mut seen_data = false;
        for (p, ast_p) in params.iter().zip(&a.params) {
            if p.direction == Direction::None {
                seen_data = true;
                if Types::is_wide(&p.ty) {
                    return Err(unsupported(
                        ast_p.ty.span(),
                        "action data wider than 128 bits",
                    ));
                }
                if self.types.scalar_width(&p.ty).is_none() {
                    return fail(
                        ast_p.ty.span(),
                        "action data must be a scalar (bit<W>, int<W>, bool, enum)",
                    );
                }
            } else if seen_data {
                return fail(
                    ast_p.name.span,
                    "directional parameters must come before action data",
                );
            }
        }
        let stmts = self.block(&a.body)?;
        self.scopes.pop();
        let name = self.qualified(&a.name.name, &a.annotations, a.name.span)?;
        let body = self.push_body(name.clone(), &params, stmts, a.name.span)?;
        self.actions.push(ir::Action { name, body });
        self.spend_annotations(&a.annotations, a.name.span)?;
        for p in &a.params {
            self.spend_annotations(&p.annotations, p.name.span)?;
        }
        self.cp.actions.push(a.annotations.clone());
        self.cp.action_params.push(
            params
                .iter()
                .zip(&a.params)
                .filter(|(p, _)| p.direction == Direction::None)
                .map(|(_, ast_p)| ast_p.annotations.clone())
                .collect(),
        );
        self.cp.action_param_types.push(
            params
                .iter()
                .filter(|p| p.direction == Direction::None)
                .map(|p| p.ty.clone())
                .collect(),
        );
        self.callables.push(Callable {
            body,
            params,
            ret: None,
            action: Some(self.actions.len() - 1),
        });
        self.action_callables.push(self.callables.len() - 1);
        Ok(self.callables.len() - 1)
    }

    /// The callable of generic function `proto` for the call `span` with `args`: its type
    /// arguments are `type_args` when given, else inferred from the arguments' types.
    fn instantiate(
        &mut self,
        proto: &'a ast::Prototype,
        body: &'a ast::Block,
        type_args: &[TypeRef],
        args: &[ast::Arg],
        span: Span,
    ) -> Result<usize> {
        let mut types = Vec::new();
        for (k, tp) in proto.type_params.iter().enumerate() {
            let ty = match type_args.get(k) {
                Some(t) => self.resolve_type(t)?,
                None => {
                    let position = proto.params.iter().position(
                        |p| matches!(&p.ty, TypeRef::Named { name, .. } if name.name == tp.name),
                    );
                    let Some(arg) = position.and_then(|i| args.get(i)) else {
                        return fail(
                            span,
                            format!(
                                "cannot infer type parameter {} of '{}': give it, f<T>(...)",
                                tp.name, proto.name.name
                            ),
                        );
                    };
                    match expr::val_type(&self.expr(&arg.value)?) {
                        Type::Int => {
                            return fail(
                                arg.value.span,
                                format!(
                                    "cannot infer {} from an unsized integer: give it a width",
                                    tp.name
                                ),
                            )
                        }
                        t => t,
                    }
                }
            };
            types.push(ty);
        }
        let key = (proto.name.name.clone(), types.clone());
        if self.instantiating.contains(&key) || self.instantiating.len() >= 32 {
            return fail(
                span,
                format!(
                    "'{}' calls itself: recursion is not allowed in P4",
                    proto.name.name
                ),
            );
        }
        if let Some((_, _, idx)) = self
            .instantiations
            .iter()
            .find(|(n, t, _)| *n == proto.name.name && *t == types)
        {
            return Ok(*idx);
        }
        // The function sees the top-level names and its type parameters only.
        let outer = self.scopes.split_off(1);
        self.scopes.push(HashMap::new());
        let declared = proto
            .type_params
            .iter()
            .zip(&types)
            .try_for_each(|(tp, ty)| self.declare(tp, Sym::Type(ty.clone())));
        self.instantiating.push(key);
        let lowered = declared.and_then(|()| self.function(proto, body));
        self.instantiating.pop();
        self.scopes.truncate(1);
        self.scopes.extend(outer);
        let idx = lowered?;
        self.instantiations
            .push((proto.name.name.clone(), types, idx));
        Ok(idx)
    }

    /// Lowers a function whose type parameters, if any, are declared in the current scope.
    fn function(&mut self, proto: &ast::Prototype, body: &'a ast::Block) -> Result<usize> {
        let ret_ref = proto.ret.as_ref().expect("a function has a return type");
        let ret_ty = self.resolve_type(ret_ref)?;
        if matches!(
            ret_ty,
            Type::Int | Type::String | Type::MatchKind | Type::Var
        ) {
            return fail(
                ret_ref.span(),
                "a function must return a sized type or void",
            );
        }
        let ret = if ret_ty == Type::Void {
            None
        } else {
            Some((ret_ty.clone(), self.alloc(&ret_ty, ret_ref.span())?))
        };
        self.scopes.push(HashMap::new());
        let params = self.params(&proto.params)?;
        let saved = std::mem::replace(&mut self.ret, ret.clone());
        let saved_loops = std::mem::take(&mut self.loops);
        let stmts = self.block(body);
        (self.ret, self.loops) = (saved, saved_loops);
        let stmts = stmts?;
        self.scopes.pop();
        let name = self.qualified(&proto.name.name, &[], proto.name.span)?;
        let body = self.push_body(name, &params, stmts, proto.name.span)?;
        self.callables.push(Callable {
            body,
            params,
            ret,
            action: None,
        });
        Ok(self.callables.len() - 1)
    }

    /// Adds the body of what is named at `at`, within [`MAX_BODIES`].
    fn push_body(
        &mut self,
        name: String,
        params: &[CallParam],
        stmts: Vec<ir::Stmt>,
        at: Span,
    ) -> Result<usize> {
        if self.bodies.len() >= MAX_BODIES {
            return fail(
                at,
                format!(
                    "the program lowers more than {MAX_BODIES} bodies of actions, functions, \
                     controls and parsers (limits::MAX_BODIES; each instance of a control or \
                     parser lowers its own)"
                ),
            );
        }
        let params = params
            .iter()
            .map(|p| ir::Param {
                name: p.name.clone(),
                slot: p.slot,
                width: self.types.scalar_width(&p.ty).unwrap_or(0),
                action_data: p.direction == Direction::None,
            })
            .collect();
        let depth = self.run_depth().stmts(&stmts);
        self.depths.bodies.push(depth);
        self.bodies.push(ir::Body {
            name,
            params,
            stmts,
        });
        Ok(self.bodies.len() - 1)
    }

    /// Lowers a control: its parameters are bound to `args` (slots of the architecture's values).
    fn control(
        &mut self,
        c: &'a ast::ControlDecl,
        args: &[(Type, Slot)],
        ctor_args: &[ast::Arg],
    ) -> Result<ir::Control> {
        self.enter_block(&c.name, &c.params, args, &c.ctor_params, ctor_args)?;
        self.blocks.push(c.name.name.clone());
        // Locals are zeroed where they are declared (see `var_decl`).
        let mut body = Vec::new();
        for local in &c.locals {
            let stmts = self.local(local);
            body.extend(self.recovered(stmts)?);
        }
        body.extend(self.block(&c.apply)?);
        self.blocks.pop();
        self.leave_block();
        let depth = self.run_depth().stmts(&body);
        self.check_run_depth(depth, &format!("control {}", c.name.name), c.name.span)?;
        Ok(ir::Control {
            name: c.name.name.clone(),
            body,
        })
    }

    /// The name p4c gives a parser or control that `main` instantiates with constructor
    /// arguments: its specialization `NAME_0` (`NAME_1` for the next of that type), which
    /// qualifies its tables, actions and externs in P4Info (`MyIngress_0.t`).
    fn specialized_name(&mut self, name: &str) -> String {
        let count = self.specialized.entry(name.to_owned()).or_default();
        *count += 1;
        format!("{name}_{}", *count - 1)
    }

    /// Enters a parser or control that `main` instantiates: its scope
    /// ([`Self::block_scope`]), its constructor parameters bound to the constant arguments
    /// `main` gives (read outside that scope), and its names' prefix: its specialization's
    /// when it has constructor arguments. [`Self::leave_block`] leaves it.
    fn enter_block(
        &mut self,
        name: &ast::Ident,
        params: &[ast::Param],
        args: &[(Type, Slot)],
        ctor_params: &[ast::Param],
        ctor_args: &[ast::Arg],
    ) -> Result<()> {
        let constants = self.ctor_constants(name, ctor_params, ctor_args)?;
        self.block_scope(name, params, args)?;
        if !ctor_args.is_empty() {
            self.prefix = self.specialized_name(&name.name);
        }
        self.declare_all(constants)
    }

    /// Leaves what [`Self::enter_block`] entered.
    fn leave_block(&mut self) {
        self.scopes.pop();
        self.prefix.clear();
    }

    /// Opens the scope of a parser or control, binding its parameters to architecture slots.
    fn block_scope(
        &mut self,
        name: &ast::Ident,
        params: &[ast::Param],
        args: &[(Type, Slot)],
    ) -> Result<()> {
        self.prefix = name.name.clone();
        self.scopes.push(HashMap::new());
        for (p, (ty, slot)) in params.iter().zip(args) {
            let sym = match type_name(&p.ty) {
                "packet_in" => Sym::Packet { out: false },
                "packet_out" => Sym::Packet { out: true },
                _ => {
                    let declared = self.resolve_type(&p.ty)?;
                    if declared != *ty && *ty != Type::Var {
                        let (d, t) = (
                            self.types.show(&declared).to_string(),
                            self.types.show(ty).to_string(),
                        );
                        return fail(
                            p.ty.span(),
                            format!("parameter type {d} does not match the architecture's {t}"),
                        );
                    }
                    Sym::Var {
                        ty: declared,
                        slot: *slot,
                    }
                }
            };
            self.declare(&p.name, sym)?;
        }
        if params.len() != args.len() {
            return fail(
                name.span,
                format!(
                    "'{}' has {} parameters; v1model expects {}",
                    name.name,
                    params.len(),
                    args.len()
                ),
            );
        }
        Ok(())
    }

    /// Declares a local of a parser or control; returns its initialization statements.
    fn local(&mut self, d: &'a Decl) -> Result<Vec<ir::Stmt>> {
        match d {
            Decl::Var(v) => self.var_decl(v),
            Decl::Table(t) => {
                let idx = self.table(t)?;
                self.declare(&t.name, Sym::Table(idx))?;
                Ok(Vec::new())
            }
            Decl::Instance(i) => {
                if self.blocks.iter().any(|b| b == type_name(&i.ty)) {
                    return fail(
                        i.ty.span(),
                        format!("'{}' instantiates itself", type_name(&i.ty)),
                    );
                }
                match self.lookup(type_name(&i.ty)).cloned() {
                    Some(Sym::Control(c)) => {
                        let idx = self.sub_control(i, c)?;
                        self.declare(&i.name, Sym::ControlInstance(idx))?;
                        return Ok(Vec::new());
                    }
                    Some(Sym::Parser(p)) if self.in_parser => {
                        let (parser, callable) = self.sub_parser(i, p)?;
                        self.declare(&i.name, Sym::ParserInstance { parser, callable })?;
                        return Ok(Vec::new());
                    }
                    Some(Sym::Parser(_)) => {
                        return fail(i.ty.span(), "a parser can only be instantiated in a parser")
                    }
                    _ => {}
                }
                let idx = self.instance(i)?;
                self.declare(&i.name, Sym::Instance(idx))?;
                Ok(Vec::new())
            }
            other => {
                self.top_level(other)?;
                Ok(Vec::new())
            }
        }
    }

    /// The constructor parameters of block `name` bound to the (compile-time constant) `args`.
    fn ctor_constants(
        &mut self,
        name: &ast::Ident,
        params: &[ast::Param],
        args: &[ast::Arg],
    ) -> Result<Vec<(ast::Ident, Sym<'a>)>> {
        let names: Vec<&str> = params.iter().map(|p| p.name.name.as_str()).collect();
        let args = stmt::order_args(&names, args, name.span)?;
        let mut out = Vec::new();
        for (p, a) in params.iter().zip(args) {
            if let Some(instance) = self.block_instance_arg(&a.value) {
                // A control or parser instance given to a block type parameter
                // (`C2(c1) c2;` for `control C2(...)(my_control_type c)`): the parameter names
                // that instance, whose externs and tables all its applies share. Its apply
                // parameters are checked where it is applied.
                if matches!(
                    self.lookup(type_name(&p.ty)),
                    Some(Sym::ExternType | Sym::Control(_) | Sym::Parser(_))
                ) {
                    out.push((p.name.clone(), instance));
                    continue;
                }
            }
            let ty = self.resolve_type(&p.ty)?;
            if self.types.scalar_width(&ty).is_none() && ty != Type::Int {
                return Err(unsupported(
                    p.ty.span(),
                    "a constructor parameter that is not a scalar",
                ));
            }
            out.push((p.name.clone(), self.const_sym(ty, &a.value)?));
        }
        Ok(out)
    }

    /// The control or parser instance that `e` names, if it names one.
    fn block_instance_arg(&self, e: &ast::Expr) -> Option<Sym<'a>> {
        let ExprKind::Name(n) = &e.kind else {
            return None;
        };
        match self.lookup(n) {
            Some(s @ (Sym::ControlInstance(_) | Sym::ParserInstance { .. })) => Some(s.clone()),
            _ => None,
        }
    }

    /// The instance a direct invocation `T.apply(...)` of control or parser type `T` applies
    /// (P4_16 "Direct type invocation"): a fresh instance of `T` with no constructor arguments,
    /// named `T` in the control plane's names, as p4c names it (`@name("T")`).
    fn direct_type_instance(&mut self, name: &ast::Ident, span: Span) -> Result<Option<Sym<'a>>> {
        let inst = ast::Instance {
            annotations: Vec::new(),
            ty: TypeRef::Named {
                name: name.clone(),
                args: Vec::new(),
            },
            args: Vec::new(),
            name: name.clone(),
        };
        match self.lookup(&name.name).cloned() {
            Some(Sym::Control(c)) => {
                if self.blocks.contains(&name.name) {
                    return fail(span, format!("'{}' applies itself", name.name));
                }
                Ok(Some(Sym::ControlInstance(self.sub_control(&inst, c)?)))
            }
            Some(Sym::Parser(p)) if self.in_parser => {
                let (parser, callable) = self.sub_parser(&inst, p)?;
                Ok(Some(Sym::ParserInstance { parser, callable }))
            }
            Some(Sym::Parser(_)) => fail(span, "a parser can only be applied in a parser"),
            _ => Ok(None),
        }
    }

    fn declare_all(&mut self, syms: Vec<(ast::Ident, Sym<'a>)>) -> Result<()> {
        for (name, sym) in syms {
            self.declare(&name, sym)?;
        }
        Ok(())
    }

    /// Enters the parser or control `name` instantiated as `i` inside another: a scope that
    /// sees only top-level names, and its names' prefix `Outer.instance`. Returns its
    /// constructor parameters bound to `i`'s (constant) arguments, for the caller to declare,
    /// and what [`Self::leave_instance`] restores.
    fn enter_instance(
        &mut self,
        i: &ast::Instance,
        name: &ast::Ident,
        ctor_params: &[ast::Param],
    ) -> Result<(Vec<(ast::Ident, Sym<'a>)>, Outer<'a>)> {
        let constants = self.ctor_constants(name, ctor_params, &i.args)?;
        let inner_prefix = format!("{}.{}", self.prefix, i.name.name);
        self.spend_name(&inner_prefix, i.name.span)?;
        let prefix = std::mem::replace(&mut self.prefix, inner_prefix);
        let scopes = self.scopes.split_off(1);
        self.scopes.push(HashMap::new());
        Ok((constants, Outer { prefix, scopes }))
    }

    /// Leaves what [`Self::enter_instance`] entered, however its lowering ended; returns the
    /// instance's prefix.
    fn leave_instance(&mut self, outer: Outer<'a>) -> String {
        self.scopes.truncate(1);
        self.scopes.extend(outer.scopes);
        std::mem::replace(&mut self.prefix, outer.prefix)
    }

    /// Lowers control `c` instantiated as `i` inside another control: its parameters get slots of
    /// their own (bound by copy-in/copy-out at each `apply`), its tables and externs are named
    /// `Outer.instance.name`, and it sees only top-level names. Returns its callable.
    fn sub_control(&mut self, i: &ast::Instance, c: &'a ast::ControlDecl) -> Result<usize> {
        let (constants, outer) = self.enter_instance(i, &c.name, &c.ctor_params)?;
        self.blocks.push(c.name.name.clone());
        let lowered = (|| {
            self.declare_all(constants)?;
            let params = self.params(&c.params)?;
            let mut body = Vec::new();
            for local in &c.locals {
                let stmts = self.local(local);
                body.extend(self.recovered(stmts)?);
            }
            body.extend(self.block(&c.apply)?);
            Ok((params, body))
        })();
        self.blocks.pop();
        let name = self.leave_instance(outer);
        let (params, stmts) = lowered?;
        let body = self.push_body(name, &params, stmts, i.name.span)?;
        self.callables.push(Callable {
            body,
            params,
            ret: None,
            action: None,
        });
        Ok(self.callables.len() - 1)
    }

    fn var_decl(&mut self, v: &ast::VarDecl) -> Result<Vec<ir::Stmt>> {
        let ty = match &v.ty {
            TypeRef::List { elem, span } => self.list_var_type(elem, *span, v.init.as_ref())?,
            t => self.resolve_type(t)?,
        };
        if matches!(ty, Type::Int | Type::Void | Type::String | Type::MatchKind) {
            return fail(v.ty.span(), "a variable cannot have this type");
        }
        let slot = self.alloc(&ty, v.name.span)?;
        let len = self.types.size(&ty);
        self.locals.push((slot, len));
        let mut out = vec![ir::Stmt::Zero { start: slot, len }];
        let init = match &v.init {
            Some(init) => self.assign_to(self.storage(slot, ty.clone()), init),
            None => Ok(Vec::new()),
        };
        // Declared even when its initializer is wrong: the checker goes on after that error,
        // and the variable's uses are not errors of their own.
        self.declare(&v.name, Sym::Var { ty, slot })?;
        out.extend(init?);
        Ok(out)
    }

    /// The type of a `list<T>` variable: as many `T`s as its initializer has values (a list
    /// expression cast to `list<T>`, as p4c wants it, or another list variable), stored as a
    /// tuple of them.
    fn list_var_type(
        &mut self,
        elem: &TypeRef,
        span: Span,
        init: Option<&ast::Expr>,
    ) -> Result<Type> {
        let elem_ty = self.resolve_type(elem)?;
        let Some(init) = init else {
            return fail(
                span,
                "a list<T> variable needs its values: list<T> l = (list<T>){ ... }",
            );
        };
        let ty = match &init.kind {
            ExprKind::Cast(TypeRef::List { .. }, inner) => match &inner.kind {
                ExprKind::List(items) => Type::Tuple(vec![elem_ty.clone(); items.len()]),
                _ => return fail(inner.span, "expected a list expression { ... }"),
            },
            _ => expr::val_type(&self.expr(init)?),
        };
        match &ty {
            Type::Tuple(elems) if elems.iter().all(|t| *t == elem_ty) => self.bounded(ty, span),
            other => {
                let (t, e) = (self.show(other), self.show(&elem_ty));
                fail(init.span, format!("expected a list of {e}, found {t}"))
            }
        }
    }

    fn instance(&mut self, i: &ast::Instance) -> Result<usize> {
        let kind = externs::instance_kind(self, i)?;
        // The switch allocates these cells when it loads the program.
        self.extern_cells += u64::from(kind.cells().unwrap_or(0));
        if self.extern_cells > MAX_EXTERN_CELLS {
            return fail(
                i.name.span,
                format!(
                    "the program's registers, counters and meters have more than \
                     {MAX_EXTERN_CELLS} cells in all (limits::MAX_EXTERN_CELLS)"
                ),
            );
        }
        let name = self.qualified(&i.name.name, &i.annotations, i.name.span)?;
        self.spend_annotations(&i.annotations, i.name.span)?;
        self.instances.push(ir::Instance { name, kind });
        self.cp.instances.push(i.annotations.clone());
        Ok(self.instances.len() - 1)
    }

    /// Finds `main`, lowers the six v1model blocks and assembles the program.
    fn finish(
        mut self,
        decls: &'a [Decl],
        map: &crate::source::SourceMap,
    ) -> Result<(crate::Compiled, Vec<UserExtern>)> {
        let Some(main) = decls.iter().rev().find_map(|d| match d {
            Decl::Instance(i) if i.name.name == "main" => Some(i),
            _ => None,
        }) else {
            let end = decls.last().map_or(Span::default(), Decl::name_span);
            return fail(
                end,
                "the program has no 'main' instance (V1Switch(...) main;)",
            );
        };
        if type_name(&main.ty) != "V1Switch" {
            return fail(
                main.ty.span(),
                "softswitch runs only the v1model architecture: main must be a V1Switch",
            );
        }
        if main.args.len() != 6 {
            return fail(
                main.name.span,
                format!("V1Switch takes 6 blocks, {} given", main.args.len()),
            );
        }
        let mut blocks = Vec::new();
        for a in &main.args {
            let ExprKind::Call { callee, args, .. } = &a.value.kind else {
                return fail(
                    a.value.span,
                    "expected a block instantiation such as MyIngress()",
                );
            };
            let ExprKind::Name(n) = &callee.kind else {
                return fail(callee.span, "expected the name of a parser or control");
            };
            match self.lookup(n) {
                Some(Sym::Parser(p)) => blocks.push((Some(*p), None, callee.span, args.as_slice())),
                Some(Sym::Control(c)) => {
                    blocks.push((None, Some(*c), callee.span, args.as_slice()))
                }
                _ => return fail(callee.span, format!("'{n}' is not a parser or control")),
            }
        }
        let (Some(parser), None, _, parser_args) = blocks[0] else {
            return fail(blocks[0].2, "the first V1Switch argument must be a parser");
        };
        for b in &blocks[1..] {
            if b.1.is_none() {
                return fail(b.2, "V1Switch arguments 2 to 6 must be controls");
            }
        }
        // The architecture's values: headers, metadata, standard_metadata, shared by every block.
        let hdr_ty = self.param_type(parser, 1)?;
        let meta_ty = self.param_type(parser, 2)?;
        let std_ty = self.param_type(parser, 3)?;
        let hdr = self.alloc(&hdr_ty, parser.params[1].name.span)?;
        let meta = self.alloc(&meta_ty, parser.params[2].name.span)?;
        let std = self.alloc(&std_ty, parser.params[3].name.span)?;
        let std_meta = self.standard_metadata(&std_ty, std, parser.params[3].ty.span())?;
        self.user_field_lists = self.user_field_lists(&meta_ty, meta);
        let user_meta = (meta, self.types.size(&meta_ty));
        let packet = (Type::Var, 0);
        let full = [
            packet.clone(),
            (hdr_ty.clone(), hdr),
            (meta_ty.clone(), meta),
            (std_ty.clone(), std),
        ];
        let parser_ir = self.parser(parser, &full, parser_args)?;
        let two = [(hdr_ty.clone(), hdr), (meta_ty.clone(), meta)];
        let three = [
            (hdr_ty.clone(), hdr),
            (meta_ty.clone(), meta),
            (std_ty.clone(), std),
        ];
        let deparse = [packet, (hdr_ty.clone(), hdr)];
        let control = |i: usize| blocks[i].1.expect("checked above");
        let verify = self.control(control(1), &two, blocks[1].3)?;
        let ingress = self.control(control(2), &three, blocks[2].3)?;
        let egress = self.control(control(3), &three, blocks[3].3)?;
        let compute = self.control(control(4), &two, blocks[4].3)?;
        let deparser = self.control(control(5), &deparse, blocks[5].3)?;
        let mut headers = Vec::new();
        self.header_names(hdr, &hdr_ty, "", &mut headers);
        self.header_names(meta, &meta_ty, "", &mut headers);
        headers.sort_by_key(|(slot, _)| *slot);
        let program = ir::Program {
            slots: self.next_slot,
            header_bits: self
                .layouts
                .iter()
                .map(|fields| {
                    fields
                        .iter()
                        .map(|f| match f {
                            ir::FieldLayout::Fixed(w) => u32::from(*w),
                            ir::FieldLayout::VarBit { .. } => 0,
                        })
                        .sum()
                })
                .collect(),
            header_layouts: self.layouts,
            std_meta,
            user_meta,
            locals: std::mem::take(&mut self.locals),
            field_lists: self.field_lists,
            parser: parser_ir,
            subparsers: self.subparsers,
            controls: [verify, ingress, egress, compute, deparser],
            tables: self.tables,
            actions: self.actions,
            bodies: self.bodies,
            instances: self.instances,
            errors: self.errors,
            trace_names: ir::TraceNames {
                headers,
                conditions: self
                    .conditions
                    .iter()
                    .enumerate()
                    .map(|(i, span)| condition(map, *span, i))
                    .collect(),
            },
        };
        let compiled = crate::Compiled {
            program,
            control_plane: crate::cpinfo::CpInfo {
                types: self.types,
                ..self.cp
            },
            warnings: Vec::new(),
        };
        Ok((compiled, self.user_externs))
    }

    fn param_type(&mut self, p: &ast::ParserDecl, i: usize) -> Result<Type> {
        match p.params.get(i) {
            Some(param) => self.resolve_type(&param.ty),
            None => fail(p.name.span, "a v1model parser has 4 parameters (packet_in, headers, metadata, standard_metadata)"),
        }
    }

    fn standard_metadata(&self, ty: &Type, base: Slot, at: Span) -> Result<ir::StandardMetadata> {
        let Type::Aggregate(agg) = ty else {
            return fail(
                at,
                "the fourth parser parameter must be standard_metadata_t",
            );
        };
        let slot = |name: &str| -> Result<Slot> {
            match self.types.field(*agg, name) {
                Some((off, _)) => Ok(base + off),
                None => fail(at, format!("standard_metadata_t has no field '{name}'")),
            }
        };
        ir::StandardMetadata::from_fields(slot)
    }

    /// User-metadata slots tagged `@field_list(N)`, per N.
    fn user_field_lists(&self, ty: &Type, base: Slot) -> Vec<(u8, Vec<Slot>)> {
        let mut out: Vec<(u8, Vec<Slot>)> = Vec::new();
        self.collect_field_lists(ty, base, &mut out);
        out
    }

    /// Adds the `@field_list(N)` fields of struct `ty` (stored at `base`) and of the structs in it.
    fn collect_field_lists(&self, ty: &Type, base: Slot, out: &mut Vec<(u8, Vec<Slot>)>) {
        let Type::Aggregate(agg) = ty else { return };
        for (name, fty, annotations) in &self.types.aggregates[*agg].fields {
            let (off, _) = self.types.field(*agg, name).expect("the field exists");
            for a in annotations.iter().filter(|a| a.name.name == "field_list") {
                for t in &a.body {
                    if let crate::lexer::Tok::Int(lit) = t.tok {
                        let n = lit.value as u8;
                        let slots = (0..self.types.size(fty)).map(|i| base + off + i);
                        match out.iter_mut().find(|(k, _)| *k == n) {
                            Some((_, v)) => v.extend(slots),
                            None => out.push((n, slots.collect())),
                        }
                    }
                }
            }
            if !self.types.is_header(fty) {
                self.collect_field_lists(fty, base + off, out);
            }
        }
    }
}

/// The `@name("...")` annotation's string, if any.
fn name_annotation(annotations: &[ast::Annotation]) -> Option<String> {
    annotations
        .iter()
        .find(|a| a.name.name == "name")
        .and_then(|a| match a.body.first() {
            Some(crate::lexer::Token {
                tok: crate::lexer::Tok::Str(s),
                ..
            }) => Some(s.clone()),
            _ => None,
        })
}

/// The name of a named type (`""` otherwise).
fn type_name(t: &TypeRef) -> &str {
    match t {
        TypeRef::Named { name, .. } => &name.name,
        _ => "",
    }
}

/// A diagnostic for an unsupported construct.
fn unsupported(span: Span, what: &str) -> Diagnostic {
    Diagnostic::new(span, format!("{what} is not supported yet"))
}

/// The trace's view of the `if` condition at `span`, the `index`th of the program: its source
/// text on one line, a node name in p4c's style, and its `file(line)`.
fn condition(map: &crate::source::SourceMap, span: Span, index: usize) -> ir::Condition {
    let text = map
        .snippet(span)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let (line, _) = map.line_col(span);
    let file = &map.file(span.file).name;
    let file = std::path::Path::new(file)
        .file_name()
        .map_or_else(|| file.clone(), |f| f.to_string_lossy().into_owned());
    ir::Condition {
        text,
        node: format!("node_{}", index + 1),
        location: Some(format!("{file}({line})")),
    }
}

impl Checker<'_> {
    /// The header instances in the value of type `ty` at slot `base`, named as p4c names them
    /// (`ethernet`, `vlan[0]`, `outer.inner` under `prefix`), added to `out`.
    fn header_names(&self, base: Slot, ty: &Type, prefix: &str, out: &mut Vec<(Slot, String)>) {
        match ty {
            Type::Aggregate(_) if self.types.is_header(ty) => out.push((base, prefix.to_string())),
            Type::Aggregate(a) => {
                for (name, off, fty) in self.types.aggregates[*a].fields_at() {
                    let path = if prefix.is_empty() {
                        name.to_string()
                    } else {
                        format!("{prefix}.{name}")
                    };
                    self.header_names(base + off, fty, &path, out);
                }
            }
            Type::Stack(a, n) => {
                let stride = self.types.size(&Type::Aggregate(*a));
                for i in 0..*n {
                    out.push((base + 1 + i * stride, format!("{prefix}[{i}]")));
                }
            }
            _ => {}
        }
    }
}
