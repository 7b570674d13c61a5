//! `cargo xtask bench host`, in one run, in alternating rounds, reported as medians and ratios:
//! packets/s through a veth pair with (a) no program, (b) a minimal XDP_PASS program, (c) the
//! lossless ECN program; with CE-marked frames, (c') the ECN program alone against (d) the CNP
//! path answering every frame, and the CNPs/s it sent; the latency from a CE frame to its CNP;
//! the traffic tool's own ceiling with each engine (AF_PACKET, AF_XDP) into a peer that drops
//! every frame in XDP, and their ratio; and forwarding through the load balancer, per policy,
//! against a plain XDP_REDIRECT program. Every load comes from the traffic tool's AF_XDP
//! engine (AF_PACKET where AF_XDP cannot be had, with the reason printed), pinned to one core at
//! real-time priority (`lossless_tests::load`), and every rate within 10% of the generator's
//! ceiling for its engine and QP count, measured in the same run, is flagged `sender-bound`.

#[path = "bench_host/forwarding.rs"]
mod forwarding;
#[path = "bench_host/latency.rs"]
mod latency;
#[path = "bench_host/lb_bed.rs"]
mod lb_bed;
#[path = "bench_host/program_cost.rs"]
mod program_cost;

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::Context as _;
use dataplane_common::programs;
use lossless_tests::{
    bed::{Attached, Link},
    load,
};
use sysutil::netns::{check, Namespace};
use traffic::{Engine, FixedRate, SendConfig, SendSummary};
use wire::{ethernet::Address, ip::Ecn};

/// Frame size: the smallest RoCEv2 frame rounded up to Ethernet's minimum.
const FRAME: usize = 64;
/// Rounds of every variant (and of every ceiling measurement).
const ROUNDS: usize = 3;
/// Length of one measurement.
const SECONDS_PER_RUN: f64 = 2.0;
/// Rate given to each QP: more than any sender reaches, so it sends flat out.
const FLAT_OUT_BPS: u64 = 100_000_000_000;
/// Latency samples (CE frame → CNP).
const LATENCY_SAMPLES: usize = 2000;
/// QPs of the sender through the veth pair.
const LINK_QPS: u32 = 1;
/// QP counts of the traffic tool's ceiling: those of the veth pair and of the balancer.
const CEILING_QPS: [u32; 2] = [LINK_QPS, forwarding::QPS];
/// A rate at least this share of the generator's ceiling is flagged `sender-bound`.
const SENDER_BOUND: f64 = 0.9;
/// The traffic tool's engines, measured side by side for its ceiling: the default first.
const ENGINES: [Engine; 2] = [Engine::AfPacket, Engine::Afxdp];

/// What the receiving end runs, and what the sender sends it.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// No program; ECT(0) frames.
    NoProgram,
    /// tests/bench/xdp_pass.c; ECT(0) frames.
    XdpPass,
    /// `lossless host attach` (XDP ECN program); ECT(0) frames.
    Ecn,
    /// The XDP ECN program alone; CE frames.
    EcnCe,
    /// `--hooks xdp,cnp` with `cnp.interval_us=0`; CE frames, each answered with a CNP.
    Cnp,
}

impl Variant {
    /// Every variant, in the order of a round.
    const ALL: [Variant; 5] = [
        Variant::NoProgram,
        Variant::XdpPass,
        Variant::Ecn,
        Variant::EcnCe,
        Variant::Cnp,
    ];

    /// The label printed for it.
    fn name(self) -> &'static str {
        match self {
            Variant::NoProgram => "(a) no program",
            Variant::XdpPass => "(b) XDP_PASS",
            Variant::Ecn => "(c) lossless ECN",
            Variant::EcnCe => "(c') ECN, CE frames",
            Variant::Cnp => "(d) CNP path, CE",
        }
    }

    /// The ECN codepoint of the frames sent.
    fn ecn(self) -> Ecn {
        match self {
            Variant::EcnCe | Variant::Cnp => Ecn::Ce,
            _ => Ecn::Ect0,
        }
    }
}

/// One measurement of a variant.
#[derive(Clone, Copy, Default)]
struct Rates {
    /// Packets/s the receiving interface counted.
    received: f64,
    /// Packets/s the sender sent, by its own summary.
    sent: f64,
    /// CNPs/s the receiving end sent (`cnp_sent`).
    cnps: f64,
    /// The engine the sender used.
    engine: Engine,
}

