//! Where the forwarding entries send packets: for each destination host, every hop a packet
//! to it may take from any host (every member of every ECMP group followed), as queues
//! (switch, egress port) and the steps from one queue to the next. Forwarding in lossless.p4
//! depends on the destination address only, so one walk per destination covers every source.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::fabric::{End, Fabric};

/// An egress queue's port: (switch, egress port); a priority makes it a queue.
pub type Port = (usize, u16);

/// Where packets to one host go.
#[derive(Clone, Debug, Default)]
pub struct Walk {
    /// Every (switch, egress port) a packet to the host leaves by.
    pub ports: BTreeSet<Port>,
    /// Every step: a packet leaves the first port and, at the next switch, the second.
    pub steps: BTreeSet<(Port, Port)>,
    /// Switches a packet to the host reaches that drop it (no route, or a drop route).
    pub dropped_at: BTreeSet<usize>,
}

/// The walk of packets to host `dst` from every other host.
pub fn walk(fabric: &Fabric, dst: usize) -> Walk {
    let ip = fabric.hosts[dst].ip;
    let mut w = Walk::default();
    // Switches reached, each once (its ports depend on the destination only).
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<usize> = (0..fabric.hosts.len())
        .filter(|&h| h != dst)
        .filter_map(|h| fabric.attachment(h).map(|(s, _, _)| s))
        .collect();
    let mut out: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
    let mut ports_of = |s: usize| -> Vec<u16> {
        out.entry(s)
            .or_insert_with(|| fabric.switches[s].tables.ports_to(ip))
            .clone()
    };
    while let Some(s) = queue.pop_front() {
        if !seen.insert(s) {
            continue;
        }
        let ports = ports_of(s);
        if ports.is_empty() {
            w.dropped_at.insert(s);
        }
        for p in ports {
            w.ports.insert((s, p));
            if let Some((_, End::Switch(t, _))) = fabric.peer(s, p) {
                for q in ports_of(t) {
                    w.steps.insert(((s, p), (t, q)));
                }
                queue.push_back(t);
            }
        }
    }
    w
}
