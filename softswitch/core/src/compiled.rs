//! The compiled execution path: the IR of a loaded program lowered once, at load, into a tree
//! of closures that run one packet's blocks without matching on IR node kinds where it can.
//!
//! **Unit of compilation.** A block: each of the five controls (verify checksum, ingress,
//! egress, compute checksum, deparser), the parser and each sub-parser (their states'
//! statements; the state machine and its `select`s stay the interpreter's), and each action or
//! function body (which tables and calls run). A block either compiles whole or runs
//! interpreted: [`compile`] gives every block that does not compile a [`Fallback`] naming
//! why, which the switch lists ([`crate::switch::Switch::compile_fallbacks`]) and the device's
//! engine logs when it loads the program. Compiled and interpreted blocks call each
//! other freely: both run over the same [`Exec`] (slots, cursor, state, trace, loop budget).
//!
//! **Pre-resolved.** Every statement and expression node becomes a closure that holds its
//! operands as they are needed: slot indices as `usize` (the IR already resolved names to
//! slots), constants, masks computed from widths, the operator picked (an `Arith` node becomes
//! the closure of its operator, its mask folded in), children as closures or, for constants
//! and slot loads, inline operands ([`Operand`]) read without a call. Table applies hold the
//! table's index, calls the body's index, which runs compiled.
//!
//! **Packet I/O pre-resolved** ([`packet`]): `extract` of a header at a fixed slot and `emit`
//! of headers, whose fields are all of fixed width, become precomputed words of fields read
//! and written a word at a time; a checksum extern's call (`verify_checksum`,
//! `update_checksum` and their `_with_payload` forms) has its condition, field list and
//! algorithm compiled, and hands the checksum to the extern's own ending.
//!
//! **Still dispatched to the interpreter's own code** (so that their semantics stay in one
//! place, `interp`): table lookups and the action a table runs (`Exec::apply`, which runs the
//! action's compiled body), calls of the other externs (their arguments stay IR, evaluated by
//! the interpreter through [`crate::externs::Machine`]), `extract` into a header stack or of a
//! header with a `varbit` field, `emit` of such a header, `advance`, `verify`,
//! stack shifts, sub-parser calls, the rare expressions (`lookahead`, a header-stack element
//! picked at run time, `varbit` equality, `Checksum16`) and the block-copy statement. The
//! control flow shared by both paths (a statement sequence with its loop budget and aborts, an
//! `if`'s branch and trace, `switch` cases, calls with copy-in/copy-out, loops) is the
//! interpreter's generic code, given compiled pieces.
//!
//! **Limits.** A program is untrusted input. The compiled form takes memory linear in the
//! IR's size, which the loaders bound: each IR node becomes at most one closure, or is copied
//! once into a closure that hands it to the interpreter (an extern call's arguments, a
//! [`Place`] other than a slot, the rare expressions and statements above); an `extract` or
//! `emit` holds its headers' slots and a shared reference to the words of each header's
//! layout, packed once per program and layout, so that their memory is bounded by the
//! layouts, which the loaders bound, and not by how often a program extracts or emits a wide
//! header. A block is not
//! compiled when it has more than [`MAX_BLOCK_NODES`] nodes counted as the compiler meets
//! them — one per statement, expression and place it turns into code, one for a subtree it
//! copies whole, however large — and runs interpreted, with that reason. The limit is a
//! knob (a test forces fallbacks with a small one), not what bounds memory: the IR's limits
//! do. Compiling recurses as deep as running does, which the loaders bound
//! ([`crate::ir::RunDepth`]).

use crate::externs;
use crate::interp::{Exec, Flow};
use crate::ir::{
    mask, sign_extend, ArithOp, CompareOp, Expr, ExternCall, ParserIr, Place, Program, Stmt,
};
use crate::ops;

mod packet;

/// IR nodes at most in one compiled block, counted as [`compile`] meets them (see the
/// module's "Limits").
pub const MAX_BLOCK_NODES: usize = 1 << 16;

