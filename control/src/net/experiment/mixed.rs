//! The mixed-traffic experiment on a generated fabric of softswitches (`lossless net experiment
//! mixed`): RoCEv2 in the lossless priority beside lossy bulk traffic in two lossy priorities,
//! all leaving one congested egress port, the port toward host X (by default the fabric's first
//! host, h11), with every switch's lossy priorities shared by DWRR at the given weights (the
//! Queues service) and the CNP and lossless priorities strict above them.
//!
//! What crosses that port: X's neighbour on its leaf sends bulk to X in both lossy classes, each
//! at three quarters of the link rate (together twice what the strict traffic leaves them);
//! the receiver Y (the fabric's last host) sends RoCEv2 to X at a quarter of the link rate (the
//! lossless class, strict, takes its quarter first); and the CNPs the fabric sends X: X (at
//! half the link rate) and a host on Y's leaf (at the link rate) send RoCEv2 with DCQCN to Y,
//! so Y's port is congested in the lossless priority, marks, and sends CNPs back, which reach
//! X through the bulk's port in the CNP priority. Every port is paced as a
//! link: a rate of the port as a whole (not of each queue), so the port's queues compete for
//! its departures and its scheduler decides.
//!
//! Two runs: with the bulk traffic, and without (the control). It reads the port's queues over
//! the Queues service twice while the bulk runs (each lossy class's share is its count of
//! frames between the two reads, both queues holding frames at both), and the CNP priority's
//! sojourn times over each whole run. The verdict: the shares are the weights' within the
//! tolerance, and CNPs waited no longer with the bulk than in the control, within the bound.

use std::{
    net::IpAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use p4client::cli::SwitchKind;
use p4client::client::Client;
use p4runtime::lossless::softswitch::v1::{QueueState, SetQueueRequest};
use serde::Serialize;
use serde_json::Value;

use super::{count, host_ip, Fabric, Links, Spawned, SwitchRef};
use crate::net::leaf_spine::Tuning;
use crate::output;
use topology::tuning::{Class, PRIORITY_CNP};
use traffic::StopFlag;
use units::parse_run_time;

/// The lossy classes, highest priority first: (DSCP, priority). DSCP 0 would go to priority 0
/// anyway (lossless.p4's default class); DSCP 10 (AF11) is mapped to priority 1 for this
/// experiment ([`tuning`]).
pub const LOSSY: [(u8, u8); 2] = [(10, 1), (0, 0)];

/// The DSCP of RoCEv2 data, as the tuning maps it to the lossless priority.
const DSCP_DATA: u8 = 26;

/// The bulk senders' first QP numbers, one per lossy class: the receiver and the summaries tell
/// them apart.
const BULK_QP_BASE: [u32; 2] = [0x1000, 0x2000];

/// When the shares are read, as fractions of the run: after the queues have filled, before
/// the senders stop.
const SHARE_READS: [f64; 2] = [0.25, 0.9];

/// Each bulk class's rate, as a fraction of the link's: as much as the three quarters of the
/// port the lossless class leaves the two together, so neither is given more than it offers
/// and both stay backlogged whatever the weights.
const BULK_OF_LINK: f64 = 0.75;

/// The lateness a sender makes up with a burst, µs (the traffic tool's `--max-burst-us`): on a
/// loaded machine the senders are descheduled often, and without catching up they would offer
/// a fraction of their rates (the bulk less than the port gives it, the DCQCN senders too
/// little to congest their receiver's port). The queues absorb the bursts.
const CATCH_UP_US: u64 = 100_000;

/// How long after the senders' end the last CNPs may still be on their way.
const SETTLE: Duration = Duration::from_millis(300);

/// The DWRR weights of the two lossy classes (1 to 100 each), as `A:B`: A for priority 1, B
/// for priority 0.
fn parse_weights(text: &str) -> Result<[u32; 2], String> {
    let bad = || format!("{text}: weights are A:B, each 1 to {}", MAX_WEIGHT);
    let (a, b) = text.split_once(':').ok_or_else(bad)?;
    let weight = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|w| (1..=MAX_WEIGHT).contains(w))
            .ok_or_else(bad)
    };
    Ok([weight(a)?, weight(b)?])
}

/// softswitch's heaviest DWRR weight (its traffic manager refuses more).
const MAX_WEIGHT: u32 = 100;

