//! `rail:G,S,R`: rail-optimised, as NVIDIA's DGX SuperPOD reference architectures and the
//! rail-optimised AI back-end fabrics built after them lay it out. G scalable units (groups) of
//! S servers with R NICs each; NIC r of every server of a unit is on that unit's leaf of rail r
//! (`leafG_R`), so traffic between the same NIC of two servers of a unit crosses one switch;
//! every leaf is linked to every spine, which joins units and rails. A leaf has S host ports and
//! S/os uplinks, one to each of the S/os spines. (NVIDIA bundles two links per leaf-spine pair
//! to use 64-port spines; one link per pair, as here, gives the same bandwidth with twice the
//! spines of half the radix.)
//!
//! Server `srvG_S` has NICs (hosts) `hG_S_R`, R from 1, at 10.R.G.S/24, gateway 10.R.G.254.
//! Ports: leaf (G, R): 1..=S servers, S + I spine I. Spine I: (G - 1) × R + R' to leaf (G, R').
//! Port MACs 02:TT:AA:BB:PP:PP (tier 1 leaf (G, R), tier 2 spine (0, I)). Switches: the spines,
//! then the leaves unit by unit, rail by rail.

use std::net::Ipv4Addr;

use super::port_mac;
use crate::fabric::{Builder, Fabric};
use crate::spec::Spec;

/// Builds the fabric.
pub(crate) fn build(spec: &Spec, groups: u16, servers: u16, rails: u16) -> Fabric {
    let uplinks = servers / spec.options.oversubscription;
    let mut b = Builder::new(spec);
    let spines: Vec<_> = (1..=uplinks)
        .map(|i| b.switch(format!("spine{i}"), 2, None))
        .collect();
    for g in 1..=groups {
        let machines: Vec<_> = (1..=servers)
            .map(|s| b.server(format!("srv{g}_{s}")))
            .collect();
        for r in 1..=rails {
            let subnet = Ipv4Addr::new(10, r as u8, g as u8, 0);
            let leaf = b.switch(format!("leaf{g}_{r}"), 1, Some(subnet));
            for (s, &server) in (1..=servers).zip(&machines) {
                let ip = Ipv4Addr::new(10, r as u8, g as u8, s as u8);
                let gateway = Ipv4Addr::new(10, r as u8, g as u8, 254);
                let attachment = (leaf, s, port_mac(1, g, r, s));
                b.nic(format!("h{g}_{s}_{r}"), ip, gateway, server, attachment);
            }
            let spine_port = (g - 1) * rails + r;
            for (i, &spine) in (1..=uplinks).zip(&spines) {
                let up = servers + i;
                b.connect(
                    (leaf, up, port_mac(1, g, r, up)),
                    (spine, spine_port, port_mac(2, 0, i, spine_port)),
                    2,
                );
            }
        }
    }
    b.finish()
}
