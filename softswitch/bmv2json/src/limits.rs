//! The loader's limits on an untrusted BMv2 JSON: past one, loading fails with an error that
//! names it (docs/ARCHITECTURE.md, "Limits and untrusted input"). JSON nesting is bounded by
//! serde_json's recursion limit (128 levels).

/// Bytes of one JSON program (p4c's output for lossless.p4 is about 590 KB).
pub const MAX_JSON_BYTES: usize = 16 << 20;

/// Objects of each kind: header types, headers, fields of one header type, parser states,
/// actions, primitives of one action, tables, conditionals, calculations, extern arrays, entries
/// of one table, field lists.
pub const MAX_OBJECTS: usize = 1 << 14;

/// Slots of per-packet state (as the front end's `MAX_SLOTS`).
pub const MAX_SLOTS: u32 = 1 << 14;

/// How deep an expression may nest.
pub const MAX_EXPR_DEPTH: usize = 64;

/// Statements the control flow graphs of the pipelines become. A node is lowered once after
/// the branches that meet at it ([`crate::joins`]), but a node reached by branches that do not
/// all meet there first (a graph no `if` or `switch` makes) is lowered once per path, so such a
/// graph stops here.
pub const MAX_LOWERED_NODES: usize = 1 << 16;

/// Steps of the walk that finds where a pipeline's branches meet again ([`crate::joins`]):
/// about the sum of the branches' lengths for the graphs p4c writes (the nodes times how deep
/// the branches nest), quadratic in the nodes at worst.
pub const MAX_JOIN_STEPS: usize = 1 << 22;

/// Items of field lists (a calculation's inputs, a learn list's values) copied into the
/// primitives and checksums that use them, over the whole program.
pub const MAX_COPIED_FIELDS: usize = 1 << 18;

/// How deep the interpreter may have to recurse to run a packet (as the front end's
/// `MAX_RUN_DEPTH`).
pub const MAX_RUN_DEPTH: usize = 256;

/// Cells of all register, counter and meter arrays together (as the front end's
/// `MAX_EXTERN_CELLS`).
pub const MAX_EXTERN_CELLS: u64 = 4 << 20;

/// Entries of a table (`max_size`).
pub const MAX_TABLE_SIZE: u64 = 1 << 24;

/// Characters of an error's message: what it quotes of the JSON (a name, a `hexstr` of a
/// million digits) is cut here, so that an error stays a line, and fits a P4Runtime status.
pub const MAX_ERROR_CHARS: usize = 1000;