/// A fraction, 0 to 1 exclusive of 0.
fn parse_fraction(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|f| *f > 0.0 && *f < 1.0)
        .ok_or_else(|| format!("{text}: a fraction between 0 and 1"))
}

/// Options of `lossless net experiment mixed`.
#[derive(Debug, Clone, clap::Args)]
pub struct MixedArgs {
    /// The host the bulk traffic and the CNPs go to: its leaf's port toward it is the congested
    /// one [default: the fabric's first host].
    #[arg(long)]
    pub host: Option<String>,
    /// The links.
    #[command(flatten)]
    pub links: Links,
    /// How long each run sends (1 ms to 1 day).
    #[arg(long, default_value = "3", value_parser = parse_run_time)]
    pub secs: Duration,
    /// The DWRR weights of the two lossy classes, priority 1 (DSCP 10) : priority 0 (DSCP 0),
    /// each 1 to 100.
    #[arg(long, default_value = "3:1", value_parser = parse_weights)]
    pub weights: [u32; 2],
    /// The most a lossy class's share of the two classes' bytes may miss its weight's share,
    /// as a fraction of it.
    #[arg(long, default_value = "0.05", value_parser = parse_fraction)]
    pub share_tolerance: f64,
    /// The most the CNPs' median wait at the congested port may exceed the control's, µs
    /// [default: two frame-times of the link: a strict queue waits at most for the frame on
    /// the wire].
    #[arg(long)]
    pub cnp_bound_us: Option<u64>,
    /// Directory for summary.json and table.txt.
    #[arg(long, default_value = "lab-output/net-mixed")]
    pub out: PathBuf,
}

/// The tuning the fabric is built with: the default classes, and DSCP 10 to priority 1.
pub fn tuning() -> Tuning {
    let mut tuning = Tuning::default();
    for (dscp, priority) in LOSSY {
        if priority != 0 {
            tuning.classes.push(Class { dscp, priority });
        }
    }
    tuning
}

/// One queue of the congested port, as read.
#[derive(Clone, Debug, Serialize)]
struct QueueRead {
    priority: u32,
    /// Packets that left it since the run began.
    packets: u64,
    /// Packets in it at the read.
    occupancy: u32,
    strict: bool,
    weight: u32,
    sojourn_p50_us: u64,
    sojourn_p99_us: u64,
    sojourn_max_us: u64,
}

impl QueueRead {
    fn of(q: &QueueState) -> QueueRead {
        QueueRead {
            priority: q.priority,
            packets: q.sojourn_us_buckets.iter().sum(),
            occupancy: q.occupancy_packets,
            strict: q.strict,
            weight: q.weight,
            sojourn_p50_us: q.sojourn_p50_us,
            sojourn_p99_us: q.sojourn_p99_us,
            sojourn_max_us: q.sojourn_max_us,
        }
    }
}

/// A lossy class's share of the port while both were backlogged.
#[derive(Debug, Serialize)]
struct Share {
    priority: u8,
    dscp: u8,
    weight: u32,
    /// Frames it sent between the two reads.
    packets: u64,
    /// Bytes (every bulk frame is --size bytes).
    bytes: u64,
    /// Its share of the two classes' bytes.
    share: f64,
    /// Its weight's share.
    expected: f64,
    /// Frames in its queue at the two reads.
    occupancy: [u32; 2],
}

/// One run.
#[derive(Debug, Serialize)]
struct Run {
    bulk: bool,
    /// The port's queues that carried frames, at the end of the run.
    queues: Vec<QueueRead>,
    /// CNPs that left the port (its CNP priority's packets).
    cnps: u64,
    cnp_sojourn_p50_us: u64,
    cnp_sojourn_p99_us: u64,
    cnp_sojourn_max_us: u64,
    /// CNPs the host's DCQCN sender received.
    cnp_received: u64,
    /// What each sender sent.
    senders: Vec<Sent>,
    /// The lossy classes' shares (bulk run only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shares: Vec<Share>,
}

