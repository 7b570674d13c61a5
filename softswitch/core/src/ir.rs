//! The lowered program the interpreter runs: every name resolved to a slot index in one flat
//! array of `u128` values, every width constant, every call bound. Per-packet work neither walks
//! the AST nor hashes strings.
//!
//! Storage layout: a scalar (`bit<W>`, `int<W>`, `bool`, `error`, an enum) takes one slot, a
//! `bit<W>` wider than 128 bits several (see [`slot_widths`]); a
//! header takes one validity slot followed by its fields; a struct its fields in order; a header
//! stack one `nextIndex` slot followed by its elements. Signed values are stored as two's
//! complement masked to their width.

/// A slot index.
pub type Slot = u32;

/// The mask of the low `width` bits.
pub fn mask(width: u16) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// The widest `bit<W>`/`int<W>` a program may declare: p4c's own limit ("Compiler only
/// supports widths up to 2048"), so that every program p4c compiles for BMv2 fits.
pub const MAX_WIDTH: u16 = 2048;

/// The widest value one slot holds; a wider ("wide") `bit<W>` takes several slots.
pub const SLOT_BITS: u16 = 128;

/// The widths of the slots a `width`-bit value takes, in slot order: one slot up to
/// [`SLOT_BITS`] bits; a wider value is stored most significant bits first, in wire order, the
/// first slot holding the top `width - 128 * (n - 1)` bits and each other slot 128 bits. So a
/// wide header field is extracted and emitted as that many [`FieldLayout::Fixed`] fields, and
/// two wide values of one width are equal when their slots are.
pub fn slot_widths(width: u16) -> impl Iterator<Item = u16> {
    let n = width.div_ceil(SLOT_BITS).max(1);
    let first = width - (n - 1) * SLOT_BITS;
    std::iter::once(first).chain(std::iter::repeat_n(SLOT_BITS, usize::from(n - 1)))
}

/// Sign-extends the low `width` bits of `v`.
pub fn sign_extend(v: u128, width: u16) -> i128 {
    if width >= 128 {
        return v as i128;
    }
    let shift = 128 - u32::from(width);
    ((v << shift) as i128) >> shift
}

/// The operator of an [`Expr::Arith`]: arithmetic, bitwise or shift, on sized values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    /// Wrapping `+`.
    Add,
    /// Wrapping `-`.
    Sub,
    /// Wrapping `*`.
    Mul,
    /// `/` (0 when dividing by 0).
    Div,
    /// `%` (0 when dividing by 0).
    Mod,
    /// Saturating `|+|`.
    AddSat,
    /// Saturating `|-|`.
    SubSat,
    /// `<<`.
    Shl,
    /// `>>` (arithmetic on signed values).
    Shr,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
}

/// The operator of an [`Expr::Compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// A scalar expression.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Expr {
    /// A constant.
    Const(u128),
    /// The value of a slot.
    Load(Slot),
    /// A field of a header-stack element picked at run time; an index out of range reads 0.
    LoadDyn(DynSlot),
    /// An arithmetic or bitwise operation on `width`-bit values, result masked to `width`.
    Arith {
        op: ArithOp,
        width: u16,
        signed: bool,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// A comparison of two `width`-bit values; yields 0 or 1.
    Compare {
        op: CompareOp,
        width: u16,
        signed: bool,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// `a ++ b` where `b` has `b_width` bits.
    Concat {
        a: Box<Expr>,
        b: Box<Expr>,
        b_width: u16,
    },
    /// Bits `lo .. lo + width` of `arg`.
    Slice { arg: Box<Expr>, lo: u16, width: u16 },
    /// Sign extension of a `from`-bit value to `to` bits (for casts of signed values).
    SignExtend { arg: Box<Expr>, from: u16, to: u16 },
    /// The low `width` bits of `arg` (for casts that narrow).
    Truncate { arg: Box<Expr>, width: u16 },
    /// `!arg` on a bool.
    Not(Box<Expr>),
    /// `~arg` on `width` bits.
    Complement { arg: Box<Expr>, width: u16 },
    /// `-arg` on `width` bits.
    Negate { arg: Box<Expr>, width: u16 },
    /// Short-circuit `&&`.
    And(Box<Expr>, Box<Expr>),
    /// Short-circuit `||`.
    Or(Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Equality of two slot ranges (two `varbit` values: length and chunks).
    RangeEq { a: Slot, b: Slot, len: u32 },
    /// Applies a table; yields 1 if it hit (or, with `miss`, 1 if it missed).
    TableHit { table: usize, miss: bool },
    /// Calls a function and yields its return slot.
    Invoke(Box<Invoke>),
    /// `width` bits at `offset` bits past the parser's cursor, which must have `need` bits after
    /// it (`packet.lookahead<bit<W>>()`, or a field of `packet.lookahead<H>()`).
    Lookahead { offset: u32, width: u16, need: u32 },
    /// `packet.length()` in a parser (bytes).
    PacketLength,
    /// `Checksum16.get(data)`: the Internet checksum of the fields.
    Checksum16(Box<FieldList>),
}

/// A slot of a header-stack element picked at run time: slot `base + index * stride`, for an
/// `index` below `count` (past it there is no slot).
#[derive(Clone, Debug, PartialEq)]
pub struct DynSlot {
    /// The slot in the stack's first element.
    pub base: Slot,
    /// Slots per element.
    pub stride: u32,
    /// Elements of the stack.
    pub count: u32,
    /// Which element.
    pub index: Box<Expr>,
}

impl DynSlot {
    /// The slot `by` slots further into the same element.
    pub fn offset(&self, by: u32) -> DynSlot {
        DynSlot {
            base: self.base + by,
            ..self.clone()
        }
    }
}

/// A scalar place that can be written.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Place {
    /// A slot.
    Slot(Slot),
    /// A field of a header-stack element picked at run time (writes out of range are ignored).
    Dyn(DynSlot),
    /// Bits `lo .. lo + width` of a place.
    Slice {
        inner: Box<Place>,
        lo: u16,
        width: u16,
    },
}

/// A call of an action or function body with copy-in/copy-out of its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Invoke {
    /// Statements that copy the arguments into the parameter slots.
    pub copy_in: Vec<Stmt>,
    /// The body (an index into [`Program::bodies`]).
    pub body: usize,
    /// Statements that copy `out`/`inout` parameters back to the arguments.
    pub copy_out: Vec<Stmt>,
    /// The slot that holds the return value (functions only).
    pub ret: Option<Slot>,
}