/// The generator's ceiling measured in this run: per QP count and engine, the median packets/s
/// that a peer dropping every frame in XDP received.
struct Ceilings(Vec<(u32, Engine, f64)>);

impl Ceilings {
    /// The ceiling of `qps` QPs on `engine`.
    fn of(&self, qps: u32, engine: Engine) -> f64 {
        self.0
            .iter()
            .find(|c| c.0 == qps && c.1 == engine)
            .map_or(f64::NAN, |c| c.2)
    }

    /// `sender-bound` where `rate` is within 10% of the ceiling of `qps` QPs on `engine`: the
    /// sender, not what it feeds, set the rate; else nothing.
    fn flag(&self, rate: f64, qps: u32, engine: Engine) -> &'static str {
        if rate >= SENDER_BOUND * self.of(qps, engine) {
            "sender-bound"
        } else {
            ""
        }
    }
}

/// Runs every measurement on one fresh veth pair and prints the report.
fn main() -> anyhow::Result<()> {
    program_cost::run()?;
    if std::env::args().any(|arg| arg == "--program-cost-only") {
        return Ok(());
    }
    let link = Link::new()?;
    let pass_object = compile_xdp("xdp_pass.c", &[])?;
    let mut runs: Vec<Vec<Rates>> = vec![Vec::new(); Variant::ALL.len()];
    for round in 0..ROUNDS {
        for (i, variant) in Variant::ALL.into_iter().enumerate() {
            let rates = measure(&link, variant, &pass_object)?;
            eprintln!(
                "round {}: {:<20} {:>10.0} packets/s received, {:>10.0} sent, {:>10.0} CNPs/s",
                round + 1,
                variant.name(),
                rates.received,
                rates.sent,
                rates.cnps
            );
            runs[i].push(rates);
        }
    }
    let drop_object = compile_xdp("xdp_drop.c", &[])?;
    // Per QP count, per engine: (sent, received at the dropping peer) of each round.
    let mut ceilings = vec![vec![Vec::new(); ENGINES.len()]; CEILING_QPS.len()];
    for round in 0..ROUNDS {
        for (i, qps) in CEILING_QPS.into_iter().enumerate() {
            for (j, engine) in ENGINES.into_iter().enumerate() {
                let (sent, received) = ceiling(&link, qps, engine, &drop_object)?;
                eprintln!(
                    "round {}: sender alone, {qps:>2} QPs, {:<9} {sent:>10.0} packets/s sent, \
                     {received:>10.0} received",
                    round + 1,
                    engine_name(engine)
                );
                ceilings[i][j].push((sent, received));
            }
        }
    }
    let ceiling = Ceilings(
        CEILING_QPS
            .iter()
            .zip(&ceilings)
            .flat_map(|(qps, engines)| {
                ENGINES
                    .iter()
                    .zip(engines)
                    .map(|(engine, runs)| (*qps, *engine, median(runs.iter().map(|r| r.1))))
            })
            .collect(),
    );
    let mut latencies = {
        let _attached = attach_cnp(&link)?;
        latency::measure(&link, LATENCY_SAMPLES, FRAME)?
    };
    latencies.sort();

    let medians: Vec<Rates> = runs
        .iter()
        .map(|runs| Rates {
            received: median(runs.iter().map(|r| r.received)),
            sent: median(runs.iter().map(|r| r.sent)),
            cnps: median(runs.iter().map(|r| r.cnps)),
            engine: runs[runs.len() - 1].engine,
        })
        .collect();
    let of = |variant: Variant| medians[variant as usize];
    println!("\nhost benchmark: {FRAME}-byte RoCEv2 frames through a veth pair, median of {ROUNDS} rounds of {SECONDS_PER_RUN} s");
    println!(
        "{:<20} {:>12} {:>12} {:>12}  {:<10} {:>12}",
        "", "received/s", "sent/s", "CNPs/s", "engine", "of ceiling"
    );
    for variant in Variant::ALL {
        let rates = of(variant);
        let generator = ceiling.of(LINK_QPS, rates.engine);
        println!(
            "{:<20} {:>12.0} {:>12.0} {:>12.0}  {:<10} {:>12.2} {}",
            variant.name(),
            rates.received,
            rates.sent,
            rates.cnps,
            engine_name(rates.engine),
            rates.received / generator,
            ceiling.flag(rates.received, LINK_QPS, rates.engine)
        );
    }
    let ratio = |a: Variant, b: Variant| of(a).received / of(b).received;
    println!(
        "ratio c/b            {:>12.3}",
        ratio(Variant::Ecn, Variant::XdpPass)
    );
    println!(
        "ratio c/a            {:>12.3}",
        ratio(Variant::Ecn, Variant::NoProgram)
    );
    println!(
        "ratio d/c'           {:>12.3}",
        ratio(Variant::Cnp, Variant::EcnCe)
    );
    println!(
        "CNPs per packet (d)  {:>12.3}",
        of(Variant::Cnp).cnps / of(Variant::Cnp).received
    );
    println!(
        "(c') and (d): every frame is CE; in (d) cnp.interval_us=0, every one is answered and the"
    );
    println!(
        "CNPs cross back into the sender's namespace (its stack and CNP socket, same two cores)"
    );

    let percentile = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    println!(
        "\nCE frame → CNP, {} samples one at a time: median {:.1} µs, p99 {:.1} µs",
        latencies.len(),
        micros(percentile(50)),
        micros(percentile(99))
    );
    println!(
        "  from the kernel timestamp of the CE frame leaving the sender's veth (packet tap in"
    );
    println!(
        "  dev_queue_xmit) to that of the CNP arriving on it (netif_rx): the veth crossing both"
    );
    println!(
        "  ways, the receiver's XDP program and NAPI poll, {} (TC ingress) with its",
        programs::INGRESS
    );
    println!(
        "  clone redirected through {} (TC egress); no socket wake-up is included",
        programs::EMIT
    );

    println!("\ntraffic tool ceiling (the generator's rate): {FRAME}-byte frames, sender pinned to one core");
    println!(
        "at real-time priority (SCHED_FIFO 1, so the machine's other tasks do not share its core),"
    );
    println!(
        "into a veth whose peer drops every frame in XDP (counted by the peer's kernel), median of"
    );
    println!("{ROUNDS} rounds; the engines in alternation in each round:");
    println!("{:<20} {:>12} {:>12}", "", "sent/s", "received/s");
    for (qps, engines) in CEILING_QPS.iter().zip(&ceilings) {
        let mut received = Vec::new();
        for (engine, runs) in ENGINES.iter().zip(engines) {
            let sent = median(runs.iter().map(|r| r.0));
            received.push(median(runs.iter().map(|r| r.1)));
            println!(
                "{qps:>2} QPs, {:<12} {sent:>12.0} {:>12.0}",
                engine_name(*engine),
                received[received.len() - 1]
            );
        }
        println!(
            "{qps:>2} QPs, ratio afxdp/af-packet (received) {:>8.2}",
            received[1] / received[0]
        );
    }
    drop(link);
    forwarding::run(&ceiling)
}

