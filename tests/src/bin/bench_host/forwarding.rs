//! Forwarding through the load balancer: packets/s from a sender through a balancing
//! namespace to a sink over three uplinks, for each policy, against a plain XDP_REDIRECT
//! program on the same downlink (frames spread over the same uplinks by source port), in
//! alternating rounds; each rate against the generator's ceiling for its engine at 64 QPs.

use std::{net::Ipv4Addr, path::Path, time::Duration};

use anyhow::Context as _;
use dataplane_common::lb::Policy;
use lossless_tests::{
    bed::{subnet_link, Attached},
    load,
};
use sysutil::netns::{Endpoint, Namespace};
use traffic::{Engine, FixedRate, SendConfig};
use wire::ethernet::Address;

use super::lb_bed::{Uplinks, UPLINKS};
use super::{
    compile_xdp, engine_name, median, Ceilings, FLAT_OUT_BPS, FRAME, ROUNDS, SECONDS_PER_RUN,
};

/// QPs of the sender: enough flows for the hash policies to use every uplink.
pub const QPS: u32 = 64;

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
        let (tx, down) = subnet_link(&sender, &balancer, [10, 89, 0])?;
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
            .map(|p| self.sink.rx_packets(&p.ifname))
            .sum()
    }

    /// Sends flat out for one run; returns the packets/s delivered to the sink and the engine
    /// that sent them.
    fn measure(&self) -> anyhow::Result<(f64, Engine)> {
        let mut config =
            SendConfig::new(self.tx.ifname.clone(), Ipv4Addr::new(10, 99, 0, 7).into());
        config.dst_mac = Some(Address(self.down.mac));
        config.size = FRAME;
        config.qps = QPS;
        config.duration = Some(Duration::from_secs_f64(SECONDS_PER_RUN));
        config.engine = Engine::Afxdp;
        let before = self.delivered()?;
        let rates = vec![FixedRate { bps: FLAT_OUT_BPS }; QPS as usize];
        let summary = load::send(&self.sender, config, rates)?;
        let pps = (self.delivered()? - before) as f64 / summary.duration_s;
        Ok((pps, load::engine_used(&summary)))
    }

    /// Attaches the balancer over every uplink with `policy`.
    fn attach(&self, policy: &str) -> anyhow::Result<Attached<'_>> {
        let policy = format!("lb.policy={policy}");
        self.uplinks
            .attach(&self.balancer, &self.down.ifname, &[policy])
    }

    /// Runs the baseline: the plain redirect program on the downlink.
    fn measure_baseline(&self, object: &Path) -> anyhow::Result<(f64, Engine)> {
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

/// Measures and prints the forwarding rates, the ratio of each policy to the baseline and each
/// rate's share of the generator's ceiling (`ceilings`, measured in this run).
pub fn run(ceilings: &Ceilings) -> anyhow::Result<()> {
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
    // Each row's label and (packets/s forwarded, engine) of each round: the baseline first.
    let mut rows: Vec<(String, Vec<(f64, Engine)>)> = std::iter::once("plain XDP_REDIRECT".into())
        .chain(
            Policy::ALL
                .iter()
                .map(|policy| format!("lb {}", policy.name())),
        )
        .map(|label| (label, Vec::new()))
        .collect();
    for round in 1..=ROUNDS {
        for (i, (label, runs)) in rows.iter_mut().enumerate() {
            let (pps, engine) = match i.checked_sub(1) {
                None => topology.measure_baseline(&redirect)?,
                Some(policy) => {
                    let _attached = topology.attach(Policy::ALL[policy].name())?;
                    topology.measure()?
                }
            };
            eprintln!("round {round}: {label:<22} {pps:>10.0} packets/s forwarded");
            runs.push((pps, engine));
        }
    }
    println!(
        "\nforwarding: {FRAME}-byte frames, {QPS} QPs, downlink → {UPLINKS} uplinks (native XDP), median of {ROUNDS} rounds"
    );
    println!(
        "{:<22} {:>12} {:>8}  {:<10} {:>10}",
        "", "forwarded/s", "ratio", "engine", "of ceiling"
    );
    let mut baseline = None;
    for (label, runs) in &rows {
        let pps = median(runs.iter().map(|r| r.0));
        let baseline = *baseline.get_or_insert(pps);
        let engine = runs[runs.len() - 1].1;
        println!(
            "{label:<22} {pps:>12.0} {:>8.3}  {:<10} {:>10.2} {}",
            pps / baseline,
            engine_name(engine),
            pps / ceilings.of(QPS, engine),
            ceilings.flag(pps, QPS, engine)
        );
    }
    println!(
        "(the baseline spreads by UDP source port over the same uplinks and rewrites the MACs,"
    );
    println!(
        " nothing else; wcmp weighs the first uplink 2:1; \"of ceiling\": of what the same sender"
    );
    println!(
        " delivered in this run into a peer dropping every frame in XDP; sender-bound: within 10%)"
    );
    Ok(())
}