/// What one sender sent, from its summary.
#[derive(Debug, Serialize)]
struct Sent {
    host: String,
    dst: IpAddr,
    dscp: u8,
    packets: u64,
    wire_rate_bps: f64,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    host: String,
    /// The switch and port toward the host: the congested port.
    switch: String,
    port: u32,
    link_rate_bps: u64,
    link_pps: u64,
    frame_bytes: usize,
    secs: f64,
    weights: [u32; 2],
    share_tolerance: f64,
    cnp_bound_us: u64,
    control: Run,
    bulk: Run,
    /// Whether the shares held the weights and CNPs were not delayed; why not if not.
    pass: bool,
    failures: Vec<String>,
    stopped_early: bool,
}

/// Who sends what.
struct Hosts {
    /// The bulk's and the CNPs' destination.
    x: String,
    x_ip: IpAddr,
    /// The bulk sender, on X's leaf.
    bulk: String,
    /// The RoCEv2 receiver, and the other RoCEv2 sender into it (on its leaf).
    y: String,
    y_ip: IpAddr,
    other: String,
}

/// Picks the hosts: X, a host beside it, Y (the last host, on another leaf) and a host beside
/// Y.
fn hosts(fabric: &Fabric, x: Option<&str>) -> anyhow::Result<Hosts> {
    let all = fabric.hosts();
    let x = match x {
        Some(name) => name.to_string(),
        None => all.first().context("the fabric has no hosts")?.clone(),
    };
    let leaf_of = |h: &str| fabric.port_toward(h).map(|(s, _)| s.name);
    let x_leaf = leaf_of(&x)?;
    let beside = |leaf: &str, not: &str| -> anyhow::Result<Option<String>> {
        for h in &all {
            if h != not && leaf_of(h)? == leaf {
                return Ok(Some(h.clone()));
            }
        }
        Ok(None)
    };
    let bulk = beside(&x_leaf, &x)?
        .with_context(|| format!("{x} needs a host beside it on {x_leaf}: the bulk sender"))?;
    let mut y = None;
    for h in all.iter().rev() {
        if leaf_of(h)? != x_leaf {
            y = Some(h.clone());
            break;
        }
    }
    let y = y.with_context(|| format!("the fabric needs a host off {x_leaf}"))?;
    let other = beside(&leaf_of(&y)?, &y)?
        .with_context(|| format!("{y} needs a host beside it: the other RoCEv2 sender"))?;
    Ok(Hosts {
        x_ip: host_ip(fabric.host(&x)?)?,
        y_ip: host_ip(fabric.host(&y)?)?,
        x,
        bulk,
        y,
        other,
    })
}

/// Runs the experiment on `fabric`; stops early when `stop` is set (and still reports).
pub fn run(args: &MixedArgs, fabric: &Fabric, stop: &StopFlag) -> anyhow::Result<()> {
    if fabric.kind != SwitchKind::Softswitch {
        bail!(
            "the mixed experiment shares ports by DWRR and paces them as links, which softswitch \
             does (its Queues service); BMv2's queues are strict priority only"
        );
    }
    let h = hosts(fabric, args.host.as_deref())?;
    let (switch, port) = fabric.port_toward(&h.x)?;
    fabric.read_pauses_at_fabric_speed([&h.x, &h.y, &h.other, &h.bulk])?;
    let pps = args
        .links
        .pacing
        .apply_to_ports(fabric, args.links.size)
        .with_context(|| format!("--size {}", args.links.size))?;
    share_by_weights(fabric, args.weights)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    println!(
        "mixed: bulk {} -> {} in priorities {} and {} (weights {}:{}), RoCEv2 {} -> {} at a \
         quarter of the link, {} and {} -> {} with DCQCN (CNPs back to {}); congested port {}:{}; links {} \
         Mb/s ({pps} frames of {} bytes a second), {:?} a run",
        h.bulk,
        h.x,
        LOSSY[0].1,
        LOSSY[1].1,
        args.weights[0],
        args.weights[1],
        h.y,
        h.x,
        h.x,
        h.other,
        h.y,
        h.x,
        switch.name,
        port,
        args.links.pacing.link_rate as f64 / 1e6,
        args.links.size,
        args.secs
    );
    let control = one_run(args, fabric, &h, &switch, port, false, stop)?;
    fabric.wait_idle()?;
    let bulk = one_run(args, fabric, &h, &switch, port, true, stop)?;
    let cnp_bound_us = args.cnp_bound_us.unwrap_or(2_000_000 / pps);
    let failures = verdict(args, cnp_bound_us, &control, &bulk);
    let outcome = Outcome {
        host: h.x.clone(),
        switch: switch.name.clone(),
        port,
        link_rate_bps: args.links.pacing.link_rate,
        link_pps: pps,
        frame_bytes: args.links.size,
        secs: args.secs.as_secs_f64(),
        weights: args.weights,
        share_tolerance: args.share_tolerance,
        cnp_bound_us,
        pass: failures.is_empty() && !stop.is_stopped(),
        failures,
        control,
        bulk,
        stopped_early: stop.is_stopped(),
    };
    let mut failures = outcome.failures.clone();
    if outcome.stopped_early {
        failures.push("stopped early".into());
    }
    super::report(&args.out, &outcome, &table(&outcome), &failures)
}

