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

/// Where table `t` goes on a hit and on a miss (`None`: the end), if its `next_tables` are by
/// hit and miss (`__HIT__`, `__MISS__`: a table applied in `if (t.apply().hit)`) rather than by
/// action; a missing one of the two is the end.
pub fn hit_miss(t: &Value) -> Option<(Option<&str>, Option<&str>)> {
    let Some(Value::Object(next)) = t.get("next_tables") else {
        return None;
    };
    if !next.contains_key("__HIT__") && !next.contains_key("__MISS__") {
        return None;
    }
    let to = |key| next.get(key).and_then(Value::as_str);
    Some((to("__HIT__"), to("__MISS__")))
}

/// No node: the pipeline's end.
const END: u32 = u32::MAX;

/// The nodes of one pipeline by name, with the join of every node reachable from its first.
pub struct Graph<'p> {
    names: Vec<&'p str>,
    nodes: Vec<Node<'p>>,
    index: HashMap<&'p str, u32>,
    /// By node: its immediate post-dominator ([`END`]: the pipeline's end; also for the nodes
    /// not reachable from the first, which are never lowered).
    joins: Vec<u32>,
}

impl<'p> Graph<'p> {
    /// The graph of pipeline `p`, from its node `init` on; two nodes of one name are refused.
    pub fn of(p: &'p Value, init: Option<&'p str>) -> Result<Graph<'p>> {
        let tables = array_member(p, "tables", "a pipeline")?;
        let conditionals = array_member(p, "conditionals", "a pipeline")?;
        let mut graph = Graph {
            names: Vec::new(),
            nodes: Vec::new(),
            index: HashMap::new(),
            joins: Vec::new(),
        };
        let all = tables.iter().map(|t| (t, "a table", Node::Table(t))).chain(
            conditionals
                .iter()
                .map(|c| (c, "a conditional", Node::Conditional(c))),
        );
        for (object, what, node) in all {
            let name = name(object, what)?;
            let i = graph.nodes.len() as u32;
            if graph.index.insert(name, i).is_some() {
                return fail(format!("a pipeline has two nodes called {name}"));
            }
            graph.names.push(name);
            graph.nodes.push(node);
        }
        graph.joins = vec![END; graph.nodes.len()];
        let init = init.and_then(|n| graph.index.get(n).copied());
        let order = graph.post_order(init)?;
        graph.post_dominators(&order)?;
        Ok(graph)
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<Node<'p>> {
        match self.index.get(name) {
            Some(&i) => Ok(self.nodes[i as usize]),
            None => fail(format!("a pipeline goes to unknown node {name}")),
        }
    }

    /// Where the branches of node `name` meet again (`None`: only at the pipeline's end).
    pub fn join(&self, name: &str) -> Option<&'p str> {
        let &i = self.index.get(name)?;
        let join = self.joins[i as usize];
        (join != END).then(|| self.names[join as usize])
    }

    /// The node called `name`, if there is one, else [`END`] (an unknown node is refused where
    /// the lowering meets it; here it counts as the end).
    fn index_of(&self, name: Option<&str>) -> u32 {
        name.and_then(|n| self.index.get(n).copied()).unwrap_or(END)
    }

    /// The nodes that may follow node `i` ([`END`]: the end), the edges the lowering follows:
    /// a hit/miss table's two, another table's by action and its `base_default_next`, a
    /// conditional's two.
    fn successors(&self, i: u32) -> Vec<u32> {
        match self.nodes[i as usize] {
            Node::Table(t) => match hit_miss(t) {
                Some((hit, miss)) => vec![self.index_of(hit), self.index_of(miss)],
                None => {
                    let mut next: Vec<u32> = match t.get("next_tables") {
                        Some(Value::Object(m)) => {
                            m.values().map(|v| self.index_of(v.as_str())).collect()
                        }
                        _ => Vec::new(),
                    };
                    next.push(self.index_of(t.get("base_default_next").and_then(Value::as_str)));
                    next
                }
            },
            Node::Conditional(c) => ["true_next", "false_next"]
                .iter()
                .map(|k| self.index_of(c.get(*k).and_then(Value::as_str)))
                .collect(),
        }
    }

    /// The nodes reachable from `init`, each after every node that may follow it (a
    /// depth-first post-order, without recursion); a cycle is an error.
    fn post_order(&self, init: Option<u32>) -> Result<Vec<u32>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Seen {
            Not,
            OnPath,
            Done,
        }
        let mut seen = vec![Seen::Not; self.nodes.len()];
        let mut order = Vec::new();
        let Some(init) = init else {
            return Ok(order);
        };
        // Each frame: a node and the successors still to visit.
        let mut stack = vec![(init, self.successors(init))];
        seen[init as usize] = Seen::OnPath;
        while let Some((node, rest)) = stack.last_mut() {
            match rest.pop() {
                Some(END) => {}
                Some(next) => match seen[next as usize] {
                    Seen::OnPath => {
                        return fail(format!(
                            "a pipeline's control flow graph has a cycle through node {}",
                            self.names[next as usize]
                        ))
                    }
                    Seen::Done => {}
                    Seen::Not => {
                        seen[next as usize] = Seen::OnPath;
                        let successors = self.successors(next);
                        stack.push((next, successors));
                    }
                },
                None => {
                    let node = *node;
                    seen[node as usize] = Seen::Done;
                    order.push(node);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }

    /// Sets every node's immediate post-dominator, given the nodes in `order` (each after its
    /// successors, whose joins and depths are therefore set when it is reached).
    fn post_dominators(&mut self, order: &[u32]) -> Result<()> {
        // The depth of each node in the post-dominator tree, whose root is the end (depth 0).
        let mut depth = vec![0u32; self.nodes.len()];
        let depth_of = |depth: &[u32], n: u32| if n == END { 0 } else { depth[n as usize] };
        let mut steps = 0usize;
        for &node in order {
            let mut join: Option<u32> = None;
            for next in self.successors(node) {
                join = Some(match join {
                    None => next,
                    Some(mut a) => {
                        let mut b = next;
                        while a != b {
                            steps += 1;
                            if steps > limits::MAX_JOIN_STEPS {
                                return fail(format!(
                                    "a pipeline's control flow graph takes more than {} steps \
                                     to find where its branches meet (limits::MAX_JOIN_STEPS)",
                                    limits::MAX_JOIN_STEPS
                                ));
                            }
                            if depth_of(&depth, a) >= depth_of(&depth, b) {
                                a = self.joins[a as usize];
                            } else {
                                b = self.joins[b as usize];
                            }
                        }
                        a
                    }
                });
            }
            let join = join.unwrap_or(END);
            depth[node as usize] = depth_of(&depth, join) + 1;
            self.joins[node as usize] = join;
        }
        Ok(())
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
    fn a_hit_miss_table_without_a_miss_ends_there() {
        // t0 goes to t1 on a hit and ends on a miss: they meet only at the end.
        let p = json!({
            "tables": [
                {"name": "t0", "next_tables": {"__HIT__": "t1"}, "base_default_next": "t1"},
                table("t1", None),
            ],
        });
        let g = Graph::of(&p, Some("t0")).unwrap();
        assert_eq!(g.join("t0"), None);
    }

    #[test]
    fn two_nodes_of_one_name_are_refused() {
        let p = json!({
            "conditionals": [conditional("x", None, None)],
            "tables": [table("x", None)],
        });
        let e = Graph::of(&p, Some("x")).err().unwrap();
        assert!(e.to_string().contains("two nodes called x"), "{e}");
    }

    #[test]
    fn a_graph_whose_branches_meet_far_away_is_refused_within_the_step_limit() {
        // A chain of 8,000 conditionals, and 1,000 nodes that branch to the chain's top and to
        // the end: each walks the whole chain to find they meet at the end.
        let chain = 8_000;
        let mut conditionals: Vec<Value> = (0..chain)
            .map(|i| {
                let next = (i + 1 < chain).then(|| format!("c{}", i + 1));
                conditional(&format!("c{i}"), next.as_deref(), next.as_deref())
            })
            .collect();
        for i in 0..1_000 {
            let next = (i + 1 < 1_000).then(|| format!("x{}", i + 1));
            conditionals.push(conditional(&format!("x{i}"), Some("c0"), next.as_deref()));
        }
        let p = json!({ "conditionals": conditionals });
        let e = Graph::of(&p, Some("x0")).err().unwrap();
        assert!(e.to_string().contains("MAX_JOIN_STEPS"), "{e}");
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