/// The median of `values` (the upper one of an even count).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A duration in microseconds.
fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// The sender's configuration: flat out from the tx end to the rx end, `ecn` on every frame.
fn send_config(link: &Link, ecn: Ecn) -> SendConfig {
    let mut config = SendConfig::new(link.tx.ifname.clone(), IpAddr::V4(link.rx.ipv4));
    config.dst_mac = Some(Address(link.rx.mac));
    config.size = FRAME;
    config.ecn = ecn;
    config.qps = LINK_QPS;
    config.duration = Some(Duration::from_secs_f64(SECONDS_PER_RUN));
    config.engine = Engine::Afxdp;
    config
}

/// An engine as `--engine` names it.
fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::AfPacket => "af-packet",
        Engine::Afxdp => "afxdp",
    }
}

/// Runs the generator (see [`load::send`]) with `config` in the tx namespace, every QP flat
/// out.
fn send(link: &Link, config: SendConfig) -> anyhow::Result<SendSummary> {
    let rates = vec![FixedRate { bps: FLAT_OUT_BPS }; config.qps as usize];
    load::send(&link.tx_ns, config, rates)
}

/// Attaches `--hooks xdp,cnp` on the rx end and makes it answer every CE frame.
fn attach_cnp(link: &Link) -> anyhow::Result<Attached<'_>> {
    let attached = Attached::new(
        &link.rx_ns,
        &link.rx.ifname,
        &["--mode", "native", "--hooks", "xdp,cnp"],
    )?;
    Link::lossless(
        &link.rx_ns,
        &["host", "set", &link.rx.ifname, "cnp.interval_us=0"],
    )?;
    Ok(attached)
}