/// Makes the lossy priorities of every port of every switch share by DWRR at `weights`; the
/// others stay strict.
fn share_by_weights(fabric: &Fabric, weights: [u32; 2]) -> anyhow::Result<()> {
    let requests = LOSSY.map(|(_, priority)| priority).map(u32::from);
    let requests: Vec<SetQueueRequest> = requests
        .into_iter()
        .zip(weights)
        .map(|(priority, weight)| SetQueueRequest {
            priority: Some(priority),
            strict: Some(false),
            weight: Some(weight),
            ..Default::default()
        })
        .collect();
    fabric.set_queue_everywhere(&requests, "making its lossy priorities DWRR")
}

/// The queues of `switch`'s `port`, by priority; with `reset`, their measures are forgotten
/// first.
fn read_port(
    fabric: &Fabric,
    switch: &SwitchRef,
    port: u32,
    reset: bool,
) -> anyhow::Result<Vec<QueueState>> {
    fabric.in_network(async {
        let mut client = Client::connect(switch.target.clone()).await?;
        let queues = if reset {
            client
                .set_queue(SetQueueRequest {
                    port: Some(port),
                    reset_measures: true,
                    ..Default::default()
                })
                .await
        } else {
            client.queues().await
        }
        .with_context(|| format!("{}: reading its queues", switch.name))?;
        Ok(queues.into_iter().filter(|q| q.port == port).collect())
    })
}

/// `lossless traffic send` from a host's eth0 to `dst` for the run, its summary as JSON.
fn sender(args: &MixedArgs, dst: IpAddr, rate_bps: u64, dscp: u8, qp_base: u32) -> Vec<String> {
    let mut send = args.links.sender(dst, rate_bps);
    send.extend([
        "--dscp".into(),
        dscp.to_string(),
        "--qp-base".into(),
        qp_base.to_string(),
        "--duration".into(),
        format!("{}ms", args.secs.as_millis()),
        "--max-burst-us".into(),
        CATCH_UP_US.to_string(),
    ]);
    send
}

