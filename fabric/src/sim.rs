//! The fabric: softswitch instances and hosts wired by links, on one discrete-event µs clock.
//!
//! Each link direction serializes frames at its rate (a FIFO: a frame starts when the previous
//! one is out) and delivers them after its latency. Switch queues are softswitch's traffic
//! manager, every queue of a port drained at the link's rate in packets per second for frames of
//! [`FabricConfig::frame_bytes`] bytes, so that queues build in the switch, where the P4 program
//! sees them (`enq_qdepth`), not on the wire. Each step moves the clock to the earliest of: a
//! delivery, a switch queue ready to send, a host ready to send; then every switch is advanced
//! to it, deliveries are handed over, and hosts send.

use crate::host::Host;
use crate::runtime::{self, RuntimeError};
use crate::topology::{parse_ipv4, parse_mac, End, TopologyError, TopologyFile};
use softswitch_core::ir::Program;
use softswitch_core::switch::{Clock, Switch};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::path::Path;

/// Settings of a fabric.
#[derive(Clone, Copy, Debug)]
pub struct FabricConfig {
    /// The frame size that switch queue rates are computed for (packets per second = link rate
    /// / 8 / frame_bytes), bytes.
    pub frame_bytes: usize,
    /// Depth of every switch queue, packets (BMv2's default is 64).
    pub queue_depth: usize,
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            frame_bytes: 1000,
            queue_depth: 64,
        }
    }
}

/// A node's port: a switch port or a host's only port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Port {
    /// Switch index, port.
    Switch(usize, u16),
    /// Host index.
    Host(usize),
}

/// One direction of a link.
#[derive(Debug)]
pub struct Link {
    /// Where it leaves from.
    pub from: Port,
    /// Where it arrives.
    pub to: Port,
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Propagation delay, µs.
    pub latency_us: u64,
    /// When the last frame handed to it is fully sent, µs.
    busy_until: u64,
    in_flight: VecDeque<(u64, Vec<u8>)>,
    /// Frames carried.
    pub frames: u64,
    /// RoCEv2 frames carried per (source address, UDP source port).
    pub flows: BTreeMap<(u32, u16), u64>,
}

/// A switch of the fabric.
pub struct SwitchNode {
    /// Name in the topology.
    pub name: String,
    /// The switch.
    pub switch: Switch,
    /// Outgoing link of each port.
    pub ports: BTreeMap<u16, usize>,
}

/// Why a fabric could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// The topology file.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A runtime file.
    #[error("switch {switch}: {source}")]
    Runtime {
        /// The switch.
        switch: String,
        /// Why.
        source: RuntimeError,
    },
    /// Something else, said in words.
    #[error("{0}")]
    Invalid(String),
}

/// The fabric.
pub struct Fabric {
    now: u64,
    config: FabricConfig,
    /// Switches.
    pub switches: Vec<SwitchNode>,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Link directions.
    pub links: Vec<Link>,
    host_links: Vec<usize>,
    deliveries: BinaryHeap<Reverse<(u64, u64, usize)>>,
    sequence: u64,
    max_queue: BTreeMap<(usize, u16, u8), usize>,
}

impl Fabric {
    /// Builds the fabric of `topology` (a tutorials-style `topology.json`), every switch running
    /// `program` with the entries of its runtime file.
    pub fn load(
        topology: &Path,
        program: &Program,
        config: FabricConfig,
    ) -> Result<Self, FabricError> {
        let (topo, dir) = TopologyFile::load(topology)?;
        let mut fabric = Fabric {
            now: 0,
            config,
            switches: Vec::new(),
            hosts: Vec::new(),
            links: Vec::new(),
            host_links: Vec::new(),
            deliveries: BinaryHeap::new(),
            sequence: 0,
            max_queue: BTreeMap::new(),
        };
        for (name, spec) in &topo.switches {
            let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
            let runtime_err = |source| FabricError::Runtime {
                switch: name.clone(),
                source,
            };
            runtime::load(&dir.join(&spec.runtime_json))
                .and_then(|rt| runtime::apply(&rt, &mut switch))
                .map_err(runtime_err)?;
            switch
                .set_queue_depth(None, None, config.queue_depth)
                .map_err(|e| FabricError::Invalid(format!("queue depth: {e}")))?;
            fabric.switches.push(SwitchNode {
                name: name.clone(),
                switch,
                ports: BTreeMap::new(),
            });
        }
        let specs = topo.link_specs()?;
        for (name, h) in &topo.hosts {
            let invalid =
                |key: &str| FabricError::Invalid(format!("hosts.{name}.{key}: cannot read it"));
            let ip = parse_ipv4(&h.ip).ok_or_else(|| invalid("ip"))?;
            let mac = parse_mac(&h.mac).ok_or_else(|| invalid("mac"))?;
            let gw = parse_mac(&h.gateway_mac).ok_or_else(|| invalid("gateway_mac"))?;
            let rate = specs
                .iter()
                .find(|l| l.a == End::Host(name.clone()) || l.b == End::Host(name.clone()))
                .map(|l| l.rate_bps)
                .ok_or_else(|| FabricError::Invalid(format!("host {name} has no link")))?;
            fabric.hosts.push(Host::new(name, ip, mac, gw, rate));
            fabric.host_links.push(usize::MAX);
        }
        for l in &specs {
            let a = fabric.port_of(&l.a)?;
            let b = fabric.port_of(&l.b)?;
            fabric.add_link(a, b, l.rate_bps, l.latency_us)?;
            fabric.add_link(b, a, l.rate_bps, l.latency_us)?;
        }
        if let Some(i) = fabric.host_links.iter().position(|&l| l == usize::MAX) {
            return Err(FabricError::Invalid(format!(
                "host {} has no link",
                fabric.hosts[i].name
            )));
        }
        Ok(fabric)
    }

