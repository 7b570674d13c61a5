//! Cyclic buffer dependencies, the condition of a PFC deadlock (Hu et al., HotNets'16): per
//! lossless priority, the graph whose nodes are the lossless egress queues (switch, port) and
//! whose edges go from a queue to the next queue a packet in it takes (from the forwarding
//! entries, along every route to every host): a queue waits on the next one, which pauses it
//! when full. A cycle in the graph is a set of queues that can all be full and all paused by
//! each other, forever. The cycles reported are those a depth-first search closes: at least
//! one in every set of queues that wait on each other (not every elementary cycle of it, of
//! which there can be exponentially many), each once (rotated to its smallest queue), with
//! the destinations whose routes form each of its edges; at most [`MAX_CYCLES`] a priority.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    fabric::{End, Fabric},
    finding::{Finding, Place, Severity},
    paths::{self, Port},
};

/// The most cycles reported per priority (a broken fabric has many, all fixed alike).
pub const MAX_CYCLES: usize = 16;

/// The buffer-dependency graph of one priority: edges, each with the hosts whose routes make
/// it.
type Graph = BTreeMap<Port, BTreeMap<Port, BTreeSet<usize>>>;

/// Every cycle of every lossless priority's buffer-dependency graph.
pub fn cycles(fabric: &Fabric) -> Vec<Finding> {
    let walks: Vec<paths::Walk> = (0..fabric.hosts.len())
        .map(|h| paths::walk(fabric, h))
        .collect();
    let mut found = Vec::new();
    for p in fabric.lossless_priorities() {
        let lossless = |&(s, port): &Port| fabric.switches[s].tables.pfc.contains_key(&(port, p));
        let mut graph: Graph = BTreeMap::new();
        for (dst, walk) in walks.iter().enumerate() {
            for (from, to) in &walk.steps {
                if lossless(from) && lossless(to) {
                    graph
                        .entry(*from)
                        .or_default()
                        .entry(*to)
                        .or_default()
                        .insert(dst);
                }
            }
        }
        let all = find_cycles(&graph);
        let more = all.len().saturating_sub(MAX_CYCLES);
        for cycle in all.into_iter().take(MAX_CYCLES) {
            found.push(report(fabric, &graph, &cycle, p, more));
        }
    }
    found
}

/// The cycles of `graph`, each once, rotated to start at its smallest node: every cycle a
/// depth-first search closes with an edge back to a node on its path.
fn find_cycles(graph: &Graph) -> Vec<Vec<Port>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        Grey,
        Black,
    }
    let mut colour: BTreeMap<Port, Colour> = BTreeMap::new();
    let mut cycles: BTreeSet<Vec<Port>> = BTreeSet::new();
    let next = |n: &Port| -> Vec<Port> {
        graph
            .get(n)
            .map(|e| e.keys().copied().collect())
            .unwrap_or_default()
    };
    for &root in graph.keys() {
        if colour.contains_key(&root) {
            continue;
        }
        // The path from the root, each node with the successors left to visit.
        let mut stack: Vec<(Port, Vec<Port>)> = vec![(root, next(&root))];
        colour.insert(root, Colour::Grey);
        while let Some((node, left)) = stack.last_mut() {
            let node = *node;
            let Some(succ) = left.pop() else {
                colour.insert(node, Colour::Black);
                stack.pop();
                continue;
            };
            match colour.get(&succ) {
                None => {
                    colour.insert(succ, Colour::Grey);
                    let n = next(&succ);
                    stack.push((succ, n));
                }
                Some(Colour::Grey) => {
                    let start = stack
                        .iter()
                        .position(|(n, _)| *n == succ)
                        .expect("a grey node is on the path");
                    let mut cycle: Vec<Port> = stack[start..].iter().map(|(n, _)| *n).collect();
                    let min = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
                    cycle.rotate_left(min);
                    cycles.insert(cycle);
                }
                Some(Colour::Black) => {}
            }
        }
    }
    cycles.into_iter().collect()
}

/// The finding of one cycle of priority `p`: its queues, and per edge the destinations whose
/// routes make it.
fn report(fabric: &Fabric, graph: &Graph, cycle: &[Port], p: u8, more: usize) -> Finding {
    let name = |&(s, port): &Port| fabric.describe(End::Switch(s, port));
    let mut ring: Vec<String> = cycle.iter().map(name).collect();
    ring.push(name(&cycle[0]));
    let routes: Vec<String> = (0..cycle.len())
        .map(|i| {
            let (a, b) = (cycle[i], cycle[(i + 1) % cycle.len()]);
            let dsts: Vec<&str> = graph[&a][&b]
                .iter()
                .map(|&h| fabric.hosts[h].name.as_str())
                .collect();
            format!(
                "{} → {} by the routes to {}",
                name(&a),
                name(&b),
                dsts.join(", ")
            )
        })
        .collect();
    let mut detail = routes.join("; ");
    if more > 0 {
        detail.push_str(&format!(" ({more} more cycles at this priority not shown)"));
    }
    let (s, port) = cycle[0];
    Finding::new(
        "buffer-cycle",
        Severity::Error,
        Place::switch(&fabric.switches[s].name)
            .port(port)
            .priority(p),
        format!(
            "the lossless queues {} wait on each other in a cycle, so once all are full their \
             pauses hold each other forever (a PFC deadlock)",
            ring.join(" → ")
        ),
        "route up then down only (no route through a spine back up to another spine), or \
         make one queue of the cycle lossy"
            .into(),
    )
    .detail(detail)
}
