//! The load-balancing lab's namespaces: k senders, each on its own downlink into the balancer;
//! the balancer's M uplinks, one to each spine; every spine forwards to the collecting leaf over
//! a link it shapes with `tbf` (the uplink's capacity, one of them optionally slower); the leaf
//! forwards to the receiver.
//!
//! ```text
//! sender i 10.40.(i+1).2 ─ 10.40.(i+1).1 balancer 10.41.(j+1).1 ─ 10.41.(j+1).2 spine j
//! spine j 10.42.(j+1).1 ─(tbf)─ 10.42.(j+1).2 leaf 10.43.0.1 ─ 10.43.0.2 receiver
//! ```

use std::net::Ipv4Addr;

use super::super::harness::{enable_forwarding, Attached, LabPorts};
use sysutil::netns::{check, subnet_link, veth_pair, Endpoint, Namespace};

/// The receiver's subnet: the prefix the balancer owns.
pub const OWNED_PREFIX: &str = "10.43.0.0/24";

/// The receiver's address.
pub const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 43, 0, 2);

/// A sender and the downlink it sends into.
pub struct SenderLink {
    /// The sender's namespace.
    pub ns: Namespace,
    /// The sender's end.
    pub sender: Endpoint,
    /// The balancer's end: a downlink, where the `lb` hook runs.
    pub downlink: Endpoint,
}

/// An uplink of the balancer and the spine behind it.
pub struct UplinkPath {
    /// The balancer's end.
    pub uplink: Endpoint,
    /// The spine's end: the uplink's next hop.
    pub spine_end: Endpoint,
    /// The capacity of the spine's link to the leaf, bits per second.
    pub rate_bps: u64,
    /// The spine's namespace.
    spine: Namespace,
}

impl UplinkPath {
    /// Frames the spine's end of the uplink received, by the kernel's own interface counters.
    pub fn spine_rx_packets(&self) -> anyhow::Result<u64> {
        self.spine.rx_packets(&self.spine_end.ifname)
    }
}

/// Every namespace of the lab and the balancers attached in it; dropping it detaches the
/// balancers, then deletes the namespaces.
pub struct Topology {
    // Fields drop in order: the data planes first.
    attached: Attached,
    /// The senders, in order.
    pub senders: Vec<SenderLink>,
    /// The uplinks, in order.
    pub uplinks: Vec<UplinkPath>,
    /// The balancer's namespace.
    pub balancer: Namespace,
    /// The receiver's namespace.
    pub receiver_ns: Namespace,
    /// The receiver's end of its link to the leaf.
    pub receiver: Endpoint,
    _leaf: Namespace,
}

/// How to build the topology.
pub struct Shape {
    /// Number of senders.
    pub senders: u8,
    /// The capacity of each spine's link to the leaf, bits per second, one per uplink.
    pub uplink_rates_bps: Vec<u64>,
    /// Bytes each spine's shaper queues before it drops.
    pub buffer_bytes: u64,
}