    fn port_of(&self, end: &End) -> Result<Port, FabricError> {
        match end {
            End::Host(name) => self.host_index(name).map(Port::Host),
            End::Switch(name, port) => self.switch_index(name).map(|s| Port::Switch(s, *port)),
        }
    }

    fn add_link(
        &mut self,
        from: Port,
        to: Port,
        rate_bps: u64,
        latency_us: u64,
    ) -> Result<(), FabricError> {
        let id = self.links.len();
        let taken = match from {
            Port::Host(h) => std::mem::replace(&mut self.host_links[h], id) != usize::MAX,
            Port::Switch(s, p) => self.switches[s].ports.insert(p, id).is_some(),
        };
        if taken {
            return Err(FabricError::Invalid(format!("{from:?} is wired twice")));
        }
        self.links.push(Link {
            from,
            to,
            rate_bps,
            latency_us,
            busy_until: 0,
            in_flight: VecDeque::new(),
            frames: 0,
            flows: BTreeMap::new(),
        });
        self.set_rate(id, rate_bps);
        Ok(())
    }

    /// Sets a link direction's rate, and the queue rate of the switch port it leaves from.
    fn set_rate(&mut self, link: usize, rate_bps: u64) {
        self.links[link].rate_bps = rate_bps;
        if let Port::Switch(s, p) = self.links[link].from {
            let pps = rate_bps / (8 * self.config.frame_bytes as u64);
            self.switches[s]
                .switch
                .set_queue_rate(Some(p), None, Some(pps.max(1)))
                .expect("no priority given, so none out of range");
        }
    }

    /// Changes the rate of the link out of `switch` port `port` (that direction only).
    pub fn set_port_rate(
        &mut self,
        switch: &str,
        port: u16,
        rate_bps: u64,
    ) -> Result<(), FabricError> {
        let s = self.switch_index(switch)?;
        let link = *self.switches[s]
            .ports
            .get(&port)
            .ok_or_else(|| FabricError::Invalid(format!("{switch} has no port {port}")))?;
        self.set_rate(link, rate_bps);
        Ok(())
    }

