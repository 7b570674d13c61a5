//! The v1model switch: parser → verify checksum → ingress → traffic manager (unicast, the
//! packet replication engine's multicast groups, I2E/E2E clone sessions, resubmit, drop on port
//! 511) → egress → compute checksum → deparser, with recirculation; plus the control-plane
//! operations on tables, registers, counters, sessions, groups and queues.

use crate::interp::{Effects, Exec};
use crate::ir::{self, block, ActionCall, Entry, FieldMatch, InstanceKind, Program, Slot};
use crate::meter::Meter;
use crate::mirroring::MirroringSessions;
use crate::pre::ReplicationEngine;
use crate::table::{CounterCell, Profile, TableError, TableState};
use crate::tm::{Dequeued, TrafficManager};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Instant;

/// The port that drops.
pub const DROP_PORT: u128 = 511;

/// Resubmissions, recirculations and E2E clones one received packet may cause before the
/// switch drops the loop (BMv2 has no limit and would loop for ever).
pub const MAX_PASSES: u32 = 1000;

/// Pipeline runs (ingress or egress) one received packet may cause, with every copy made of it:
/// clones, replicas, recirculations and resubmissions together. Past it the copies are dropped
/// and logged: a program that clones and recirculates every copy doubles them at each pass, and
/// [`MAX_PASSES`] alone would let one packet keep the switch busy for hours.
pub const MAX_PACKET_WORK: u32 = 1 << 16;

/// Log lines a switch holds (`log_msg` and its own notes).
pub const MAX_LOG_LINES: usize = 100_000;

/// The pipeline runs a received packet and every copy made of it have taken so far.
type Work = Rc<std::cell::Cell<u32>>;

/// How a packet instance came to be: `standard_metadata.instance_type`, with BMv2's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceType {
    /// A packet from a port.
    Normal = 0,
    /// An ingress-to-egress clone.
    IngressClone = 1,
    /// An egress-to-egress clone.
    EgressClone = 2,
    /// A recirculated packet.
    Recirc = 4,
    /// A multicast replica.
    Replication = 5,
    /// A resubmitted packet.
    Resubmit = 6,
}

impl InstanceType {
    /// The value the program reads in `standard_metadata.instance_type`.
    pub fn value(self) -> u128 {
        self as u128
    }
}

/// The mutable state that P4 code reads and writes: tables, registers, counters, meters.
#[derive(Debug)]
pub struct State {
    /// Tables, by program index.
    pub tables: Vec<TableState>,
    /// Register cells, by instance index (empty for other instances).
    pub registers: Vec<Vec<u128>>,
    /// Indirect counter cells, by instance index.
    pub counters: Vec<Vec<CounterCell>>,
    /// Indirect meter cells, by instance index.
    pub meters: Vec<Vec<Meter>>,
    direct_meters: HashMap<(usize, usize), Meter>,
    /// Members of each parser value set, by instance index.
    pub value_sets: Vec<Vec<FieldMatch>>,
    /// Members and groups of each action profile or selector, by instance index.
    pub profiles: Vec<Profile>,
    /// Digests sent.
    pub digests: Vec<DigestSent>,
    /// `log_msg` output and the switch's own notes, at most [`MAX_LOG_LINES`] of them.
    pub log: Vec<String>,
    /// Lines not kept in `log` because it was full.
    pub log_dropped: u64,
    /// A buffer reused by every checksum and hash computation.
    pub(crate) field_buffer: Vec<u8>,
    /// Failed `assert`/`assume` calls.
    pub assertion_failures: u64,
    rng: u64,
}

impl State {
    /// Adds a line to the log, or counts it when the log holds [`MAX_LOG_LINES`] (a running
    /// switch empties it after every packet; an STF run keeps it to the end).
    pub(crate) fn log(&mut self, line: String) {
        if self.log.len() < MAX_LOG_LINES {
            self.log.push(line);
        } else {
            self.log_dropped += 1;
        }
    }