/// A header instance, possibly chosen at run time in a stack.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum HeaderRef {
    /// A header at a fixed slot (its validity slot) with layout `layout`.
    Static { base: Slot, layout: usize },
    /// `stack.next` (or `stack.next.member` in a stack of header unions): the header `offset`
    /// slots into the element at the stack's `nextIndex` (elements are `stride` slots apart),
    /// which then advances.
    Next {
        stack: Slot,
        count: u32,
        stride: u32,
        offset: u32,
        layout: usize,
    },
}

/// One field of a list given to a hash, checksum or digest.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum FieldItem {
    /// A value of a fixed width.
    Bits(Expr, u16),
    /// A `varbit` field stored at `base` (see [`FieldLayout::VarBit`]).
    VarBit { base: Slot, max: u32 },
    /// Fields of the header whose validity slot is `valid`: a hash or checksum leaves them out
    /// while the header is invalid, as BMv2 does.
    Header { valid: Slot, fields: FieldList },
}

/// A list of fields given to a hash, checksum or digest, in order.
pub type FieldList = Vec<FieldItem>;

/// The fields of `list` in order, out of their [`FieldItem::Header`] groups.
pub fn flat_fields(list: &[FieldItem]) -> Vec<&FieldItem> {
    let mut out = Vec::new();
    for item in list {
        match item {
            FieldItem::Header { fields, .. } => out.extend(flat_fields(fields)),
            leaf => out.push(leaf),
        }
    }
    out
}

/// How one header field is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum FieldLayout {
    /// A `bit<W>`/`int<W>`/`bool`/enum field in one slot.
    Fixed(u16),
    /// A `varbit<max>` field: its current length in bits, then its bits in 128-bit chunks, the
    /// first chunk holding the first bits (each chunk right-aligned to its own length).
    VarBit { max: u32 },
}

impl FieldLayout {
    /// Slots the field takes.
    pub fn slots(&self) -> u32 {
        match self {
            FieldLayout::Fixed(_) => 1,
            FieldLayout::VarBit { max } => 1 + max.div_ceil(128),
        }
    }
}

/// The length of chunk `i` of a varbit value `len` bits long.
pub fn varbit_chunk_width(len: u128, i: u32) -> u16 {
    len.saturating_sub(u128::from(i) * 128).min(128) as u16
}

/// A call of a v1model or core extern.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum ExternCall {
    /// A call of a registered extern ([`crate::externs`]), its arguments in the order of its
    /// signature's parameters.
    Call { ext: ExternId, args: Vec<ExternArg> },
    /// `packet.extract(h)`, or `packet.extract(h, bits)` giving its varbit field `bits` bits.
    Extract {
        target: HeaderRef,
        varbit: Option<Expr>,
    },
    /// `packet.advance(bits)`.
    Advance(Expr),
    /// `sub.apply(packet, args)`: runs sub-parser `parser` (an index into
    /// [`Program::subparsers`]) between the copy-in and copy-out of its arguments.
    SubParser {
        parser: usize,
        copy_in: Vec<Stmt>,
        copy_out: Vec<Stmt>,
    },
    /// `verify(cond, error)`.
    Verify { cond: Expr, error: Expr },
    /// `packet.emit(h)` for each header, in order.
    Emit(Vec<EmitItem>),
    /// `stack.push_front(n)` / `stack.pop_front(n)` (negative `shift` pops). The elements that
    /// come in are invalid: the slots at `valids` (offsets into an element: the header's
    /// validity, or each member's in a stack of header unions) are cleared.
    StackShift {
        stack: Slot,
        count: u32,
        stride: u32,
        valids: Vec<u32>,
        shift: i32,
    },
}

