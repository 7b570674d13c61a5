//! The load balancer as the forwarding and program-cost benchmarks set it up: uplinks from the
//! balancing namespace to a peer namespace, and the balancer attached to a downlink and
//! configured over them by the CLI (`lossless host attach --hooks lb`, then `lossless host set`
//! with the uplinks, the owned prefix `10.99.0.0/16`, the first uplink weighed 2:1 and each
//! uplink's next hop).

use lossless_tests::bed::{subnet_link, Attached, Link};
use sysutil::netns::{Endpoint, Namespace};
use wire::ethernet::Address;

/// Uplinks of the balancer.
pub const UPLINKS: u8 = 3;

/// The balancer's uplinks and, pair by pair, their peers' ends.
pub struct Uplinks {
    /// The balancer's ends (10.89.N.1, N from 1).
    pub ends: Vec<Endpoint>,
    /// The peers' ends (10.89.N.2).
    pub peers: Vec<Endpoint>,
}

impl Uplinks {
    /// [`UPLINKS`] veth pairs from `balancer` to `peer`.
    pub fn new(balancer: &Namespace, peer: &Namespace) -> anyhow::Result<Uplinks> {
        let (mut ends, mut peers) = (Vec::new(), Vec::new());
        for i in 0..UPLINKS {
            let (end, far) = subnet_link(balancer, peer, [10, 89, i + 1])?;
            ends.push(end);
            peers.push(far);
        }
        Ok(Uplinks { ends, peers })
    }

    /// Attaches the balancer to `down` in `ns` and configures it over these uplinks, with the
    /// `lossless host set` settings `extra` (`lb.policy=...`) too.
    pub fn attach<'a>(
        &self,
        ns: &'a Namespace,
        down: &str,
        extra: &[String],
    ) -> anyhow::Result<Attached<'a>> {
        let attached = Attached::new(ns, down, &["--mode", "native", "--hooks", "lb"])?;
        let names: Vec<&str> = self.ends.iter().map(|u| u.ifname.as_str()).collect();
        let mut args = vec![
            "host".to_owned(),
            "set".into(),
            down.to_owned(),
            format!("lb.uplinks={}", names.join(",")),
            "lb.prefixes=10.99.0.0/16".into(),
            format!("lb.weights={}:2", names[0]),
        ];
        args.extend_from_slice(extra);
        for (up, peer) in self.ends.iter().zip(&self.peers) {
            args.push(format!("lb.nexthop.{}={}", up.ifname, Address(peer.mac)));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Link::lossless(ns, &args)?;
        Ok(attached)
    }
}
