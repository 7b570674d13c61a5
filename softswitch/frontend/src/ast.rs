//! Abstract syntax tree of a P4_16 program, as written (names unresolved, types unchecked).

use crate::lexer::{IntLit, Token};
use crate::source::Span;

/// A name and where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where it is.
    pub span: Span,
}

/// An annotation such as `@name("x")`; its body is kept as tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    /// The name after `@`.
    pub name: Ident,
    /// The tokens between the parentheses, if any.
    pub body: Vec<Token>,
}

/// A type as written.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum TypeRef {
    /// `bit<W>` (`signed: false`) or `int<W>` (`signed: true`).
    Bits {
        width: Box<Expr>,
        signed: bool,
        span: Span,
    },
    /// `varbit<W>`.
    VarBit { width: Box<Expr>, span: Span },
    /// `int`, the type of unsized integer literals.
    Int(Span),
    /// `bool`.
    Bool(Span),
    /// `error`.
    Error(Span),
    /// `void`.
    Void(Span),
    /// `string`.
    String(Span),
    /// `match_kind`.
    MatchKind(Span),
    /// `_`, a type to infer.
    DontCare(Span),
    /// A named type, with type arguments if any (`register<bit<32>, bit<8>>`).
    Named { name: Ident, args: Vec<TypeRef> },
    /// A header stack `T[N]`.
    Stack {
        elem: Box<TypeRef>,
        size: Box<Expr>,
        span: Span,
    },
    /// `tuple<T, ...>`.
    Tuple { elems: Vec<TypeRef>, span: Span },
    /// `list<T>` (P4_16 1.2.4): any number of values of type `T`.
    List { elem: Box<TypeRef>, span: Span },
}

impl TypeRef {
    /// Where the type is written.
    pub fn span(&self) -> Span {
        match self {
            TypeRef::Bits { span, .. }
            | TypeRef::VarBit { span, .. }
            | TypeRef::Stack { span, .. }
            | TypeRef::Tuple { span, .. }
            | TypeRef::List { span, .. }
            | TypeRef::Int(span)
            | TypeRef::Bool(span)
            | TypeRef::Error(span)
            | TypeRef::Void(span)
            | TypeRef::String(span)
            | TypeRef::MatchKind(span)
            | TypeRef::DontCare(span) => *span,
            TypeRef::Named { name, .. } => name.span,
        }
    }
}

/// Parameter direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// No direction: action data or a compile-time value.
    None,
    /// `in`.
    In,
    /// `out`.
    Out,
    /// `inout`.
    InOut,
}

/// A parameter of an action, function, parser, control, extern method or package.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Direction.
    pub direction: Direction,
    /// Type.
    pub ty: TypeRef,
    /// Name.
    pub name: Ident,
    /// Default value, if any.
    pub default: Option<Expr>,
}

/// A function, method or constructor signature (`ret` is `None` for a constructor).
#[derive(Clone, Debug, PartialEq)]
pub struct Prototype {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Return type, `None` for a constructor.
    pub ret: Option<TypeRef>,
    /// Name.
    pub name: Ident,
    /// Type parameters.
    pub type_params: Vec<Ident>,
    /// Parameters.
    pub params: Vec<Param>,
}

/// A field of a header or struct.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Type.
    pub ty: TypeRef,
    /// Name.
    pub name: Ident,
}

/// Which aggregate a [`Decl::Aggregate`] declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateKind {
    /// `header`.
    Header,
    /// `header_union`.
    HeaderUnion,
    /// `struct`.
    Struct,
}

/// A top-level or local declaration.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Decl {
    /// `const T name = value;`
    Const {
        annotations: Vec<Annotation>,
        ty: TypeRef,
        name: Ident,
        value: Expr,
    },
    /// `typedef T name;` or `type T name;` (`new_type`).
    Typedef {
        annotations: Vec<Annotation>,
        ty: TypeRef,
        name: Ident,
        new_type: bool,
    },
    /// `header`, `header_union` or `struct`, generic when it has type parameters
    /// (`struct pair_t<T> { T a; T b; }`).
    Aggregate {
        annotations: Vec<Annotation>,
        kind: AggregateKind,
        name: Ident,
        type_params: Vec<Ident>,
        fields: Vec<Field>,
    },
    /// `enum [bit<W>] name { A [= v], ... }`.
    Enum {
        annotations: Vec<Annotation>,
        repr: Option<TypeRef>,
        name: Ident,
        members: Vec<(Ident, Option<Expr>)>,
    },
    /// `error { ... }`.
    Error(Vec<Ident>),
    /// `match_kind { ... }`.
    MatchKind(Vec<Ident>),
    /// `extern Name<T> { methods }`.
    ExternObject {
        annotations: Vec<Annotation>,
        name: Ident,
        type_params: Vec<Ident>,
        methods: Vec<Prototype>,
    },
    /// `extern R f<T>(params);`
    ExternFunction(Prototype),
    /// `parser P<T>(params);`, `control C<T>(params);` or `package P<T>(params);`
    BlockType {
        annotations: Vec<Annotation>,
        kind: BlockKind,
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
    },
    /// A parser definition.
    Parser(Box<ParserDecl>),
    /// A control definition.
    Control(Box<ControlDecl>),
    /// An action.
    Action(ActionDecl),
    /// A function with a body.
    Function { proto: Prototype, body: Block },
    /// An instantiation `T(args) name;`.
    Instance(Instance),
    /// A variable `T name [= init];`.
    Var(VarDecl),
    /// A table.
    Table(TableDecl),
}

