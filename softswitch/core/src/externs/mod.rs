//! The externs as modules, as BMv2 registers its externs (`BM_REGISTER_EXTERN`): each extern
//! is one file here implementing [`Extern`], and one line of [`REGISTRY`] makes it known.
//!
//! An extern's own pieces live in its file: the P4 names it is called by and the BMv2 JSON
//! primitives it is lowered from ([`Signature`], data the front end and the BMv2 JSON loader
//! read, so that neither needs a line per extern and the crate arrows stay one way), and its
//! execution over a packet ([`Extern::execute`], against the narrow [`Machine`] the
//! interpreter gives it). A call of a registered extern is one IR node,
//! [`ir::ExternCall::Call`], holding the extern's [`ir::ExternId`] and its arguments as the
//! signature's [`Param`]s made them.
//!
//! The packet-parsing primitives (`extract`, `advance`, `emit`, `verify`, a sub-parser's
//! `apply`, a header stack's `push_front`/`pop_front`) are language constructs, not externs:
//! they stay variants of [`ir::ExternCall`].
//!
//! A stateful extern type is an [`Object`] in its file and a line of [`OBJECTS`]: its instances
//! are data ([`ir::InstanceKind::Object`], made by [`Object::instance`]), and the value of one of
//! its cells as the control plane sees it implements [`Cell`], over which the runtime
//! interface's cell methods are generic. `Checksum16`, parser value sets, action profiles and
//! action selectors are not `Object`s but variants of [`ir::InstanceKind`] of their own: they
//! are not cell arrays. Action profiles and selectors are table machinery (the members and
//! groups the entries of the tables they implement point to, as BMv2 keeps them inside its
//! indirect match tables), a value set is a parser `select`'s key set, and `Checksum16` holds
//! nothing.

mod assert;
pub(crate) mod checksum;
mod clone;
pub(crate) mod counter;
mod digest;
mod hash;
mod log_msg;
mod mark_to_drop;
pub(crate) mod meter;
mod random;
pub(crate) mod register;
mod resubmit;
mod truncate;

use crate::ir::{self, Expr, ExternArg, ExternId, Place, Program};
use crate::state::State;

/// Requests a packet's run makes of the architecture through its externs (the last request of
/// each kind wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Effects {
    /// `clone`: egress (E2E) or not (I2E), session, preserved field list.
    pub(crate) clone: Option<(bool, u32, Option<usize>)>,
    /// `resubmit_preserving_field_list`.
    pub(crate) resubmit: Option<Option<usize>>,
    /// `recirculate_preserving_field_list`.
    pub(crate) recirculate: Option<Option<usize>>,
    /// `truncate`: bytes to keep.
    pub(crate) truncate: Option<u32>,
}

