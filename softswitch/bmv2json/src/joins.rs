//! Where a pipeline's branches meet again. A BMv2 pipeline is a graph of tables and
//! conditionals, each naming the nodes that may follow it (`next_tables` and
//! `base_default_next`, `true_next` and `false_next`; none is the pipeline's end). p4c writes
//! an `if` or a `switch` as a node whose branches lead to the same node after them, so the
//! statements from that node on can be lowered once, after the branching statement, instead of
//! once at the end of every branch: the node is the branching node's immediate post-dominator
//! (the first node every path from it to the end goes through), its *join*.
//!
//! The joins are computed on the nodes reachable from the pipeline's first node, in reverse
//! topological order (Cooper, Harvey and Kennedy's intersection of post-dominator chains; on a
//! graph without cycles one pass is exact). A cycle is an error, as BMv2's graphs have none,
//! and the walk's steps are bounded by [`limits::MAX_JOIN_STEPS`].

use std::collections::HashMap;

use serde_json::Value;

use crate::{
    fail,
    json::{array_member, name},
    limits, Result,
};

/// A pipeline's node: a table or a conditional, its JSON object.
#[derive(Clone, Copy)]
pub enum Node<'p> {
    /// An entry of the pipeline's `tables`.
    Table(&'p Value),
    /// An entry of the pipeline's `conditionals`.
    Conditional(&'p Value),
}

/// The nodes of one pipeline by name, with the join of every node reachable from its first.
pub struct Graph<'p> {
    nodes: HashMap<&'p str, Node<'p>>,
    /// Node → its immediate post-dominator (`None`: the pipeline's end).
    joins: HashMap<&'p str, Option<&'p str>>,
}