impl Decl {
    /// Where the name it declares is written (for an `error` or `match_kind` list, its first
    /// name's; none for an empty list).
    pub fn name_span(&self) -> Span {
        match self {
            Decl::Const { name, .. }
            | Decl::Typedef { name, .. }
            | Decl::Aggregate { name, .. }
            | Decl::Enum { name, .. }
            | Decl::ExternObject { name, .. }
            | Decl::BlockType { name, .. } => name.span,
            Decl::Error(n) | Decl::MatchKind(n) => n.first().map_or(Span::default(), |i| i.span),
            Decl::ExternFunction(p) | Decl::Function { proto: p, .. } => p.name.span,
            Decl::Parser(p) => p.name.span,
            Decl::Control(c) => c.name.span,
            Decl::Action(a) => a.name.span,
            Decl::Instance(i) => i.name.span,
            Decl::Var(v) => v.name.span,
            Decl::Table(t) => t.name.span,
        }
    }
}

/// Which block type a [`Decl::BlockType`] declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// `parser`.
    Parser,
    /// `control`.
    Control,
    /// `package`.
    Package,
}

/// A variable declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Type.
    pub ty: TypeRef,
    /// Name.
    pub name: Ident,
    /// Initializer.
    pub init: Option<Expr>,
}

/// An instantiation `T(args) name;`.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// The instantiated type.
    pub ty: TypeRef,
    /// Constructor arguments.
    pub args: Vec<Arg>,
    /// The instance's name.
    pub name: Ident,
}

/// An action declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: Ident,
    /// Parameters (directional first, then action data).
    pub params: Vec<Param>,
    /// Body.
    pub body: Block,
}

/// A parser definition.
#[derive(Clone, Debug, PartialEq)]
pub struct ParserDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: Ident,
    /// Apply parameters.
    pub params: Vec<Param>,
    /// Constructor parameters.
    pub ctor_params: Vec<Param>,
    /// Local declarations.
    pub locals: Vec<Decl>,
    /// States.
    pub states: Vec<State>,
}

/// A parser state.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: Ident,
    /// Statements before the transition.
    pub body: Vec<Stmt>,
    /// The transition (`None` if the state has none: it rejects, per the specification).
    pub transition: Option<Transition>,
}

/// A parser transition.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Transition {
    /// `transition name;`
    Goto(Ident),
    /// `transition select (exprs) { cases }`
    Select {
        exprs: Vec<Expr>,
        cases: Vec<SelectCase>,
        span: Span,
    },
}

/// One case of a `select`.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectCase {
    /// One keyset element per select expression (or one `default`/`_` for all).
    pub keyset: Vec<Keyset>,
    /// The next state.
    pub target: Ident,
    /// Where the case is.
    pub span: Span,
}

/// A keyset element of a select case or table entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Keyset {
    /// `default`.
    Default(Span),
    /// `_`.
    DontCare(Span),
    /// A value.
    Value(Expr),
    /// `value &&& mask`.
    Mask(Expr, Expr),
    /// `lo .. hi`.
    Range(Expr, Expr),
}

impl Keyset {
    /// Where the keyset element is.
    pub fn span(&self) -> Span {
        match self {
            Keyset::Default(s) | Keyset::DontCare(s) => *s,
            Keyset::Value(e) => e.span,
            Keyset::Mask(a, b) | Keyset::Range(a, b) => a.span.to(b.span),
        }
    }
}

/// A control definition.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: Ident,
    /// Apply parameters.
    pub params: Vec<Param>,
    /// Constructor parameters.
    pub ctor_params: Vec<Param>,
    /// Local declarations: constants, variables, instances, actions, tables.
    pub locals: Vec<Decl>,
    /// The `apply` block.
    pub apply: Block,
}

/// A table declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDecl {
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Name.
    pub name: Ident,
    /// Properties, in order.
    pub props: Vec<TableProp>,
}

/// One property of a table.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum TableProp {
    /// `key = { expr: match_kind; ... }`
    Key(Vec<KeyElement>),
    /// `actions = { a; b; }`
    Actions(Vec<ActionRef>),
    /// `[const] default_action = a(args);`
    DefaultAction { action: ActionRef, is_const: bool },
    /// `[const] entries = { ... }`
    Entries { entries: Vec<Entry>, is_const: bool },
    /// Any other `[const] name = expr;` (`size`, `counters`, `meters`, `implementation`, ...).
    Other {
        name: Ident,
        value: Expr,
        is_const: bool,
    },
}