/// How one parameter of a registered extern is passed, in P4's order (which is also the order
/// of the BMv2 JSON primitive's parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// An `in bit<W>` of this width (unsigned): [`ExternArg::Value`].
    Bits(u16),
    /// An `in bool`: [`ExternArg::Value`] (1 or 0).
    Bool,
    /// An `out bit<W>` l-value of any width: [`ExternArg::Out`].
    Out,
    /// An `in` value of the type of the call's [`Param::Out`] argument (`random`'s bounds):
    /// [`ExternArg::Value`].
    LikeOut,
    /// The instance a method is called on (P4's receiver, not one of its arguments; BMv2's
    /// primitive names it among its parameters): [`ExternArg::Instance`].
    Instance,
    /// An `in` value of any `bit<W>` (v1model's generic `I`, `T`, `M`: an index, a hash's
    /// base and maximum): [`ExternArg::Value`].
    AnyBits,
    /// An `in` value of any `bit<W>` whose width the extern reads (the checksum
    /// `verify_checksum` compares): [`ExternArg::Sized`].
    Sized,
    /// An `in` compile-time constant from 0 to the given maximum (an enum such as `CloneType`):
    /// [`ExternArg::Value`] of an [`Expr::Const`]. BMv2 passes it in the primitive's name, not
    /// among its parameters: the i-th of [`Signature::bmv2_ops`] gives i.
    Choice(u8),
    /// An `in` `HashAlgorithm` constant: [`ExternArg::Value`] of an [`Expr::Const`] of its
    /// code ([`crate::hash::Algorithm::from_code`]). BMv2 gives it as a calculation's
    /// `algo`, the primitive's parameter naming the calculation.
    Algorithm,
    /// An `in` struct, tuple or list whose fields an extern reads as data, headers' fields
    /// counting only while the header is valid: [`ExternArg::Fields`]. BMv2 gives it as a
    /// calculation's `input`, the primitive's parameter naming the calculation.
    Fields,
    /// A digest's `in T data`, `T` being the call's type argument or the data's type:
    /// [`ExternArg::Digest`]. BMv2 gives it as a learn list, by id.
    Digest,
    /// The `@field_list(n)` index of the user metadata fields to preserve (a constant
    /// `bit<8>`): [`ExternArg::Preserved`]. BMv2 gives a field list id, which it may leave
    /// out ([`ExternArg::Unused`]).
    PreservedIndex,
    /// The l-values whose slots to preserve (the deprecated `clone3`'s, `resubmit`'s and
    /// `recirculate`'s data): [`ExternArg::Preserved`]. BMv2 gives a field list id, as for
    /// [`Param::PreservedIndex`].
    PreservedData,
    /// An `out` l-value of the instance's cell type ([`ir::InstanceKind::cell_width`]; a
    /// register's `read` result): [`ExternArg::Out`].
    CellOut,
    /// An `in` value of the instance's cell type (a register's `write` value):
    /// [`ExternArg::Value`].
    Cell,
    /// A string literal: [`ExternArg::Text`].
    Format,
    /// An optional last `in T data` of a struct, tuple or list of bit fields:
    /// [`ExternArg::Values`] ([`ExternArg::Unused`] when left out).
    Values,
    /// The `inout standard_metadata_t` the extern does not read, which v1model's older form
    /// of the call leaves out (and BMv2's `drop` primitive too): [`ExternArg::Unused`].
    StandardMetadata,
}

/// A constructor parameter of a stateful extern type, in P4's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtorParam {
    /// The number of cells, 1 to 2^32-1: [`CtorArg::Size`]. BMv2's `size`.
    Size,
    /// A `CounterType` (`packets`, `bytes`, `packets_and_bytes`): [`CtorArg::Counter`].
    /// BMv2's JSON has none: its counters count both.
    CounterType,
    /// A `MeterType` (`packets`, `bytes`): [`CtorArg::MeterBytes`]. BMv2's `type`.
    MeterType,
}

pub use crate::ir::CtorArg;

/// A stateful extern type: how its instances are declared, in P4 and in BMv2 JSON, and what
/// their methods are (the registered externs whose [`Signature::of`] it is, and
/// [`Object::inert`]).
#[derive(Clone, Copy, Debug)]
pub struct Object {
    /// Its name in v1model.p4 ([`ir::InstanceKind::type_name`]), which names it uniquely.
    pub p4: &'static str,
    /// What the runtime interface's errors call it (`direct meter`).
    pub noun: &'static str,
    /// The BMv2 JSON array that declares its instances (`counter_arrays` holds a
    /// `counter_array`'s).
    pub bmv2_array: &'static str,
    /// Whether its instances have one cell per entry of the table they are attached to (BMv2's
    /// `is_direct`, its `binding` naming the table), rather than cells the program indexes
    /// (whose index type, from `V1MODEL_VERSION` 20200408 on, is its last type argument).
    pub direct: bool,
    /// Whether its cells hold values of its first type argument, a `bit<W>` of at most 128
    /// bits (a register's; BMv2's `bitwidth`).
    pub cell_type: bool,
    /// Its constructor's parameters.
    pub ctor: &'static [CtorParam],
    /// Its methods whose calls do nothing (a direct counter counts where its table hits, so
    /// its `count` adds nothing).
    pub inert: &'static [&'static str],
    /// What one of its cells takes in the switch's memory, in bytes, for estimates (the
    /// simulator's); 0 for a direct type (its cells are its table's entries').
    pub cell_bytes: u64,
}