/// A compiled expression.
type ExprFn = Box<dyn Fn(&mut Exec<'_>) -> u128 + Send + Sync>;
/// A compiled statement.
type StmtFn = Box<dyn Fn(&mut Exec<'_>) -> Flow + Send + Sync>;

/// The compiled cases of a `switch`: their labels and bodies.
type Cases<K> = Vec<(Vec<K>, Block)>;

/// Why a block was not compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// The block has more IR nodes than [`MAX_BLOCK_NODES`].
    #[error("more than {limit} IR nodes")]
    TooLarge {
        /// The limit it passed.
        limit: usize,
    },
}

/// A block that runs interpreted, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The block: `control MyIngress`, `parser` (the program's), `sub-parser 0` (by its index
    /// among the sub-parsers), `body MyIngress.forward`.
    pub block: String,
    /// Why it was not compiled.
    pub reason: Unsupported,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs interpreted, not compiled: {}",
            self.block, self.reason
        )
    }
}

/// A compiled statement sequence.
pub(crate) struct Block(Vec<StmtFn>);

impl Block {
    /// Runs it over `x`, as the interpreter runs the statements it came from.
    #[inline]
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        x.run_with(&self.0, |x, s| s(x))
    }
}

/// A compiled parser: its initialization and each state's statements.
pub(crate) struct CompiledParser {
    init: Block,
    states: Vec<Block>,
}

impl CompiledParser {
    /// Its initialization.
    pub(crate) fn init(&self) -> &Block {
        &self.init
    }

    /// The statements of state `i`.
    pub(crate) fn state(&self, i: usize) -> &Block {
        &self.states[i]
    }
}

/// The compiled form of a program: each block compiled, or `None` where it runs interpreted.
pub struct CompiledProgram {
    controls: [Option<Block>; 5],
    bodies: Vec<Option<Block>>,
    parser: Option<CompiledParser>,
    subparsers: Vec<Option<CompiledParser>>,
    fallbacks: Vec<Fallback>,
    /// The limit its blocks were compiled within.
    max_block_nodes: usize,
}

impl std::fmt::Debug for CompiledProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledProgram")
            .field("fallbacks", &self.fallbacks)
            .finish_non_exhaustive()
    }
}

impl CompiledProgram {
    /// The blocks that run interpreted, with why.
    pub fn fallbacks(&self) -> &[Fallback] {
        &self.fallbacks
    }

    /// The limit of IR nodes its blocks were compiled within.
    pub fn max_block_nodes(&self) -> usize {
        self.max_block_nodes
    }

    /// Control `block` ([`crate::ir::block`]), if compiled.
    pub(crate) fn control(&self, block: usize) -> Option<&Block> {
        self.controls[block].as_ref()
    }

    /// Body `body`, if compiled.
    pub(crate) fn body(&self, body: usize) -> Option<&Block> {
        self.bodies.get(body)?.as_ref()
    }

    /// The parser, if compiled.
    pub(crate) fn parser(&self) -> Option<&CompiledParser> {
        self.parser.as_ref()
    }

    /// Sub-parser `i`, if compiled.
    pub(crate) fn subparser(&self, i: usize) -> Option<&CompiledParser> {
        self.subparsers.get(i)?.as_ref()
    }
}

/// Compiles every block of `prog` that has at most `max_nodes` IR nodes
/// ([`MAX_BLOCK_NODES`] is the switch's limit).
pub fn compile(prog: &Program, max_nodes: usize) -> CompiledProgram {
    let layouts = packet::Layouts::new(prog);
    let mut fallbacks = Vec::new();
    let controls = std::array::from_fn(|i| {
        let c = &prog.controls[i];
        keep(
            &mut fallbacks,
            format!("control {}", c.name),
            compile_block(prog, &layouts, &[c.body.as_slice()], max_nodes).map(|mut b| b.remove(0)),
        )
    });
    let bodies = prog
        .bodies
        .iter()
        .map(|b| {
            keep(
                &mut fallbacks,
                format!("body {}", b.name),
                compile_block(prog, &layouts, &[b.stmts.as_slice()], max_nodes)
                    .map(|mut b| b.remove(0)),
            )
        })
        .collect();
    let parser = keep(
        &mut fallbacks,
        "parser".to_string(),
        compile_parser(prog, &layouts, &prog.parser, max_nodes),
    );
    let subparsers = prog
        .subparsers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            keep(
                &mut fallbacks,
                format!("sub-parser {i}"),
                compile_parser(prog, &layouts, p, max_nodes),
            )
        })
        .collect();
    CompiledProgram {
        controls,
        bodies,
        parser,
        subparsers,
        fallbacks,
        max_block_nodes: max_nodes,
    }
}