    fn new(p: &Program) -> Self {
        let cells = |f: &dyn Fn(&InstanceKind) -> usize| {
            p.instances
                .iter()
                .map(|i| f(&i.kind))
                .collect::<Vec<usize>>()
        };
        State {
            tables: p.tables.iter().map(TableState::new).collect(),
            registers: cells(&|k| {
                if let InstanceKind::Register { size, .. } = k {
                    *size as usize
                } else {
                    0
                }
            })
            .into_iter()
            .map(|n| vec![0; n])
            .collect(),
            counters: cells(&|k| {
                if let InstanceKind::Counter { size, .. } = k {
                    *size as usize
                } else {
                    0
                }
            })
            .into_iter()
            .map(|n| vec![CounterCell::default(); n])
            .collect(),
            meters: cells(&|k| {
                if let InstanceKind::Meter { size, .. } = k {
                    *size as usize
                } else {
                    0
                }
            })
            .into_iter()
            .map(|n| vec![Meter::default(); n])
            .collect(),
            direct_meters: HashMap::new(),
            value_sets: vec![Vec::new(); p.instances.len()],
            profiles: vec![Profile::default(); p.instances.len()],
            digests: Vec::new(),
            log: Vec::new(),
            log_dropped: 0,
            field_buffer: Vec::new(),
            assertion_failures: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// The next pseudo-random number (xorshift64*; deterministic per switch).
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The direct meter cell of entry `handle` of the table owning meter `instance`.
    pub fn direct_meter(&mut self, instance: usize, handle: usize) -> &mut Meter {
        self.direct_meters.entry((instance, handle)).or_default()
    }
}

/// A digest the program sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestSent {
    /// The receiver argument.
    pub receiver: u32,
    /// Which digest (index into `CpInfo::digests`).
    pub digest: usize,
    /// The data's fields, flattened.
    pub values: Vec<u128>,
}

/// A packet the switch sent out of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Egress port.
    pub port: u16,
    /// Bytes.
    pub data: Vec<u8>,
}

/// Where time comes from.
#[derive(Clone, Copy, Debug)]
pub enum Clock {
    /// A virtual clock at the given microsecond, advanced only by [`Switch::advance`].
    Virtual(u64),
    /// The wall clock since the switch started.
    Wall(Instant),
}

#[derive(Clone, Debug)]
struct IngressPacket {
    port: u16,
    data: Rc<[u8]>,
    instance_type: InstanceType,
    preserved: Vec<(Slot, u128)>,
    /// Resubmissions, recirculations and E2E clones behind this packet.
    passes: u32,
    work: Work,
}

/// A packet between ingress and egress: its slots and its bytes (the payload starts at `payload`).
#[derive(Clone, Debug)]
pub struct Queued {
    slots: Vec<u128>,
    data: Rc<[u8]>,
    payload: usize,
    passes: u32,
    work: Work,
}

/// A running v1model switch.
pub struct Switch {
    program: Program,
    /// Tables, registers, counters, meters.
    pub state: State,
    /// The traffic manager.
    pub tm: TrafficManager<Queued>,
    clock: Clock,
    mirroring: MirroringSessions,
    pre: ReplicationEngine,
    pending: VecDeque<IngressPacket>,
    spare_slots: Vec<Vec<u128>>,
    outputs: Vec<Output>,
    /// Packets dropped (by the program, a full queue or a missing session).
    pub drops: u64,
}