impl<'p> Graph<'p> {
    /// The graph of pipeline `p`, from its node `init` on.
    pub fn of(p: &'p Value, init: Option<&'p str>) -> Result<Graph<'p>> {
        let mut nodes = HashMap::new();
        for t in array_member(p, "tables", "a pipeline")? {
            nodes.insert(name(t, "a table")?, Node::Table(t));
        }
        for c in array_member(p, "conditionals", "a pipeline")? {
            nodes.insert(name(c, "a conditional")?, Node::Conditional(c));
        }
        let mut graph = Graph {
            nodes,
            joins: HashMap::new(),
        };
        let order = graph.post_order(init)?;
        graph.joins = graph.post_dominators(&order)?;
        Ok(graph)
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<Node<'p>> {
        self.nodes.get(name).copied().map_or_else(
            || fail(format!("a pipeline goes to unknown node {name}")),
            Ok,
        )
    }

    /// Where the branches of node `name` meet again (`None`: only at the pipeline's end).
    pub fn join(&self, name: &str) -> Option<&'p str> {
        self.joins.get(name).copied().flatten()
    }

    /// The nodes that may follow node `name` (`None`: the end), unknown names included (the
    /// lowering refuses them where it meets them).
    fn successors(&self, name: &str) -> Vec<Option<&'p str>> {
        match self.nodes.get(name) {
            None => Vec::new(),
            Some(Node::Table(t)) => {
                let mut next: Vec<Option<&'p str>> = match t.get("next_tables") {
                    Some(Value::Object(m)) => m.values().map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let has_hit_miss = matches!(t.get("next_tables"), Some(Value::Object(m))
                    if m.contains_key("__HIT__") || m.contains_key("__MISS__"));
                if !has_hit_miss {
                    next.push(t.get("base_default_next").and_then(Value::as_str));
                }
                next
            }
            Some(Node::Conditional(c)) => ["true_next", "false_next"]
                .iter()
                .map(|k| c.get(*k).and_then(Value::as_str))
                .collect(),
        }
    }

    /// The nodes reachable from `init`, each after every node that may follow it (a
    /// depth-first post-order, without recursion); a cycle is an error.
    fn post_order(&self, init: Option<&'p str>) -> Result<Vec<&'p str>> {
        #[derive(PartialEq)]
        enum Seen {
            OnPath,
            Done,
        }
        let mut seen: HashMap<&'p str, Seen> = HashMap::new();
        let mut order = Vec::new();
        let Some(init) = init else {
            return Ok(order);
        };
        // Each frame: a node and the successors still to visit.
        let mut stack = vec![(init, self.successors(init))];
        seen.insert(init, Seen::OnPath);
        while let Some((node, rest)) = stack.last_mut() {
            match rest.pop() {
                Some(Some(next)) if self.nodes.contains_key(next) => match seen.get(next) {
                    Some(Seen::OnPath) => {
                        return fail(format!(
                            "a pipeline's control flow graph has a cycle through node {next}"
                        ))
                    }
                    Some(Seen::Done) => {}
                    None => {
                        seen.insert(next, Seen::OnPath);
                        let successors = self.successors(next);
                        stack.push((next, successors));
                    }
                },
                Some(_) => {}
                None => {
                    let node = *node;
                    seen.insert(node, Seen::Done);
                    order.push(node);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }

    /// Every node's immediate post-dominator, given the nodes in `order` (each after its
    /// successors).
    fn post_dominators(&self, order: &[&'p str]) -> Result<HashMap<&'p str, Option<&'p str>>> {
        // The depth of each node in the post-dominator tree, whose root is the end (depth 0).
        let mut depth: HashMap<&'p str, usize> = HashMap::new();
        let mut joins: HashMap<&'p str, Option<&'p str>> = HashMap::new();
        let mut steps = 0usize;
        for &node in order {
            let mut join: Option<Option<&'p str>> = None;
            for next in self.successors(node) {
                // An unknown node is lowered as an error; here it counts as the end.
                let next = next.filter(|n| self.nodes.contains_key(n));
                join = Some(match join {
                    None => next,
                    Some(j) => {
                        let (mut a, mut b) = (j, next);
                        while a != b {
                            steps += 1;
                            if steps > limits::MAX_JOIN_STEPS {
                                return fail(format!(
                                    "a pipeline's control flow graph takes more than {} steps \
                                     to find where its branches meet (limits::MAX_JOIN_STEPS)",
                                    limits::MAX_JOIN_STEPS
                                ));
                            }
                            let depth_of = |n: Option<&str>| n.map_or(0, |n| depth[n]);
                            if depth_of(a) >= depth_of(b) {
                                a = a.and_then(|n| joins[n]);
                            } else {
                                b = b.and_then(|n| joins[n]);
                            }
                        }
                        a
                    }
                });
            }
            let join = join.flatten();
            depth.insert(node, join.map_or(0, |j| depth[j]) + 1);
            joins.insert(node, join);
        }
        Ok(joins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conditional(name: &str, t: Option<&str>, f: Option<&str>) -> Value {
        json!({"name": name, "true_next": t, "false_next": f})
    }

    fn table(name: &str, next: Option<&str>) -> Value {
        json!({"name": name, "next_tables": {"a": next}, "base_default_next": next})
    }

    #[test]
    fn an_if_else_meets_again_at_the_node_after_it() {
        // c0 ? t1 : t2; then t3.
        let p = json!({
            "conditionals": [conditional("c0", Some("t1"), Some("t2"))],
            "tables": [table("t1", Some("t3")), table("t2", Some("t3")), table("t3", None)],
        });
        let g = Graph::of(&p, Some("c0")).unwrap();
        assert_eq!(g.join("c0"), Some("t3"));
        assert_eq!(g.join("t1"), Some("t3"));
        assert_eq!(g.join("t3"), None);
    }

    #[test]
    fn an_if_without_else_meets_at_its_false_branch() {
        let p = json!({
            "conditionals": [conditional("c0", Some("t1"), Some("t2"))],
            "tables": [table("t1", Some("t2")), table("t2", None)],
        });
        assert_eq!(Graph::of(&p, Some("c0")).unwrap().join("c0"), Some("t2"));
    }

    #[test]
    fn nested_branches_meet_at_the_outer_join() {
        // c0 ? (c1 ? t1 : t2) : t3; then t4. c1 meets at t4 too.
        let p = json!({
            "conditionals": [
                conditional("c0", Some("c1"), Some("t3")),
                conditional("c1", Some("t1"), Some("t2")),
            ],
            "tables": [
                table("t1", Some("t4")), table("t2", Some("t4")), table("t3", Some("t4")),
                table("t4", None),
            ],
        });
        let g = Graph::of(&p, Some("c0")).unwrap();
        assert_eq!(g.join("c0"), Some("t4"));
        assert_eq!(g.join("c1"), Some("t4"));
    }

    #[test]
    fn a_branch_to_the_end_meets_only_at_the_end() {
        let p = json!({
            "conditionals": [conditional("c0", Some("t1"), None)],
            "tables": [table("t1", None)],
        });
        assert_eq!(Graph::of(&p, Some("c0")).unwrap().join("c0"), None);
    }

    #[test]
    fn a_cycle_is_refused() {
        let p = json!({
            "conditionals": [conditional("c0", Some("t1"), None)],
            "tables": [table("t1", Some("c0"))],
        });
        let e = Graph::of(&p, Some("c0")).err().unwrap();
        assert!(e.to_string().contains("cycle"), "{e}");
    }

    #[test]
    fn a_long_chain_of_diamonds_is_found_in_linear_steps() {
        // 5,000 if/else in a row: each meets at the next.
        let n = 5_000;
        let mut conditionals = Vec::new();
        let mut tables = Vec::new();
        for i in 0..n {
            let next = (i + 1 < n).then(|| format!("c{}", i + 1));
            conditionals.push(conditional(
                &format!("c{i}"),
                Some(&format!("a{i}")),
                Some(&format!("b{i}")),
            ));
            tables.push(table(&format!("a{i}"), next.as_deref()));
            tables.push(table(&format!("b{i}"), next.as_deref()));
        }
        let p = json!({"conditionals": conditionals, "tables": tables});
        let g = Graph::of(&p, Some("c0")).unwrap();
        assert_eq!(g.join("c0"), Some("c1"));
        assert_eq!(g.join(&format!("c{}", n - 1)), None);
    }
}