/// One run, with or without the bulk traffic.
fn one_run(
    args: &MixedArgs,
    fabric: &Fabric,
    h: &Hosts,
    switch: &SwitchRef,
    port: u32,
    bulk: bool,
    stop: &StopFlag,
) -> anyhow::Result<Run> {
    read_port(fabric, switch, port, true)?;
    let link = args.links.pacing.link_rate;
    let run_for = ["--duration".into(), format!("{}ms", args.secs.as_millis())];
    let catch_up = ["--max-burst-us".into(), CATCH_UP_US.to_string()];
    // The other sender congests Y's port at the link rate, catching up after deschedules; X
    // sends at half the link rate without catching up, so that its own leaf's uplink builds no
    // queue to mark (a CNP X's own leaf makes would leave it from priority 0, behind the bulk).
    let mut other = args.links.dcqcn_sender(h.y_ip);
    other.extend(run_for.clone());
    other.extend(catch_up);
    let mut x = args.links.dcqcn_sender(h.y_ip);
    let rate = x
        .iter()
        .position(|a| a == "--rate")
        .expect("a DCQCN sender has a rate")
        + 1;
    x[rate] = (link / 2).to_string();
    x.extend(run_for);
    let mut plan = vec![
        (&h.x, h.y_ip, DSCP_DATA, x),
        (&h.other, h.y_ip, DSCP_DATA, other),
        (
            &h.y,
            h.x_ip,
            DSCP_DATA,
            sender(args, h.x_ip, link / 4, DSCP_DATA, 0x3000),
        ),
    ];
    if bulk {
        let rate = (link as f64 * BULK_OF_LINK) as u64;
        for ((dscp, _), qp) in LOSSY.into_iter().zip(BULK_QP_BASE) {
            plan.push((&h.bulk, h.x_ip, dscp, sender(args, h.x_ip, rate, dscp, qp)));
        }
    }
    let mut running = Vec::new();
    for (host, dst, dscp, command) in plan {
        let spawned = Spawned::start(fabric.lossless_in(host, &command)?)?;
        running.push((host.clone(), dst, dscp, spawned));
    }
    let started = Instant::now();
    let mut reads = Vec::new();
    if bulk {
        for at in SHARE_READS {
            let at = started + args.secs.mul_f64(at);
            // Reading at set times of the run: waiting for a time, not for a condition.
            while Instant::now() < at && !stop.is_stopped() {
                std::thread::sleep(
                    Duration::from_millis(10).min(at.saturating_duration_since(Instant::now())),
                );
            }
            reads.push(read_port(fabric, switch, port, false)?);
        }
    }
    while !running.iter_mut().all(|(.., s)| s.finished()) && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut cnp_received, mut senders) = (0, Vec::new());
    for (host, dst, dscp, sender) in running {
        if stop.is_stopped() {
            break;
        }
        let text = sender.output(&format!("{host}: traffic send"))?;
        let summary: Value =
            serde_json::from_str(&text).with_context(|| format!("{host}: the sender's summary"))?;
        if host == h.x {
            cnp_received += count(&summary, "cnp_received");
        }
        senders.push(Sent {
            host,
            dst,
            dscp,
            packets: count(&summary, "packets"),
            wire_rate_bps: summary["wire_rate_bps"].as_f64().unwrap_or(0.0),
        });
    }
    std::thread::sleep(SETTLE);
    let end = read_port(fabric, switch, port, false)?;
    let cnp = end
        .iter()
        .find(|q| q.priority == u32::from(PRIORITY_CNP))
        .map(QueueRead::of)
        .context("the port has no CNP queue")?;
    let shares = match reads.as_slice() {
        [first, last] => shares(args, first, last)?,
        _ => Vec::new(),
    };
    Ok(Run {
        bulk,
        queues: end
            .iter()
            .map(QueueRead::of)
            .filter(|q| q.packets > 0)
            .collect(),
        cnps: cnp.packets,
        cnp_sojourn_p50_us: cnp.sojourn_p50_us,
        cnp_sojourn_p99_us: cnp.sojourn_p99_us,
        cnp_sojourn_max_us: cnp.sojourn_max_us,
        cnp_received,
        senders,
        shares,
    })
}

/// The lossy classes' shares between two reads of the port.
fn shares(
    args: &MixedArgs,
    first: &[QueueState],
    last: &[QueueState],
) -> anyhow::Result<Vec<Share>> {
    let of = |reads: &[QueueState], priority: u8| {
        reads
            .iter()
            .find(|q| q.priority == u32::from(priority))
            .map(QueueRead::of)
            .with_context(|| format!("the port has no queue of priority {priority}"))
    };
    let mut shares = Vec::new();
    for ((dscp, priority), weight) in LOSSY.into_iter().zip(args.weights) {
        let (a, b) = (of(first, priority)?, of(last, priority)?);
        let packets = b.packets.saturating_sub(a.packets);
        shares.push(Share {
            priority,
            dscp,
            weight,
            packets,
            bytes: packets * args.links.size as u64,
            share: 0.0,
            expected: f64::from(weight) / f64::from(args.weights.iter().sum::<u32>()),
            occupancy: [a.occupancy, b.occupancy],
        });
    }
    let total: u64 = shares.iter().map(|s| s.bytes).sum();
    for s in &mut shares {
        s.share = s.bytes as f64 / total.max(1) as f64;
    }
    Ok(shares)
}