impl Object {
    /// The instance of a declaration: its cell width (given for a type with
    /// [`Object::cell_type`] only) and its constructor's arguments, following
    /// [`Object::ctor`]; `None` if they do not.
    pub fn instance(&self, width: Option<u16>, args: Vec<CtorArg>) -> Option<ir::InstanceKind> {
        let follows = args.len() == self.ctor.len()
            && self.ctor.iter().zip(&args).all(|(p, a)| {
                matches!(
                    (p, a),
                    (CtorParam::Size, CtorArg::Size(_))
                        | (CtorParam::CounterType, CtorArg::Counter(_))
                        | (CtorParam::MeterType, CtorArg::MeterBytes(_))
                )
            });
        let object = OBJECTS.iter().position(|o| o.p4 == self.p4)?;
        (follows && width.is_some() == self.cell_type).then_some(ir::InstanceKind::Object {
            object: ir::ObjectId(object as u8),
            width,
            args,
        })
    }
}

impl ir::InstanceKind {
    /// The stateful extern type it is an instance of, if it is one.
    pub fn object(&self) -> Option<&'static Object> {
        match self {
            ir::InstanceKind::Object { object, .. } => OBJECTS.get(usize::from(object.0)).copied(),
            _ => None,
        }
    }

    /// The extern type's name in v1model.p4 (`counter`, `direct_meter`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            ir::InstanceKind::Object { .. } => self.object().map_or("", |o| o.p4),
            ir::InstanceKind::Checksum16 => "Checksum16",
            ir::InstanceKind::ValueSet { .. } => "value_set",
            ir::InstanceKind::ActionProfile { .. } => "action_profile",
            ir::InstanceKind::ActionSelector { .. } => "action_selector",
        }
    }
}

/// What the front end and the BMv2 JSON loader read of a registered extern.
#[derive(Clone, Copy, Debug)]
pub struct Signature {
    /// For a method, the extern type it belongs to; `None` for a function.
    pub of: Option<&'static Object>,
    /// The P4 functions (v1model.p4's) or, with [`Signature::of`], the methods that call it.
    pub names: &'static [&'static str],
    /// The P4 names of its arguments (the receiver has none), for a call that names them;
    /// empty where calls pass them by position only.
    pub arg_names: &'static [&'static str],
    /// The BMv2 JSON primitives (`"op"`) that call it.
    pub bmv2_ops: &'static [&'static str],
    /// Its parameters.
    pub params: &'static [Param],
    /// Where a BMv2 primitive's parameters differ in order from P4's: for each of
    /// [`Signature::params`], the index of the primitive's parameter that gives it. Empty when
    /// they come in P4's order, each parameter but a [`Param::Choice`] taking the next one.
    pub bmv2_params: &'static [u8],
}

impl Signature {
    /// The index of the BMv2 primitive's parameter that gives parameter `i`
    /// ([`Signature::bmv2_params`]).
    pub fn bmv2_param(&self, i: usize) -> usize {
        match self.bmv2_params.get(i) {
            Some(&j) => usize::from(j),
            None => self.params[..i]
                .iter()
                .filter(|p| !matches!(p, Param::Choice(_)))
                .count(),
        }
    }
}

/// What an extern's execution may read and change of the packet's run: the interpreter
/// implements it, and an extern sees nothing else.
pub(crate) trait Machine {
    /// The program running.
    fn program(&self) -> &Program;
    /// Evaluates an argument.
    fn value(&mut self, e: &Expr) -> u128;
    /// Stores into an out argument.
    fn store(&mut self, place: &Place, v: u128);
    /// The packet's slots (its headers and metadata).
    fn slots(&mut self) -> &mut [u128];
    /// The packet's requests of the architecture.
    fn effects(&mut self) -> &mut Effects;
    /// The switch's state.
    fn state(&mut self) -> &mut State;
    /// The switch's clock, in µs.
    fn now_us(&self) -> u64;
    /// The table and entry handle of the last table hit of this run, if any.
    fn last_hit(&self) -> Option<(usize, usize)>;
    /// Sends a line to the packet's trace at BMv2's info level, if it is traced.
    fn trace_info(&mut self, text: &str);
    /// The checksum or hash `algo` (a `HashAlgorithm` code) computes over the fields `data`
    /// (and, with `payload`, over the payload after the parsed headers).
    fn checksum(&mut self, data: &[ir::FieldItem], algo: &Expr, payload: bool) -> u64;
}

