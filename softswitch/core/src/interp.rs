//! The interpreter: runs lowered statements and expressions of one packet over its slots.
//! Parser errors, `exit` and `return` travel as a [`Flow`].

use crate::bits::{read_bits, BitWriter};
use crate::compiled::{CompiledParser, CompiledProgram};
use crate::externs::{self, Effects, Machine};
use crate::hash::{self, Algorithm};
use crate::ir::{
    self, mask, sign_extend, varbit_chunk_width, CaseKeyset, DynSlot, EmitItem, Expr, ExternCall,
    FieldItem, FieldLayout, HeaderRef, Place, Program, Slot, Stmt, Target, Transition,
};
use crate::ops;
use crate::state::State;
use crate::table::ActionRef;
use crate::trace::{self, block_name, trace_line, Level, PacketTrace};

/// How a statement list ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// It ran to its end.
    Next,
    /// `exit`.
    Exit,
    /// `return`.
    Return,
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// A parser error with its code.
    Reject(u128),
}

/// The run of one packet through one block.
pub struct Exec<'a> {
    prog: &'a Program,
    /// The compiled form of the program's blocks, when the switch runs it compiled: a block
    /// it holds runs compiled, every other one here.
    compiled: Option<&'a CompiledProgram>,
    state: &'a mut State,
    /// The packet's slots.
    pub slots: &'a mut [u128],
    data: &'a [u8],
    /// Parser cursor, in bits into `data`.
    pub cursor: usize,
    /// Architecture requests.
    pub effects: &'a mut Effects,
    now_us: u64,
    abort: Option<Flow>,
    out: Option<BitWriter>,
    /// The table and entry of the last hit, for `direct_meter.read`.
    last_hit: Option<(usize, usize)>,
    /// Loop work this run may still do (from [`ir::MAX_LOOP_WORK`]).
    loop_budget: usize,
    /// How many loops enclose the statement running.
    loops: usize,
    /// Whether the log has the note that the loop budget is spent.
    loop_limit_noted: bool,
    /// Where this packet's trace lines go, when the switch traces packets.
    pub(crate) trace: Option<PacketTrace<'a>>,
}

const PARSER_STEP_LIMIT: usize = 100_000;

impl Machine for Exec<'_> {
    fn program(&self) -> &Program {
        self.prog
    }

    fn value(&mut self, e: &Expr) -> u128 {
        self.val(e)
    }

    fn store(&mut self, place: &Place, v: u128) {
        Exec::store(self, place, v);
    }

    fn slots(&mut self) -> &mut [u128] {
        self.slots
    }

    fn effects(&mut self) -> &mut Effects {
        self.effects
    }

    fn state(&mut self) -> &mut State {
        self.state
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn last_hit(&self) -> Option<(usize, usize)> {
        self.last_hit
    }

    fn trace_info(&mut self, text: &str) {
        trace_line!(self.trace, Level::Info, "{}", trace::Printable(text));
    }

    fn checksum(&mut self, data: &[FieldItem], algo: &Expr, payload: bool) -> u64 {
        self.checksum_with(
            |x, w| x.write_fields(w, data),
            payload,
            |x| Algorithm::from_code(x.val(algo)).unwrap_or(Algorithm::Csum16),
        )
    }
}

impl<'a> Exec<'a> {
    /// A run over `slots` of the packet `data` (whose unparsed part starts at `cursor` bits).
    pub fn new(
        prog: &'a Program,
        state: &'a mut State,
        slots: &'a mut [u128],
        data: &'a [u8],
        cursor: usize,
        effects: &'a mut Effects,
        now_us: u64,
    ) -> Self {
        Exec {
            prog,
            compiled: None,
            state,
            slots,
            data,
            cursor,
            effects,
            now_us,
            abort: None,
            out: None,
            last_hit: None,
            loop_budget: ir::MAX_LOOP_WORK,
            loops: 0,
            loop_limit_noted: false,
            trace: None,
        }
    }

