//! Up-down routing over a fabric with failed links and switches, as BGP runs a Clos (RFC 7938:
//! a private AS per switch, multipath over equal AS-path lengths): a switch learns a subnet
//! (the /24 of a first-tier switch's hosts) from a neighbour only if the neighbour still reaches
//! it, and never from above once it has it from below, so every path goes up, then down, and
//! is the shortest the live fabric allows. A switch sends a subnet it reaches below down, over
//! every live port on a shortest path; a subnet it does not, up, over every live uplink whose
//! switch reaches it on a shortest path; a subnet neither reaches, nowhere.
//!
//! Then each switch's table is made small with aggregated prefixes: one route for 10.0.0.0/8
//! (every address) over the uplinks most subnets take; a /16 area (a pod, a rail, the
//! leaf-spine's whole fabric) where its subnets agree; a /24 only where a subnet differs from
//! what covers it; /32s for a first-tier switch's own hosts. A switch that has every subnet of
//! an area below it in the intact fabric drops the rest of that area (a discard route, as BGP
//! aggregation installs), and a first-tier switch drops the rest of its own /24, so an address
//! that is nobody's goes up until it is dropped, and is never sent down again: no loop.
//!
//! Traffic already on a failed path when the routes change is not rerouted by them: a frame
//! queued for or on a failed link is lost with it, and a frame that reaches a switch whose route
//! for its destination was withdrawn is dropped there (lossless.p4's `dropped` counter), as on a
//! real fabric until BGP has converged. No switch bounces a frame back up (which could close a
//! PFC deadlock cycle): a switch that lost its way down to a subnet never learns it from above
//! in these shapes, since its uplinks' switches reach that subnet only through it.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use crate::fabric::{End, Fabric, LinkId, SwitchId};

/// What has failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// Failed links.
    pub links: BTreeSet<LinkId>,
    /// Failed switches (all their links with them).
    pub switches: BTreeSet<SwitchId>,
}

impl Failures {
    /// Nothing failed.
    pub fn none() -> Failures {
        Failures::default()
    }

    /// These links failed, nothing else.
    pub fn of_links(links: impl IntoIterator<Item = LinkId>) -> Failures {
        Failures {
            links: links.into_iter().collect(),
            ..Failures::default()
        }
    }

    /// These switches failed (with all their links), nothing else.
    pub fn of_switches(switches: impl IntoIterator<Item = SwitchId>) -> Failures {
        Failures {
            switches: switches.into_iter().collect(),
            ..Failures::default()
        }
    }

    /// Whether port `port` of `switch` can carry traffic: its switch, its link and the switch
    /// at its other end are up.
    pub fn port_up(&self, fabric: &Fabric, switch: SwitchId, port: u16) -> bool {
        let Some(p) = fabric.switch(switch).port(port) else {
            return false;
        };
        let peer_up = match p.peer {
            End::Switch(s, _) => !self.switches.contains(&s),
            End::Host(_) => true,
        };
        !self.switches.contains(&switch) && !self.links.contains(&p.link) && peer_up
    }
}

/// Where a route sends its packets.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// To the host on this port.
    Host(u16),
    /// Down over these ports (sorted, at least one).
    Down(Vec<u16>),
    /// Up over these ports (sorted, at least one).
    Up(Vec<u16>),
    /// Nowhere: dropped.
    Drop,
}

/// An LPM route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The prefix.
    pub prefix: Ipv4Addr,
    /// Its length.
    pub len: u8,
    /// Where it sends packets.
    pub action: Action,
}

/// The routes of every switch (a failed switch's are empty), in [`Fabric::switches`]' order.
pub fn routes(fabric: &Fabric, failures: &Failures) -> Vec<Vec<Route>> {
    let subnets = subnets(fabric);
    let intact = next_hops(fabric, &subnets, &Failures::none());
    let failed;
    let live = if *failures == Failures::none() {
        &intact
    } else {
        failed = next_hops(fabric, &subnets, failures);
        &failed
    };
    (0..fabric.switches.len())
        .map(|s| {
            let id = SwitchId(s);
            if failures.switches.contains(&id) {
                return Vec::new();
            }
            table(fabric, failures, &subnets, &intact, &live[s], id)
        })
        .collect()
}

