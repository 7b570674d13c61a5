//! The packet replication engine, as BMv2's `simple_pre`: multicast groups made of replication
//! nodes, each node a replication id (`egress_rid`) and the ports it copies a packet to.

use std::collections::HashMap;

/// Multicast groups and their nodes.
#[derive(Clone, Debug, Default)]
pub struct ReplicationEngine {
    groups: HashMap<u16, Vec<usize>>,
    nodes: Vec<Option<(u16, Vec<u16>)>>,
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
        for node in self.groups.remove(&group).unwrap_or_default() {
            self.nodes[node] = None;
        }
    }

    /// Removes group `group`, leaving its nodes (dissociated) for other groups; false if there
    /// is no such group.
    pub fn destroy_group(&mut self, group: u16) -> bool {
        self.groups.remove(&group).is_some()
    }

    /// Creates group `group` (empty) unless it exists.
    pub fn create_group(&mut self, group: u16) {
        self.groups.entry(group).or_default();
    }

    /// Creates a replication node (`rid`, ports); returns its handle.
    pub fn create_node(&mut self, rid: u16, ports: Vec<u16>) -> usize {
        self.nodes.push(Some((rid, ports)));
        self.nodes.len() - 1
    }

    /// Adds node `node` to group `group`; false if either is unknown.
    pub fn associate_node(&mut self, group: u16, node: usize) -> bool {
        match (self.groups.get_mut(&group), self.nodes.get(node)) {
            (Some(g), Some(Some(_))) => {
                g.push(node);
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
        g.len() != before
    }

    /// Changes the ports of node `node`; false if there is no such node.
    pub fn update_node(&mut self, node: usize, ports: Vec<u16>) -> bool {
        match self.nodes.get_mut(node) {
            Some(Some((_, p))) => {
                *p = ports;
                true
            }
            _ => false,
        }
    }

    /// Destroys node `node`, taking it out of every group; false if there is no such node.
    pub fn destroy_node(&mut self, node: usize) -> bool {
        match self.nodes.get_mut(node) {
            Some(n @ Some(_)) => {
                *n = None;
                for g in self.groups.values_mut() {
                    g.retain(|&m| m != node);
                }
                true
            }
            _ => false,
        }
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
}