impl Param {
    /// Whether a call may leave it out (when it comes last).
    pub fn optional(self) -> bool {
        matches!(self, Param::StandardMetadata | Param::Values)
    }
}

/// One extern: its signature and its execution.
pub(crate) trait Extern: Sync {
    /// Its names and parameters.
    fn signature(&self) -> &'static Signature;
    /// Runs one call whose arguments follow the signature's parameters; `Err` is a parser error
    /// code that rejects the packet.
    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128>;
    /// The checksum verification or update it is, if it is one: the compiled path computes
    /// its field list itself ([`crate::compiled`]) and hands the result to it.
    fn checksum(&self) -> Option<&checksum::Checksum> {
        None
    }
}

/// Every registered extern: an [`ExternId`] is an index into it.
static REGISTRY: &[&dyn Extern] = &[
    &mark_to_drop::MarkToDrop,
    &truncate::Truncate,
    &assert::Assert,
    &random::Random,
    &counter::Count,
    &register::Read,
    &register::Write,
    &meter::Execute,
    &meter::DirectRead,
    &log_msg::LogMsg,
    &hash::Hash,
    &checksum::VERIFY,
    &checksum::VERIFY_WITH_PAYLOAD,
    &checksum::UPDATE,
    &checksum::UPDATE_WITH_PAYLOAD,
    &clone::CLONE,
    &clone::CLONE_PRESERVING_FIELD_LIST,
    &clone::CLONE3,
    &resubmit::RESUBMIT_PRESERVING_FIELD_LIST,
    &resubmit::RESUBMIT,
    &resubmit::RECIRCULATE_PRESERVING_FIELD_LIST,
    &resubmit::RECIRCULATE,
    &digest::Digest,
];

/// Every stateful extern type, in the order the BMv2 JSON loader reads their arrays.
static OBJECTS: &[&Object] = &[
    &register::REGISTER,
    &counter::COUNTER,
    &counter::DIRECT_COUNTER,
    &meter::METER,
    &meter::DIRECT_METER,
];

/// The stateful extern type v1model.p4 calls `p4`, if there is one.
pub fn object(p4: &str) -> Option<&'static Object> {
    OBJECTS.iter().copied().find(|o| o.p4 == p4)
}

/// Every stateful extern type.
pub fn objects() -> &'static [&'static Object] {
    OBJECTS
}

/// The cells of every instance of one indexed stateful extern type, by instance index (none
/// for the program's other instances): a field of `State`, whose type the extern type's file
/// names (`register::Registers`).
#[derive(Clone, Debug)]
pub(crate) struct CellArrays<T> {
    /// Each instance's cells; `None` for an instance of another type.
    cells: Vec<Option<Vec<T>>>,
}

impl<T: Clone> CellArrays<T> {
    /// `init` cells for every instance of `object` in `p`, as many as its size.
    pub(crate) fn new(p: &Program, object: &'static Object, init: T) -> Self {
        let cells = p
            .instances
            .iter()
            .map(|i| {
                let size = i.kind.cells().map_or(0, |n| n as usize);
                (i.kind.type_name() == object.p4).then(|| vec![init.clone(); size])
            })
            .collect();
        CellArrays { cells }
    }
}

impl<T> CellArrays<T> {
    /// The cells of instance `instance`; `None` if it is not of this type.
    pub(crate) fn of(&self, instance: usize) -> Option<&[T]> {
        self.cells.get(instance)?.as_deref()
    }

    /// The cells of instance `instance`, to change; `None` if it is not of this type.
    pub(crate) fn of_mut(&mut self, instance: usize) -> Option<&mut [T]> {
        self.cells.get_mut(instance)?.as_deref_mut()
    }

    /// Cell `index` of instance `instance`, as a packet sees it: none past its size.
    pub(crate) fn get(&self, instance: usize, index: usize) -> Option<&T> {
        self.of(instance)?.get(index)
    }

    /// Cell `index` of instance `instance`, to change: none past its size.
    pub(crate) fn get_mut(&mut self, instance: usize, index: usize) -> Option<&mut T> {
        self.of_mut(instance)?.get_mut(index)
    }
}

