//! The load-balancing experiments on a generated fabric (`lossless net experiment lb` and
//! `lossless net experiment link-failure`). One workload, run once per policy on the same
//! running fabric, the policy switched live over P4Runtime between runs: every host of the
//! first leaf sends a long DCQCN flow to a host of the last leaf, and short DCQCN flows of a
//! few frames start evenly over the run between other pairs of those hosts, all of it crossing
//! the spines through lossless.p4 with PFC, ECN and CNPs on and every queue paced at the link
//! rate. What each policy costs shows as pauses, marks and short flows waiting behind long ones
//! (head-of-line blocking), not as loss: the lossless class drops nothing.
//!
//! link-failure takes one leaf-spine link down a part of the way into each run. lossless.p4 has
//! no notion of a link's state: whatever its groups send to the dead port is lost. The
//! reaction is the control plane's, as a fabric's routing withdraws the paths over a dead
//! link: the experiment's controller (the one P4Runtime primary of the leaves' groups) follows
//! the kernel's link events (rtnetlink) and, when a fabric link loses its carrier, rewrites
//! every leaf's uplink group without the link's spine (and puts it back when the link returns). `--no-reroute` leaves the groups
//! alone, to show what the data plane does on its own.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde::Serialize;
use serde_json::Value;

use super::{
    controller::{link_ends, Controller, PolicyTimers},
    count, host_ip, spine_bytes, spine_cells, spine_columns, table_end, table_head, table_row,
    CountSample, Fabric, Links, Receiving, Sampler, Spawned, SwitchCounts, SwitchOutcome,
    GOODPUT_EVERY,
};
use crate::net::leaf_spine::{host_name, policy_parser, Policy, Tuning};
use crate::output::{self, Line, Panel};
use sysutil::clock::monotonic_ns_at;
use sysutil::{interface::Interface, netns::run_in};
use traffic::{Interval, StopFlag};
use units::parse_run_time;

/// How often the sampler reads the switches' counters: recovery shows at this grain.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Once the senders are done: how long the receivers may go without a new frame before the
/// run ends, and the most the drain may take.
const QUIET: Duration = Duration::from_secs(1);
const DRAIN: Duration = Duration::from_secs(10);

/// Short flows' UDP source ports count from here (long flows use the traffic tool's default,
/// 49152 up), so every short flow is a 5-tuple of its own; every run sends the same 5-tuples,
/// so every policy balances the same flows.
const SHORT_SPORT_BASE: u16 = 50000;

/// Each run's QPs are its own (long flows from 256 + 256 × run, short flows 128 above them),
/// so a frame of an earlier run still in the fabric is never counted as this run's.
const QPS_PER_RUN: u32 = 256;
const SHORT_QP_OFFSET: u32 = 128;

/// The most policies a run of the experiment takes (each its own QP numbers).
const MAX_RUNS: usize = 64;

/// Header bytes of a RoCEv2 frame (Ethernet, IPv4, UDP, BTH, ICRC), and what a frame takes on
/// the wire beyond its own bytes: the part of a link's rate that is goodput.
const ROCE_HEADER_BYTES: usize = 14 + 20 + 8 + 12 + 4;
const WIRE_EXTRA_BYTES: usize = 24;

/// A link failure's recovery: goodput back at this fraction of what flowed before (or of what
/// the surviving paths can carry, if less). Half: DCQCN on this machine keeps goodput well
/// below a link's rate, and a flow left on a dead path takes its share to zero.
const RECOVERED: f64 = 0.5;

/// How long the link and the control plane may take to come back between runs.
const RESTORE: Duration = Duration::from_secs(10);

/// Options of `lossless net experiment lb`.
#[derive(Debug, Clone, clap::Args)]
pub struct LbArgs {
    /// The policies, run in this order on the same fabric.
    #[arg(
        long,
        value_parser = policy_parser(),
        value_delimiter = ',',
        default_value = "ecmp,flowlet,dlb,spray"
    )]
    pub policies: Vec<Policy>,
    /// The links.
    #[command(flatten)]
    pub links: Links,
    /// How long each policy's long flows send (1 ms to 1 day).
    #[arg(long, default_value = "3", value_parser = parse_run_time)]
    pub secs: Duration,
    /// QPs of each long flow, 1 to 16 (each its own UDP source port, so its own 5-tuple).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub long_qps: u32,
    /// Short flows per policy, 0 to 100, started evenly over the run.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub short_flows: u32,
    /// The uplink groups' timers.
    #[command(flatten)]
    pub timers: PolicyTimers,
    /// Frames of each short flow, 1 to 10000.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub short_frames: u64,
    /// Directory for summary.json, table.md and the plot [default: lab-output/net-lb, or
    /// lab-output/net-link-failure].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `lossless net experiment link-failure`.