/// The first-tier switches, each with its /24.
fn subnets(fabric: &Fabric) -> Vec<(SwitchId, Ipv4Addr)> {
    fabric
        .switches
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((SwitchId(i), s.subnet?)))
        .collect()
}

/// The /16 area a subnet is in.
fn area(subnet: Ipv4Addr) -> u8 {
    subnet.octets()[1]
}

/// For every switch, for every subnet (in `subnets`' order), its next hops under `failures`:
/// `Down` (or, for the subnet's own switch, `Down` of nothing), `Up` or `Drop`.
fn next_hops(
    fabric: &Fabric,
    subnets: &[(SwitchId, Ipv4Addr)],
    failures: &Failures,
) -> Vec<Vec<Action>> {
    let n = fabric.switches.len();
    let mut by_tier: Vec<SwitchId> = (0..n).map(SwitchId).collect();
    by_tier.sort_by_key(|s| fabric.switch(*s).tier);
    // Live neighbours of each switch: (port, neighbour, whether it is above).
    let neighbours: Vec<Vec<(u16, usize, bool)>> = (0..n)
        .map(|s| {
            let me = fabric.switch(SwitchId(s));
            me.ports
                .iter()
                .filter(|p| failures.port_up(fabric, SwitchId(s), p.number))
                .filter_map(|p| match p.peer {
                    End::Switch(o, _) => Some((p.number, o.0, fabric.switch(o).tier > me.tier)),
                    End::Host(_) => None,
                })
                .collect()
        })
        .collect();
    let mut out = vec![Vec::with_capacity(subnets.len()); n];
    let mut down = vec![None::<u32>; n];
    let mut any = vec![None::<u32>; n];
    for &(owner, _) in subnets {
        // Hops down to the subnet's switch, tier by tier from the bottom.
        for &s in &by_tier {
            down[s.0] = if s == owner {
                (!failures.switches.contains(&s)).then_some(0)
            } else {
                neighbours[s.0]
                    .iter()
                    .filter(|(_, _, above)| !above)
                    .filter_map(|&(_, o, _)| down[o])
                    .min()
                    .map(|d| d + 1)
            };
        }
        // Hops up and down, tier by tier from the top.
        for &s in by_tier.iter().rev() {
            let up = neighbours[s.0]
                .iter()
                .filter(|(_, _, above)| *above)
                .filter_map(|&(_, o, _)| any[o])
                .min()
                .map(|d| d + 1);
            any[s.0] = match (down[s.0], up) {
                (Some(d), _) => Some(d),
                (None, u) => u,
            };
        }
        for s in 0..n {
            let ports = |above: bool, dist: &[Option<u32>], want: u32| -> Vec<u16> {
                neighbours[s]
                    .iter()
                    .filter(|&&(_, o, a)| a == above && dist[o] == Some(want))
                    .map(|&(p, _, _)| p)
                    .collect()
            };
            let action = match (down[s], any[s]) {
                (Some(0), _) => Action::Down(Vec::new()),
                (Some(d), _) => Action::Down(ports(false, &down, d - 1)),
                (None, Some(d)) => Action::Up(ports(true, &any, d - 1)),
                (None, None) => Action::Drop,
            };
            out[s].push(action);
        }
    }
    out
}