/// A registered extern: an index into [`crate::externs`]' registry (found by
/// [`crate::externs::by_name`] or [`crate::externs::by_bmv2_op`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExternId(pub(crate) u16);

/// One argument of a call of a registered extern, as its parameter
/// ([`crate::externs::Param`]) says.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum ExternArg {
    /// An `in` value.
    Value(Expr),
    /// An `out` scalar and its width.
    Out(Place, u16),
    /// The extern instance a method is called on: an index into [`Program::instances`].
    Instance(usize),
    /// A string literal (`log_msg`'s format).
    Text(String),
    /// The values of a struct, tuple or list argument, its bit fields in order.
    Values(Vec<Expr>),
    /// An `in` value and its width, for an extern that reads the width.
    Sized(Expr, u16),
    /// The fields of a data argument (a hash's or a checksum's), with their header groups.
    Fields(FieldList),
    /// A field list whose slots a clone, resubmit or recirculation keeps: an index into
    /// [`Program::field_lists`].
    Preserved(usize),
    /// A digest's data: its type's index in `CpInfo::digests` and its fields.
    Digest { digest: usize, data: FieldList },
    /// An argument the extern does not read (or the call left out).
    Unused,
}

/// One item emitted by a deparser.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum EmitItem {
    /// A header (emitted if valid).
    Header { base: Slot, layout: usize },
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Stmt {
    /// Stores a scalar.
    Assign(Place, Expr),
    /// Copies `len` slots from `src` to `dst`.
    Copy { dst: Slot, src: Slot, len: u32 },
    /// Copies `len` slots (a whole header or header union) from the block starting at `src` to
    /// the one starting at `dst`, either of which may be a header-stack element picked at run
    /// time ([`Place::Dyn`]; never a [`Place::Slice`]): `hdr.s[i] = h`, `h = hdr.s[i]`. Out of
    /// range, a source reads as zeros (an invalid header) and a destination ignores the write,
    /// as a field does.
    CopyBlock { dst: Place, src: Place, len: u32 },
    /// Zeroes `len` slots from `start` (fresh locals, `out` parameters).
    Zero { start: Slot, len: u32 },
    /// `if`: condition, then, else, and the condition's index in [`TraceNames::conditions`]
    /// (`None` for an `if` the compiler made, which the trace does not show).
    If(Expr, Vec<Stmt>, Vec<Stmt>, Option<u32>),
    /// `switch` on a value: the first case whose values contain it runs, else `default`.
    Switch {
        on: Expr,
        cases: Vec<(Vec<u128>, Vec<Stmt>)>,
        default: Vec<Stmt>,
    },
    /// `switch (t.apply().action_run)`: cases keyed by action index.
    SwitchAction {
        table: usize,
        cases: Vec<(Vec<usize>, Vec<Stmt>)>,
        default: Vec<Stmt>,
    },
    /// Applies a table for its effect.
    Apply(usize),
    /// Calls an action or function.
    Invoke(Box<Invoke>),
    /// Calls an extern.
    Extern(Box<ExternCall>),
    /// `exit`.
    Exit,
    /// `return` (the value, if any, was stored before).
    Return,
    /// A loop: while `cond` holds, runs `body` then `update`. `break` in either ends the
    /// loop, `continue` in the body goes on to `update`. The interpreter bounds the work of
    /// one block's loops at [`MAX_LOOP_WORK`].
    Loop {
        cond: Expr,
        body: Vec<Stmt>,
        update: Vec<Stmt>,
    },
    /// `break`: ends the innermost [`Stmt::Loop`].
    Break,
    /// `continue`: ends the innermost [`Stmt::Loop`]'s body for this iteration.
    Continue,
}

impl Stmt {
    /// A copy of `len` slots from the block at `src` to the one at `dst`: a [`Stmt::Copy`]
    /// when both are slots (nothing to evaluate), else a [`Stmt::CopyBlock`].
    pub fn copy_block(dst: Place, src: Place, len: u32) -> Stmt {
        match (dst, src) {
            (Place::Slot(dst), Place::Slot(src)) => Stmt::Copy { dst, src, len },
            (dst, src) => Stmt::CopyBlock { dst, src, len },
        }
    }
}

/// Work of the loops of one packet's run of one block (a control, with the actions its tables
/// run), all loops together, in units: one per iteration and one per statement run inside a
/// loop (in its body, in what the body calls, in nested loops). P4 loops may depend on packet
/// data and need not end, and a packet must not hold the switch. Past it the block ends as at
/// `exit`, with a note in the switch's log.
pub const MAX_LOOP_WORK: usize = 1 << 20;

/// A match kind of a table key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// `exact`.
    Exact,
    /// `ternary`.
    Ternary,
    /// `lpm`.
    Lpm,
    /// `range`.
    Range,
    /// `optional`.
    Optional,
    /// `selector`: hashed by an action selector, not matched.
    Selector,
}