impl Topology {
    /// Builds the namespaces, links, routes and shapers.
    pub fn build(shape: &Shape) -> anyhow::Result<Topology> {
        let balancer = Namespace::create("lbal")?;
        let leaf = Namespace::create("lleaf")?;
        let receiver_ns = Namespace::create("lrcv")?;
        // Frames from the senders reach the leaf over every spine: no reverse-path filter.
        sysctl(&leaf, "net.ipv4.conf.all.rp_filter=0")?;
        sysctl(&leaf, "net.ipv4.conf.default.rp_filter=0")?;
        for ns in [&balancer, &leaf] {
            enable_forwarding(ns)?;
        }
        let (_, receiver) = veth_pair(&leaf, Ipv4Addr::new(10, 43, 0, 1), &receiver_ns, RECEIVER)?;
        receiver_ns.ip(&["route", "add", "10.40.0.0/16", "via", "10.43.0.1"])?;
        let mut uplinks = Vec::new();
        for (j, &rate_bps) in shape.uplink_rates_bps.iter().enumerate() {
            let subnet = u8::try_from(j + 1)?;
            let spine = Namespace::create("lspn")?;
            enable_forwarding(&spine)?;
            let (uplink, spine_end) = subnet_link(&balancer, &spine, [10, 41, subnet])?;
            let (to_leaf, _) = subnet_link(&spine, &leaf, [10, 42, subnet])?;
            shape_link(&spine, &to_leaf.ifname, rate_bps, shape.buffer_bytes)?;
            spine.ip(&[
                "route",
                "add",
                OWNED_PREFIX,
                "via",
                &format!("10.42.{subnet}.2"),
            ])?;
            spine.ip(&[
                "route",
                "add",
                "10.40.0.0/16",
                "via",
                &format!("10.41.{subnet}.1"),
            ])?;
            uplinks.push(UplinkPath {
                uplink,
                spine_end,
                rate_bps,
                spine,
            });
        }
        leaf.ip(&["route", "add", "10.40.0.0/16", "via", "10.42.1.1"])?;
        balancer.ip(&["route", "add", OWNED_PREFIX, "via", "10.41.1.2"])?;
        let mut senders = Vec::new();
        for i in 0..shape.senders {
            let subnet = i + 1;
            let ns = Namespace::create("lsnd")?;
            let (downlink, sender) = subnet_link(&balancer, &ns, [10, 40, subnet])?;
            ns.ip(&[
                "route",
                "add",
                OWNED_PREFIX,
                "via",
                &format!("10.40.{subnet}.1"),
            ])?;
            senders.push(SenderLink {
                ns,
                sender,
                downlink,
            });
        }
        Ok(Topology {
            attached: Attached::default(),
            senders,
            uplinks,
            balancer,
            receiver_ns,
            receiver,
            _leaf: leaf,
        })
    }
}

/// Where the lab attaches a data plane.
#[derive(Clone, Copy, Debug)]
pub enum Port {
    /// Sender `i`'s interface.
    Sender(usize),
    /// The balancer's downlink from sender `i`.
    Downlink(usize),
    /// The balancer's uplink `j`.
    Uplink(usize),
    /// Spine `j`'s end of uplink `j`: where the path's queue is modelled.
    SpineIngress(usize),
    /// The receiver's interface.
    Receiver,
}

impl LabPorts for Topology {
    type Port = Port;

    fn port(&self, port: Port) -> anyhow::Result<(&Namespace, &Endpoint)> {
        match port {
            Port::Sender(i) => self.senders.get(i).map(|l| (&l.ns, &l.sender)),
            Port::Downlink(i) => self.senders.get(i).map(|l| (&self.balancer, &l.downlink)),
            Port::Uplink(j) => self.uplinks.get(j).map(|u| (&self.balancer, &u.uplink)),
            Port::SpineIngress(j) => self.uplinks.get(j).map(|u| (&u.spine, &u.spine_end)),
            Port::Receiver => Some((&self.receiver_ns, &self.receiver)),
        }
        .ok_or_else(|| anyhow::anyhow!("the lab has no {port:?}"))
    }

    fn attached(&self) -> &Attached {
        &self.attached
    }
}

/// Sets one sysctl inside `ns`.
fn sysctl(ns: &Namespace, assignment: &str) -> anyhow::Result<()> {
    let output = ns.command("sysctl").args(["-qw", assignment]).output()?;
    check(&format!("sysctl {assignment}"), output).map(drop)
}

/// Shapes what leaves `ifname` to `rate_bps` with a token bucket (`tbf`) holding `buffer_bytes`
/// at most; its bucket holds 4 ms at the rate (at least 16 KB), so the kernel's timer
/// granularity does not cap the rate.
fn shape_link(
    ns: &Namespace,
    ifname: &str,
    rate_bps: u64,
    buffer_bytes: u64,
) -> anyhow::Result<()> {
    let burst = (rate_bps / 8 / 250).max(16 * 1024);
    let output = ns
        .command("tc")
        .args(["qdisc", "replace", "dev", ifname, "root", "tbf"])
        .args(["rate", &format!("{rate_bps}bit")])
        .args(["burst", &burst.to_string()])
        .args(["limit", &buffer_bytes.max(burst).to_string()])
        .output()?;
    check(&format!("tc qdisc replace dev {ifname} root tbf"), output).map(drop)
}