impl Switch {
    /// A switch running `program` on `clock`.
    pub fn new(program: Program, clock: Clock) -> Self {
        let state = State::new(&program);
        Switch {
            program,
            state,
            tm: TrafficManager::default(),
            clock,
            mirroring: MirroringSessions::default(),
            pre: ReplicationEngine::default(),
            pending: VecDeque::new(),
            spare_slots: Vec::new(),
            outputs: Vec::new(),
            drops: 0,
        }
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The current time in microseconds.
    pub fn now_us(&self) -> u64 {
        match self.clock {
            Clock::Virtual(t) => t,
            Clock::Wall(start) => start.elapsed().as_micros() as u64,
        }
    }

    /// Receives a packet on `port`: runs ingress (and any resubmissions) and serves the queues.
    pub fn receive(&mut self, port: u16, data: Vec<u8>) {
        self.pending.push_back(IngressPacket {
            port,
            data: data.into(),
            instance_type: InstanceType::Normal,
            preserved: Vec::new(),
            passes: 0,
            work: Work::default(),
        });
        self.serve();
    }

    /// Advances the virtual clock by `us` microseconds, serving the queues on the way.
    pub fn advance(&mut self, us: u64) {
        let Clock::Virtual(now) = self.clock else {
            self.serve();
            return;
        };
        let end = now.saturating_add(us);
        while let Some(t) = self.tm.next_ready().filter(|&t| t <= end) {
            self.clock = Clock::Virtual(t.max(now));
            self.serve();
        }
        self.clock = Clock::Virtual(end);
        self.serve();
    }

    /// Advances the virtual clock until every queue is empty.
    pub fn drain(&mut self) {
        self.serve();
        while let Some(t) = self.tm.next_ready() {
            let now = self.now_us();
            self.advance(t.saturating_sub(now));
        }
    }

    /// Takes the packets sent so far, in the order they left (the buffer is kept for reuse).
    pub fn drain_outputs(&mut self) -> std::vec::Drain<'_, Output> {
        self.outputs.drain(..)
    }

    /// Runs pending ingress packets and egress for every packet ready now.
    fn serve(&mut self) {
        loop {
            if let Some(p) = self.pending.pop_front() {
                self.ingress(p);
                continue;
            }
            let now = self.now_us();
            match self.tm.dequeue(now) {
                Some(d) => self.egress(d),
                None => break,
            }
        }
    }

    fn preserved(&self, slots: &[u128], list: Option<usize>) -> Vec<(Slot, u128)> {
        let Some(id) = list else { return Vec::new() };
        self.program.field_lists[id]
            .iter()
            .map(|&slot| (slot, slots[slot as usize]))
            .collect()
    }

    /// Zeroes all user and standard metadata of a copy but its `preserved` fields, and sets its
    /// instance type, as BMv2 does to a clone.
    fn reset_metadata(
        &self,
        slots: &mut [u128],
        preserved: &[(Slot, u128)],
        instance: InstanceType,
    ) {
        let sm = self.program.std_meta;
        let (meta, len) = self.program.user_meta;
        slots[meta as usize..(meta + len) as usize].fill(0);
        for s in sm.all() {
            slots[s as usize] = 0;
        }
        for &(s, v) in preserved {
            slots[s as usize] = v;
        }
        slots[sm.instance_type as usize] = instance.value();
    }

    /// Parser, verify checksum and ingress for one packet; returns its slots, payload offset and effects.
    fn run_ingress(
        &mut self,
        p: &IngressPacket,
        run_controls: bool,
    ) -> (Vec<u128>, usize, Effects) {
        let now = self.now_us();
        let sm = self.program.std_meta;
        let mut slots = self.spare_slots.pop().unwrap_or_default();
        slots.clear();
        slots.resize(self.program.slots as usize, 0);
        // BMv2 sets the ingress port and timestamp when a packet arrives from a port; it resets
        // all metadata of a resubmitted or recirculated packet, which so starts with 0 in both.
        // An I2E clone is parsed again with the ingress port (behavioral-model#1175).
        let fresh = p.instance_type == InstanceType::Normal;
        if fresh || p.instance_type == InstanceType::IngressClone {
            slots[sm.ingress_port as usize] = u128::from(p.port);
        }
        if fresh {
            slots[sm.ingress_global_timestamp as usize] = u128::from(now) & ir::mask(48);
        }
        slots[sm.packet_length as usize] = p.data.len() as u128;
        slots[sm.instance_type as usize] = p.instance_type.value();
        for &(s, v) in &p.preserved {
            slots[s as usize] = v;
        }
        let mut effects = Effects::default();
        let mut exec = Exec::new(
            &self.program,
            &mut self.state,
            &mut slots,
            &p.data,
            0,
            &mut effects,
            now,
        );
        if let Err(code) = exec.parse() {
            exec.slots[sm.parser_error as usize] = code;
        }
        if run_controls {
            exec.control(block::VERIFY);
            exec.control(block::INGRESS);
        }
        let cursor = exec.cursor;
        (slots, cursor.div_ceil(8), effects)
    }