impl MatchKind {
    /// Whether a key of this kind gives a table's entries a priority: two entries may match
    /// one packet (ternary, range, optional; an lpm table orders its entries by prefix
    /// length).
    pub fn needs_priority(self) -> bool {
        matches!(
            self,
            MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
        )
    }
}

/// A table key.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The key's control-plane name (`@name` or the expression as written).
    pub name: String,
    /// The expression.
    pub expr: Expr,
    /// Its width in bits.
    pub width: u16,
    /// How it matches.
    pub kind: MatchKind,
}

/// How one key field of an entry matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum FieldMatch {
    /// Equal to the value under the mask.
    Masked { value: u128, mask: u128 },
    /// Within `lo..=hi`.
    Range { lo: u128, hi: u128 },
}

impl FieldMatch {
    /// Whether `v` matches.
    pub fn matches(&self, v: u128) -> bool {
        match *self {
            FieldMatch::Masked { value, mask } => v & mask == value & mask,
            FieldMatch::Range { lo, hi } => lo <= v && v <= hi,
        }
    }
}

/// An action bound to its action-data arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionCall {
    /// The action (index into [`Program::actions`]).
    pub action: usize,
    /// Values of its action-data parameters, in order.
    pub args: Vec<u128>,
}

/// A table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// One match per key.
    pub matches: Vec<FieldMatch>,
    /// Priority (higher wins, as in P4Runtime); entries the program gives get theirs from
    /// BMv2's (see [`Entry::priority_from_bmv2`]).
    pub priority: i64,
    /// The action.
    pub action: ActionCall,
}

impl Entry {
    /// The priority of an entry to which BMv2 gives priority `bmv2` (where a smaller value
    /// wins): both the BMv2 JSON loader and the front end (which places entries as p4c's BMv2
    /// back end does) say an entry's priority in BMv2's terms.
    pub fn priority_from_bmv2(bmv2: i64) -> i64 {
        bmv2.saturating_neg()
    }
}

/// The directional arguments a table binds to one of its actions.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionBinding {
    /// Run before the action (copy-in).
    pub copy_in: Vec<Stmt>,
    /// Run after it (copy-out).
    pub copy_out: Vec<Stmt>,
}

/// A table.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Its fully qualified control-plane name (`MyIngress.ipv4_lpm`).
    pub name: String,
    /// Keys.
    pub keys: Vec<Key>,
    /// Allowed actions.
    pub actions: Vec<usize>,
    /// Directional arguments bound in the actions list, by action.
    pub bindings: Vec<(usize, ActionBinding)>,
    /// The default action.
    pub default_action: ActionCall,
    /// Whether the default action is `const`.
    pub const_default: bool,
    /// Entries given in the program.
    pub const_entries: Vec<Entry>,
    /// Whether the entries are `const` (the control plane may not change them).
    pub const_entries_fixed: bool,
    /// The `size` property (default 1024).
    pub size: usize,
    /// Its direct counter instance, if any.
    pub direct_counter: Option<usize>,
    /// Its direct meter instance, if any.
    pub direct_meter: Option<usize>,
    /// Its action profile or selector instance (`implementation =`), if any.
    pub profile: Option<usize>,
    /// Keys with match kind `selector`: not matched, hashed to pick a group's member.
    pub selector: Vec<Key>,
    /// Counts the copies made of tables ([`Table::copies_on_this_thread`]).
    pub copies: CopyCount,
}

thread_local! {
    static TABLE_COPIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts the copies made of the table it is part of, per thread: a control-plane write path
/// that copied its table per update (as P4Runtime's Write once did) shows in a test, which
/// reads [`Table::copies_on_this_thread`] around it.
///
/// It is public, not `cfg(test)`, because the test that reads it is an integration test of the
/// `softswitch` crate (`tests/table_writes.rs`, a write through the server's P4Runtime path),
/// which sees the core as any other crate does. It costs nothing where it is not read: a
/// zero-sized field, and a thread-local increment when a whole table is copied, which no
/// packet and no write does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyCount;

impl Clone for CopyCount {
    fn clone(&self) -> Self {
        TABLE_COPIES.with(|c| c.set(c.get() + 1));
        CopyCount
    }
}

impl Table {
    /// How many tables were copied on this thread so far (whole programs' copies included).
    pub fn copies_on_this_thread() -> u64 {
        TABLE_COPIES.with(|c| c.get())
    }

    /// Whether its entries have a priority ([`MatchKind::needs_priority`]).
    pub fn has_priority(&self) -> bool {
        self.keys.iter().any(|k| k.kind.needs_priority())
    }
}

/// A parameter of an action or function.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Name.
    pub name: String,
    /// First slot.
    pub slot: Slot,
    /// Width if scalar (action data is always scalar).
    pub width: u16,
    /// Whether it is action data (no direction).
    pub action_data: bool,
}

