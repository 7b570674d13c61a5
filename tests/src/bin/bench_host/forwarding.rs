//! Forwarding through the load balancer: packets/s from a sender through a balancing
//! namespace to a sink over three uplinks, for each policy, against a plain XDP_REDIRECT
//! program on the same downlink (frames spread over the same uplinks by source port), in
//! alternating rounds.

use std::{net::Ipv4Addr, path::Path, time::Duration};

use anyhow::Context as _;
use lossless::{
    netns::{veth_pair, Endpoint, Namespace},
    traffic::{Engine, FixedRate, SendConfig, Sender},
};
use lossless_tests::bed::Attached;
use wire::ethernet::Address;

use super::lb_bed::{Uplinks, UPLINKS};
use super::{compile_xdp, median, rx_packets, FLAT_OUT_BPS, FRAME, ROUNDS, SECONDS_PER_RUN};

/// The policies measured, after the baseline.
const POLICIES: [&str; 5] = ["ecmp", "flowlet", "dlb", "spray", "wcmp"];
/// QPs of the sender: enough flows for the hash policies to use every uplink.
const QPS: u32 = 64;

/// sender → balancer (downlink) → three uplinks → sink.
struct Topology {
    sender: Namespace,
    balancer: Namespace,
    sink: Namespace,
    tx: Endpoint,
    down: Endpoint,
    uplinks: Uplinks,
}

impl Topology {
    fn new() -> anyhow::Result<Topology> {
        let sender = Namespace::create("bfs")?;
        let balancer = Namespace::create("bfb")?;
        let sink = Namespace::create("bfk")?;
        let (tx, down) = veth_pair(
            &sender,
            Ipv4Addr::new(10, 89, 0, 1),
            &balancer,
            Ipv4Addr::new(10, 89, 0, 2),
        )?;
        let uplinks = Uplinks::new(&balancer, &sink)?;
        Ok(Topology {
            sender,
            balancer,
            sink,
            tx,
            down,
            uplinks,
        })
    }

    /// Packets the sink received over every uplink.
    fn delivered(&self) -> anyhow::Result<u64> {
        self.uplinks
            .peers
            .iter()
            .map(|p| rx_packets(&self.sink, &p.ifname))
            .sum()
    }

    /// Sends flat out for one run; returns the packets/s delivered to the sink.
    fn measure(&self) -> anyhow::Result<f64> {
        let mut config =
            SendConfig::new(self.tx.ifname.clone(), Ipv4Addr::new(10, 99, 0, 7).into());
        config.dst_mac = Some(Address(self.down.mac));
        config.size = FRAME;
        config.qps = QPS;
        config.duration = Some(Duration::from_secs_f64(SECONDS_PER_RUN));
        config.engine = Engine::Afxdp;
        let before = self.delivered()?;
        let mut rates = vec![FixedRate { bps: FLAT_OUT_BPS }; QPS as usize];
        let summary = self
            .sender
            .run(move || Sender::open(config)?.run(&mut rates))??;
        Ok((self.delivered()? - before) as f64 / summary.duration_s)
    }

    /// Attaches the balancer over every uplink with `policy`.
    fn attach(&self, policy: &str) -> anyhow::Result<Attached<'_>> {
        let policy = format!("lb.policy={policy}");
        self.uplinks
            .attach(&self.balancer, &self.down.ifname, &[policy])
    }

    /// Runs the baseline: the plain redirect program on the downlink.
    fn measure_baseline(&self, object: &Path) -> anyhow::Result<f64> {
        let object = object.to_str().context("object path")?;
        let down = &self.down.ifname;
        self.balancer.ip(&[
            "link", "set", "dev", down, "xdpdrv", "obj", object, "sec", "xdp",
        ])?;
        let rate = self.measure();
        self.balancer
            .ip(&["link", "set", "dev", down, "xdpdrv", "off"])?;
        rate
    }
}

/// Measures and prints the forwarding rates and the ratio of each policy to the baseline.
pub fn run() -> anyhow::Result<()> {
    let topology = Topology::new()?;
    let mut defines = Vec::new();
    let uplinks = &topology.uplinks;
    for (i, (uplink, peer)) in uplinks.ends.iter().zip(&uplinks.peers).enumerate() {
        let ifindex = super::ifindex_in(&topology.balancer, &uplink.ifname)?;
        defines.push(format!("-DUPLINK{i}={ifindex}"));
        let bytes: Vec<String> = peer
            .mac
            .iter()
            .chain(&uplink.mac)
            .map(|b| format!("{b:#04x}"))
            .collect();
        defines.push(format!("-DMACS{i}={{{}}}", bytes.join(",")));
    }
    let redirect = compile_xdp("xdp_redirect.c", &defines)?;
    let mut baseline = Vec::new();
    let mut policies: Vec<Vec<f64>> = vec![Vec::new(); POLICIES.len()];
    for round in 1..=ROUNDS {
        let pps = topology.measure_baseline(&redirect)?;
        eprintln!(
            "round {round}: {:<22} {pps:>10.0} packets/s forwarded",
            "plain XDP_REDIRECT"
        );
        baseline.push(pps);
        for (i, policy) in POLICIES.into_iter().enumerate() {
            let _attached = topology.attach(policy)?;
            let pps = topology.measure()?;
            eprintln!("round {round}: lb {policy:<19} {pps:>10.0} packets/s forwarded");
            policies[i].push(pps);
        }
    }
    let baseline = median(baseline.into_iter());
    println!(
        "\nforwarding: {FRAME}-byte frames, {QPS} QPs, downlink → {UPLINKS} uplinks (native XDP), median of {ROUNDS} rounds"
    );
    println!("{:<22} {:>12} {:>8}", "", "forwarded/s", "ratio");
    println!("{:<22} {baseline:>12.0} {:>8.3}", "plain XDP_REDIRECT", 1.0);
    for (policy, runs) in POLICIES.iter().zip(&policies) {
        let pps = median(runs.iter().copied());
        println!(
            "{:<22} {pps:>12.0} {:>8.3}",
            format!("lb {policy}"),
            pps / baseline
        );
    }
    println!(
        "(the baseline spreads by UDP source port over the same uplinks and rewrites the MACs,"
    );
    println!(
        " nothing else; wcmp weighs the first uplink 2:1; the sender is one AF_PACKET thread, so a"
    );
    println!(" ratio near 1 can also mean the sender, not the balancer, is the bottleneck)");
    Ok(())
}
