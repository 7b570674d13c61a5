//! `leaf-spine:S,L,H`: S spines, L leaves of H hosts, every leaf linked to every spine; the
//! fabric `lossless net` has always built, with the same names, addresses, MACs and ports.
//!
//! Leaf L: ports 1..=H to its hosts, H+S' to spine S'. Spine S: port L to leaf L. Host
//! `h<L><H>` (`h<L>x<H>` past 9): 10.0.L.H/24, MAC 08:00:00:00:LL:HH, gateway 10.0.L.254 at its
//! leaf port's MAC. Port MACs `00:aa:ID:00:00:PORT`, spine S's id S, leaf L's 0x10 + L.
//! Switches: the spines, then the leaves.

use std::net::Ipv4Addr;

use wire::ethernet::Address;

use crate::fabric::{Builder, Fabric};
use crate::spec::{LeafSpine, Spec};

/// Builds the fabric.
pub(crate) fn build(spec: &Spec, shape: LeafSpine) -> Fabric {
    let LeafSpine {
        spines,
        leaves,
        hosts,
    } = shape;
    let mut b = Builder::new(spec);
    let spine_ids: Vec<_> = (1..=spines)
        .map(|s| b.switch(format!("spine{s}"), 2, None))
        .collect();
    for l in 1..=leaves {
        let subnet = Ipv4Addr::new(10, 0, l as u8, 0);
        let leaf = b.switch(format!("leaf{l}"), 1, Some(subnet));
        for h in 1..=hosts {
            let ip = Ipv4Addr::new(10, 0, l as u8, h as u8);
            let gateway = Ipv4Addr::new(10, 0, l as u8, 254);
            b.host(
                host_name(l, h),
                ip,
                gateway,
                (leaf, h, port_mac(0x10 + l, h)),
            );
        }
        for (s, &spine) in (1..=spines).zip(&spine_ids) {
            let up = hosts + s;
            b.connect(
                (leaf, up, port_mac(0x10 + l, up)),
                (spine, l, port_mac(s, l)),
                2,
            );
        }
    }
    b.finish()
}

/// The name of host `h` of leaf `l`.
pub fn host_name(l: u16, h: u16) -> String {
    if l < 10 && h < 10 {
        format!("h{l}{h}")
    } else {
        format!("h{l}x{h}")
    }
}

/// The MAC of port `port` of the switch of id `id` (spine S: S; leaf L: 0x10 + L).
fn port_mac(id: u16, port: u16) -> Address {
    Address([0x00, 0xaa, id as u8, 0, 0, port as u8])
}