/// An action or function body.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// Fully qualified name.
    pub name: String,
    /// Parameters.
    pub params: Vec<Param>,
    /// Statements.
    pub stmts: Vec<Stmt>,
}

/// An action: a body that tables may run.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// Fully qualified name (`MyIngress.ipv4_forward`, or `NoAction`).
    pub name: String,
    /// The body (index into [`Program::bodies`]).
    pub body: usize,
}

/// Where a parser goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Another state.
    State(usize),
    /// `accept`.
    Accept,
    /// `reject`.
    Reject,
}

/// A parser transition.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum Transition {
    /// Unconditional.
    Goto(Target),
    /// `select`: the first case that matches wins; none matching is `error.NoMatch`. `widths`
    /// are the select expressions' widths in bits, for the trace (the last key that value sets
    /// over several expressions match, their concatenation, has none).
    Select {
        keys: Vec<Expr>,
        widths: Vec<u16>,
        cases: Vec<(CaseKeyset, Target)>,
    },
}

/// The keyset of a `select` case.
#[derive(Clone, Debug, PartialEq)]
pub enum CaseKeyset {
    /// One match per select expression.
    Fields(Vec<FieldMatch>),
    /// A parser value set (instance index) the last select expression must be in: the only
    /// one, or, for a value set over several, their concatenation (see [`concat_keys`]).
    ValueSet(usize),
}

/// The concatenation of select expressions of the given widths (together at most 128 bits),
/// first one highest: the key a value set over several select expressions matches, which a
/// select that has such a case gets as its last key.
pub fn concat_keys(keys: &[(Expr, u16)]) -> Expr {
    let mut all = keys.iter();
    let first = all.next().map_or(Expr::Const(0), |(e, _)| e.clone());
    all.fold(first, |a, (b, w)| Expr::Concat {
        a: Box::new(a),
        b: Box::new(b.clone()),
        b_width: *w,
    })
}

/// A parser state.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// Name.
    pub name: String,
    /// Statements.
    pub stmts: Vec<Stmt>,
    /// Transition.
    pub transition: Transition,
}

/// A parser.
#[derive(Clone, Debug, PartialEq)]
pub struct ParserIr {
    /// Statements run before `start` (local initialization).
    pub init: Vec<Stmt>,
    /// States; `start` is index 0.
    pub states: Vec<State>,
}

/// A control block.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    /// Name.
    pub name: String,
    /// Its apply body (starting with local initialization).
    pub body: Vec<Stmt>,
}

/// One of the stateful extern types the core registers (an index into
/// [`crate::externs::objects`]), as [`ExternId`] is one of its externs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectId(pub u8);

/// The value of one constructor parameter of a stateful extern type
/// ([`crate::externs::CtorParam`]), as the front end or the BMv2 JSON loader read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtorArg {
    /// `CtorParam::Size`.
    Size(u32),
    /// `CtorParam::CounterType`.
    Counter(CounterKind),
    /// `CtorParam::MeterType`: whether the meter measures bytes.
    MeterBytes(bool),
}

/// The kind and configuration of an extern instance.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs, reason = "each variant's doc says what its fields are")]
pub enum InstanceKind {
    /// An instance of a stateful extern type the core registers (`register`, `counter`,
    /// `meter`, their direct forms: [`crate::externs::Object`], which makes it): its cells'
    /// `width`, for a type whose cells hold a `bit<W>` (a register's), and its constructor's
    /// `args`, in the order of the type's `CtorParam`s. A new stateful extern type is data
    /// here, not a variant.
    Object {
        object: ObjectId,
        width: Option<u16>,
        args: Vec<CtorArg>,
    },
    /// The deprecated `Checksum16()` (its `get` computes an Internet checksum).
    Checksum16,
    /// A parser `value_set<T>(size)`, filled by the control plane, of `width`-bit values: `T` is
    /// `bit<W>` (`fields` empty), or a struct whose fields (names and widths, in order) the
    /// values hold one after the other, as the select expressions it matches are concatenated.
    ValueSet {
        size: u32,
        width: u16,
        fields: Vec<(String, u16)>,
    },
    /// `action_profile(size)`: members (actions with data) that entries refer to.
    ActionProfile { size: u32 },
    /// `action_selector(algorithm, size, width)`: members and groups of members; an entry
    /// pointing to a group runs the member the hash of the selector keys picks.
    ActionSelector { size: u32, algo: u8 },
}

impl InstanceKind {
    /// The constructor arguments of an instance of a stateful extern type (none for another).
    pub fn args(&self) -> &[CtorArg] {
        match self {
            InstanceKind::Object { args, .. } => args,
            _ => &[],
        }
    }

    /// The number of cells of an instance whose cells the program indexes (its `size`
    /// argument: a register's, counter's or meter's; the switch allocates them when it loads
    /// the program).
    pub fn cells(&self) -> Option<u32> {
        self.args().iter().find_map(|a| match a {
            CtorArg::Size(n) => Some(*n),
            _ => None,
        })
    }