/// The aggregated table of switch `id`: `intact` is every switch's next hops in the intact
/// fabric (for which areas it covers), `live` its own under the failures.
fn table(
    fabric: &Fabric,
    failures: &Failures,
    subnets: &[(SwitchId, Ipv4Addr)],
    intact: &[Vec<Action>],
    live: &[Action],
    id: SwitchId,
) -> Vec<Route> {
    let me = fabric.switch(id);
    let mut areas: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (i, (_, subnet)) in subnets.iter().enumerate() {
        areas.entry(area(*subnet)).or_default().push(i);
    }
    // Whether switch `s` has every subnet of `area` below it in the intact fabric.
    let covers = |s: usize, area: &[usize]| {
        area.iter()
            .all(|&i| matches!(intact[s][i], Action::Down(_)))
    };
    let mut routes = Vec::new();
    let root = most_common(
        subnets
            .iter()
            .enumerate()
            .filter(|(_, (owner, _))| *owner != id)
            .map(|(i, _)| &live[i])
            .filter(|a| matches!(a, Action::Up(_))),
    );
    if let Some(up) = &root {
        routes.push(Route {
            prefix: Ipv4Addr::new(10, 0, 0, 0),
            len: 8,
            action: up.clone(),
        });
    }
    for (&area_byte, members) in &areas {
        let from_root = root.clone().unwrap_or(Action::Drop);
        // A switch that has the whole area below it drops the area's unknown addresses.
        let covering = covers(id.0, members);
        let mut inherited = if covering {
            Action::Drop
        } else {
            from_root.clone()
        };
        let others: Vec<&Action> = members
            .iter()
            .filter(|&&i| subnets[i].0 != id)
            .map(|&i| &live[i])
            .collect();
        // May the whole area take this action? Drop, and Up but at a switch that covers the
        // area (whose cover may have brought the address down): an unknown address goes up
        // or nowhere. Down: only to switches that drop the area's unknown addresses.
        let aggregable = |a: &Action| match a {
            Action::Down(ports) => ports.iter().all(|&p| match me.port(p).map(|p| p.peer) {
                Some(End::Switch(s, _)) => covers(s.0, members),
                _ => false,
            }),
            Action::Up(_) => !covering,
            _ => true,
        };
        if let Some(common) = most_common(others.iter().copied().filter(|a| aggregable(a))) {
            let count = others.iter().filter(|a| ***a == common).count();
            if common != inherited && count >= 2 {
                inherited = common;
            }
        }
        if inherited != from_root {
            routes.push(Route {
                prefix: Ipv4Addr::new(10, area_byte, 0, 0),
                len: 16,
                action: inherited.clone(),
            });
        }
        for &i in members {
            let (owner, subnet) = subnets[i];
            if owner == id {
                routes.extend(me.ports.iter().filter_map(|p| match p.peer {
                    End::Host(h) if failures.port_up(fabric, id, p.number) => Some(Route {
                        prefix: fabric.host(h).ip,
                        len: 32,
                        action: Action::Host(p.number),
                    }),
                    _ => None,
                }));
                if inherited != Action::Drop {
                    routes.push(Route {
                        prefix: subnet,
                        len: 24,
                        action: Action::Drop,
                    });
                }
            } else if live[i] != inherited {
                routes.push(Route {
                    prefix: subnet,
                    len: 24,
                    action: live[i].clone(),
                });
            }
        }
    }
    routes
}