    /// The packet's bytes.
    pub(crate) fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The checksum or hash of the bytes `write` writes (its fields, zero-padded to whole
    /// bytes) followed, with `payload`, by the payload after the parsed headers, by the
    /// algorithm `algo` picks once they are written. The bytes go into the state's reusable
    /// buffer.
    pub(crate) fn checksum_with(
        &mut self,
        write: impl FnOnce(&mut Self, &mut BitWriter),
        payload: bool,
        algo: impl FnOnce(&mut Self) -> Algorithm,
    ) -> u64 {
        let mut w = BitWriter::reusing(std::mem::take(&mut self.state.field_buffer));
        write(self, &mut w);
        let mut bytes = w.into_bytes();
        if payload {
            bytes.extend_from_slice(self.payload());
        }
        let algo = algo(self);
        let h = hash::compute(algo, &bytes, &mut || self.state.random());
        self.state.field_buffer = bytes;
        h
    }

    /// Runs `emit` with the deparser's output, when the deparser runs (nothing otherwise: an
    /// `emit` elsewhere does nothing).
    #[inline]
    pub(crate) fn emit_with(&mut self, emit: impl FnOnce(&mut Self, &mut BitWriter)) {
        if let Some(mut out) = self.out.take() {
            emit(self, &mut out);
            self.out = Some(out);
        }
    }

    /// Traces `verb` (`Extracting`, `Deparsing`) of the header whose validity slot is `base`.
    #[cold]
    #[inline(never)]
    pub(crate) fn trace_header(&mut self, verb: &str, base: Slot) {
        if let Some(t) = &mut self.trace {
            let name = trace::Printable(trace::header_name(self.prog, base));
            t.line(Level::Debug, format_args!("{verb} header '{name}'"));
        }
    }

    /// Runs the blocks `compiled` holds compiled.
    pub(crate) fn with_compiled(mut self, compiled: Option<&'a CompiledProgram>) -> Self {
        self.compiled = compiled;
        self
    }

    fn error_code(&self, name: &str) -> u128 {
        self.prog.error_code(name)
    }

    /// Runs the parser; `Err(code)` on a parser error (the headers extracted so far stay valid).
    pub fn parse(&mut self) -> Result<(), u128> {
        let parser = block_name::PARSER;
        trace_line!(self.trace, Level::Debug, "Parser '{parser}': start");
        let compiled = self.compiled.and_then(|c| c.parser());
        let result = self.run_parser(&self.prog.parser, compiled);
        if let Some(t) = &mut self.trace {
            trace_parsed(t, self.prog, result);
        }
        result
    }

    /// Runs a parser's state machine from `start` to `accept` (`Ok`) or an error (`Err`), its
    /// statements compiled if `compiled` is given; the transitions run here either way.
    fn run_parser(
        &mut self,
        p: &'a ir::ParserIr,
        compiled: Option<&'a CompiledParser>,
    ) -> Result<(), u128> {
        match compiled {
            Some(c) => {
                self.state.compiled_block_runs += 1;
                c.init().run(self)
            }
            None => self.run(&p.init),
        };
        let mut state = 0;
        for _ in 0..PARSER_STEP_LIMIT {
            let s = &p.states[state];
            trace_line!(
                self.trace,
                Level::Debug,
                "Parser '{}' entering state '{}'",
                block_name::PARSER,
                s.name
            );
            let flow = match compiled {
                Some(c) => c.state(state).run(self),
                None => self.run(&s.stmts),
            };
            if let Flow::Reject(code) = flow {
                return Err(code);
            }
            let target = match &s.transition {
                Transition::Goto(t) => {
                    trace_line!(
                        self.trace,
                        Level::Debug,
                        "Parser state '{}' has no switch, going to default next state",
                        s.name
                    );
                    *t
                }
                Transition::Select {
                    keys,
                    widths,
                    cases,
                } => {
                    let mut values = std::mem::take(&mut self.state.key_buffer);
                    values.clear();
                    for k in keys {
                        let v = self.val(k);
                        values.push(v);
                    }
                    if let Some(t) = &mut self.trace {
                        trace_select(t, &s.name, &values, widths);
                    }
                    let state = &*self.state;
                    let found = cases
                        .iter()
                        .find(|(keyset, _)| match keyset {
                            CaseKeyset::Fields(ms) => {
                                ms.iter().zip(&values).all(|(m, &v)| m.matches(v))
                            }
                            CaseKeyset::ValueSet(i) => values.last().is_some_and(|&v| {
                                state.value_sets[*i].iter().any(|m| m.matches(v))
                            }),
                        })
                        .map(|(_, t)| *t);
                    self.state.key_buffer = values;
                    if let Some(Flow::Reject(code)) = self.abort.take() {
                        return Err(code);
                    }
                    match found {
                        Some(t) => t,
                        None => return Err(self.error_code("NoMatch")),
                    }
                }
            };
            trace_line!(
                self.trace,
                Level::Trace,
                "Bytes parsed: {}",
                self.cursor / 8
            );
            match target {
                Target::State(i) => state = i,
                Target::Accept => return Ok(()),
                Target::Reject => return Err(0),
            }
        }
        Err(self.error_code("ParserTimeout"))
    }

    /// Runs a control's body.
    pub fn control(&mut self, block: usize) {
        if let Some(t) = &mut self.trace {
            trace_pipeline(t, block, "start");
        }
        match self.compiled.and_then(|c| c.control(block)) {
            Some(body) => {
                self.state.compiled_block_runs += 1;
                body.run(self)
            }
            None => self.run(&self.prog.controls[block].body),
        };
        if let Some(t) = &mut self.trace {
            trace_pipeline(t, block, "end");
        }
    }

    /// Runs the deparser, writing into `buffer` (emptied first, its allocation reused); returns
    /// the emitted headers.
    pub fn deparse(&mut self, buffer: Vec<u8>) -> BitWriter {
        self.out = Some(BitWriter::reusing(buffer));
        let name = block_name::DEPARSER;
        trace_line!(self.trace, Level::Debug, "Deparser '{name}': start");
        self.control(ir::block::DEPARSER);
        trace_line!(self.trace, Level::Debug, "Deparser '{name}': end");
        self.out.take().unwrap_or_default()
    }

    fn run(&mut self, stmts: &[Stmt]) -> Flow {
        self.run_with(stmts, Self::stmt)
    }

    /// Runs statements one after the other with `step` (the interpreter's, or a compiled
    /// statement's call), charging loop work inside loops and stopping at the first that does
    /// not end normally or that aborts the block.
    #[inline]
    pub(crate) fn run_with<T>(
        &mut self,
        stmts: &[T],
        step: impl Fn(&mut Self, &T) -> Flow,
    ) -> Flow {
        for s in stmts {
            if self.loops > 0 && !self.loop_work() {
                return Flow::Exit;
            }
            let f = step(self, s);
            if let Some(a) = self.abort.take() {
                return a;
            }
            if f != Flow::Next {
                return f;
            }
        }
        Flow::Next
    }

    pub(crate) fn stmt(&mut self, s: &Stmt) -> Flow {
        match s {
            Stmt::Assign(place, e) => {
                let v = self.val(e);
                self.store(place, v);
            }
            Stmt::Copy { dst, src, len } => {
                let (d, s, n) = (*dst as usize, *src as usize, *len as usize);
                self.slots.copy_within(s..s + n, d);
            }
            Stmt::CopyBlock { dst, src, len } => {
                let d = self.whole_slot(dst);
                let s = self.whole_slot(src);
                if let Some(d) = d {
                    let n = *len as usize;
                    match s {
                        Some(s) => self.slots.copy_within(s..s + n, d),
                        None => self.slots[d..d + n].fill(0),
                    }
                }
            }
            Stmt::Zero { start, len } => {
                self.slots[*start as usize..(*start + *len) as usize].fill(0)
            }
            Stmt::If(c, t, e, cond) => {
                let c = self.val(c);
                return match self.branch(c, *cond) {
                    Some(true) => self.run(t),
                    Some(false) => self.run(e),
                    None => Flow::Next,
                };
            }
            Stmt::Switch { on, cases, default } => {
                let v = self.val(on);
                return self.run_case::<_, [Stmt]>(v, cases, default, Self::run);
            }
            Stmt::SwitchAction {
                table,
                cases,
                default,
            } => {
                let (_, action) = self.apply(*table);
                return self.run_case::<_, [Stmt]>(action, cases, default, Self::run);
            }
            Stmt::Apply(t) => {
                self.apply(*t);
            }
            Stmt::Invoke(inv) => {
                return self.invoke_with(
                    inv.body,
                    |x| x.run(&inv.copy_in),
                    |x| x.run(&inv.copy_out),
                )
            }
            Stmt::Extern(call) => return self.extern_call(call),
            Stmt::Exit => return Flow::Exit,
            Stmt::Return => return Flow::Return,
            Stmt::Break => return Flow::Break,
            Stmt::Continue => return Flow::Continue,
            Stmt::Loop { cond, body, update } => return self.run_loop(cond, body, update),
        }
        Flow::Next
    }

    /// After an `if`'s condition (the condition's index in the trace names `cond`) evaluated
    /// to `c`: whether the `then` branch runs, traced; `None` when evaluating it exited (an
    /// exit in an action the condition applied ends the block at once).
    #[inline]
    pub(crate) fn branch(&mut self, c: u128, cond: Option<u32>) -> Option<bool> {
        if self.abort.is_some() {
            return None;
        }
        if let Some(trace) = &mut self.trace {
            trace_condition(trace, self.prog, cond, c != 0);
        }
        Some(c != 0)
    }

    fn run_loop(&mut self, cond: &Expr, body: &[Stmt], update: &[Stmt]) -> Flow {
        self.run_loop_with(|x| x.val(cond), |x| x.run(body), |x| x.run(update))
    }

    /// Runs a [`Stmt::Loop`] (its condition, body and update given as what evaluates and runs
    /// them) within the run's loop budget ([`ir::MAX_LOOP_WORK`]); past it, the block ends as
    /// at `exit`.
    pub(crate) fn run_loop_with(
        &mut self,
        cond: impl Fn(&mut Self) -> u128,
        body: impl Fn(&mut Self) -> Flow,
        update: impl Fn(&mut Self) -> Flow,
    ) -> Flow {
        self.loops += 1;
        let f = self.iterate(cond, body, update);
        self.loops -= 1;
        f
    }

    fn iterate(
        &mut self,
        cond: impl Fn(&mut Self) -> u128,
        body: impl Fn(&mut Self) -> Flow,
        update: impl Fn(&mut Self) -> Flow,
    ) -> Flow {
        loop {
            if !self.loop_work() {
                return Flow::Exit;
            }
            let c = cond(self);
            if self.abort.is_some() || c == 0 {
                return Flow::Next;
            }
            match body(self) {
                Flow::Next | Flow::Continue => {}
                Flow::Break => return Flow::Next,
                other => return other,
            }
            match update(self) {
                Flow::Next | Flow::Continue => {}
                Flow::Break => return Flow::Next,
                other => return other,
            }
        }
    }

    /// Spends a unit of the run's loop budget (an iteration, or a statement run in a loop);
    /// `false` when it is spent, the first time with a note in the switch's log.
    fn loop_work(&mut self) -> bool {
        if self.loop_budget > 0 {
            self.loop_budget -= 1;
            return true;
        }
        if !std::mem::replace(&mut self.loop_limit_noted, true) {
            self.state.log(format!(
                "loops did more than {} units of work in one block: the block ends as at exit \
                 (ir::MAX_LOOP_WORK)",
                ir::MAX_LOOP_WORK
            ));
        }
        false
    }

    /// Runs (with `run`) the body of the first case whose labels hold `key`, else `default`;
    /// nothing when evaluating the key exited (an exit in an action the key applied ends the
    /// block at once).
    #[inline]
    pub(crate) fn run_case<K: PartialEq, B: ?Sized>(
        &mut self,
        key: K,
        cases: &[(Vec<K>, impl std::borrow::Borrow<B>)],
        default: &B,
        run: impl Fn(&mut Self, &B) -> Flow,
    ) -> Flow {
        if self.abort.is_some() {
            return Flow::Next;
        }
        let body = cases
            .iter()
            .find(|(labels, _)| labels.contains(&key))
            .map_or(default, |(_, body)| body.borrow());
        run(self, body)
    }

    /// Calls body `body` between `copy_in` and `copy_out` (which copy its arguments in and
    /// out); an `exit` in it is the caller's.
    #[inline]
    pub(crate) fn invoke_with(
        &mut self,
        body: usize,
        copy_in: impl FnOnce(&mut Self) -> Flow,
        copy_out: impl FnOnce(&mut Self) -> Flow,
    ) -> Flow {
        let f = copy_in(self);
        if f != Flow::Next {
            return f;
        }
        let f = self.run_body(body);
        copy_out(self);
        if f == Flow::Exit {
            Flow::Exit
        } else {
            Flow::Next
        }
    }

    /// The value of a call as an expression, once it ran with outcome `f`: its return slot's
    /// (0 without one); an `exit` in it aborts the block.
    #[inline]
    pub(crate) fn called_value(&mut self, f: Flow, ret: Option<Slot>) -> u128 {
        if f == Flow::Exit {
            self.abort = Some(Flow::Exit);
        }
        ret.map_or(0, |r| self.slots[r as usize])
    }

    /// Runs action or function body `body`, compiled if the program's compiled form has it.
    fn run_body(&mut self, body: usize) -> Flow {
        match self.compiled.and_then(|c| c.body(body)) {
            Some(b) => {
                self.state.compiled_block_runs += 1;
                b.run(self)
            }
            None => self.run(&self.prog.bodies[body].stmts),
        }
    }

    /// Applies a table: looks up, counts, binds action data, runs the action.
    pub(crate) fn apply(&mut self, t: usize) -> (bool, usize) {
        let table = &self.prog.tables[t];
        let mut keys = std::mem::take(&mut self.state.key_buffer);
        keys.clear();
        for k in &table.keys {
            keys.push(self.val(&k.expr));
        }
        if let Some(trace) = &mut self.trace {
            trace_lookup(trace, table, &keys);
        }
        let hit = self.state.tables[t].lookup(&keys);
        self.state.key_buffer = keys;
        self.last_hit = hit.map(|h| (t, h));
        if let Some(h) = hit {
            let bytes = table
                .direct_counter
                .map(|_| self.slots[self.prog.std_meta.packet_length as usize] as u64);
            self.state.tables[t].record_hit(h, self.now_us, bytes);
        }
        let member = match (hit, table.profile) {
            (Some(h), Some(profile)) => self.state.tables[t]
                .group_of(h)
                .and_then(|g| self.pick_member(table, profile, g)),
            _ => None,
        };
        let action = action_call(self.state, t, hit, member).action;
        let body_index = self.prog.actions[action].body;
        let body = &self.prog.bodies[body_index];
        let binding = table
            .bindings
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, b)| b);
        if let Some(b) = binding {
            self.run(&b.copy_in);
        }
        let call = action_call(self.state, t, hit, member);
        if let Some(trace) = &mut self.trace {
            trace_apply(trace, self.prog, self.state, t, hit, call);
        }
        for (p, v) in body.params.iter().filter(|p| p.action_data).zip(call.args) {
            self.slots[p.slot as usize] = *v;
        }
        if self.run_body(body_index) == Flow::Exit {
            self.abort = Some(Flow::Exit);
        }
        if let Some(b) = binding {
            self.run(&b.copy_out);
        }
        (hit.is_some(), action)
    }

    /// The member of group `group` of action selector `profile` that the hash of `table`'s
    /// selector keys picks (`None` for an empty group).
    fn pick_member(
        &mut self,
        table: &ir::Table,
        profile: usize,
        group: u32,
    ) -> Option<(usize, u32)> {
        let ir::InstanceKind::ActionSelector { algo, .. } = self.prog.instances[profile].kind
        else {
            return None;
        };
        let count = self.state.profiles[profile]
            .groups
            .get(&group)
            .map_or(0, Vec::len);
        if count == 0 {
            return None;
        }
        let algo = Algorithm::from_code(u128::from(algo)).unwrap_or(Algorithm::Crc16);
        let write = |x: &mut Self, w: &mut BitWriter| {
            for k in &table.selector {
                let v = x.val(&k.expr);
                w.write(v, k.width);
            }
        };
        let h = self.checksum_with(write, false, |_| algo);
        let members = &self.state.profiles[profile].groups[&group];
        Some((profile, members[(h % count as u64) as usize]))
    }

    /// Evaluates an expression, reading slots and constants without a call.
    #[inline(always)]
    fn val(&mut self, e: &Expr) -> u128 {
        match e {
            Expr::Load(s) => self.slots[*s as usize],
            Expr::Const(v) => *v,
            _ => self.eval(e),
        }
    }

    /// Evaluates a scalar expression.
    pub fn eval(&mut self, e: &Expr) -> u128 {
        match e {
            Expr::Const(v) => *v,
            Expr::Load(s) => self.slots[*s as usize],
            Expr::LoadDyn(d) => self.dyn_slot(d).map_or(0, |slot| self.slots[slot]),
            Expr::Arith {
                op,
                width,
                signed,
                a,
                b,
            } => {
                let (x, y) = (self.val(a), self.val(b));
                ops::binop(*op, *width, *signed, x, y)
            }
            Expr::Compare {
                op,
                width,
                signed,
                a,
                b,
            } => {
                let (x, y) = (self.val(a), self.val(b));
                u128::from(ops::compare(*op, *width, *signed, x, y))
            }
            Expr::Concat { a, b, b_width } => {
                let (x, y) = (self.val(a), self.val(b));
                if *b_width >= 128 {
                    y
                } else {
                    (x << b_width) | y
                }
            }
            Expr::Slice { arg, lo, width } => (self.val(arg) >> lo) & mask(*width),
            Expr::SignExtend { arg, from, to } => {
                sign_extend(self.val(arg), *from) as u128 & mask(*to)
            }
            Expr::Truncate { arg, width } => self.val(arg) & mask(*width),
            Expr::Not(a) => u128::from(self.val(a) == 0),
            Expr::Complement { arg, width } => !self.val(arg) & mask(*width),
            Expr::Negate { arg, width } => self.val(arg).wrapping_neg() & mask(*width),
            Expr::And(a, b) => u128::from(self.val(a) != 0 && self.val(b) != 0),
            Expr::Or(a, b) => u128::from(self.val(a) != 0 || self.val(b) != 0),
            Expr::Cond(c, a, b) => {
                if self.val(c) != 0 {
                    self.val(a)
                } else {
                    self.val(b)
                }
            }
            Expr::RangeEq { a, b, len } => {
                let (a, b, n) = (*a as usize, *b as usize, *len as usize);
                u128::from(self.slots[a..a + n] == self.slots[b..b + n])
            }
            Expr::TableHit { table, miss } => u128::from(self.apply(*table).0 != *miss),
            Expr::Invoke(inv) => {
                let f =
                    self.invoke_with(inv.body, |x| x.run(&inv.copy_in), |x| x.run(&inv.copy_out));
                self.called_value(f, inv.ret)
            }
            Expr::Lookahead {
                offset,
                width,
                need,
            } => {
                if self.cursor + *need as usize > self.data.len() * 8 {
                    self.abort = Some(Flow::Reject(self.error_code("PacketTooShort")));
                    0
                } else {
                    read_bits(self.data, self.cursor + *offset as usize, *width)
                }
            }
            Expr::PacketLength => self.data.len() as u128,
            Expr::Checksum16(fields) => u128::from(self.checksum_with(
                |x, w| x.write_fields(w, fields),
                false,
                |_| Algorithm::Csum16,
            )),
        }
    }

    /// The slot `d` picks; `None` when its index is not below its count.
    fn dyn_slot(&mut self, d: &DynSlot) -> Option<usize> {
        let i = self.val(&d.index);
        (i < u128::from(d.count)).then(|| (d.base + i as u32 * d.stride) as usize)
    }

    /// The slot a place that is not a slice names: `None` for a stack element out of range,
    /// which reads as 0 and ignores writes.
    fn whole_slot(&mut self, place: &Place) -> Option<usize> {
        match place {
            Place::Slot(s) => Some(*s as usize),
            Place::Dyn(d) => self.dyn_slot(d),
            Place::Slice { .. } => unreachable!("a slice is not a whole slot"),
        }
    }

    pub(crate) fn store(&mut self, place: &Place, v: u128) {
        match place {
            Place::Slice { inner, lo, width } => {
                let old = self.load(inner);
                let m = mask(*width) << lo;
                self.store(inner, (old & !m) | ((v << lo) & m));
            }
            whole => {
                if let Some(slot) = self.whole_slot(whole) {
                    self.slots[slot] = v;
                }
            }
        }
    }

    fn load(&mut self, place: &Place) -> u128 {
        match place {
            Place::Slice { inner, lo, width } => (self.load(inner) >> lo) & mask(*width),
            whole => self.whole_slot(whole).map_or(0, |slot| self.slots[slot]),
        }
    }

    /// Writes `fields` into `w`, leaving out those of invalid headers.
    fn write_fields(&mut self, w: &mut BitWriter, fields: &[FieldItem]) {
        for f in fields {
            match f {
                FieldItem::Bits(e, width) => {
                    let v = self.val(e);
                    w.write(v, *width);
                }
                FieldItem::VarBit { base, max } => self.write_varbit(w, *base, *max),
                FieldItem::Header { valid, fields } => {
                    if self.slots[*valid as usize] != 0 {
                        self.write_fields(w, fields);
                    }
                }
            }
        }
    }

    fn payload(&self) -> &[u8] {
        &self.data[(self.cursor / 8).min(self.data.len())..]
    }

    /// Writes the varbit stored at `base` (its length, then its chunks).
    fn write_varbit(&self, w: &mut BitWriter, base: u32, max: u32) {
        let len = self.slots[base as usize];
        for i in 0..max.div_ceil(128) {
            let width = varbit_chunk_width(len, i);
            if width > 0 {
                w.write(self.slots[(base + 1 + i) as usize], width);
            }
        }
    }

    fn extract(&mut self, h: &HeaderRef, varbit: Option<&Expr>) -> Flow {
        let layout = match *h {
            HeaderRef::Static { layout, .. } | HeaderRef::Next { layout, .. } => layout,
        };
        let fields = &self.prog.header_layouts[layout];
        // BMv2's checks, in its order: a full stack, a varbit length that is not whole bytes,
        // too few bytes left, a varbit longer than its field.
        if let HeaderRef::Next { stack, count, .. } = *h {
            if self.slots[stack as usize] >= u128::from(count) {
                return Flow::Reject(self.error_code("StackOutOfBounds"));
            }
        }
        let var_len = varbit.map_or(0, |e| self.val(e));
        if !var_len.is_multiple_of(8) {
            return Flow::Reject(self.error_code("ParserInvalidArgument"));
        }
        let var_max = fields.iter().find_map(|f| match f {
            FieldLayout::VarBit { max } => Some(*max),
            FieldLayout::Fixed(_) => None,
        });
        let total = u128::from(self.prog.header_bits[layout]).saturating_add(var_len);
        if self.cursor as u128 + total > self.data.len() as u128 * 8 {
            return Flow::Reject(self.error_code("PacketTooShort"));
        }
        if var_max.is_some_and(|max| var_len > u128::from(max)) {
            return Flow::Reject(self.error_code("HeaderTooShort"));
        }
        let base = match *h {
            HeaderRef::Static { base, .. } => base,
            HeaderRef::Next {
                stack,
                stride,
                offset,
                ..
            } => {
                let next = self.slots[stack as usize];
                self.slots[stack as usize] = next + 1;
                stack + 1 + next as u32 * stride + offset
            }
        };
        self.slots[base as usize] = 1;
        if self.trace.is_some() {
            self.trace_header("Extracting", base);
        }
        if var_max.is_none() {
            // Fixed fields only: one slot each, read in a row.
            let first = base as usize + 1;
            let mut pos = self.cursor;
            for (slot, f) in self.slots[first..first + fields.len()]
                .iter_mut()
                .zip(fields)
            {
                if let FieldLayout::Fixed(w) = *f {
                    *slot = read_bits(self.data, pos, w);
                    pos += usize::from(w);
                }
            }
            self.cursor = pos;
            return Flow::Next;
        }
        let mut slot = base as usize + 1;
        for f in fields {
            match *f {
                FieldLayout::Fixed(w) => {
                    self.slots[slot] = read_bits(self.data, self.cursor, w);
                    self.cursor += usize::from(w);
                }
                FieldLayout::VarBit { max } => {
                    self.slots[slot] = var_len;
                    for i in 0..max.div_ceil(128) {
                        let w = varbit_chunk_width(var_len, i);
                        let v = if w > 0 {
                            read_bits(self.data, self.cursor, w)
                        } else {
                            0
                        };
                        self.slots[slot + 1 + i as usize] = v;
                        self.cursor += usize::from(w);
                    }
                }
            }
            slot += f.slots() as usize;
        }
        Flow::Next
    }

    pub(crate) fn extern_call(&mut self, call: &ExternCall) -> Flow {
        match call {
            ExternCall::Call { ext, args } => {
                if let Err(code) = externs::get(*ext).execute(args, self) {
                    return Flow::Reject(code);
                }
            }
            ExternCall::Extract { target, varbit } => return self.extract(target, varbit.as_ref()),
            ExternCall::SubParser {
                parser,
                copy_in,
                copy_out,
            } => {
                self.run(copy_in);
                let compiled = self.compiled.and_then(|c| c.subparser(*parser));
                let result = self.run_parser(&self.prog.subparsers[*parser], compiled);
                self.run(copy_out);
                if let Err(code) = result {
                    return Flow::Reject(code);
                }
            }
            ExternCall::Advance(bits) => {
                // As BMv2: only whole bytes, then only as many as are left.
                let n = self.val(bits);
                if !n.is_multiple_of(8) {
                    return Flow::Reject(self.error_code("ParserInvalidArgument"));
                }
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if self.cursor.saturating_add(n) > self.data.len() * 8 {
                    return Flow::Reject(self.error_code("PacketTooShort"));
                }
                self.cursor += n;
            }
            ExternCall::Verify { cond, error } => {
                if self.val(cond) == 0 {
                    return Flow::Reject(self.val(error));
                }
            }
            ExternCall::Emit(items) => self.emit_with(|x, out| {
                for EmitItem::Header { base, layout } in items {
                    if x.slots[*base as usize] == 0 {
                        continue;
                    }
                    if x.trace.is_some() {
                        x.trace_header("Deparsing", *base);
                    }
                    let mut slot = *base + 1;
                    for f in &x.prog.header_layouts[*layout] {
                        match *f {
                            FieldLayout::Fixed(w) => out.write(x.slots[slot as usize], w),
                            FieldLayout::VarBit { max } => x.write_varbit(out, slot, max),
                        }
                        slot += f.slots();
                    }
                }
            }),
            ExternCall::StackShift {
                stack,
                count,
                stride,
                valids,
                shift,
            } => self.stack_shift(*stack, *count, *stride, valids, *shift),
        }
        Flow::Next
    }

    fn stack_shift(&mut self, stack: u32, count: u32, stride: u32, valids: &[u32], shift: i32) {
        let (s, n, st) = (stack as usize, count as usize, stride as usize);
        let k = shift.unsigned_abs() as usize;
        let elems = s + 1;
        if shift > 0 {
            for i in (k..n).rev() {
                self.slots.copy_within(
                    elems + (i - k) * st..elems + (i - k + 1) * st,
                    elems + i * st,
                );
            }
            for i in 0..k.min(n) {
                self.invalidate(elems + i * st, valids);
            }
            self.slots[s] = (self.slots[s] + k as u128).min(n as u128);
        } else {
            for i in 0..n.saturating_sub(k) {
                self.slots.copy_within(
                    elems + (i + k) * st..elems + (i + k + 1) * st,
                    elems + i * st,
                );
            }
            for i in n.saturating_sub(k)..n {
                self.invalidate(elems + i * st, valids);
            }
            self.slots[s] = self.slots[s].saturating_sub(k as u128);
        }
    }

    /// Clears the validity slots `valids` of the stack element at slot `element`.
    fn invalidate(&mut self, element: usize, valids: &[u32]) {
        for &v in valids {
            self.slots[element + v as usize] = 0;
        }
    }
}