    /// The width of its cells, for an instance whose cells hold values the program reads
    /// and writes (a register's `bit<W>`).
    pub fn cell_width(&self) -> Option<u16> {
        match self {
            InstanceKind::Object { width, .. } => *width,
            _ => None,
        }
    }

    /// What it counts, for an instance with a `CounterType` argument.
    pub fn counter_kind(&self) -> Option<CounterKind> {
        self.args().iter().find_map(|a| match a {
            CtorArg::Counter(k) => Some(*k),
            _ => None,
        })
    }

    /// Whether it measures bytes, for an instance with a `MeterType` argument.
    pub fn meter_bytes(&self) -> Option<bool> {
        self.args().iter().find_map(|a| match a {
            CtorArg::MeterBytes(b) => Some(*b),
            _ => None,
        })
    }
}

/// What a counter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// Packets.
    Packets,
    /// Bytes.
    Bytes,
    /// Both.
    PacketsAndBytes,
}

/// An extern instance (register, counter, meter).
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// Fully qualified name (`MyIngress.my_counter`).
    pub name: String,
    /// Kind and configuration.
    pub kind: InstanceKind,
}

/// The slots of `standard_metadata`, by field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct StandardMetadata {
    pub ingress_port: Slot,
    pub egress_spec: Slot,
    pub egress_port: Slot,
    pub instance_type: Slot,
    pub packet_length: Slot,
    pub enq_timestamp: Slot,
    pub enq_qdepth: Slot,
    pub deq_timedelta: Slot,
    pub deq_qdepth: Slot,
    pub ingress_global_timestamp: Slot,
    pub egress_global_timestamp: Slot,
    pub mcast_grp: Slot,
    pub egress_rid: Slot,
    pub checksum_error: Slot,
    pub parser_error: Slot,
    pub priority: Slot,
}

impl StandardMetadata {
    /// The slots of v1model's `standard_metadata_t`, each found by `slot` from its field name
    /// (the one list of those names that the front end and the BMv2 JSON loader share).
    pub fn from_fields<E>(mut slot: impl FnMut(&str) -> Result<Slot, E>) -> Result<Self, E> {
        Ok(StandardMetadata {
            ingress_port: slot("ingress_port")?,
            egress_spec: slot("egress_spec")?,
            egress_port: slot("egress_port")?,
            instance_type: slot("instance_type")?,
            packet_length: slot("packet_length")?,
            enq_timestamp: slot("enq_timestamp")?,
            enq_qdepth: slot("enq_qdepth")?,
            deq_timedelta: slot("deq_timedelta")?,
            deq_qdepth: slot("deq_qdepth")?,
            ingress_global_timestamp: slot("ingress_global_timestamp")?,
            egress_global_timestamp: slot("egress_global_timestamp")?,
            mcast_grp: slot("mcast_grp")?,
            egress_rid: slot("egress_rid")?,
            checksum_error: slot("checksum_error")?,
            parser_error: slot("parser_error")?,
            priority: slot("priority")?,
        })
    }

    /// Every field's slot.
    pub fn all(&self) -> [Slot; 16] {
        [
            self.ingress_port,
            self.egress_spec,
            self.egress_port,
            self.instance_type,
            self.packet_length,
            self.enq_timestamp,
            self.enq_qdepth,
            self.deq_timedelta,
            self.deq_qdepth,
            self.ingress_global_timestamp,
            self.egress_global_timestamp,
            self.mcast_grp,
            self.egress_rid,
            self.checksum_error,
            self.parser_error,
            self.priority,
        ]
    }
}

/// A lowered v1model program.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// Number of slots of per-packet state.
    pub slots: u32,
    /// The fields of each header type (a header's layout index).
    pub header_layouts: Vec<Vec<FieldLayout>>,
    /// The bits of each header type's fixed-width fields.
    pub header_bits: Vec<u32>,
    /// `standard_metadata` slots.
    pub std_meta: StandardMetadata,
    /// The range of user metadata slots `(start, len)`.
    pub user_meta: (Slot, u32),
    /// The slots of the program's local variables `(start, len)`, each zeroed by a statement
    /// where it is declared, before the program can read it: a packet's slots need not start
    /// zeroed there. The switch zeroes every other slot for each packet.
    pub locals: Vec<(Slot, u32)>,
    /// The slots each preserved field list keeps, by id (one per `@field_list(N)` index used,
    /// one per data argument of a deprecated `clone3`, `resubmit` or `recirculate`).
    pub field_lists: Vec<Vec<Slot>>,
    /// The parser.
    pub parser: ParserIr,
    /// Parsers instantiated inside the parser (or inside each other).
    pub subparsers: Vec<ParserIr>,
    /// Verify checksum, ingress, egress, compute checksum, deparser.
    pub controls: [Control; 5],
    /// Tables.
    pub tables: Vec<Table>,
    /// Actions.
    pub actions: Vec<Action>,
    /// Action and function bodies.
    pub bodies: Vec<Body>,
    /// Extern instances.
    pub instances: Vec<Instance>,
    /// Error names by code.
    pub errors: Vec<String>,
    /// The names the trace shows that nothing else needs.
    pub trace_names: TraceNames,
}