    fn ingress(&mut self, p: IngressPacket) {
        if !self.within_work_limit(&p.work) {
            return;
        }
        let sm = self.program.std_meta;
        let (slots, payload, effects) = self.run_ingress(&p, true);
        let data = p.data.clone();
        if let Some((false, session, list)) = effects.clone {
            if let Some(port) = self.mirroring.port(session) {
                let preserved = self.preserved(&slots, list);
                let copy = IngressPacket {
                    instance_type: InstanceType::IngressClone,
                    preserved,
                    ..p.clone()
                };
                let (mut cslots, cpayload, _) = self.run_ingress(&copy, false);
                // After that parse BMv2 resets all metadata but the preserved fields.
                self.reset_metadata(&mut cslots, &copy.preserved, InstanceType::IngressClone);
                cslots[sm.egress_port as usize] = u128::from(port);
                self.enqueue(
                    port,
                    Queued {
                        slots: cslots,
                        data: data.clone(),
                        payload: cpayload,
                        passes: p.passes,
                        work: p.work.clone(),
                    },
                );
            }
        }
        if let Some(list) = effects.resubmit {
            if self.within_pass_limit(p.passes) {
                let preserved = self.preserved(&slots, list);
                self.pending.push_back(IngressPacket {
                    instance_type: InstanceType::Resubmit,
                    preserved,
                    passes: p.passes + 1,
                    ..p
                });
            }
            return;
        }
        let group = slots[sm.mcast_grp as usize] as u16;
        if group != 0 {
            self.replicate(group, &slots, &data, payload, p.passes, &p.work);
            return;
        }
        let spec = slots[sm.egress_spec as usize];
        if spec == DROP_PORT {
            self.drops += 1;
            self.recycle(slots);
            return;
        }
        let port = spec as u16;
        let mut slots = slots;
        slots[sm.egress_port as usize] = spec;
        let queued = Queued {
            slots,
            data,
            payload,
            passes: p.passes,
            work: p.work,
        };
        let priority = queued.slots[sm.priority as usize] as u8;
        if self.pending.is_empty() && self.tm.idle_and_unlimited(port, priority) {
            // It would be dequeued at once, with empty queues behind it: skip the queue.
            let now = self.now_us();
            let d = Dequeued {
                item: queued,
                port,
                enq_us: now,
                enq_qdepth: 0,
                deq_qdepth: 0,
                deq_timedelta: 0,
            };
            self.egress(d);
        } else {
            self.enqueue(port, queued);
        }
    }

    fn replicate(
        &mut self,
        group: u16,
        slots: &[u128],
        data: &Rc<[u8]>,
        payload: usize,
        passes: u32,
        work: &Work,
    ) {
        let sm = self.program.std_meta;
        for (port, rid) in self.pre.replicas(group) {
            let mut copy = slots.to_vec();
            copy[sm.egress_port as usize] = u128::from(port);
            copy[sm.egress_rid as usize] = u128::from(rid);
            copy[sm.instance_type as usize] = InstanceType::Replication.value();
            self.enqueue(
                port,
                Queued {
                    slots: copy,
                    data: data.clone(),
                    payload,
                    passes,
                    work: work.clone(),
                },
            );
        }
    }

    /// Whether a packet whose lineage has taken `work` pipeline runs may take one more (and
    /// counts it); counts a drop if not, and logs the lineage's first.
    fn within_work_limit(&mut self, work: &Work) -> bool {
        let done = work.get();
        work.set(done.saturating_add(1));
        if done < MAX_PACKET_WORK {
            return true;
        }
        self.drops += 1;
        if done == MAX_PACKET_WORK {
            self.state.log(format!(
                "dropped the copies of a packet past {MAX_PACKET_WORK} pipeline runs (clones, replicas, recirculations)"
            ));
        }
        false
    }