/// The trace of the start or `end` of block `block`, if it is a pipeline (ingress or egress).
#[cold]
#[inline(never)]
fn trace_pipeline(trace: &mut PacketTrace<'_>, block: usize, end: &str) {
    let name = match block {
        ir::block::INGRESS => block_name::INGRESS,
        ir::block::EGRESS => block_name::EGRESS,
        _ => return,
    };
    trace.line(Level::Debug, format_args!("Pipeline '{name}': {end}"));
}

/// The trace of the parser's end: its end, or the parser error `Err` holds.
#[cold]
#[inline(never)]
fn trace_parsed(trace: &mut PacketTrace<'_>, prog: &Program, result: Result<(), u128>) {
    match result {
        Ok(()) => trace.line(
            Level::Debug,
            format_args!("Parser '{}': end", block_name::PARSER),
        ),
        Err(code) => {
            let name = trace::Printable(prog.errors.get(code as usize).map_or("?", String::as_str));
            trace.line(
                Level::Error,
                format_args!("Exception while parsing: {name}"),
            );
        }
    }
}

/// The trace of an `if`'s outcome (`cond`: its index in the program's trace names).
#[cold]
#[inline(never)]
fn trace_condition(trace: &mut PacketTrace<'_>, prog: &Program, cond: Option<u32>, holds: bool) {
    let Some(cond) = cond.and_then(|i| prog.trace_names.conditions.get(i as usize)) else {
        return;
    };
    let at = cond.location.as_deref().unwrap_or_default();
    let space = if at.is_empty() { "" } else { " " };
    let (at, text, node) = (
        trace::Printable(at),
        trace::Printable(&cond.text),
        trace::Printable(&cond.node),
    );
    trace.line(
        Level::Trace,
        format_args!("{at}{space}Condition \"{text}\" ({node}) is {holds}"),
    );
}