#[derive(Debug, Clone, clap::Args)]
pub struct LinkFailureArgs {
    /// The workload.
    #[command(flatten)]
    pub lb: LbArgs,
    /// The link that fails: leafL-spineS, or busiest: the sending leaf's uplink that has
    /// carried the most bytes of the run so far (by the spines' counters), so every policy
    /// loses the link it leans on.
    #[arg(long, default_value = "busiest")]
    pub link: String,
    /// When it fails, into each run [default: a third of --secs].
    #[arg(long, value_parser = parse_run_time)]
    pub fail_at: Option<Duration>,
    /// Leave the uplink groups alone when the link fails: what the data plane does on its own.
    #[arg(long)]
    pub no_reroute: bool,
}

/// The failing link, resolved on the fabric.
struct Failure {
    /// Its leaf and spine, or `None`: the sending leaf's busiest uplink at the time.
    link: Option<(u16, u16)>,
    /// When it fails, into each run.
    at: Duration,
    reroute: bool,
}

/// A link taken down.
struct Failed {
    /// When.
    at: Instant,
    /// Its leaf and spine.
    leaf: u16,
    spine: u16,
    /// Its leaf-side interface (the one taken down).
    iface: String,
}

impl LbArgs {
    /// The uplink groups' timers.
    fn tuning(&self) -> Tuning {
        self.timers
            .tuning(self.links.pacing.link_rate, self.links.size)
    }
}

/// One short flow's outcome.
#[derive(Debug, Serialize)]
struct ShortFlow {
    from: String,
    to: String,
    /// When it started, seconds into the run.
    start_s: f64,
    sent: u64,
    received: u64,
    /// From its first frame sent to its last received, ms (when every frame arrived).
    fct_ms: Option<f64>,
}

/// One long flow's outcome.
#[derive(Debug, Serialize)]
struct LongFlow {
    from: String,
    to: String,
    sent: u64,
    received: u64,
    reordered: u64,
    goodput_bps: f64,
    paused_ms: f64,
    cnp_received: u64,
}

/// How a run recovered from its link failure.
#[derive(Debug, Serialize)]
struct Recovery {
    link: String,
    /// When the link went down, seconds into the run.
    failed_at_s: f64,
    /// The control plane's reaction, ms after the failure: the kernel's event seen, every
    /// leaf's group rewritten (none with --no-reroute).
    detected_ms: Option<f64>,
    rerouted_ms: Option<f64>,
    /// Receivers' goodput before the failure, and what the surviving paths can carry.
    goodput_before_bps: f64,
    surviving_capacity_bps: f64,
    /// From the failure until the end of the first of the receivers' reports (every 100 ms,
    /// begun after it) from which on the goodput averaged at least half the smaller of the two
    /// to the senders' end (none: from none).
    recovery_ms: Option<f64>,
    /// Receivers' goodput from the reroute (plus a sample's grain; the failure with
    /// --no-reroute) to the senders' end.
    goodput_after_bps: f64,
    /// Bytes the surviving spines received over the same span.
    surviving_spine_bytes_after: u64,
    /// Bytes the dead link's spine received over the same span (to the run's end).
    dead_spine_bytes_after: u64,
    /// The same, by the leaf they came from (the spine's port to it).
    dead_spine_bytes_after_from: BTreeMap<String, u64>,
    /// Frames sent and never received.
    lost_frames: u64,
}

/// One policy's run.
#[derive(Debug, Serialize)]
struct PolicyOutcome {
    policy: Policy,
    secs: f64,
    /// Bytes each spine received from the wire, by name.
    spine_bytes: BTreeMap<String, u64>,
    /// The busiest spine's bytes over the mean, minus 1 (0: perfectly even).
    imbalance: f64,
    /// Frames of the lossless class sent, received, and lost end to end.
    sent: u64,
    received: u64,
    lossless_drops: u64,
    /// Frames the switches' program dropped in the lossless priority.
    switch_drops: u64,
    /// Frames the receivers found out of order, and PSNs they found skipped.
    reordered: u64,
    psn_gaps: u64,
    /// Short flows' completion times (those that completed), ms.
    fct_p50_ms: Option<f64>,
    fct_p99_ms: Option<f64>,
    short_completed: usize,
    /// PAUSEs, CE marks and CNPs the switches sent.
    pauses: u64,
    ecn_marked: u64,
    cnp_sent: u64,
    /// The receivers' goodput, b/s.
    goodput_bps: f64,
    long_flows: Vec<LongFlow>,
    short_flows: Vec<ShortFlow>,
    switches: Vec<SwitchOutcome>,
    recovery: Option<Recovery>,
    /// Per spine, its received rate over the run (seconds, Mb/s); and the receivers' goodput.
    #[serde(skip)]
    spine_rates: Vec<(String, Vec<(f64, f64)>)>,
    #[serde(skip)]
    goodput: Vec<(f64, f64)>,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    experiment: &'static str,
    switch: &'static str,
    shape: [u16; 3],
    link_rate_bps: u64,
    link_pps: u64,
    frame_bytes: usize,
    secs_per_policy: f64,
    flowlet_timeout_us: u64,
    dlb_load_age_us: u64,
    long_qps: u32,
    short_flows: u32,
    short_frames: u64,
    policies: Vec<PolicyOutcome>,
    /// The kernel's drops (rx, tx) on the network's interfaces that dropped any, over the
    /// whole experiment, by name.
    interface_drops: BTreeMap<String, [u64; 2]>,
    stopped_early: bool,
}