    /// The index of switch `name`.
    pub fn switch_index(&self, name: &str) -> Result<usize, FabricError> {
        self.switches
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| FabricError::Invalid(format!("no switch '{name}'")))
    }

    /// The index of host `name`.
    pub fn host_index(&self, name: &str) -> Result<usize, FabricError> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| FabricError::Invalid(format!("no host '{name}'")))
    }

    /// The switch `name`. Panics if there is none (for tests).
    pub fn switch(&mut self, name: &str) -> &mut Switch {
        let i = self.switch_index(name).expect("a switch of the topology");
        &mut self.switches[i].switch
    }

    /// The host `name`. Panics if there is none (for tests).
    pub fn host(&mut self, name: &str) -> &mut Host {
        let i = self.host_index(name).expect("a host of the topology");
        &mut self.hosts[i]
    }

    /// The link direction from `switch` port `port`. Panics if it is not wired (for tests).
    pub fn link_from(&self, switch: &str, port: u16) -> &Link {
        let s = self.switch_index(switch).expect("a switch of the topology");
        &self.links[self.switches[s].ports[&port]]
    }

    /// The current time, µs.
    pub fn now_us(&self) -> u64 {
        self.now
    }

    /// The most packets ever seen waiting in `switch`'s queue (`port`, `priority`) at a step.
    pub fn max_queue(&self, switch: &str, port: u16, priority: u8) -> usize {
        let s = self.switch_index(switch).expect("a switch of the topology");
        self.max_queue
            .get(&(s, port, priority))
            .copied()
            .unwrap_or(0)
    }

    /// The most packets ever seen waiting in any queue of `priority`, and where (switch, port).
    pub fn deepest_queue(&self, priority: u8) -> (usize, String, u16) {
        self.max_queue
            .iter()
            .filter(|((_, _, p), _)| *p == priority)
            .map(|(&(s, port, _), &n)| (n, self.switches[s].name.clone(), port))
            .max()
            .unwrap_or((0, String::new(), 0))
    }

    /// Tail drops in `priority` over every queue of every switch.
    pub fn tail_drops(&self, priority: u8) -> u64 {
        self.switches
            .iter()
            .flat_map(|s| {
                s.ports
                    .keys()
                    .map(move |&p| s.switch.queue_drops(p, priority))
            })
            .sum()
    }

    /// Runs until every host has sent everything and the fabric is empty, or until `limit_us`;
    /// returns whether it emptied.
    pub fn run(&mut self, limit_us: u64) -> bool {
        while let Some(t) = self.next_event() {
            if t > limit_us {
                return false;
            }
            self.step(t);
        }
        true
    }

    fn next_event(&self) -> Option<u64> {
        let delivery = self.deliveries.peek().map(|Reverse((t, _, _))| *t);
        let queues = self
            .switches
            .iter()
            .filter_map(|s| s.switch.next_ready_us());
        let hosts = self
            .hosts
            .iter()
            .zip(&self.host_links)
            .filter_map(|(h, &l)| h.next_send_us(self.free_at(l)));
        delivery.into_iter().chain(queues).chain(hosts).min()
    }

    /// When `link` can take a frame: when its last frame is out, and not before now (a host
    /// that gets something to send, such as a CNP, on a link idle since earlier sends it now,
    /// not in the past).
    fn free_at(&self, link: usize) -> u64 {
        self.links[link].busy_until.max(self.now)
    }

    fn step(&mut self, t: u64) {
        self.now = t;
        for s in 0..self.switches.len() {
            let now = self.switches[s].switch.now_us();
            self.switches[s].switch.advance(t - now);
            self.forward_outputs(s);
        }
        while let Some(&Reverse((at, _, link))) = self.deliveries.peek() {
            if at > t {
                break;
            }
            self.deliveries.pop();
            let (_, frame) = self.links[link]
                .in_flight
                .pop_front()
                .expect("a frame per delivery");
            match self.links[link].to {
                Port::Host(h) => self.hosts[h].receive(t, &frame),
                Port::Switch(s, port) => {
                    self.switches[s].switch.receive(port, frame);
                    self.forward_outputs(s);
                }
            }
        }
        for h in 0..self.hosts.len() {
            let link = self.host_links[h];
            if self.hosts[h].next_send_us(self.free_at(link)) == Some(t) {
                if let Some(frame) = self.hosts[h].send(t) {
                    self.transmit(link, frame);
                }
            }
        }
        self.sample_queues();
    }

    fn forward_outputs(&mut self, s: usize) {
        let outputs: Vec<_> = self.switches[s].switch.drain_outputs().collect();
        for o in outputs {
            // A frame for an unwired port is lost, as on a switch whose port has no cable.
            if let Some(&link) = self.switches[s].ports.get(&o.port) {
                self.transmit(link, o.data);
            }
        }
    }

    fn transmit(&mut self, link: usize, frame: Vec<u8>) {
        let l = &mut self.links[link];
        let bits = frame.len() as u64 * 8;
        let start = l.busy_until.max(self.now);
        l.busy_until = start + (bits * 1_000_000).div_ceil(l.rate_bps);
        let arrival = l.busy_until + l.latency_us;
        l.frames += 1;
        if let Ok(r) = crate::frame::Roce::parse(&frame) {
            *l.flows.entry((r.src_ip, r.sport)).or_default() += 1;
        }
        l.in_flight.push_back((arrival, frame));
        self.sequence += 1;
        self.deliveries
            .push(Reverse((arrival, self.sequence, link)));
    }

    fn sample_queues(&mut self) {
        for (i, s) in self.switches.iter().enumerate() {
            for &port in s.ports.keys() {
                for priority in 0..8u8 {
                    let n = s.switch.queue_occupancy(port, priority);
                    if n > 0 {
                        let m = self.max_queue.entry((i, port, priority)).or_default();
                        *m = (*m).max(n);
                    }
                }
            }
        }
    }
}

/// A counter cell's packet count of `switch`, by the counter's name (`LosslessEgress.pfc_hold`).
pub fn counter(switch: &Switch, name: &str, index: usize) -> u64 {
    let instance = switch
        .instance_id(name)
        .unwrap_or_else(|| panic!("no counter '{name}'"));
    switch
        .read_counter(instance, index)
        .unwrap_or_else(|e| panic!("counter '{name}': {e}"))
        .packets
}
