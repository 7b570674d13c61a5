//! The simulation: nodes (switches and hosts), the links between their ports, the flows, the
//! failures, and the loop that takes events in time order and hands each to the one link,
//! node or flow it concerns.

use std::collections::HashMap;
use std::sync::Arc;

use p4values::runtime_json::RuntimeConfig;
use softswitch_core::compiled::Fallback;
use softswitch_core::ir::Program;
pub use softswitch_core::switch::Execution;

use crate::event::{Event, EventQueue, FlowId, LinkId, NodeId};
use crate::flows::{FlowError, FlowSpec, Flows};
use crate::host::{HostConfig, HostNode};
use crate::link::{End, Link, Wires};
use crate::runtime::{self, RuntimeError};
use crate::switch::{SwitchNode, MAX_PORT};
use crate::time::Ps;

/// A node of the fabric.
pub enum Node {
    /// A switch.
    Switch(Box<SwitchNode>),
    /// A host.
    Host(Box<HostNode>),
}

impl Node {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Node::Switch(s) => &s.name,
            Node::Host(h) => &h.config.name,
        }
    }
}

/// What fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failing {
    /// The cable at this end (both directions).
    Link(End),
    /// A switch: every cable on it.
    Switch(NodeId),
}

/// What the control plane does after a failure: after a delay (detection and convergence),
/// every routing table it names is emptied on the switches it names and their new entries
/// written.
#[derive(Clone, Debug)]
pub struct Reroute {
    /// Time from the failure to the new entries.
    pub after: Ps,
    /// Tables emptied first on each switch below.
    pub tables: Vec<String>,
    /// The switches' new entries (of those tables).
    pub entries: Vec<(NodeId, RuntimeConfig)>,
}

/// A failure of the scenario.
#[derive(Clone, Debug)]
pub struct Failure {
    /// When.
    pub at: Ps,
    /// What.
    pub what: Failing,
    /// The control plane's reaction, if any.
    pub reroute: Option<Reroute>,
}

/// Why the fabric could not be built as asked.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A node that does not exist, or of the wrong kind.
    #[error("no {kind} with index {node}")]
    NoNode {
        /// What was wanted.
        kind: &'static str,
        /// The index.
        node: NodeId,
    },
    /// A port used twice or out of range.
    #[error("{node} port {port}: {why}")]
    Port {
        /// The node's name.
        node: String,
        /// The port.
        port: u16,
        /// What is wrong.
        why: &'static str,
    },
    /// A flow.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// A flow between hosts that are not hosts, or from a host to itself.
    #[error("flow {flow}: {why}")]
    FlowEnds {
        /// The flow's index.
        flow: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// Entries that do not apply.
    #[error("{switch}: {source}")]
    Entries {
        /// The switch.
        switch: String,
        /// Why.
        source: RuntimeError,
    },
    /// Past a limit.
    #[error("{0}")]
    Limit(String),
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    /// Nothing was left to happen.
    Idle,
    /// The time limit came.
    TimeLimit,
    /// The observer asked to stop.
    Stopped,
}

/// Events between two calls of a run's observer.
pub const OBSERVE_EVERY: u64 = 1 << 16;

/// The most links (directions) a fabric may have.
pub const MAX_LINKS: usize = 1 << 22;

/// The fabric and everything in it.
#[derive(Default)]
pub struct Simulation {
    now: Ps,
    events: EventQueue,
    nodes: Vec<Node>,
    links: Vec<Link>,
    flows: Flows,
    /// QP number and UDP source port per (source, destination, connection, QP).
    qps: HashMap<(NodeId, NodeId, u32, u16), (u32, u16)>,
    /// Whether each QP (not each connection) takes its own UDP source port.
    sport_per_qp: bool,
    /// Mixed into every UDP source port drawn.
    sport_seed: u64,
    failures: Vec<Failure>,
    /// How the switches run their program ([`Simulation::set_execution`]).
    execution: Execution,
    started: bool,
    /// When the last frame arrived or finished leaving.
    last_frame: Ps,
}

/// A UDP source port for `key`, in the RoCEv2 range 0xC000-0xFFFF (a splitmix64 mix, so that
/// neighbouring keys land far apart).
fn source_port(key: u64) -> u16 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    0xC000 | (z as u16 & 0x3FFF)
}