/// Runs the sender flat out for a while with `variant` on the rx end; returns the packets/s
/// the receiver counted, those the sender sent and the CNPs/s the receiver sent.
fn measure(link: &Link, variant: Variant, pass_object: &Path) -> anyhow::Result<Rates> {
    let rx = &link.rx.ifname;
    let _attached = match variant {
        Variant::Ecn | Variant::EcnCe => {
            Some(Attached::new(&link.rx_ns, rx, &["--mode", "native"])?)
        }
        Variant::Cnp => Some(attach_cnp(link)?),
        _ => None,
    };
    if variant == Variant::XdpPass {
        let object = pass_object.to_str().context("object path")?;
        link.rx_ns.ip(&[
            "link", "set", "dev", rx, "xdpdrv", "obj", object, "sec", "xdp",
        ])?;
    }
    let cnps_before = cnp_sent(link, variant)?;
    let before = link.rx_ns.rx_packets(rx)?;
    let summary = send(link, send_config(link, variant.ecn()))?;
    let after = link.rx_ns.rx_packets(rx)?;
    let cnps_after = cnp_sent(link, variant)?;
    if variant == Variant::XdpPass {
        link.rx_ns
            .ip(&["link", "set", "dev", rx, "xdpdrv", "off"])?;
    }
    Ok(Rates {
        received: (after - before) as f64 / summary.duration_s,
        sent: summary.pps,
        cnps: (cnps_after - cnps_before) as f64 / summary.duration_s,
        engine: load::engine_used(&summary),
    })
}

/// The rx end's `cnp_sent` from `lossless host stats --json` (0 unless `variant` is
/// [`Variant::Cnp`]).
fn cnp_sent(link: &Link, variant: Variant) -> anyhow::Result<u64> {
    if variant != Variant::Cnp {
        return Ok(0);
    }
    let stats = Link::stats(&link.rx_ns, &link.rx.ifname)?;
    stats["cnp_sent"]
        .as_u64()
        .with_context(|| format!("no cnp_sent in {stats}"))
}

/// The sender's own packets/s over `qps` QPs with `engine`, pinned to one core, into a peer
/// that drops every frame in XDP (`drop_object`): (sent by its summary, received by the peer's
/// kernel); not a number where the sender fell back from `engine` to another.
fn ceiling(
    link: &Link,
    qps: u32,
    engine: Engine,
    drop_object: &Path,
) -> anyhow::Result<(f64, f64)> {
    let mut config = send_config(link, Ecn::Ect0);
    config.qps = qps;
    config.engine = engine;
    let rx = &link.rx.ifname;
    let object = drop_object.to_str().context("object path")?;
    link.rx_ns.ip(&[
        "link", "set", "dev", rx, "xdpdrv", "obj", object, "sec", "xdp",
    ])?;
    let before = link.rx_ns.rx_packets(rx)?;
    let summary = send(link, config);
    let after = link.rx_ns.rx_packets(rx)?;
    link.rx_ns
        .ip(&["link", "set", "dev", rx, "xdpdrv", "off"])?;
    let summary = summary?;
    if load::engine_used(&summary) != engine {
        eprintln!(
            "no ceiling of {}: the sender fell back",
            engine_name(engine)
        );
        return Ok((f64::NAN, f64::NAN));
    }
    Ok((summary.pps, (after - before) as f64 / summary.duration_s))
}

/// The index of `ifname` in `ns`.
fn ifindex_in(ns: &Namespace, ifname: &str) -> anyhow::Result<u32> {
    let ifname = ifname.to_owned();
    ns.run(move || sysutil::interface::ifindex(&ifname))?
}

/// Compiles tests/bench/SOURCE with Debian's clang 22 and `defines`.
fn compile_xdp(source: &str, defines: &[String]) -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("bench")
        .join(source);
    let object = std::env::temp_dir().join(format!(
        "lossless-{}-{}.o",
        source.trim_end_matches(".c"),
        std::process::id()
    ));
    let output = Command::new("clang-22")
        .args(["-O2", "-g", "-target", "bpf", "-c"])
        .args(defines)
        // Debian keeps <asm/types.h> under the multiarch include directory.
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::consts::ARCH
        ))
        .arg(&path)
        .arg("-o")
        .arg(&object)
        .output()
        .context("running clang-22 (installed by cargo xtask setup)")?;
    check("clang-22 -target bpf", output)?;
    Ok(object)
}