/// A block compiled, or `None` with its fallback added to `fallbacks`.
fn keep<B>(fallbacks: &mut Vec<Fallback>, block: String, r: Result<B, Unsupported>) -> Option<B> {
    r.map_err(|reason| fallbacks.push(Fallback { block, reason }))
        .ok()
}

fn compile_parser(
    prog: &Program,
    layouts: &packet::Layouts,
    p: &ParserIr,
    max_nodes: usize,
) -> Result<CompiledParser, Unsupported> {
    let parts: Vec<&[Stmt]> = std::iter::once(p.init.as_slice())
        .chain(p.states.iter().map(|s| s.stmts.as_slice()))
        .collect();
    let mut blocks = compile_block(prog, layouts, &parts, max_nodes)?.into_iter();
    let init = blocks.next().unwrap_or(Block(Vec::new()));
    Ok(CompiledParser {
        init,
        states: blocks.collect(),
    })
}

/// Compiles the statement lists of one block, within `max_nodes` nodes together.
fn compile_block(
    prog: &Program,
    layouts: &packet::Layouts,
    parts: &[&[Stmt]],
    max_nodes: usize,
) -> Result<Vec<Block>, Unsupported> {
    let mut c = Compiler {
        prog,
        layouts,
        nodes: 0,
        max_nodes,
    };
    parts.iter().map(|stmts| c.block(stmts)).collect()
}

/// A constant, a slot or a compiled expression: what an operator reads, constants and slots
/// without a call.
enum Operand {
    Const(u128),
    Slot(usize),
    Expr(ExprFn),
}

impl Operand {
    #[inline(always)]
    fn get(&self, x: &mut Exec<'_>) -> u128 {
        match self {
            Operand::Const(v) => *v,
            Operand::Slot(s) => x.slots[*s],
            Operand::Expr(f) => f(x),
        }
    }
}

/// Compiles one block of `prog`, counting its nodes.
struct Compiler<'p> {
    prog: &'p Program,
    /// The program's header layouts packed, shared by every block.
    layouts: &'p packet::Layouts,
    nodes: usize,
    max_nodes: usize,
}