/// The seed as it is mixed into a source port's key: 0 stays 0 (runs without a seed keep their
/// ports), others spread over all 64 bits.
fn source_port_seed_mix(seed: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Simulation {
    /// An empty fabric at time 0, its switches running their program compiled.
    pub fn new() -> Self {
        Simulation {
            execution: Execution::Compiled,
            ..Self::default()
        }
    }

    /// Chooses how every switch, those added so far and those added later, runs its program:
    /// compiled (the default: the same outputs as the interpreter, which the differential
    /// tests check, at a lower cost) or interpreted (the reference). The switches that run
    /// one program (one `Arc`) share one compiled form of it.
    pub fn set_execution(&mut self, execution: Execution) {
        self.execution = execution;
        for node in 0..self.nodes.len() {
            self.apply_execution(node);
        }
    }

    /// How the switches run their program.
    pub fn execution(&self) -> Execution {
        self.execution
    }

    /// The blocks of the switches' programs that run interpreted although the switches run
    /// compiled, with why (one list per program; none when they run interpreted).
    pub fn compile_fallbacks(&self) -> Vec<Fallback> {
        let mut seen: Vec<&Program> = Vec::new();
        let mut fallbacks = Vec::new();
        for node in &self.nodes {
            let Node::Switch(s) = node else { continue };
            if !seen.iter().any(|p| std::ptr::eq(*p, s.core.program())) {
                seen.push(s.core.program());
                fallbacks.extend_from_slice(s.core.compile_fallbacks());
            }
        }
        fallbacks
    }

    /// Makes switch `node` (if it is one) run its program as [`Simulation::set_execution`]
    /// chose, sharing the compiled form of the nearest switch before it that runs the same
    /// program (those before it already run as chosen).
    fn apply_execution(&mut self, node: usize) {
        let execution = self.execution;
        let (before, rest) = self.nodes.split_at_mut(node);
        let Some(Node::Switch(switch)) = rest.first_mut() else {
            return;
        };
        let same = before.iter().rev().find_map(|n| match n {
            Node::Switch(s) if std::ptr::eq(s.core.program(), switch.core.program()) => Some(s),
            _ => None,
        });
        match same {
            Some(s) => switch.core.set_execution_as(&s.core),
            None => switch.core.set_execution(execution),
        }
    }

    /// Gives every QP its own UDP source port (RoCE NICs that hash the QP number into it);
    /// by default the QPs of one connection share the connection's (one 5-tuple, many QPs:
    /// the case E-ECMP is for).
    pub fn set_source_port_per_qp(&mut self, per_qp: bool) {
        self.sport_per_qp = per_qp;
    }

    /// Draws the UDP source ports with `seed` (0 by default): which ports the NICs pick, and
    /// so which paths an ECMP hash gives the connections, is a random choice of the run.
    pub fn set_source_port_seed(&mut self, seed: u64) {
        self.sport_seed = seed;
    }

    /// Adds a switch running `program` (shared, not copied, by the switches given the same
    /// `Arc`, as is its compiled form) with a shared buffer of `buffer_bytes`.
    pub fn add_switch(
        &mut self,
        name: impl Into<String>,
        program: Arc<Program>,
        buffer_bytes: Option<u64>,
    ) -> NodeId {
        self.nodes.push(Node::Switch(Box::new(SwitchNode::new(
            name.into(),
            program,
            buffer_bytes,
        ))));
        self.apply_execution(self.nodes.len() - 1);
        (self.nodes.len() - 1) as NodeId
    }

    /// Adds a host.
    pub fn add_host(&mut self, config: HostConfig) -> NodeId {
        self.nodes.push(Node::Host(Box::new(HostNode::new(config))));
        (self.nodes.len() - 1) as NodeId
    }

    /// Cables `a` to `b` (both directions) at `rate_bps` with a propagation delay of `delay`.
    pub fn connect(&mut self, a: End, b: End, rate_bps: u64, delay: Ps) -> Result<(), SimError> {
        if self.links.len() + 2 > MAX_LINKS {
            return Err(SimError::Limit(format!(
                "more than {MAX_LINKS} link directions"
            )));
        }
        for end in [a, b] {
            let node = self.nodes.get(end.node as usize).ok_or(SimError::NoNode {
                kind: "node",
                node: end.node,
            })?;
            let taken = match node {
                Node::Switch(s) => {
                    if end.port > MAX_PORT {
                        return Err(SimError::Port {
                            node: s.name.clone(),
                            port: end.port,
                            why: "above 510",
                        });
                    }
                    s.link(end.port).is_some()
                }
                Node::Host(h) => h.link().is_some(),
            };
            if taken {
                return Err(SimError::Port {
                    node: node.name().to_string(),
                    port: end.port,
                    why: "cabled twice",
                });
            }
        }
        for (from, to) in [(a, b), (b, a)] {
            let id = self.links.len() as LinkId;
            self.links.push(Link::new(from, to, rate_bps, delay));
            match &mut self.nodes[from.node as usize] {
                Node::Switch(s) => s.attach(from.port, id),
                Node::Host(h) => h.attach(id, rate_bps),
            }
        }
        Ok(())
    }

    /// The link that leaves from `from`.
    pub fn link_from(&self, from: End) -> Option<LinkId> {
        self.links
            .iter()
            .position(|l| l.from == from)
            .map(|i| i as LinkId)
    }

    /// The link direction `id`, to change (its rate, what it counts).
    pub fn link_mut(&mut self, id: LinkId) -> &mut Link {
        &mut self.links[id as usize]
    }

    /// Writes `entries` into switch `node`.
    pub fn apply_entries(&mut self, node: NodeId, entries: &RuntimeConfig) -> Result<(), SimError> {
        let s = self.switch_mut(node)?;
        runtime::apply(entries, &mut s.core).map_err(|source| SimError::Entries {
            switch: s.name.clone(),
            source,
        })
    }

    /// Adds a flow between two hosts.
    pub fn add_flow(&mut self, spec: FlowSpec) -> Result<FlowId, SimError> {
        let flow = self.flows.len();
        for end in [spec.src, spec.dst] {
            if !matches!(self.nodes.get(end as usize), Some(Node::Host(_))) {
                return Err(SimError::FlowEnds {
                    flow,
                    why: "its ends must be hosts",
                });
            }
        }
        if spec.src == spec.dst {
            return Err(SimError::FlowEnds {
                flow,
                why: "a host does not send to itself",
            });
        }
        let key = (spec.src, spec.dst, spec.connection, spec.qp);
        if !self.qps.contains_key(&key) {
            let qpn = self.qps.len() as u32 + 1;
            if qpn > wire::bth::MASK_24 {
                return Err(SimError::Limit("more than 2^24 - 1 QPs".into()));
            }
            let sport_key = (u64::from(spec.src) << 40)
                ^ (u64::from(spec.dst) << 16)
                ^ (u64::from(spec.connection) << 20)
                ^ if self.sport_per_qp {
                    u64::from(spec.qp) << 56
                } else {
                    0
                };
            let sport = source_port(sport_key ^ source_port_seed_mix(self.sport_seed));
            self.qps.insert(key, (qpn, sport));
        }
        Ok(self.flows.add(spec)?)
    }

    /// Adds a failure.
    pub fn add_failure(&mut self, failure: Failure) {
        self.failures.push(failure);
    }

    /// The time now.
    pub fn now(&self) -> Ps {
        self.now
    }

    /// When the last frame arrived or finished leaving: the end of the traffic (timers that
    /// fire later do nothing on the wire).
    pub fn last_frame(&self) -> Ps {
        self.last_frame
    }

    /// Events handled so far.
    pub fn events_handled(&self) -> u64 {
        self.events.taken
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The flows.
    pub fn flows(&self) -> &Flows {
        &self.flows
    }

    /// The QP number and UDP source port of a flow's QP.
    pub fn qp_of(&self, flow: FlowId) -> (u32, u16) {
        let s = self.flows.spec(flow);
        self.qps[&(s.src, s.dst, s.connection, s.qp)]
    }

    /// Switch `node`.
    pub fn switch(&self, node: NodeId) -> Result<&SwitchNode, SimError> {
        match self.nodes.get(node as usize) {
            Some(Node::Switch(s)) => Ok(s),
            _ => Err(SimError::NoNode {
                kind: "switch",
                node,
            }),
        }
    }

    /// Switch `node`, to change.
    pub fn switch_mut(&mut self, node: NodeId) -> Result<&mut SwitchNode, SimError> {
        match self.nodes.get_mut(node as usize) {
            Some(Node::Switch(s)) => Ok(s),
            _ => Err(SimError::NoNode {
                kind: "switch",
                node,
            }),
        }
    }

    /// Host `node`.
    pub fn host(&self, node: NodeId) -> Result<&HostNode, SimError> {
        match self.nodes.get(node as usize) {
            Some(Node::Host(h)) => Ok(h),
            _ => Err(SimError::NoNode { kind: "host", node }),
        }
    }

    /// Runs until nothing is left to happen, time `until` comes, or `observe` (called every
    /// [`OBSERVE_EVERY`] events) returns false; may be called again to go on. The first call
    /// refuses flows that wait for flows that do not exist.
    pub fn run(
        &mut self,
        until: Ps,
        mut observe: impl FnMut(&Simulation) -> bool,
    ) -> Result<RunEnd, SimError> {
        if !self.started {
            self.started = true;
            self.flows.schedule(&mut self.events)?;
            for (i, f) in self.failures.iter().enumerate() {
                self.events.at(f.at, Event::Fail(i as u32));
            }
        }
        loop {
            if self.events.taken.is_multiple_of(OBSERVE_EVERY)
                && self.events.taken > 0
                && !observe(self)
            {
                return Ok(RunEnd::Stopped);
            }
            match self.events.peek_time() {
                None => return Ok(RunEnd::Idle),
                Some(t) if t > until => {
                    self.now = until;
                    return Ok(RunEnd::TimeLimit);
                }
                Some(_) => {}
            }
            let (at, event) = self.events.pop().expect("an event was there");
            self.now = at;
            self.handle(event);
        }
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        if matches!(event, Event::Arrive(_) | Event::TxDone(_)) {
            self.last_frame = now;
        }
        let Simulation {
            nodes,
            links,
            events,
            flows,
            ..
        } = self;
        let wires = &mut Wires { links, events };
        match event {
            Event::Arrive(l) => {
                let Some(frame) = wires.links[l as usize].arrive(l, wires.events) else {
                    return;
                };
                let to = wires.links[l as usize].to;
                match &mut nodes[to.node as usize] {
                    Node::Switch(s) => s.receive(to.node, to.port, frame, now, wires),
                    Node::Host(h) => h.receive(to.node, frame, now, wires, flows),
                }
            }
            Event::TxDone(l) => {
                let from = wires.links[l as usize].from;
                match &mut nodes[from.node as usize] {
                    Node::Switch(s) => s.transmitted(from.node, from.port, now, wires),
                    Node::Host(h) => h.transmitted(from.node, now, wires),
                }
            }
            Event::Wake(node, port) => match &mut nodes[node as usize] {
                Node::Switch(s) => s.wake(node, port, now, wires),
                Node::Host(h) => h.wake(node, now, wires),
            },
            Event::Retransmit(node, qp, generation) => {
                if let Node::Host(h) = &mut nodes[node as usize] {
                    h.retransmit_timer(node, qp, generation, now, wires);
                }
            }
            Event::FlowStart(flow) => self.start_flow(flow),
            Event::Fail(i) => self.fail(i),
            Event::Reroute(i) => self.reroute(i),
        }
    }

    fn start_flow(&mut self, flow: FlowId) {
        let now = self.now;
        self.flows.started(flow, now);
        let spec = self.flows.spec(flow).clone();
        let (qpn, sport) = self.qps[&(spec.src, spec.dst, spec.connection, spec.qp)];
        let ip = |n: &Node| match n {
            Node::Host(h) => h.config.ip,
            Node::Switch(_) => unreachable!("flows are between hosts (checked when added)"),
        };
        let (src_ip, dst_ip) = (
            ip(&self.nodes[spec.src as usize]),
            ip(&self.nodes[spec.dst as usize]),
        );
        if let Node::Host(h) = &mut self.nodes[spec.dst as usize] {
            h.post_receive(flow, spec.bytes, src_ip, qpn);
        }
        let Simulation {
            nodes,
            links,
            events,
            ..
        } = self;
        if let Node::Host(h) = &mut nodes[spec.src as usize] {
            let wires = &mut Wires { links, events };
            h.post_send(spec.src, flow, spec.bytes, dst_ip, qpn, sport, now, wires);
        }
    }

    /// Both directions of every cable at `end`'s port.
    fn cable(&self, end: End) -> Vec<LinkId> {
        self.links
            .iter()
            .enumerate()
            .filter(|(_, l)| l.from == end || l.to == end)
            .map(|(i, _)| i as LinkId)
            .collect()
    }

    fn fail(&mut self, i: u32) {
        let failure = self.failures[i as usize].clone();
        let cut: Vec<LinkId> = match failure.what {
            Failing::Link(end) => self.cable(end),
            Failing::Switch(node) => self
                .links
                .iter()
                .enumerate()
                .filter(|(_, l)| l.from.node == node || l.to.node == node)
                .map(|(i, _)| i as LinkId)
                .collect(),
        };
        for l in cut {
            self.links[l as usize].fail();
        }
        if let Some(r) = &failure.reroute {
            self.events.at(self.now + r.after, Event::Reroute(i));
        }
    }

    fn reroute(&mut self, i: u32) {
        let Some(r) = self.failures[i as usize].reroute.clone() else {
            return;
        };
        for (node, entries) in &r.entries {
            let Ok(s) = self.switch_mut(*node) else {
                continue;
            };
            for t in &r.tables {
                if let Some(id) = s.core.table_id(t) {
                    // Only const tables refuse: routing tables are not const.
                    let _ = s.core.clear_table(id);
                }
            }
            // Entries were checked against the program when the scenario was built.
            let _ = runtime::apply(entries, &mut s.core);
        }
    }
}