impl Program {
    /// The slot ranges a packet starts with zeroed: all of `0..slots` but the
    /// [locals](Program::locals), which the program zeroes itself where it declares them;
    /// sorted, disjoint, not adjacent.
    pub fn packet_state(&self) -> Vec<std::ops::Range<usize>> {
        let end = self.slots as usize;
        let mut locals: Vec<(usize, usize)> = self
            .locals
            .iter()
            .map(|&(s, n)| (s as usize, (s as usize).saturating_add(n as usize)))
            .collect();
        locals.sort_unstable();
        let mut state = Vec::new();
        let mut from = 0;
        for (start, stop) in locals {
            if start.min(end) > from {
                state.push(from..start.min(end));
            }
            from = from.max(stop);
        }
        if end > from {
            state.push(from..end);
        }
        state
    }

    /// The code of parser error `name` (0 if the program has none of that name).
    pub(crate) fn error_code(&self, name: &str) -> u128 {
        self.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }

    /// The action-data parameters of action `action` (an index into [`Program::actions`]), in
    /// order: the values the control plane gives an entry or a default action that runs it.
    pub fn action_data(&self, action: usize) -> impl Iterator<Item = &Param> {
        self.bodies[self.actions[action].body]
            .params
            .iter()
            .filter(|p| p.action_data)
    }
}

/// The names of a program's parts that only the trace shows (`softswitch_core::trace`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceNames {
    /// Header instances by validity slot, sorted by slot (`ethernet`, `vlan[0]`: p4c's names).
    pub headers: Vec<(Slot, String)>,
    /// The conditions of `if` statements, by the index their [`Stmt::If`] holds.
    pub conditions: Vec<Condition>,
}

/// An `if` condition as BMv2 shows it: `prog.p4(79) Condition "hdr.ipv4.isValid()" (node_2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Its source text.
    pub text: String,
    /// Its control-flow node's name (`node_2`).
    pub node: String,
    /// Where it is, `file(line)`, if known.
    pub location: Option<String>,
}

/// Indices into [`Program::controls`].
pub mod block {
    /// Verify checksum.
    pub const VERIFY: usize = 0;
    /// Ingress.
    pub const INGRESS: usize = 1;
    /// Egress.
    pub const EGRESS: usize = 2;
    /// Compute checksum.
    pub const COMPUTE: usize = 3;
    /// Deparser.
    pub const DEPARSER: usize = 4;
}

/// How deep the interpreter recurses to run a piece of the IR: one level per statement and per
/// expression node, plus the depth of what each call, table apply and sub-parser runs.
/// The depths of those are given, measured before: everything a piece of P4 calls is lowered
/// before it (P4 has no recursion). Sums saturate.
pub struct RunDepth<'a> {
    /// The depth of each body, by index (see [`Program::bodies`]).
    pub bodies: &'a [usize],
    /// The depth of each table's apply, by index.
    pub tables: &'a [usize],
    /// The depth of each sub-parser, by index.
    pub subparsers: &'a [usize],
}