/// The trace of a `select`'s key in state `state`: the `values` of `widths` bits, in hex.
#[cold]
#[inline(never)]
fn trace_select(trace: &mut PacketTrace<'_>, state: &str, values: &[u128], widths: &[u16]) {
    let mut key = String::new();
    for (v, w) in values.iter().zip(widths) {
        trace::hex_bytes(&mut key, *v, *w);
    }
    trace.line(
        Level::Debug,
        format_args!("Parser state '{}': key is {key}", trace::Printable(state)),
    );
}

/// The trace of a table applied and the key it looks up.
#[cold]
#[inline(never)]
fn trace_lookup(trace: &mut PacketTrace<'_>, table: &ir::Table, keys: &[u128]) {
    trace.line(
        Level::Trace,
        format_args!("Applying table '{}'", trace::Printable(&table.name)),
    );
    let lookup = trace::lookup_key(table, keys);
    trace.line(Level::Debug, format_args!("{lookup}"));
}

/// The trace of a table's outcome: hit (with the entry) or miss, and the action it runs.
#[cold]
#[inline(never)]
fn trace_apply(
    trace: &mut PacketTrace<'_>,
    prog: &Program,
    state: &State,
    t: usize,
    hit: Option<usize>,
    call: ActionRef<'_>,
) {
    let table = &prog.tables[t];
    let name = trace::Printable(&table.name);
    match hit.and_then(|h| Some((h, state.tables[t].entry(h)?))) {
        Some((h, installed)) => {
            trace.line(
                Level::Debug,
                format_args!("Table '{name}': hit with handle {h}"),
            );
            let e = &installed.entry;
            let dump = trace::dump_entry(prog, table, h, &e.matches, &e.action);
            trace.line(Level::Debug, format_args!("{dump}"));
        }
        None => trace.line(Level::Debug, format_args!("Table '{name}': miss")),
    }
    let entry = trace::action_entry(prog, call);
    trace.line(Level::Debug, format_args!("Action entry is {entry}"));
    let action = prog
        .actions
        .get(call.action)
        .map_or("?", |a| a.name.as_str());
    let action = trace::Printable(action);
    trace.line(Level::Trace, format_args!("Action {action}"));
}

/// The action of entry `hit` of table `t`, or its default action on a miss.
/// With `member` (an action selector's pick), that member's action.
fn action_call(
    state: &State,
    t: usize,
    hit: Option<usize>,
    member: Option<(usize, u32)>,
) -> ActionRef<'_> {
    if let Some(call) = member.and_then(|(profile, m)| state.profiles[profile].members.get(&m)) {
        return call.into();
    }
    let table = &state.tables[t];
    match hit.and_then(|h| table.action_of(h)) {
        Some(call) => call,
        None => (&table.default_action).into(),
    }
}