    /// Whether a packet behind `passes` loops may loop once more; counts and logs a drop if not.
    fn within_pass_limit(&mut self, passes: u32) -> bool {
        if passes < MAX_PASSES {
            return true;
        }
        self.drops += 1;
        self.state.log(format!(
            "dropped a packet looping {MAX_PASSES} times (resubmit, recirculate or E2E clone)"
        ));
        false
    }

    fn enqueue(&mut self, port: u16, q: Queued) {
        let priority = q.slots[self.program.std_meta.priority as usize] as u8;
        let now = self.now_us();
        if self.tm.enqueue(port, priority, q, now).is_err() {
            self.drops += 1;
        }
    }

    fn egress(&mut self, d: Dequeued<Queued>) {
        let now = self.now_us();
        let sm = self.program.std_meta;
        let Queued {
            mut slots,
            data,
            payload,
            passes,
            work,
        } = d.item;
        if !self.within_work_limit(&work) {
            return;
        }
        slots[sm.egress_port as usize] = u128::from(d.port);
        slots[sm.enq_timestamp as usize] = u128::from(d.enq_us) & ir::mask(32);
        slots[sm.enq_qdepth as usize] = u128::from(d.enq_qdepth) & ir::mask(19);
        slots[sm.deq_timedelta as usize] = u128::from(d.deq_timedelta) & ir::mask(32);
        slots[sm.deq_qdepth as usize] = u128::from(d.deq_qdepth) & ir::mask(19);
        slots[sm.egress_global_timestamp as usize] = u128::from(now) & ir::mask(48);
        let mut effects = Effects::default();
        let mut exec = Exec::new(
            &self.program,
            &mut self.state,
            &mut slots,
            &data,
            payload * 8,
            &mut effects,
            now,
        );
        exec.control(block::EGRESS);
        drop(exec);
        if let Some((true, session, list)) = effects.clone {
            let port = self
                .mirroring
                .port(session)
                .filter(|_| self.within_pass_limit(passes));
            if let Some(port) = port {
                // BMv2 copies the headers and resets all metadata (user and standard).
                let mut copy = slots.clone();
                let preserved = self.preserved(&slots, list);
                self.reset_metadata(&mut copy, &preserved, InstanceType::EgressClone);
                copy[sm.egress_port as usize] = u128::from(port);
                self.enqueue(
                    port,
                    Queued {
                        slots: copy,
                        data: data.clone(),
                        payload,
                        passes: passes + 1,
                        work: work.clone(),
                    },
                );
            }
        }
        if slots[sm.egress_spec as usize] == DROP_PORT {
            self.drops += 1;
            self.recycle(slots);
            return;
        }
        let mut exec = Exec::new(
            &self.program,
            &mut self.state,
            &mut slots,
            &data,
            payload * 8,
            &mut effects,
            now,
        );
        exec.control(block::COMPUTE);
        let mut out = exec.deparse();
        drop(exec);
        out.extend(&data[payload.min(data.len())..]);
        let mut bytes = out.into_bytes();
        if let Some(n) = effects.truncate {
            bytes.truncate(n as usize);
        }
        if let Some(list) = effects.recirculate {
            if self.within_pass_limit(passes) {
                let preserved = self.preserved(&slots, list);
                self.pending.push_back(IngressPacket {
                    // Not seen by the program: BMv2 resets a recirculated packet's metadata.
                    port: slots[sm.ingress_port as usize] as u16,
                    data: bytes.into(),
                    instance_type: InstanceType::Recirc,
                    preserved,
                    passes: passes + 1,
                    work,
                });
            }
            return;
        }
        self.recycle(slots);
        self.outputs.push(Output {
            port: d.port,
            data: bytes,
        });
    }

    /// Keeps a finished packet's slots for the next packet (saves an allocation per packet).
    fn recycle(&mut self, slots: Vec<u128>) {
        if self.spare_slots.len() < 64 {
            self.spare_slots.push(slots);
        }
    }

    // ---- control plane ----

    /// The index of the table named `name` (full name, or a unique suffix after a dot).
    pub fn table_id(&self, name: &str) -> Option<usize> {
        table_id(&self.program, name)
    }