/// What failed of the verdict (nothing: it passed).
fn verdict(args: &MixedArgs, cnp_bound_us: u64, control: &Run, bulk: &Run) -> Vec<String> {
    let mut failures = Vec::new();
    for s in &bulk.shares {
        if s.occupancy.contains(&0) {
            failures.push(format!(
                "priority {} was not backlogged (it held {:?} frames at the reads)",
                s.priority, s.occupancy
            ));
        }
        if (s.share - s.expected).abs() > args.share_tolerance * s.expected {
            failures.push(format!(
                "priority {} took {:.3} of the lossy bytes, its weight {:.3} (± {:.0}%)",
                s.priority,
                s.share,
                s.expected,
                args.share_tolerance * 100.0
            ));
        }
    }
    if bulk.shares.is_empty() {
        failures.push("the shares were not read".into());
    }
    for run in [control, bulk] {
        if run.cnps == 0 {
            failures.push(format!(
                "no CNP left the port in the {} run: nothing to compare",
                if run.bulk { "bulk" } else { "control" }
            ));
        }
    }
    // The median: a single stall of a switch the machine descheduled sets the p99 of some
    // tens of CNPs, in either run.
    if bulk.cnp_sojourn_p50_us > control.cnp_sojourn_p50_us.saturating_add(cnp_bound_us) {
        failures.push(format!(
            "CNPs waited {} us (p50) with the bulk, {} us without: more than {} us longer",
            bulk.cnp_sojourn_p50_us, control.cnp_sojourn_p50_us, cnp_bound_us
        ));
    }
    failures
}

/// The port's queues per run, the shares, the CNPs' waits and the verdict.
fn table(o: &Outcome) -> String {
    let mut t = format!(
        "congested port {}:{} (toward {}), links {:.1} Mb/s ({} frames a second), weights {}:{} \
         (priority {}:{})\n\n",
        o.switch,
        o.port,
        o.host,
        o.link_rate_bps as f64 / 1e6,
        o.link_pps,
        o.weights[0],
        o.weights[1],
        LOSSY[0].1,
        LOSSY[1].1
    );
    t += &format!(
        "{:<8} {:>8} {:>10} {:>8} {:>10} {:>18}\n",
        "run", "priority", "scheduler", "packets", "occupancy", "sojourn_us"
    );
    for run in [&o.control, &o.bulk] {
        for q in &run.queues {
            let (sojourn, _) = output::queue_percentiles(
                [q.sojourn_p50_us, q.sojourn_p99_us, q.sojourn_max_us],
                [0; 3],
            );
            t += &format!(
                "{:<8} {:>8} {:>10} {:>8} {:>10} {:>18}\n",
                if run.bulk { "bulk" } else { "control" },
                q.priority,
                if q.strict {
                    "strict".to_string()
                } else {
                    format!("dwrr:{}", q.weight)
                },
                q.packets,
                q.occupancy,
                sojourn
            );
        }
    }
    for run in [&o.control, &o.bulk] {
        for s in &run.senders {
            t += &format!(
                "{:<8} {} -> {} DSCP {}: {} frames at {:.2} Mb/s\n",
                if run.bulk { "bulk" } else { "control" },
                s.host,
                s.dst,
                s.dscp,
                s.packets,
                s.wire_rate_bps / 1e6
            );
        }
    }
    t += "\nlossy shares while both were backlogged (bulk run):\n";
    for s in &o.bulk.shares {
        t += &format!(
            "  priority {} (DSCP {}, weight {}): {} frames, {:.3} of the lossy bytes (weight's \
             share {:.3}); {}..{} frames queued\n",
            s.priority,
            s.dscp,
            s.weight,
            s.packets,
            s.share,
            s.expected,
            s.occupancy[0],
            s.occupancy[1]
        );
    }
    for run in [&o.control, &o.bulk] {
        t += &format!(
            "CNPs through the port, {}: {}, waited p50/p99/max {}/{}/{} us; {} reached {}\n",
            if run.bulk { "with bulk" } else { "control" },
            run.cnps,
            run.cnp_sojourn_p50_us,
            run.cnp_sojourn_p99_us,
            run.cnp_sojourn_max_us,
            run.cnp_received,
            o.host
        );
    }
    let verdict = if o.pass {
        format!(
            "PASS: shares within {:.0}% of the weights', CNPs' median wait within {} us of the \
             control's",
            o.share_tolerance * 100.0,
            o.cnp_bound_us
        )
    } else {
        format!("FAIL: {}", o.failures.join("; "))
    };
    t + &super::table_end(&Default::default(), &verdict, o.stopped_early)
}
