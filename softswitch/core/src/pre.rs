//! The packet replication engine, as BMv2's `simple_pre`: multicast groups made of replication
//! nodes, each node a replication id (`egress_rid`) and the ports it copies a packet to. A
//! destroyed node's handle is the next node's (the lowest free first, as BMv2's), so groups
//! rewritten all day keep the engine at the size of what it holds.

use std::collections::{BTreeSet, HashMap};

use crate::budget::{REPLICATION_ITEM_BYTES, REPLICA_BYTES};

/// Multicast groups and their nodes.
#[derive(Clone, Debug, Default)]
pub struct ReplicationEngine {
    groups: HashMap<u16, Vec<usize>>,
    nodes: Vec<Option<(u16, Vec<u16>)>>,
    /// Empty node slots below the last one.
    free: BTreeSet<usize>,
    /// What the groups and nodes are charged against the switch's state budget.
    footprint: usize,
}

/// What a node copying to `ports` ports is charged.
fn node_footprint(ports: usize) -> usize {
    REPLICATION_ITEM_BYTES + ports * REPLICA_BYTES
}

/// What a group of `nodes` nodes is charged (its nodes are charged apart).
fn group_footprint(nodes: usize) -> usize {
    REPLICATION_ITEM_BYTES + nodes * REPLICA_BYTES
}

impl ReplicationEngine {
    /// Makes group `group` replicate to `replicas` (egress port, replication id), creating or
    /// replacing it: one node per replication id.
    pub fn set_group(&mut self, group: u16, replicas: &[(u16, u16)]) {
        self.remove_group(group);
        self.create_group(group);
        let mut rids: Vec<u16> = replicas.iter().map(|&(_, rid)| rid).collect();
        rids.sort_unstable();
        rids.dedup();
        for rid in rids {
            let ports = replicas
                .iter()
                .filter(|&&(_, r)| r == rid)
                .map(|&(port, _)| port)
                .collect();
            let node = self.create_node(rid, ports);
            self.associate_node(group, node);
        }
    }

    /// Removes group `group` and its nodes.
    pub fn remove_group(&mut self, group: u16) {
        if let Some(nodes) = self.groups.remove(&group) {
            self.footprint -= group_footprint(nodes.len());
            for node in nodes {
                self.free_node(node);
            }
        }
    }

    /// Removes group `group`, leaving its nodes (dissociated) for other groups; false if there
    /// is no such group.
    pub fn destroy_group(&mut self, group: u16) -> bool {
        match self.groups.remove(&group) {
            Some(nodes) => {
                self.footprint -= group_footprint(nodes.len());
                true
            }
            None => false,
        }
    }

    /// Creates group `group` (empty) unless it exists.
    pub fn create_group(&mut self, group: u16) {
        if let std::collections::hash_map::Entry::Vacant(v) = self.groups.entry(group) {
            v.insert(Vec::new());
            self.footprint += group_footprint(0);
        }
    }

    /// Creates a replication node (`rid`, ports); returns its handle.
    pub fn create_node(&mut self, rid: u16, ports: Vec<u16>) -> usize {
        self.footprint += node_footprint(ports.len());
        match self.free.pop_first() {
            Some(node) => {
                self.nodes[node] = Some((rid, ports));
                node
            }
            None => {
                self.nodes.push(Some((rid, ports)));
                self.nodes.len() - 1
            }
        }
    }

    /// Empties node slot `node` (which holds a node) for the next node.
    fn free_node(&mut self, node: usize) {
        if let Some((_, ports)) = self.nodes[node].take() {
            self.footprint -= node_footprint(ports.len());
        }
        self.free.insert(node);
        while self.free.last().is_some_and(|&n| n + 1 == self.nodes.len()) {
            self.free.pop_last();
            self.nodes.pop();
        }
        if self.nodes.capacity() > 64 && self.nodes.len() * 4 < self.nodes.capacity() {
            self.nodes.shrink_to(self.nodes.len() * 2);
        }
    }

    /// Adds node `node` to group `group`; false if either is unknown.
    pub fn associate_node(&mut self, group: u16, node: usize) -> bool {
        match (self.groups.get_mut(&group), self.nodes.get(node)) {
            (Some(g), Some(Some(_))) => {
                g.push(node);
                self.footprint += REPLICA_BYTES;
                true
            }
            _ => false,
        }
    }