    /// The index of action `name` among those of table `table`.
    pub fn action_id(&self, table: usize, name: &str) -> Option<usize> {
        action_id(&self.program, table, name)
    }

    /// The index of the extern instance named `name`.
    pub fn instance_id(&self, name: &str) -> Option<usize> {
        instance_id(&self.program, name)
    }

    /// Installs an entry.
    pub fn add_entry(&mut self, table: usize, entry: Entry) -> Result<usize, TableError> {
        let t = &self.program.tables[table];
        if t.const_entries_fixed {
            return Err(TableError::Const(t.name.clone(), "entries"));
        }
        self.check_action(table, &entry.action)?;
        if entry.matches.len() != t.keys.len() {
            return Err(TableError::KeyCount {
                table: t.name.clone(),
                want: t.keys.len(),
                got: entry.matches.len(),
            });
        }
        for (i, m) in entry.matches.iter().enumerate() {
            self.state.tables[table].check_match(i, m, &t.keys[i].name)?;
        }
        self.state.tables[table].insert(entry)
    }

    /// Removes an entry.
    pub fn remove_entry(&mut self, table: usize, handle: usize) -> Result<(), TableError> {
        self.state.tables[table].remove(handle)
    }

    /// Removes every entry of every table that is not const.
    pub fn clear_tables(&mut self) {
        for (t, state) in self.program.tables.iter().zip(self.state.tables.iter_mut()) {
            if !t.const_entries_fixed {
                state.clear();
            }
        }
    }

    /// Sets the default action.
    pub fn set_default(&mut self, table: usize, call: ActionCall) -> Result<(), TableError> {
        let t = &self.program.tables[table];
        if t.const_default {
            return Err(TableError::Const(t.name.clone(), "default action"));
        }
        self.check_action(table, &call)?;
        self.state.tables[table].default_action = call;
        Ok(())
    }

    fn check_action(&self, table: usize, call: &ActionCall) -> Result<(), TableError> {
        let t = &self.program.tables[table];
        let action = &self.program.actions[call.action];
        if !t.actions.contains(&call.action) {
            return Err(TableError::BadAction {
                table: t.name.clone(),
                action: action.name.clone(),
            });
        }
        let want = self.program.bodies[action.body]
            .params
            .iter()
            .filter(|p| p.action_data)
            .count();
        if call.args.len() != want {
            return Err(TableError::ArgCount {
                action: action.name.clone(),
                want,
                got: call.args.len(),
            });
        }
        Ok(())
    }

    /// The action profile or selector of `table`.
    fn profile_of(&self, table: usize) -> Result<usize, TableError> {
        let t = &self.program.tables[table];
        t.profile
            .ok_or_else(|| TableError::NoProfile(t.name.clone()))
    }

    /// Adds (or replaces) member `member` of the action profile of `table`: an action of the table
    /// with its data.
    pub fn add_member(
        &mut self,
        table: usize,
        member: u32,
        call: ActionCall,
    ) -> Result<(), TableError> {
        let profile = self.profile_of(table)?;
        self.check_action(table, &call)?;
        self.state.profiles[profile].members.insert(member, call);
        Ok(())
    }

    /// Creates (or empties) group `group` of the action selector of `table`.
    pub fn create_selector_group(&mut self, table: usize, group: u32) -> Result<(), TableError> {
        let profile = self.profile_of(table)?;
        self.state.profiles[profile]
            .groups
            .insert(group, Vec::new());
        Ok(())
    }

    /// Adds member `member` to group `group` of the action selector of `table`.
    pub fn add_to_group(
        &mut self,
        table: usize,
        group: u32,
        member: u32,
    ) -> Result<(), TableError> {
        let index = self.profile_of(table)?;
        let profile = &mut self.state.profiles[index];
        if !profile.members.contains_key(&member) {
            return Err(TableError::NoMember("member", member));
        }
        profile
            .groups
            .get_mut(&group)
            .ok_or(TableError::NoMember("group", group))?
            .push(member);
        Ok(())
    }

