//! The front end's limits: P4 source is untrusted input (a device config comes from any
//! P4Runtime client), so every phase works within these bounds and answers a diagnostic that
//! names the limit when a program goes past one. docs/ARCHITECTURE.md ("Limits and untrusted
//! input", "P4 source") lists them with their reasons.

/// Bytes of P4 source in one compilation: the program and every file it includes (the built-in
/// headers are not counted).
pub const MAX_SOURCE_BYTES: usize = 4 << 20;

/// How deep `#include`s may nest.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// Tokens of one compilation: those the lexer reads, and those preprocessing gives the parser.
pub const MAX_TOKENS: usize = 2 << 20;

/// Tokens macro expansion may write, counting each token at every level of expansion it
/// passes through and each copy of a macro's arguments (so nested macros that double at each
/// level stop here, quickly).
pub const MAX_MACRO_EXPANSION: usize = 1 << 20;

/// How deep the syntax may nest: expressions, statements, declarations and type arguments
/// count one level each, and so does each operator of a chain (`a + b + c` is two levels), as
/// each is a node of the syntax tree over the one before. Also the depth of macro expansion and
/// of `#if` expressions.
pub const MAX_NESTING: usize = 256;

/// How deep types may nest: a struct in a struct, a header in a stack, a tuple in a tuple.
pub const MAX_TYPE_DEPTH: usize = 64;

/// Slots of per-packet state (one per scalar field, validity bit, stack index and local), of
/// 16 bytes each; every packet the traffic manager holds keeps its own.
pub const MAX_SLOTS: u32 = 1 << 14;

/// Parts of one type: its scalars, aggregates and stack elements, counted along every path
/// (a struct of two fields of one type counts that type twice). A comparison, an emit or a
/// field list of a value visits as many.
pub const MAX_TYPE_PARTS: u32 = 1 << 16;

/// Work of lowering to the IR, in units: one per expression or statement lowered, per scalar
/// an aggregate comparison, a field list or an emit expands to, per name kept (and per 32 bytes
/// of it) and per annotation token kept. A block instantiated twice is lowered, and counted,
/// twice.
pub const MAX_LOWERED: usize = 2 << 20;

/// Bodies lowered: actions, functions, and the instances of controls, parsers and generic
/// functions (a control instantiated twice lowers its body, and its actions', twice).
pub const MAX_BODIES: usize = 1 << 16;

/// How deep the interpreter may have to recurse to run a packet: the nesting of statements and
/// expressions, counted through every call, table apply and sub-parser along any path.
pub const MAX_RUN_DEPTH: usize = 256;

/// Cells of all register, counter and meter instances together (the switch allocates them
/// when it loads the program).
pub const MAX_EXTERN_CELLS: u64 = 4 << 20;

/// Bits of an `int` (arbitrary-precision) constant, sign included.
pub const MAX_INT_BITS: u64 = 1024;

/// Errors one compilation reports: the checker goes on after an error to report the next, and
/// stops at this many (p4c's default `--maxErrorCount`).
pub const MAX_ERRORS: usize = 20;

/// Warnings one compilation reports in full; the others are counted.
pub const MAX_WARNINGS: usize = 100;

/// Characters of a source line a diagnostic quotes, around its caret.
pub const MAX_EXCERPT_CHARS: usize = 120;