impl RunDepth<'_> {
    /// The depth of a sequence of statements.
    pub fn stmts(&self, stmts: &[Stmt]) -> usize {
        stmts.iter().map(|s| self.stmt(s)).max().unwrap_or(0)
    }

    fn stmt(&self, s: &Stmt) -> usize {
        let inner = match s {
            Stmt::Assign(place, e) => self.place(place).max(self.expr(e)),
            Stmt::CopyBlock { dst, src, .. } => self.place(dst).max(self.place(src)),
            Stmt::Copy { .. }
            | Stmt::Zero { .. }
            | Stmt::Exit
            | Stmt::Return
            | Stmt::Break
            | Stmt::Continue => 0,
            Stmt::If(c, t, e, _) => self.expr(c).max(self.stmts(t)).max(self.stmts(e)),
            Stmt::Loop { cond, body, update } => self
                .expr(cond)
                .max(self.stmts(body))
                .max(self.stmts(update)),
            Stmt::Switch { on, cases, default } => cases
                .iter()
                .map(|(_, b)| self.stmts(b))
                .fold(self.expr(on).max(self.stmts(default)), usize::max),
            Stmt::SwitchAction {
                table,
                cases,
                default,
            } => cases
                .iter()
                .map(|(_, b)| self.stmts(b))
                .fold(self.table(*table).max(self.stmts(default)), usize::max),
            Stmt::Apply(t) => self.table(*t),
            Stmt::Invoke(inv) => self.invoke(inv),
            Stmt::Extern(call) => self.extern_call(call),
        };
        inner.saturating_add(1)
    }

    fn invoke(&self, inv: &Invoke) -> usize {
        let body = self.bodies.get(inv.body).copied().unwrap_or(usize::MAX);
        self.stmts(&inv.copy_in)
            .max(body)
            .max(self.stmts(&inv.copy_out))
            .saturating_add(1)
    }

    fn table(&self, t: usize) -> usize {
        self.tables.get(t).copied().unwrap_or(usize::MAX)
    }

    /// The depth of a table's apply: its keys, and the actions it may run with their bindings,
    /// given the depths of the program's `actions` bodies.
    pub fn table_apply(&self, table: &Table, actions: &[Action]) -> usize {
        let body = |a: usize| {
            actions
                .get(a)
                .and_then(|a| self.bodies.get(a.body))
                .copied()
                .unwrap_or(usize::MAX)
        };
        let keys = table
            .keys
            .iter()
            .chain(&table.selector)
            .map(|k| self.expr(&k.expr));
        let bindings = table
            .bindings
            .iter()
            .map(|(_, b)| self.stmts(&b.copy_in).max(self.stmts(&b.copy_out)));
        let bodies = table
            .actions
            .iter()
            .chain([&table.default_action.action])
            .map(|&a| body(a));
        keys.chain(bindings)
            .chain(bodies)
            .max()
            .unwrap_or(0)
            .saturating_add(1)
    }

    /// The depth of a parser: its initialization, and each state's statements and select keys.
    pub fn parser(&self, p: &ParserIr) -> usize {
        let states = p.states.iter().map(|s| {
            let keys = match &s.transition {
                Transition::Goto(_) => 0,
                Transition::Select { keys, .. } => {
                    keys.iter().map(|k| self.expr(k)).max().unwrap_or(0)
                }
            };
            self.stmts(&s.stmts).max(keys)
        });
        states
            .fold(self.stmts(&p.init), usize::max)
            .saturating_add(1)
    }

    fn place(&self, p: &Place) -> usize {
        let inner = match p {
            Place::Slot(_) => 0,
            Place::Dyn(d) => self.expr(&d.index),
            Place::Slice { inner, .. } => self.place(inner),
        };
        inner.saturating_add(1)
    }

    fn fields(&self, fields: &FieldList) -> usize {
        fields
            .iter()
            .map(|f| match f {
                FieldItem::Bits(e, _) => self.expr(e),
                FieldItem::VarBit { .. } => 0,
                FieldItem::Header { fields, .. } => self.fields(fields),
            })
            .max()
            .unwrap_or(0)
    }

    fn expr(&self, e: &Expr) -> usize {
        let inner = match e {
            Expr::Const(_)
            | Expr::Load(_)
            | Expr::RangeEq { .. }
            | Expr::Lookahead { .. }
            | Expr::PacketLength => 0,
            Expr::LoadDyn(d) => self.expr(&d.index),
            Expr::Arith { a, b, .. }
            | Expr::Compare { a, b, .. }
            | Expr::Concat { a, b, .. }
            | Expr::And(a, b)
            | Expr::Or(a, b) => self.expr(a).max(self.expr(b)),
            Expr::Slice { arg, .. }
            | Expr::SignExtend { arg, .. }
            | Expr::Truncate { arg, .. }
            | Expr::Complement { arg, .. }
            | Expr::Negate { arg, .. }
            | Expr::Not(arg) => self.expr(arg),
            Expr::Cond(c, a, b) => self.expr(c).max(self.expr(a)).max(self.expr(b)),
            Expr::TableHit { table, .. } => self.table(*table),
            Expr::Invoke(inv) => self.invoke(inv),
            Expr::Checksum16(fields) => self.fields(fields),
        };
        inner.saturating_add(1)
    }

    fn extern_call(&self, call: &ExternCall) -> usize {
        let exprs = |es: &[&Expr]| es.iter().map(|e| self.expr(e)).max().unwrap_or(0);
        match call {
            ExternCall::Extract { varbit, .. } => varbit.as_ref().map_or(0, |e| self.expr(e)),
            ExternCall::Advance(e) => self.expr(e),
            ExternCall::Call { args, .. } => args
                .iter()
                .map(|a| match a {
                    ExternArg::Value(e) | ExternArg::Sized(e, _) => self.expr(e),
                    ExternArg::Values(es) => es.iter().map(|e| self.expr(e)).max().unwrap_or(0),
                    ExternArg::Out(p, _) => self.place(p),
                    ExternArg::Fields(data) | ExternArg::Digest { data, .. } => self.fields(data),
                    ExternArg::Instance(_)
                    | ExternArg::Text(_)
                    | ExternArg::Preserved(_)
                    | ExternArg::Unused => 0,
                })
                .max()
                .unwrap_or(0),
            ExternCall::SubParser {
                parser,
                copy_in,
                copy_out,
            } => self
                .subparsers
                .get(*parser)
                .copied()
                .unwrap_or(usize::MAX)
                .max(self.stmts(copy_in))
                .max(self.stmts(copy_out)),
            ExternCall::Verify { cond, error } => exprs(&[cond, error]),
            ExternCall::Emit(_) | ExternCall::StackShift { .. } => 0,
        }
    }
}