/// One key of a table.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyElement {
    /// The key expression.
    pub expr: Expr,
    /// The match kind's name.
    pub match_kind: Ident,
    /// Annotations (`@name`).
    pub annotations: Vec<Annotation>,
}

/// An action named in a table (`a`, or `a(args)` with bound arguments).
#[derive(Clone, Debug, PartialEq)]
pub struct ActionRef {
    /// Annotations (`@tableonly`, `@defaultonly`).
    pub annotations: Vec<Annotation>,
    /// The action's name.
    pub name: Ident,
    /// Arguments, if written with parentheses.
    pub args: Vec<Arg>,
    /// Where the reference is.
    pub span: Span,
}

/// A constant table entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// One keyset element per key.
    pub keyset: Vec<Keyset>,
    /// The action and its arguments.
    pub action: ActionRef,
    /// `priority = N`, if given.
    pub priority: Option<Expr>,
    /// Annotations written after the action (`@priority(N)`).
    pub annotations: Vec<Annotation>,
    /// Where the entry is.
    pub span: Span,
}

/// A block of statements.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Statements.
    pub stmts: Vec<Stmt>,
    /// Where the block is.
    pub span: Span,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Stmt {
    /// `lhs = rhs;`
    Assign { lhs: Expr, rhs: Expr, span: Span },
    /// A call used as a statement (`t.apply();`, `f(x);`).
    Call(Expr),
    /// `if (cond) then [else otherwise]`.
    If {
        cond: Expr,
        then: Box<Stmt>,
        otherwise: Option<Box<Stmt>>,
        span: Span,
    },
    /// `{ ... }`.
    Block(Block),
    /// `switch (expr) { cases }`.
    Switch {
        expr: Expr,
        cases: Vec<SwitchCase>,
        span: Span,
    },
    /// `exit;`
    Exit(Span),
    /// `return [expr];`
    Return(Option<Expr>, Span),
    /// A local constant or variable.
    Decl(Box<Decl>),
    /// `;`
    Empty(Span),
    /// `for (init; cond; update) body`.
    For(Box<ForLoop>),
    /// `for (T x in collection) body`.
    ForIn(Box<ForInLoop>),
    /// `break;`
    Break(Span),
    /// `continue;`
    Continue(Span),
}

/// A three-clause `for` loop.
#[derive(Clone, Debug, PartialEq)]
pub struct ForLoop {
    /// Declarations, assignments and calls run once before the loop, in order.
    pub init: Vec<Stmt>,
    /// The condition, tested before each iteration.
    pub cond: Expr,
    /// Assignments and calls run after each iteration (and on `continue`).
    pub update: Vec<Stmt>,
    /// The body.
    pub body: Stmt,
    /// Where the loop is.
    pub span: Span,
}

/// A `for (T x in collection)` loop.
#[derive(Clone, Debug, PartialEq)]
pub struct ForInLoop {
    /// The loop variable's type.
    pub ty: TypeRef,
    /// The loop variable.
    pub var: Ident,
    /// What it runs over.
    pub collection: ForCollection,
    /// The body.
    pub body: Stmt,
    /// Where the loop is.
    pub span: Span,
}

/// What a `for`-`in` loop runs over.
#[derive(Clone, Debug, PartialEq)]
pub enum ForCollection {
    /// A header stack or a list expression.
    Expr(Expr),
    /// `lo .. hi`, both included.
    Range(Expr, Expr),
}

/// A case of a `switch` statement.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchCase {
    /// The label.
    pub label: SwitchLabel,
    /// The body, `None` for a fall-through label (`a:` followed by another label).
    pub body: Option<Block>,
}

/// A `switch` label.
#[derive(Clone, Debug, PartialEq)]
pub enum SwitchLabel {
    /// `default`.
    Default(Span),
    /// A value or action name.
    Expr(Expr),
}

/// An argument of a call or instantiation.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// `name =` for a named argument.
    pub name: Option<Ident>,
    /// The value (`_` is [`ExprKind::DontCare`]).
    pub value: Expr,
}

/// An expression and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `!`
    Not,
    /// `~`
    Complement,
    /// `-`
    Neg,
    /// `+`
    Plus,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `|+|`
    AddSat,
    /// `|-|`
    SubSat,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `&`
    BitAnd,
    /// `^`
    BitXor,
    /// `|`
    BitOr,
    /// `++`
    Concat,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    And,
    /// `||`
    Or,
}

/// What an expression is.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum ExprKind {
    /// An integer literal.
    Int(IntLit),
    /// `true` / `false`.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// A name.
    Name(String),
    /// `base.member`.
    Member(Box<Expr>, Ident),
    /// `base[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `base[hi:lo]`.
    Slice(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `callee<type_args>(args)`.
    Call {
        callee: Box<Expr>,
        type_args: Vec<TypeRef>,
        args: Vec<Arg>,
    },
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(T) e`.
    Cast(TypeRef, Box<Expr>),
    /// `{ a, b }`.
    List(Vec<Expr>),
    /// `{ f = a, g = b }`.
    StructInit(Vec<(Ident, Expr)>),
    /// `_`.
    DontCare,
}