/// Runs the lb experiment on `fabric`, with the link failure when `failure` says so.
pub fn run(
    args: &LbArgs,
    failure: Option<&LinkFailureArgs>,
    fabric: &Fabric,
    stop: &StopFlag,
) -> anyhow::Result<()> {
    if args.policies.is_empty() || args.policies.len() > MAX_RUNS {
        bail!("--policies: 1 to {MAX_RUNS}");
    }
    let shape = fabric.shape;
    if shape.leaves < 2 || shape.spines < 2 {
        bail!("load balancing needs two leaves and two spines at least");
    }
    let failure = failure.map(|f| resolve_failure(f, fabric)).transpose()?;
    let name = if failure.is_some() {
        "link-failure"
    } else {
        "lb"
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("lab-output/net-{name}")));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = std::path::absolute(&out)?;
    let senders: Vec<String> = (1..=shape.hosts).map(|h| host_name(1, h)).collect();
    let receivers: Vec<String> = (1..=shape.hosts)
        .map(|h| host_name(shape.leaves, h))
        .collect();
    fabric.read_pauses_at_fabric_speed(senders.iter().chain(&receivers))?;
    let pps = args.links.apply(fabric)?;
    println!(
        "{name}: long flows {} -> {} and {} short flows of {} frames per policy, on {:?}, every \
         link {} Mb/s ({pps} frames of {} bytes a second), {:?} per policy",
        senders.join(","),
        receivers.join(","),
        args.short_flows,
        args.short_frames,
        fabric.kind,
        args.links.pacing.link_rate as f64 / 1e6,
        args.links.size,
        args.secs
    );

    let reroute = failure.as_ref().is_some_and(|f| f.reroute);
    let controller = Controller::start(fabric, args.tuning(), reroute)?;
    let run = Run {
        args,
        fabric,
        senders,
        receivers,
        failure: failure.as_ref(),
        controller: &controller,
        stop,
    };
    let mut policies = Vec::new();
    let mut result = Ok(());
    for (i, policy) in args.policies.iter().enumerate() {
        if stop.is_stopped() {
            break;
        }
        match run.one(*policy, i as u32) {
            Ok(outcome) => policies.push(outcome),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    controller.finish()?;
    result?;
    let outcome = Outcome {
        experiment: name,
        switch: fabric.kind_name(),
        shape: [shape.spines, shape.leaves, shape.hosts],
        link_rate_bps: args.links.pacing.link_rate,
        link_pps: pps,
        frame_bytes: args.links.size,
        secs_per_policy: args.secs.as_secs_f64(),
        flowlet_timeout_us: args.tuning().flowlet_timeout_us,
        dlb_load_age_us: args.tuning().dlb_load_age_us,
        long_qps: args.long_qps,
        short_flows: args.short_flows,
        short_frames: args.short_frames,
        policies,
        interface_drops: fabric.interface_drops()?,
        stopped_early: stop.is_stopped(),
    };
    let table = table(&outcome);
    print!("{table}");
    output::write_summary(&out, &outcome)?;
    output::write_text(&out, "table.md", &table)?;
    draw(&out.join(format!("{name}.svg")), &outcome, args)?;
    println!(
        "wrote summary.json, table.md and {name}.svg to {}",
        out.display()
    );
    Ok(())
}

/// `--link` and `--fail-at` on the fabric.
fn resolve_failure(f: &LinkFailureArgs, fabric: &Fabric) -> anyhow::Result<Failure> {
    let shape = fabric.shape;
    let at = f.fail_at.unwrap_or(f.lb.secs / 3);
    if at >= f.lb.secs {
        bail!("--fail-at {at:?}: within --secs {:?}", f.lb.secs);
    }
    let link = match f.link.as_str() {
        "busiest" => None,
        text => {
            let parsed = text.split_once('-').and_then(|(leaf, spine)| {
                Some((
                    leaf.strip_prefix("leaf")?.parse::<u16>().ok()?,
                    spine.strip_prefix("spine")?.parse::<u16>().ok()?,
                ))
            });
            let Some(link) = parsed
                .filter(|(l, s)| (1..=shape.leaves).contains(l) && (1..=shape.spines).contains(s))
            else {
                bail!(
                    "--link {text}: busiest, or leafL-spineS with L in 1..={} and S in 1..={}",
                    shape.leaves,
                    shape.spines
                );
            };
            Some(link)
        }
    };
    Ok(Failure {
        link,
        at,
        reroute: !f.no_reroute,
    })
}

/// What every spine has received from leaf `leaf` so far, by spine number.
fn spine_bytes_from(fabric: &Fabric, leaf: u16) -> anyhow::Result<BTreeMap<u16, u64>> {
    let spines: Vec<_> = fabric
        .switches()
        .into_iter()
        .filter(|s| s.name.starts_with("spine"))
        .collect();
    fabric.in_network(async move {
        let mut bytes = BTreeMap::new();
        for spine in &spines {
            let number: u16 = spine.name["spine".len()..].parse()?;
            let rx = super::port_rx_bytes(spine).await?;
            let from_leaf = spine
                .ports
                .iter()
                .position(|p| *p == u32::from(leaf))
                .map_or(0, |i| rx[i]);
            bytes.insert(number, from_leaf);
        }
        Ok(bytes)
    })
}

/// `ip link set IFACE up|down` in the network's namespace.
fn set_link(fabric: &Fabric, iface: &str, up: bool) -> anyhow::Result<()> {
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net={}", fabric.running.netns_path().display()))
        .args([
            "--",
            "ip",
            "link",
            "set",
            iface,
            if up { "up" } else { "down" },
        ])
        .output()
        .context("running ip link set")?;
    if !out.status.success() {
        bail!(
            "ip link set {iface}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The experiment's fixed parts, for each policy's run.
struct Run<'a> {
    args: &'a LbArgs,
    fabric: &'a Fabric,
    senders: Vec<String>,
    receivers: Vec<String>,
    failure: Option<&'a Failure>,
    controller: &'a Controller,
    stop: &'a StopFlag,
}

/// What a sender sent: its summary.
struct Sent {
    from: String,
    to: String,
    started: Instant,
    /// A short flow (else a long one).
    short: bool,
    summary: Value,
}

/// A sender process and what it is.
struct Sending {
    from: String,
    to: String,
    started: Instant,
    process: Spawned,
}

impl Run<'_> {
    /// `traffic send` from `from` to `to`, with DCQCN at the link rate.
    fn send(&self, from: &str, to: &str, extra: &[String]) -> anyhow::Result<Sending> {
        let args = self.args;
        let mut send = args.links.dcqcn_sender(host_ip(self.fabric.host(to)?)?);
        send.extend(extra.iter().cloned());
        Ok(Sending {
            from: from.into(),
            to: to.into(),
            started: Instant::now(),
            process: Spawned::start(self.fabric.lossless_in(from, &send)?)?,
        })
    }

    /// Takes the failing link down: the one given, or the sending leaf's busiest uplink since
    /// `baseline` (each spine's bytes from it at the run's start).
    fn fail(&self, failure: &Failure, baseline: &BTreeMap<u16, u64>) -> anyhow::Result<Failed> {
        let (leaf, spine) = match failure.link {
            Some(link) => link,
            None => {
                let now = spine_bytes_from(self.fabric, 1)?;
                let busiest = now
                    .iter()
                    .max_by_key(|(s, bytes)| **bytes - baseline.get(s).copied().unwrap_or(0))
                    .map(|(s, _)| *s)
                    .context("no spine")?;
                (1, busiest)
            }
        };
        let iface = link_ends(self.fabric)?
            .remove(&(leaf, spine))
            .context("the fabric lists no such link")?[0]
            .clone();
        let at = Instant::now();
        set_link(self.fabric, &iface, false)?;
        Ok(Failed {
            at,
            leaf,
            spine,
            iface,
        })
    }

    /// Brings the failed link back and waits until the fabric uses it again.
    fn restore(&self, failure: &Failure, failed: &Failed) -> anyhow::Result<()> {
        set_link(self.fabric, &failed.iface, true)?;
        let spines = usize::from(self.fabric.shape.spines);
        let deadline = Instant::now() + RESTORE;
        loop {
            let back = match failure.reroute {
                true => self.controller.live_spines()? == spines,
                false => link_ends(self.fabric)?[&(failed.leaf, failed.spine)]
                    .iter()
                    .all(|i| {
                        run_in(&self.fabric.running.netns_path(), || {
                            Interface::is_running(i)
                        })
                        .unwrap_or(false)
                    }),
            };
            if back {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} is not back after {RESTORE:?}", failed.iface);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The `run`th run of the workload, under `policy`.
    fn one(&self, policy: Policy, run: u32) -> anyhow::Result<PolicyOutcome> {
        let (args, fabric) = (self.args, self.fabric);
        fabric.wait_idle()?;
        self.controller.set_policy(policy)?;
        let qp_base = 256 + run * QPS_PER_RUN;
        println!("{policy:?}: running");
        let mut receiving = Vec::new();
        for r in &self.receivers {
            let pid = fabric.host(r)?.pid;
            receiving.push(Receiving::start(&format!("/proc/{pid}/ns/net"))?);
        }
        let baseline = match self.failure {
            Some(f) if f.link.is_none() => spine_bytes_from(fabric, 1)?,
            _ => BTreeMap::new(),
        };
        let sampler = Sampler::start(fabric, SAMPLE_EVERY)?;
        let start = Instant::now();
        let mut long = Vec::new();
        for (i, from) in self.senders.iter().enumerate() {
            let to = &self.receivers[i % self.receivers.len()];
            long.push(self.send(
                from,
                to,
                &[
                    "--duration".into(),
                    format!("{}ms", args.secs.as_millis()),
                    "--qps".into(),
                    args.long_qps.to_string(),
                    "--qp-base".into(),
                    qp_base.to_string(),
                ],
            )?);
        }
        let mut short = Vec::new();
        let mut failed = None;
        loop {
            if self.stop.is_stopped() {
                bail!("stopped");
            }
            let elapsed = start.elapsed();
            let k = short.len() as u32;
            if k < args.short_flows && elapsed >= args.secs * (2 * k + 1) / (2 * args.short_flows) {
                let from = &self.senders[k as usize % self.senders.len()];
                let to = &self.receivers[(k as usize + 1) % self.receivers.len()];
                short.push(self.send(
                    from,
                    to,
                    &[
                        "--count".into(),
                        args.short_frames.to_string(),
                        "--qp-base".into(),
                        (qp_base + SHORT_QP_OFFSET + k).to_string(),
                        "--sport-base".into(),
                        (SHORT_SPORT_BASE + k as u16).to_string(),
                    ],
                )?);
                continue;
            }
            if let (Some(f), None) = (self.failure, &failed) {
                if elapsed >= f.at {
                    let down = self.fail(f, &baseline)?;
                    println!(
                        "{policy:?}: leaf{}-spine{} ({}) down",
                        down.leaf, down.spine, down.iface
                    );
                    failed = Some(down);
                }
            }
            if k == args.short_flows && long.iter_mut().all(|s| s.process.finished()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut sent = Vec::new();
        let longs = long.len();
        for (i, s) in long.into_iter().chain(short).enumerate() {
            let what = format!("{}: traffic send", s.from);
            let text = s.process.output(&what)?;
            let summary: Value =
                serde_json::from_str(&text).with_context(|| format!("{what}: its summary"))?;
            sent.push(Sent {
                from: s.from,
                to: s.to,
                started: s.started,
                short: i >= longs,
                summary,
            });
        }
        let expected: u64 = sent.iter().map(|s| count(&s.summary, "packets")).sum();
        let drain_until = Instant::now() + DRAIN;
        let (mut last, mut last_change) = (0, Instant::now());
        loop {
            let received: u64 = receiving.iter().map(Receiving::received).sum();
            if received != last {
                (last, last_change) = (received, Instant::now());
            }
            if received >= expected
                || last_change.elapsed() > QUIET
                || Instant::now() > drain_until
                || self.stop.is_stopped()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut received = BTreeMap::new();
        for (r, receiver) in self.receivers.iter().zip(receiving) {
            received.insert(r.clone(), receiver.finish()?);
        }
        let samples = sampler.finish()?;
        let elapsed = start.elapsed();
        if let (Some(f), Some(down)) = (self.failure, &failed) {
            self.restore(f, down)?;
        }
        let mut outcome = self.measure(policy, start, elapsed, &sent, &received, &samples)?;
        if let Some(down) = &failed {
            outcome.recovery = Some(self.recovery(down, start, &outcome, &samples));
        }
        Ok(outcome)
    }

    /// What a run measured: the senders' summaries, the receivers' (with their goodput
    /// reports), the switches' counter samples.
    fn measure(
        &self,
        policy: Policy,
        start: Instant,
        elapsed: Duration,
        sent: &[Sent],
        received: &BTreeMap<String, (traffic::RecvSummary, Vec<Interval>)>,
        samples: &[CountSample],
    ) -> anyhow::Result<PolicyOutcome> {
        let fabric = self.fabric;
        let (mut long_flows, mut short_flows) = (Vec::new(), Vec::new());
        for Sent {
            from,
            to,
            started,
            short,
            summary: s,
        } in sent
        {
            let src = host_ip(fabric.host(from)?)?;
            let qps: Vec<u64> = s["qps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q["qp"].as_u64())
                .collect();
            let (summary, _) = &received[to];
            let mine: Vec<_> = summary
                .qps
                .iter()
                .filter(|q| q.src == src && qps.contains(&u64::from(q.qp)))
                .collect();
            let mine = || mine.iter();
            let got: u64 = mine().map(|q| q.frames.packets).sum();
            let frames = count(s, "packets");
            if *short {
                let last_ns = mine().map(|q| q.last_ns).max().unwrap_or(0);
                let arrived = monotonic_ns_at(summary.started) + last_ns;
                let fct_ms = (got >= frames && frames > 0)
                    .then(|| arrived.saturating_sub(count(s, "started_monotonic_ns")) as f64 / 1e6);
                short_flows.push(ShortFlow {
                    from: from.clone(),
                    to: to.clone(),
                    start_s: started.duration_since(start).as_secs_f64(),
                    sent: frames,
                    received: got,
                    fct_ms,
                });
            } else {
                long_flows.push(LongFlow {
                    from: from.clone(),
                    to: to.clone(),
                    sent: frames,
                    received: got,
                    reordered: mine().map(|q| q.frames.reordered).sum(),
                    goodput_bps: mine().map(|q| q.goodput_bps).sum(),
                    paused_ms: count(s, "pfc_paused_ns") as f64 / 1e6,
                    cnp_received: count(s, "cnp_received"),
                });
            }
        }
        let switches = fabric.switches();
        let switches_out = SwitchOutcome::over(&switches, samples)?;
        let total = |f: fn(&SwitchCounts) -> u64| SwitchOutcome::total(&switches_out, f);
        let spines: Vec<usize> = (0..switches.len())
            .filter(|i| switches[*i].name.starts_with("spine"))
            .collect();
        let spine_bytes = spine_bytes(&switches, samples)?;
        let spine_rates = spines
            .iter()
            .map(|&i| {
                let points = samples
                    .windows(2)
                    .map(|w| {
                        let dt = (w[1].t_s - w[0].t_s).max(1e-3);
                        let bits = (w[1].switch_rx_bytes(i) - w[0].switch_rx_bytes(i)) as f64 * 8.0;
                        (w[1].t_s, bits / dt / 1e6)
                    })
                    .collect();
                (switches[i].name.clone(), points)
            })
            .collect();
        let mean = spine_bytes.values().sum::<u64>() as f64 / spine_bytes.len() as f64;
        let max = spine_bytes.values().copied().max().unwrap_or(0) as f64;
        let mut fcts: Vec<f64> = short_flows.iter().filter_map(|f| f.fct_ms).collect();
        fcts.sort_by(f64::total_cmp);
        let all_qps = || received.values().flat_map(|(s, _)| &s.qps);
        let sent_total: u64 = long_flows.iter().map(|f| f.sent).sum::<u64>()
            + short_flows.iter().map(|f| f.sent).sum::<u64>();
        let received_total: u64 = long_flows.iter().map(|f| f.received).sum::<u64>()
            + short_flows.iter().map(|f| f.received).sum::<u64>();
        Ok(PolicyOutcome {
            policy,
            secs: elapsed.as_secs_f64(),
            imbalance: if mean > 0.0 { max / mean - 1.0 } else { 0.0 },
            spine_bytes,
            sent: sent_total,
            received: received_total,
            lossless_drops: sent_total.saturating_sub(received_total),
            switch_drops: total(|c| c.dropped),
            reordered: all_qps().map(|q| q.frames.reordered).sum(),
            psn_gaps: all_qps().map(|q| q.frames.psn_gaps).sum(),
            fct_p50_ms: percentile(&fcts, 0.50),
            fct_p99_ms: percentile(&fcts, 0.99),
            short_completed: fcts.len(),
            pauses: total(|c| c.pause_tx),
            ecn_marked: total(|c| c.ecn_marked),
            cnp_sent: total(|c| c.cnp_sent),
            goodput_bps: received.values().map(|(s, _)| s.goodput_bps).sum(),
            long_flows,
            short_flows,
            switches: switches_out,
            recovery: None,
            spine_rates,
            goodput: goodput_over_run(received, start),
        })
    }

    /// How the run recovered from the failure `f`.
    fn recovery(
        &self,
        f: &Failed,
        start: Instant,
        outcome: &PolicyOutcome,
        samples: &[CountSample],
    ) -> Recovery {
        let args = self.args;
        let spines = usize::from(self.fabric.shape.spines);
        let fail_s = f.at.duration_since(start).as_secs_f64();
        let reaction = self.controller.reaction(f.at, spines - 1);
        let ms_after = |t: Instant| t.saturating_duration_since(f.at).as_secs_f64() * 1e3;
        let before: Vec<f64> = outcome
            .goodput
            .iter()
            .filter(|(t, _)| *t > fail_s / 2.0 && *t <= fail_s)
            .map(|(_, bps)| *bps)
            .collect();
        let goodput_before = before.iter().sum::<f64>() / before.len().max(1) as f64;
        let payload_share = (args.links.size - ROCE_HEADER_BYTES) as f64
            / (args.links.size + WIRE_EXTRA_BYTES) as f64;
        let surviving = (spines - 1) as f64 * args.links.pacing.link_rate as f64 * payload_share;
        let target = RECOVERED * goodput_before.min(surviving);
        let end_s = args.secs.as_secs_f64();
        let reports: Vec<(f64, f64)> = outcome
            .goodput
            .iter()
            .filter(|(end, _)| *end - GOODPUT_EVERY.as_secs_f64() >= fail_s && *end <= end_s)
            .copied()
            .collect();
        let recovery_ms = (0..reports.len())
            .find(|&i| {
                let rest = &reports[i..];
                rest.iter().map(|(_, bps)| bps).sum::<f64>() / rest.len() as f64 >= target
            })
            .map(|i| (reports[i].0 - fail_s) * 1e3);
        let dead = format!("spine{}", f.spine);
        let after_s = reaction.map_or(fail_s, |r| r.written.duration_since(start).as_secs_f64())
            + SAMPLE_EVERY.as_secs_f64();
        let spine_index = self
            .fabric
            .switches()
            .iter()
            .position(|s| s.name == dead)
            .unwrap_or(0);
        let switches = self.fabric.switches();
        let mut dead_after = BTreeMap::new();
        let mut surviving_after = 0;
        if let (Some(from), Some(last)) =
            (samples.iter().find(|s| s.t_s >= after_s), samples.last())
        {
            for (i, port) in switches[spine_index].ports.iter().enumerate() {
                let bytes = last.rx_bytes[spine_index][i] - from.rx_bytes[spine_index][i];
                dead_after.insert(format!("leaf{port}"), bytes);
            }
            for (j, switch) in switches.iter().enumerate() {
                if switch.name.starts_with("spine") && j != spine_index {
                    surviving_after +=
                        last.rx_bytes[j].iter().sum::<u64>() - from.rx_bytes[j].iter().sum::<u64>();
                }
            }
        }
        let after: Vec<f64> = outcome
            .goodput
            .iter()
            .filter(|(t, _)| *t - GOODPUT_EVERY.as_secs_f64() >= after_s && *t <= end_s)
            .map(|(_, bps)| *bps)
            .collect();
        let goodput_after = after.iter().sum::<f64>() / after.len().max(1) as f64;
        Recovery {
            link: format!("leaf{}-spine{}", f.leaf, f.spine),
            failed_at_s: fail_s,
            detected_ms: reaction.map(|r| ms_after(r.seen)),
            rerouted_ms: reaction.map(|r| ms_after(r.written)),
            goodput_before_bps: goodput_before,
            surviving_capacity_bps: surviving,
            recovery_ms,
            goodput_after_bps: goodput_after,
            surviving_spine_bytes_after: surviving_after,
            dead_spine_bytes_after: dead_after.values().sum(),
            dead_spine_bytes_after_from: dead_after,
            lost_frames: outcome.lossless_drops,
        }
    }
}

/// The receivers' goodput added up per report, in seconds into the run.
fn goodput_over_run(
    received: &BTreeMap<String, (traffic::RecvSummary, Vec<Interval>)>,
    start: Instant,
) -> Vec<(f64, f64)> {
    let mut sums: BTreeMap<u64, f64> = BTreeMap::new();
    for (summary, intervals) in received.values() {
        // The receivers started before the run: their report times, moved onto the run's.
        let lead = start
            .saturating_duration_since(summary.started)
            .as_secs_f64();
        for interval in intervals {
            let t = interval.t_s - lead;
            let bps: f64 = interval.qps.iter().map(|q| q.goodput_bps).sum();
            *sums.entry((t.max(0.0) * 1e3).round() as u64).or_default() += bps;
        }
    }
    sums.into_iter()
        .map(|(ms, bps)| (ms as f64 / 1e3, bps))
        .collect()
}

/// The `p` quantile of sorted `values` (nearest rank).
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A Markdown table: one row per policy, then the switches' pauses and marks per policy.
fn table(o: &Outcome) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut head = vec!["policy".to_string()];
    head.extend(spine_columns(o.policies.first().map(|p| &p.spine_bytes)));
    head.extend(
        [
            "imbalance",
            "reordered",
            "FCT p50 ms",
            "FCT p99 ms",
            "short done",
            "pauses",
            "ECN marks",
            "CNPs",
            "goodput Mb/s",
            "lossless drops",
        ]
        .map(String::from),
    );
    let failure = o.policies.iter().any(|p| p.recovery.is_some());
    if failure {
        head.extend(
            [
                "detect ms",
                "reroute ms",
                "recovery ms",
                "dead spine bytes after",
            ]
            .map(String::from),
        );
    }
    let mut t = table_head(&head);
    for p in &o.policies {
        let mut cells = vec![format!("{:?}", p.policy).to_lowercase()];
        cells.extend(spine_cells(&p.spine_bytes));
        cells.extend([
            format!("{:.2}", p.imbalance),
            p.reordered.to_string(),
            ms(p.fct_p50_ms),
            ms(p.fct_p99_ms),
            format!("{}/{}", p.short_completed, p.short_flows.len()),
            p.pauses.to_string(),
            p.ecn_marked.to_string(),
            p.cnp_sent.to_string(),
            format!("{:.2}", p.goodput_bps / 1e6),
            p.lossless_drops.to_string(),
        ]);
        if let Some(r) = &p.recovery {
            cells.extend([
                ms(r.detected_ms),
                ms(r.rerouted_ms),
                r.recovery_ms.map_or("never".into(), |v| format!("{v:.0}")),
                r.dead_spine_bytes_after.to_string(),
            ]);
        } else if failure {
            cells.extend(["-".to_string(), "-".into(), "-".into(), "-".into()]);
        }
        t += &table_row(&cells);
    }
    t += "\n";
    t += &table_head(
        &[
            "policy",
            "switch",
            "pause_tx",
            "pfc_rx",
            "held",
            "ecn_marked",
            "cnp_tx",
            "dropped",
        ]
        .map(String::from),
    );
    for p in &o.policies {
        for s in &p.switches {
            let c = &s.counts;
            t += &table_row(&[
                format!("{:?}", p.policy).to_lowercase(),
                s.name.clone(),
                c.pause_tx.to_string(),
                c.pfc_rx.to_string(),
                c.held.to_string(),
                c.ecn_marked.to_string(),
                c.cnp_sent.to_string(),
                c.dropped.to_string(),
            ]);
        }
    }
    let drops: u64 = o.policies.iter().map(|p| p.lossless_drops).sum();
    let verdict = format!(
        "{} policies, {drops} frames lost in the lossless class",
        o.policies.len()
    );
    t + &table_end(&o.interface_drops, &verdict, o.stopped_early)
}

/// Per policy, each spine's received rate and the receivers' goodput over the run (and the
/// link's failure); then the short flows' completion times per policy.
fn draw(path: &std::path::Path, o: &Outcome, args: &LbArgs) -> anyhow::Result<()> {
    let link = args.links.pacing.link_rate as f64 / 1e6;
    let mut panels = Vec::new();
    for p in &o.policies {
        let x = 0.0..p.secs;
        let mut lines: Vec<Line> = p
            .spine_rates
            .iter()
            .map(|(name, points)| Line::solid(format!("{name} received"), points.clone()))
            .collect();
        lines.push(Line::solid(
            "receivers' goodput",
            p.goodput.iter().map(|(t, bps)| (*t, bps / 1e6)).collect(),
        ));
        let top = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|(_, y)| *y))
            .fold(link, f64::max);
        if let Some(r) = &p.recovery {
            lines.push(Line {
                label: format!("{} down", r.link),
                points: vec![(r.failed_at_s, 0.0), (r.failed_at_s, top)],
                dashed: true,
            });
        }
        lines.push(Line::level("link rate", link, &x));
        panels.push(Panel::over_time(
            format!("{:?}: bytes per spine and goodput", p.policy).to_lowercase(),
            "Mb/s",
            &x,
            top,
            lines,
        ));
    }
    let mut fct_lines = Vec::new();
    let mut fct_max: f64 = 1.0;
    for p in &o.policies {
        let points: Vec<(f64, f64)> = p
            .short_flows
            .iter()
            .filter_map(|f| Some((f.start_s, f.fct_ms?)))
            .collect();
        fct_max = points.iter().map(|(_, y)| *y).fold(fct_max, f64::max);
        fct_lines.push(Line::solid(
            format!("{:?}", p.policy).to_lowercase(),
            points,
        ));
    }
    let ideal = args.short_frames as f64 * (args.links.size + WIRE_EXTRA_BYTES) as f64 * 8.0
        / args.links.pacing.link_rate as f64
        * 1e3;
    let x = 0.0..args.secs.as_secs_f64();
    fct_lines.push(Line::level("at line rate", ideal, &x));
    panels.push(Panel {
        caption: "short flows' completion time, by start".into(),
        x_desc: "started (s into the run)".into(),
        y_desc: "FCT (ms)".into(),
        x,
        y: 0.0..fct_max * 1.1,
        lines: fct_lines,
    });
    output::draw_panels(path, (1000, 300), &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&values, 0.5), Some(2.0));
        assert_eq!(percentile(&values, 0.99), Some(4.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