/// Which cell of a stateful extern instance, once the runtime interface has checked it: an
/// indexed instance's index (below its size), or the cell of entry `handle` (installed) of
/// `table`, the table a direct instance is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellAt {
    /// Cell `0` of an indexed instance.
    Index(usize),
    /// The cell of an installed entry.
    Entry {
        /// The table the instance is attached to.
        table: usize,
        /// The entry's handle.
        handle: usize,
    },
}

/// The value of one cell of a stateful extern type as the control plane reads and writes it
/// (a counter's [`crate::table::CounterCell`], a register's `u128`, a meter's rates): the
/// runtime interface's cell methods (`Switch::read_cell`, `Switch::write_cell`) are generic
/// over it, and the extern type's file implements it where it keeps the cells, so that a new
/// stateful extern adds no method to the runtime interface.
pub trait Cell: Sized + 'static {
    /// Where its cells are kept (a [`CellStore`] only this crate can make).
    fn store() -> &'static CellStore<Self>;
}

/// Where the cells holding a [`Cell`] type are kept, and which extern types have them.
pub struct CellStore<C> {
    /// The extern types whose cells hold it (at most one indexed, one direct).
    pub(crate) objects: &'static [&'static Object],
    /// The value of cell `at` of an instance (checked to be of one of `objects`); `None` if
    /// the state has no such cell.
    pub(crate) read: fn(&State, usize, CellAt) -> Option<C>,
    /// Sets cell `at` of an instance at a time in µs; `None` if the state has no such cell.
    pub(crate) write: fn(&mut State, usize, CellAt, C, u64) -> Option<()>,
}

/// The extern of an id.
pub(crate) fn get(id: ExternId) -> &'static dyn Extern {
    REGISTRY[usize::from(id.0)]
}

fn find(pick: impl Fn(&Signature) -> bool) -> Option<ExternId> {
    REGISTRY
        .iter()
        .position(|e| pick(e.signature()))
        .map(|i| ExternId(i as u16))
}

/// The registered extern P4 calls `name` (a function of v1model.p4's), if there is one.
pub fn by_name(name: &str) -> Option<ExternId> {
    find(|s| s.of.is_none() && s.names.contains(&name))
}

/// The registered method `name` of the extern type `of` (v1model.p4's), if there is one.
pub fn by_method(of: &str, name: &str) -> Option<ExternId> {
    find(|s| s.of.is_some_and(|o| o.p4 == of) && s.names.contains(&name))
}

/// The registered extern BMv2 JSON's primitive `op` calls, if there is one.
pub fn by_bmv2_op(op: &str) -> Option<ExternId> {
    find(|s| s.bmv2_ops.contains(&op))
}

/// The signature of a registered extern.
pub fn signature(id: ExternId) -> &'static Signature {
    get(id).signature()
}

/// The value of an [`ExternArg::Value`] argument (0 for another kind, which a signature's
/// [`Param`] rules out).
pub(crate) fn value(m: &mut dyn Machine, arg: &ExternArg) -> u128 {
    match arg {
        ExternArg::Value(e) => m.value(e),
        _ => 0,
    }
}

/// The instance of an [`ExternArg::Instance`] argument (`None` for another kind, which a
/// signature's [`Param`] rules out).
pub(crate) fn instance(arg: &ExternArg) -> Option<usize> {
    match arg {
        ExternArg::Instance(i) => Some(*i),
        _ => None,
    }
}

/// The field list of an [`ExternArg::Preserved`] argument (`None` for another kind, such as
/// the [`ExternArg::Unused`] of a BMv2 primitive that left it out).
pub(crate) fn preserved(arg: Option<&ExternArg>) -> Option<usize> {
    match arg {
        Some(ExternArg::Preserved(id)) => Some(*id),
        _ => None,
    }
}

/// The fields of an [`ExternArg::Fields`] argument (none for another kind, which a
/// signature's [`Param`] rules out).
pub(crate) fn fields(arg: &ExternArg) -> &[ir::FieldItem] {
    match arg {
        ExternArg::Fields(f) => f,
        _ => &[],
    }
}

/// The expression of an [`ExternArg::Value`] argument (the constant 0 for another kind, which
/// a signature's [`Param`] rules out).
pub(crate) fn expr(arg: &ExternArg) -> &Expr {
    match arg {
        ExternArg::Value(e) => e,
        _ => &Expr::Const(0),
    }
}