/// The action most of `actions` take; ties go to the one with more ports, then the lowest.
fn most_common<'a>(actions: impl Iterator<Item = &'a Action>) -> Option<Action> {
    let mut counts: BTreeMap<&Action, usize> = BTreeMap::new();
    for a in actions {
        *counts.entry(a).or_default() += 1;
    }
    let width = |a: &Action| match a {
        Action::Down(p) | Action::Up(p) => p.len(),
        _ => 0,
    };
    counts
        .into_iter()
        .max_by(|(a, n), (b, m)| n.cmp(m).then(width(a).cmp(&width(b))).then(b.cmp(a)))
        .map(|(a, _)| a.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn show(routes: &[Route]) -> Vec<String> {
        routes
            .iter()
            .map(|r| format!("{}/{} {:?}", r.prefix, r.len, r.action))
            .collect()
    }

    /// Asserts the routes, in [`show`]'s form, of each named switch of the fabric `spec`
    /// without failures.
    fn assert_routes(spec: &str, expected: &[(&str, &[&str])]) {
        let fabric = crate::build(&Spec::parse(spec).unwrap());
        let routes = routes(&fabric, &Failures::none());
        for (name, want) in expected {
            let switch = fabric.switch_named(name).unwrap();
            assert_eq!(show(&routes[switch.0]), *want, "{spec} {name}");
        }
    }

    #[test]
    fn a_leaf_spine_routes_its_hosts_its_subnet_and_the_rest_up() {
        assert_routes(
            "leaf-spine:2,3,2",
            &[
                (
                    "leaf1",
                    &[
                        "10.0.0.0/8 Up([3, 4])",
                        "10.0.1.1/32 Host(1)",
                        "10.0.1.2/32 Host(2)",
                        "10.0.1.0/24 Drop",
                    ],
                ),
                (
                    "spine2",
                    &[
                        "10.0.1.0/24 Down([1])",
                        "10.0.2.0/24 Down([2])",
                        "10.0.3.0/24 Down([3])",
                    ],
                ),
            ],
        );
    }

    #[test]
    fn a_fat_tree_aggregates_pods_at_the_core() {
        assert_routes(
            "fat-tree:4",
            &[
                (
                    "c1_0",
                    &[
                        "10.0.0.0/16 Down([1])",
                        "10.1.0.0/16 Down([2])",
                        "10.2.0.0/16 Down([3])",
                        "10.3.0.0/16 Down([4])",
                    ],
                ),
                (
                    "a2_1",
                    &[
                        "10.0.0.0/8 Up([3, 4])",
                        "10.2.0.0/16 Drop",
                        "10.2.0.0/24 Down([1])",
                        "10.2.1.0/24 Down([2])",
                    ],
                ),
            ],
        );
    }

    #[test]
    fn a_failed_link_is_withdrawn_where_it_was_the_way() {
        let fabric = crate::build(&Spec::parse("fat-tree:4").unwrap());
        // Aggregation 1 of pod 2 loses edge 0.
        let a = fabric.switch_named("a2_1").unwrap();
        let link = fabric.switch(a).port(1).unwrap().link;
        let failures = Failures::of_links([link]);
        let routes = routes(&fabric, &failures);
        let at = |name: &str| show(&routes[fabric.switch_named(name).unwrap().0]);
        // The aggregation switch drops pod 2 edge 0's subnet (its area's discard does).
        assert_eq!(
            at("a2_1"),
            [
                "10.0.0.0/8 Up([3, 4])",
                "10.2.0.0/16 Drop",
                "10.2.1.0/24 Down([2])"
            ]
        );
        // Plane 1's cores no longer reach it (and drop it by default: pod 2 is no longer one
        // route there); plane 0's still do.
        assert_eq!(
            at("c1_0"),
            [
                "10.0.0.0/16 Down([1])",
                "10.1.0.0/16 Down([2])",
                "10.2.1.0/24 Down([3])",
                "10.3.0.0/16 Down([4])"
            ]
        );
        assert!(at("c0_0").contains(&"10.2.0.0/16 Down([3])".to_string()));
        // Every other pod's edges leave plane 1 out for it; pod 2's other edge goes through
        // aggregation 0.
        assert!(
            at("e0_0").contains(&"10.2.0.0/24 Up([3])".to_string()),
            "{:?}",
            at("e0_0")
        );
        assert!(
            at("e2_1").contains(&"10.2.0.0/24 Up([3])".to_string()),
            "{:?}",
            at("e2_1")
        );
        // Edge 0 itself: its uplink to aggregation 1 is down for everything.
        assert_eq!(at("e2_0")[0], "10.0.0.0/8 Up([3])");
    }
}