    /// Installs an entry of a table with an action profile that runs member `member`.
    pub fn add_member_entry(
        &mut self,
        table: usize,
        matches: Vec<FieldMatch>,
        priority: i64,
        member: u32,
    ) -> Result<usize, TableError> {
        let profile = self.profile_of(table)?;
        let call = self.state.profiles[profile]
            .members
            .get(&member)
            .cloned()
            .ok_or(TableError::NoMember("member", member))?;
        self.add_entry(
            table,
            Entry {
                matches,
                priority,
                action: call,
            },
        )
    }

    /// Installs an entry of a table with an action selector that runs a member of group `group`,
    /// picked by the hash of the selector keys (the default action while the group is empty).
    pub fn add_group_entry(
        &mut self,
        table: usize,
        matches: Vec<FieldMatch>,
        priority: i64,
        group: u32,
    ) -> Result<usize, TableError> {
        let profile = self.profile_of(table)?;
        if !self.state.profiles[profile].groups.contains_key(&group) {
            return Err(TableError::NoMember("group", group));
        }
        let placeholder = self.state.tables[table].default_action.clone();
        let handle = self.add_entry(
            table,
            Entry {
                matches,
                priority,
                action: placeholder,
            },
        )?;
        self.state.tables[table].set_group(handle, group);
        Ok(handle)
    }

    /// Adds a member to parser value set `instance`; false if it is full or not a value set.
    pub fn value_set_add(&mut self, instance: usize, member: FieldMatch) -> bool {
        match self.program.instances[instance].kind {
            InstanceKind::ValueSet { size, .. }
                if self.state.value_sets[instance].len() < size as usize =>
            {
                self.state.value_sets[instance].push(member);
                true
            }
            _ => false,
        }
    }

    /// Adds (or replaces) clone session `session` sending to `port`.
    pub fn set_clone_session(&mut self, session: u32, port: u16) {
        self.mirroring.set(session, port);
    }

    /// Removes clone session `session`.
    pub fn remove_clone_session(&mut self, session: u32) {
        self.mirroring.remove(session);
    }

    /// Makes multicast group `group` replicate to `replicas` (egress port, replication id),
    /// creating or replacing it.
    pub fn set_multicast_group(&mut self, group: u16, replicas: &[(u16, u16)]) {
        self.pre.set_group(group, replicas);
    }

    /// Removes multicast group `group` and its nodes.
    pub fn remove_multicast_group(&mut self, group: u16) {
        self.pre.remove_group(group);
    }

    /// Creates multicast group `group` (empty).
    pub fn create_group(&mut self, group: u16) {
        self.pre.create_group(group);
    }

    /// Creates a replication node (`rid`, ports); returns its handle.
    pub fn create_node(&mut self, rid: u16, ports: Vec<u16>) -> usize {
        self.pre.create_node(rid, ports)
    }

    /// Adds node `node` to group `group`; false if either is unknown.
    pub fn associate_node(&mut self, group: u16, node: usize) -> bool {
        self.pre.associate_node(group, node)
    }
}

/// The index of the table of `program` named `name` (full name, or a unique suffix after a dot).
pub fn table_id(program: &Program, name: &str) -> Option<usize> {
    find_by_name(program.tables.iter().map(|t| t.name.as_str()), name)
}

/// The index of action `name` among those of table `table` of `program`.
pub fn action_id(program: &Program, table: usize, name: &str) -> Option<usize> {
    let actions = &program.tables[table].actions;
    let names = actions.iter().map(|&a| program.actions[a].name.as_str());
    find_by_name(names, name).map(|i| actions[i])
}

/// The index of the extern instance of `program` named `name`.
pub fn instance_id(program: &Program, name: &str) -> Option<usize> {
    find_by_name(program.instances.iter().map(|i| i.name.as_str()), name)
}

/// The position of `name` in `names`: an exact match, else the only name ending in `.name`.
pub fn find_by_name<'a>(names: impl Iterator<Item = &'a str> + Clone, name: &str) -> Option<usize> {
    if let Some(i) = names.clone().position(|n| n == name) {
        return Some(i);
    }
    let suffix = format!(".{name}");
    let hits: Vec<usize> = names
        .enumerate()
        .filter(|(_, n)| n.ends_with(&suffix))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}