/// Stores `v`, cut to its width, into an [`ExternArg::Out`] argument.
pub(crate) fn store(m: &mut dyn Machine, arg: &ExternArg, v: u128) {
    if let ExternArg::Out(place, width) = arg {
        m.store(place, v & ir::mask(*width));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ops_name_one_extern_each() {
        let mut names = std::collections::BTreeSet::new();
        let mut ops = std::collections::BTreeSet::new();
        for e in REGISTRY {
            let s = e.signature();
            let of = s.of.map(|o| o.p4);
            for n in s.names {
                assert!(names.insert((of, *n)), "two externs are called {n}");
            }
            for o in s.bmv2_ops {
                assert!(ops.insert(*o), "two externs lower BMv2's {o}");
            }
        }
        assert_eq!(by_name("random"), by_bmv2_op("modify_field_rng_uniform"));
        assert_eq!(by_name("nothing"), None);
        assert_eq!(by_name("count"), None, "a method is no function");
        assert_eq!(by_method("counter", "count"), by_bmv2_op("count"));
    }

    #[test]
    fn an_object_makes_the_instance_its_data_describe() {
        for o in OBJECTS {
            let args: Vec<CtorArg> = o
                .ctor
                .iter()
                .map(|p| match p {
                    CtorParam::Size => CtorArg::Size(7),
                    CtorParam::CounterType => CtorArg::Counter(ir::CounterKind::Bytes),
                    CtorParam::MeterType => CtorArg::MeterBytes(true),
                })
                .collect();
            let width = o.cell_type.then_some(12);
            let kind = o
                .instance(width, args.clone())
                .expect("its own constructor");
            assert_eq!(kind.type_name(), o.p4);
            assert_eq!(kind.object().map(|x| x.p4), Some(o.p4));
            assert_eq!(kind.cells(), (!o.direct).then_some(7), "{}", o.p4);
            assert_eq!(kind.cell_width(), width, "{}", o.p4);
            assert_eq!(
                o.instance(width, args[1..].to_vec()),
                None,
                "{}: one argument short",
                o.p4
            );
            let other_width = (!o.cell_type).then_some(12);
            assert_eq!(o.instance(other_width, args), None, "{}: width", o.p4);
            assert_eq!(object(o.p4).map(|x| x.p4), Some(o.p4));
        }
        for e in REGISTRY {
            if let Some(of) = e.signature().of {
                assert!(
                    object(of.p4).is_some(),
                    "{}'s type is not in OBJECTS",
                    of.p4
                );
                for m in e.signature().names {
                    assert!(
                        !of.inert.contains(m),
                        "{}.{m} is registered and inert",
                        of.p4
                    );
                }
            }
        }
        assert_eq!(
            object("direct_counter").map(|o| o.inert),
            Some(&["count"][..])
        );
    }

    #[test]
    fn bmv2_parameters_follow_p4s_order_unless_a_signature_says_otherwise() {
        // clone_preserving_field_list(type, session, index): BMv2 names the type in its op.
        let clone = by_bmv2_op("clone_egress_pkt_to_egress").map(signature);
        let clone = clone.expect("clone is registered");
        assert!(clone.names.contains(&"clone_preserving_field_list"));
        assert_eq!(clone.params[0], Param::Choice(1));
        assert_eq!(clone.bmv2_ops[1], "clone_egress_pkt_to_egress", "E2E is 1");
        assert_eq!(
            (0..3).map(|i| clone.bmv2_param(i)).collect::<Vec<_>>(),
            [0, 0, 1]
        );
        // hash(result, algo, base, data, max) from (result, base, calculation, max).
        let hash = by_name("hash").map(signature).expect("hash is registered");
        assert_eq!(
            (0..5).map(|i| hash.bmv2_param(i)).collect::<Vec<_>>(),
            [0, 2, 1, 2, 3]
        );
        for e in REGISTRY {
            let s = e.signature();
            assert!(
                s.bmv2_params.is_empty() || s.bmv2_params.len() == s.params.len(),
                "{:?}: one BMv2 position per parameter",
                s.names
            );
        }
    }
}