    /// Removes node `node` from group `group`; false if the node is not in the group.
    pub fn dissociate_node(&mut self, group: u16, node: usize) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        let before = g.len();
        g.retain(|&n| n != node);
        self.footprint -= (before - g.len()) * REPLICA_BYTES;
        g.len() != before
    }

    /// Changes the ports of node `node`; false if there is no such node.
    pub fn update_node(&mut self, node: usize, ports: Vec<u16>) -> bool {
        match self.nodes.get_mut(node) {
            Some(Some((_, p))) => {
                self.footprint =
                    self.footprint - p.len() * REPLICA_BYTES + ports.len() * REPLICA_BYTES;
                *p = ports;
                true
            }
            _ => false,
        }
    }

    /// Destroys node `node`, taking it out of every group; false if there is no such node.
    pub fn destroy_node(&mut self, node: usize) -> bool {
        if !matches!(self.nodes.get(node), Some(Some(_))) {
            return false;
        }
        self.free_node(node);
        for g in self.groups.values_mut() {
            let before = g.len();
            g.retain(|&m| m != node);
            self.footprint -= (before - g.len()) * REPLICA_BYTES;
        }
        true
    }

    /// What the groups and nodes are charged against the switch's state budget.
    pub fn footprint(&self) -> usize {
        self.footprint
    }

    /// Every group with its nodes (in the order they joined), by group id.
    pub fn groups(&self) -> Vec<(u16, Vec<usize>)> {
        let mut groups: Vec<(u16, Vec<usize>)> =
            self.groups.iter().map(|(&g, n)| (g, n.clone())).collect();
        groups.sort_unstable_by_key(|&(g, _)| g);
        groups
    }

    /// Every node with its handle, replication id and ports, by handle.
    pub fn nodes(&self) -> impl Iterator<Item = (usize, u16, &[u16])> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(h, n)| n.as_ref().map(|(rid, ports)| (h, *rid, ports.as_slice())))
    }

    /// The copies group `group` makes, as (egress port, replication id), node by node in the
    /// order they joined; none for an unknown group.
    pub fn replicas(&self, group: u16) -> Vec<(u16, u16)> {
        let nodes = self
            .groups
            .get(&group)
            .map(Vec::as_slice)
            .unwrap_or_default();
        nodes
            .iter()
            .filter_map(|&n| self.nodes.get(n).and_then(Option::as_ref))
            .flat_map(|(rid, ports)| ports.iter().map(move |&port| (port, *rid)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_copies_to_each_node_in_order_and_forgets_removed_nodes() {
        let mut pre = ReplicationEngine::default();
        pre.set_group(1, &[(3, 7), (2, 5), (4, 7)]);
        assert_eq!(pre.replicas(1), [(2, 5), (3, 7), (4, 7)]);
        assert_eq!(pre.replicas(2), []);
        let node = pre.create_node(9, vec![8]);
        assert!(pre.associate_node(1, node));
        assert!(!pre.associate_node(2, node), "group 2 does not exist");
        assert_eq!(pre.replicas(1).last(), Some(&(8, 9)));
        pre.remove_group(1);
        assert_eq!(pre.replicas(1), []);
        pre.create_group(1);
        assert!(!pre.associate_node(1, node), "its nodes went with it");
    }

    #[test]
    fn nodes_leave_groups_change_ports_and_are_destroyed() {
        let mut pre = ReplicationEngine::default();
        pre.create_group(1);
        let a = pre.create_node(1, vec![2, 3]);
        let b = pre.create_node(2, vec![4]);
        assert!(pre.associate_node(1, a) && pre.associate_node(1, b));
        assert_eq!(pre.groups(), [(1, vec![a, b])]);
        assert!(pre.dissociate_node(1, a));
        assert!(!pre.dissociate_node(1, a), "not in the group any more");
        assert_eq!(pre.replicas(1), [(4, 2)]);
        assert!(pre.update_node(b, vec![5, 6]));
        assert_eq!(pre.replicas(1), [(5, 2), (6, 2)]);
        assert!(pre.destroy_node(b));
        assert!(!pre.destroy_node(b) && !pre.update_node(b, vec![]));
        assert_eq!(pre.replicas(1), []);
        assert_eq!(pre.nodes().map(|(h, ..)| h).collect::<Vec<_>>(), [a]);
    }

    /// Groups rewritten again and again reuse their nodes' slots, and what is charged goes
    /// back to nothing when everything goes.
    #[test]
    fn rewritten_groups_reuse_node_slots_and_footprints_balance() {
        let mut pre = ReplicationEngine::default();
        for i in 0..1000u16 {
            pre.set_group(1, &[(1, i), (2, i), (3, i + 1)]);
            pre.set_group(2, &[(4, 0)]);
        }
        assert_eq!(pre.nodes.len(), 3, "{:?}", pre.nodes);
        let a = pre.create_node(9, vec![1, 2]);
        assert!(pre.associate_node(1, a) && pre.associate_node(2, a));
        assert!(pre.update_node(a, vec![3]));
        assert!(pre.dissociate_node(2, a));
        pre.remove_group(2);
        assert!(pre.destroy_node(a));
        assert!(pre.destroy_group(1));
        // Group 1's nodes stay, dissociated, until destroyed.
        let left: Vec<usize> = pre.nodes().map(|(h, ..)| h).collect();
        for node in left {
            assert!(pre.destroy_node(node));
        }
        assert_eq!((pre.footprint(), pre.nodes.len()), (0, 0));
    }
}
