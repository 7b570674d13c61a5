//! `fat-tree:K`: three tiers of radix-K switches, as Al-Fares, Loukissas and Vahdat built it
//! ("A Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008), addresses and
//! all. K pods; in pod P, K/2 edge switches `eP_E` and K/2 aggregation switches `aP_J`; (K/2)²
//! cores `cJ_I` in K/2 planes of K/2; host `hP_E_H` on port H + 1 of edge E, at
//! 10.P.E.(H + 2)/24 with gateway 10.P.E.1 (the paper's addresses: the edge switch is
//! 10.pod.switch.1, its hosts from .2).
//!
//! With `os=N` an edge keeps its K/2 hosts and has K/(2N) uplinks, so a pod has K/(2N)
//! aggregation switches and there are K/(2N) planes of K/2 cores.
//!
//! Ports: edge E of pod P: 1..=K/2 hosts, K/2 + 1 + J to aggregation J. Aggregation J of pod
//! P: E + 1 to edge E, K/2 + 1 + I to core (J, I). Core (J, I): P + 1 to aggregation J of pod
//! P. Port MACs 02:TT:AA:BB:PP:PP (tier 1 edge (P, E), tier 2 aggregation (P, J), tier 3 core
//! (J, I)). Switches: the cores, then pod by pod its aggregation and edge switches.

use std::net::Ipv4Addr;

use super::port_mac;
use crate::fabric::{Builder, Fabric};
use crate::spec::Spec;

/// Builds the fabric.
pub(crate) fn build(spec: &Spec, k: u16) -> Fabric {
    let half = k / 2;
    let planes = half / spec.options.oversubscription;
    let mut b = Builder::new(spec);
    let cores: Vec<Vec<_>> = (0..planes)
        .map(|j| {
            (0..half)
                .map(|i| b.switch(format!("c{j}_{i}"), 3, None))
                .collect()
        })
        .collect();
    for p in 0..k {
        let aggs: Vec<_> = (0..planes)
            .map(|j| b.switch(format!("a{p}_{j}"), 2, None))
            .collect();
        for e in 0..half {
            let subnet = Ipv4Addr::new(10, p as u8, e as u8, 0);
            let edge = b.switch(format!("e{p}_{e}"), 1, Some(subnet));
            for h in 0..half {
                let ip = Ipv4Addr::new(10, p as u8, e as u8, h as u8 + 2);
                let gateway = Ipv4Addr::new(10, p as u8, e as u8, 1);
                let port = h + 1;
                let attachment = (edge, port, port_mac(1, p, e, port));
                b.host(format!("h{p}_{e}_{h}"), ip, gateway, attachment);
            }
            for (j, &agg) in (0..planes).zip(&aggs) {
                let up = half + 1 + j;
                b.connect(
                    (edge, up, port_mac(1, p, e, up)),
                    (agg, e + 1, port_mac(2, p, j, e + 1)),
                    2,
                );
            }
        }
        for (j, &agg) in (0..planes).zip(&aggs) {
            for (i, &core) in (0..half).zip(&cores[usize::from(j)]) {
                let up = half + 1 + i;
                b.connect(
                    (agg, up, port_mac(2, p, j, up)),
                    (core, p + 1, port_mac(3, j, i, p + 1)),
                    3,
                );
            }
        }
    }
    b.finish()
}