impl Compiler<'_> {
    /// Counts a node against the block's limit.
    fn node(&mut self) -> Result<(), Unsupported> {
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            return Err(Unsupported::TooLarge {
                limit: self.max_nodes,
            });
        }
        Ok(())
    }

    fn block(&mut self, stmts: &[Stmt]) -> Result<Block, Unsupported> {
        stmts
            .iter()
            .map(|s| self.stmt(s))
            .collect::<Result<_, _>>()
            .map(Block)
    }

    fn stmt(&mut self, s: &Stmt) -> Result<StmtFn, Unsupported> {
        self.node()?;
        Ok(match s {
            Stmt::Assign(place, e) => self.assign(place, e)?,
            &Stmt::Copy { dst, src, len } => {
                let (d, s, n) = (dst as usize, src as usize, len as usize);
                Box::new(move |x| {
                    x.slots.copy_within(s..s + n, d);
                    Flow::Next
                })
            }
            &Stmt::Zero { start, len } => {
                let (s, n) = (start as usize, len as usize);
                Box::new(move |x| {
                    x.slots[s..s + n].fill(0);
                    Flow::Next
                })
            }
            Stmt::If(c, t, e, cond) => {
                let (c, t, e, cond) = (self.operand(c)?, self.block(t)?, self.block(e)?, *cond);
                Box::new(move |x| {
                    let v = c.get(x);
                    match x.branch(v, cond) {
                        Some(true) => t.run(x),
                        Some(false) => e.run(x),
                        None => Flow::Next,
                    }
                })
            }
            Stmt::Switch { on, cases, default } => {
                let on = self.operand(on)?;
                let (cases, default) = self.cases(cases, default)?;
                Box::new(move |x| {
                    let v = on.get(x);
                    x.run_case(v, &cases, &default, |x, b| b.run(x))
                })
            }
            Stmt::SwitchAction {
                table,
                cases,
                default,
            } => {
                let table = *table;
                let (cases, default) = self.cases(cases, default)?;
                Box::new(move |x| {
                    let (_, action) = x.apply(table);
                    x.run_case(action, &cases, &default, |x, b| b.run(x))
                })
            }
            &Stmt::Apply(t) => Box::new(move |x| {
                x.apply(t);
                Flow::Next
            }),
            Stmt::Invoke(inv) => {
                let (copy_in, copy_out) = (self.block(&inv.copy_in)?, self.block(&inv.copy_out)?);
                let body = inv.body;
                Box::new(move |x| x.invoke_with(body, |x| copy_in.run(x), |x| copy_out.run(x)))
            }
            Stmt::Extern(call) => self.extern_call(call)?,
            Stmt::Exit => Box::new(|_| Flow::Exit),
            Stmt::Return => Box::new(|_| Flow::Return),
            Stmt::Break => Box::new(|_| Flow::Break),
            Stmt::Continue => Box::new(|_| Flow::Continue),
            Stmt::Loop { cond, body, update } => {
                let (cond, body, update) =
                    (self.operand(cond)?, self.block(body)?, self.block(update)?);
                Box::new(move |x| {
                    x.run_loop_with(|x| cond.get(x), |x| body.run(x), |x| update.run(x))
                })
            }
            Stmt::CopyBlock { .. } => self.interpreted(s)?,
        })
    }

    /// A statement the interpreter runs (one node against the limit, however large).
    fn interpreted(&mut self, s: &Stmt) -> Result<StmtFn, Unsupported> {
        let s = s.clone();
        Ok(Box::new(move |x| x.stmt(&s)))
    }

    fn cases<K: Clone>(
        &mut self,
        cases: &[(Vec<K>, Vec<Stmt>)],
        default: &[Stmt],
    ) -> Result<(Cases<K>, Block), Unsupported> {
        let cases = cases
            .iter()
            .map(|(labels, body)| Ok((labels.clone(), self.block(body)?)))
            .collect::<Result<_, Unsupported>>()?;
        Ok((cases, self.block(default)?))
    }

    /// A call compiled with its arguments resolved ([`packet`]) where it can be, else handed
    /// to the interpreter.
    fn extern_call(&mut self, call: &ExternCall) -> Result<StmtFn, Unsupported> {
        self.node()?;
        let compiled = match call {
            ExternCall::Extract {
                target,
                varbit: None,
            } => self.extract(target),
            ExternCall::Emit(items) => self.emit(items),
            ExternCall::Call { ext, args } => match externs::get(*ext).checksum() {
                Some(checksum) => self.checksum(checksum, args)?,
                None => None,
            },
            _ => None,
        };
        Ok(compiled.unwrap_or_else(|| {
            let call = call.clone();
            Box::new(move |x| x.extern_call(&call))
        }))
    }

    fn assign(&mut self, place: &Place, e: &Expr) -> Result<StmtFn, Unsupported> {
        let value = self.operand(e)?;
        Ok(match (place, value) {
            (&Place::Slot(d), Operand::Const(v)) => {
                let d = d as usize;
                Box::new(move |x| {
                    x.slots[d] = v;
                    Flow::Next
                })
            }
            (&Place::Slot(d), Operand::Slot(s)) => {
                let d = d as usize;
                Box::new(move |x| {
                    x.slots[d] = x.slots[s];
                    Flow::Next
                })
            }
            (&Place::Slot(d), Operand::Expr(f)) => {
                let d = d as usize;
                Box::new(move |x| {
                    let v = f(x);
                    x.slots[d] = v;
                    Flow::Next
                })
            }
            (place, value) => {
                self.node()?;
                let place = place.clone();
                Box::new(move |x| {
                    let v = value.get(x);
                    x.store(&place, v);
                    Flow::Next
                })
            }
        })
    }

    /// Compiles an expression into what reads it best: constants and slot loads as they
    /// are, every other expression as a closure.
    fn operand(&mut self, e: &Expr) -> Result<Operand, Unsupported> {
        self.node()?;
        let f: ExprFn = match e {
            &Expr::Const(v) => return Ok(Operand::Const(v)),
            &Expr::Load(s) => return Ok(Operand::Slot(s as usize)),
            // The common arithmetic operators inline (with the mask `ops::binop` applies),
            // the others through `ops::binop`.
            &Expr::Arith {
                op,
                width,
                signed,
                ref a,
                ref b,
            } => {
                let m = mask(width);
                match op {
                    ArithOp::Add => self.binary(a, b, move |x, y| x.wrapping_add(y) & m)?,
                    ArithOp::Sub => self.binary(a, b, move |x, y| x.wrapping_sub(y) & m)?,
                    ArithOp::BitAnd => self.binary(a, b, move |x, y| x & y & m)?,
                    ArithOp::BitOr => self.binary(a, b, move |x, y| (x | y) & m)?,
                    ArithOp::BitXor => self.binary(a, b, move |x, y| (x ^ y) & m)?,
                    _ => self.binary(a, b, move |x, y| ops::binop(op, width, signed, x, y))?,
                }
            }
            // Equality inline (under the mask: the same for signed values), the other
            // comparisons through `ops::compare`.
            &Expr::Compare {
                op,
                width,
                signed,
                ref a,
                ref b,
            } => {
                let m = mask(width);
                match op {
                    CompareOp::Eq => self.binary(a, b, move |x, y| u128::from((x ^ y) & m == 0))?,
                    CompareOp::Ne => self.binary(a, b, move |x, y| u128::from((x ^ y) & m != 0))?,
                    _ => self.binary(a, b, move |x, y| {
                        u128::from(ops::compare(op, width, signed, x, y))
                    })?,
                }
            }
            &Expr::Concat {
                ref a,
                ref b,
                b_width,
            } => {
                if b_width >= 128 {
                    self.binary(a, b, |_, y| y)?
                } else {
                    self.binary(a, b, move |x, y| (x << b_width) | y)?
                }
            }
            Expr::Slice { arg, lo, width } => {
                let (a, lo, m) = (self.operand(arg)?, *lo, mask(*width));
                Box::new(move |x| (a.get(x) >> lo) & m)
            }
            Expr::SignExtend { arg, from, to } => {
                let (a, from, m) = (self.operand(arg)?, *from, mask(*to));
                Box::new(move |x| sign_extend(a.get(x), from) as u128 & m)
            }
            Expr::Truncate { arg, width } => {
                let (a, m) = (self.operand(arg)?, mask(*width));
                Box::new(move |x| a.get(x) & m)
            }
            Expr::Not(arg) => {
                let a = self.operand(arg)?;
                Box::new(move |x| u128::from(a.get(x) == 0))
            }
            Expr::Complement { arg, width } => {
                let (a, m) = (self.operand(arg)?, mask(*width));
                Box::new(move |x| !a.get(x) & m)
            }
            Expr::Negate { arg, width } => {
                let (a, m) = (self.operand(arg)?, mask(*width));
                Box::new(move |x| a.get(x).wrapping_neg() & m)
            }
            Expr::And(a, b) => {
                let (a, b) = (self.operand(a)?, self.operand(b)?);
                Box::new(move |x| u128::from(a.get(x) != 0 && b.get(x) != 0))
            }
            Expr::Or(a, b) => {
                let (a, b) = (self.operand(a)?, self.operand(b)?);
                Box::new(move |x| u128::from(a.get(x) != 0 || b.get(x) != 0))
            }
            Expr::Cond(c, a, b) => {
                let (c, a, b) = (self.operand(c)?, self.operand(a)?, self.operand(b)?);
                Box::new(move |x| if c.get(x) != 0 { a.get(x) } else { b.get(x) })
            }
            &Expr::TableHit { table, miss } => {
                Box::new(move |x| u128::from(x.apply(table).0 != miss))
            }
            Expr::Invoke(inv) => {
                let (copy_in, copy_out) = (self.block(&inv.copy_in)?, self.block(&inv.copy_out)?);
                let (body, ret) = (inv.body, inv.ret);
                Box::new(move |x| {
                    let f = x.invoke_with(body, |x| copy_in.run(x), |x| copy_out.run(x));
                    x.called_value(f, ret)
                })
            }
            Expr::LoadDyn(_)
            | Expr::RangeEq { .. }
            | Expr::Lookahead { .. }
            | Expr::PacketLength
            | Expr::Checksum16(_) => {
                let e = e.clone();
                Box::new(move |x| x.eval(&e))
            }
        };
        Ok(Operand::Expr(f))
    }

    /// A node of two operands, evaluated in order, combined by `f`.
    fn binary(
        &mut self,
        a: &Expr,
        b: &Expr,
        f: impl Fn(u128, u128) -> u128 + Send + Sync + 'static,
    ) -> Result<ExprFn, Unsupported> {
        let (a, b) = (self.operand(a)?, self.operand(b)?);
        Ok(Box::new(move |x| {
            let va = a.get(x);
            f(va, b.get(x))
        }))
    }
}
