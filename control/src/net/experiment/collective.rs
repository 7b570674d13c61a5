//! The collective experiment on a generated fabric (`lossless net experiment collective`): a
//! ring AllReduce (or an all-to-all) with every host of the fabric a rank, run once per
//! load-balancing policy and per number of QPs per connection on the same running fabric, the
//! policy switched live over P4Runtime between runs (the lb experiment's controller). Each
//! rank is `lossless traffic collective` in its host, all started at once, meeting without a
//! shared clock; the ranks' RoCEv2 RC traffic crosses lossless.p4 with PFC, ECN and CNPs on
//! and every queue paced at the link rate, and the hosts honour the switches' PAUSEs (XDP).
//!
//! What a run measures: the collective's time, nccl-tests' way — the mean timed iteration
//! (after `--warmup` untimed ones, which include the ranks' meeting) of the slowest rank — and
//! nccl-tests' bus bandwidth of it ([`workload::Collective::busbw`], the definition the ranks
//! report with); the longest of the ranks' totals (first post to last completion, warm-up
//! included); the slowest and the fastest rank; the bytes each spine carried; and the switches' pauses,
//! marks and drops in the lossless class.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde::Serialize;
use serde_json::Value;

use super::{
    controller::{Controller, PolicyTimers},
    count, host_ip, spine_bytes, spine_cells, spine_columns, table_end, table_head, table_row,
    Fabric, Pacing, Sampler, Spawned, SwitchCounts, SwitchOutcome, HOST_IFACE, SAMPLE_EVERY,
};
use crate::net::leaf_spine::{policy_parser, Policy};
use crate::output;
use traffic::{
    collective_cli::{short_form, size_text, CollectiveArg, QpUseArg, RTO},
    StopFlag,
};
use units::{parse_duration, parse_run_time};
use wire::roce::RoceFrame;

/// The most runs (policies × QP counts) an experiment takes.
const MAX_RUNS: usize = 64;

/// How long past the ranks' own --timeout the experiment waits for them before it kills them.
const GRACE: Duration = Duration::from_secs(10);

/// Options of `lossless net experiment collective`.
#[derive(Debug, Clone, clap::Args)]
pub struct CollectiveArgs {
    /// The collective.
    #[arg(long, value_enum, default_value = "allreduce")]
    pub collective: CollectiveArg,
    /// The policies, run in this order on the same fabric.
    #[arg(
        long,
        value_parser = policy_parser(),
        value_delimiter = ',',
        default_value = "ecmp,flowlet,dlb,spray,e-ecmp"
    )]
    pub policies: Vec<Policy>,
    /// QPs per connection: every policy runs once with each (a connection's QPs are different
    /// UDP source ports and destination QPs, so different paths to ECMP and E-ECMP).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,4",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(workload::limits::MAX_QPS))
    )]
    pub qps_per_conn: Vec<u32>,
    /// How a connection's messages use its QPs.
    #[arg(long, value_enum, default_value = "round-robin")]
    pub qp_use: QpUseArg,
    /// Bytes per rank, nccl-tests' size (units B, KB, MB, KiB, MiB, ...).
    #[arg(long, default_value = "256KiB", value_parser = size_text)]
    pub size: String,
    /// Timed iterations of each run, back to back.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub iters: u32,
    /// Iterations before the timed ones, not timed: the first includes the ranks' meeting (a
    /// rank's first window may reach a peer not yet listening, and waits out a retransmission
    /// timeout).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub warmup: u32,
    /// Payload bytes per packet (the RoCE path MTU); the links are paced for frames of it.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(64..=1400))]
    pub payload: u32,
    /// Packets a QP may have unacknowledged.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub window: u32,
    /// Retransmission timeout, 100 µs to 10 s, bare number in milliseconds, as for `traffic
    /// collective` [default: twice the time a link takes to carry every rank's window on every
    /// QP of a connection: the longest a queue that PFC keeps from overflowing delays a packet,
    /// so the timeout fires on a loss and not on a wait].
    #[arg(long, value_parser = |s: &str| parse_duration(s, &RTO))]
    pub rto: Option<Duration>,
    /// The links' pace.
    #[command(flatten)]
    pub pacing: Pacing,
    /// The uplink groups' timers.
    #[command(flatten)]
    pub timers: PolicyTimers,
    /// Each run's limit: the ranks give up after it, and are killed a little later.
    #[arg(long, default_value = "60s", value_parser = parse_run_time)]
    pub timeout: Duration,
    /// Directory for summary.json and table.md [default: lab-output/net-collective].
    #[arg(long, default_value = "lab-output/net-collective")]
    pub out: PathBuf,
}

/// One rank of a run, from its own summary.
#[derive(Debug, Serialize)]
struct RankOutcome {
    host: String,
    rank: u32,
    /// Its mean timed iteration, µs.
    time_us: f64,
    /// From its first post to its last completion, warm-up included, µs.
    total_us: f64,
    /// Iterations it reported.
    iterations: usize,
    /// QPs it sent or received on.
    qps: usize,
    /// Packets it sent again (go-back-N after a NAK, timeouts), NAKs and timeouts it saw.
    resent: u64,
    naks: u64,
    timeouts: u64,
    /// CNPs it received.
    cnps: u64,
    /// Whether it honoured PFC, and the turns it held data for a pause.
    pfc_honoured: bool,
    pfc_holds: u64,
}

/// One policy × QP count.
#[derive(Debug, Serialize)]
struct RunOutcome {
    policy: Policy,
    qps_per_conn: u32,
    /// The ranks' retransmission timeout, µs.
    rto_us: u128,
    /// The collective's time, as nccl-tests reports it: the slowest rank's mean timed
    /// iteration, µs.
    time_us: f64,
    /// The longest of the ranks' totals (warm-up included), µs.
    total_us: f64,
    /// nccl-tests' bandwidths of `time_us`, GB/s (10^9 bytes/s).
    algbw_gbps: f64,
    busbw_gbps: f64,
    /// The slowest and the fastest rank's host.
    slowest: String,
    fastest: String,
    ranks: Vec<RankOutcome>,
    /// Bytes each spine received from the wire over the run, by name.
    spine_bytes: BTreeMap<String, u64>,
    /// Packets the ranks sent again, NAKs they received (a gap in the PSNs: go-back-N), and
    /// their retransmission timeouts.
    resent: u64,
    naks: u64,
    timeouts: u64,
    /// PAUSEs, CE marks and CNPs the switches sent; packets of the lossless priority their
    /// program dropped.
    pauses: u64,
    ecn_marked: u64,
    cnp_sent: u64,
    switch_drops: u64,
    switches: Vec<SwitchOutcome>,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    experiment: &'static str,
    switch: &'static str,
    shape: [u16; 3],
    collective: &'static str,
    /// Hosts in rank order.
    hosts: Vec<String>,
    size_bytes: u64,
    iters: u32,
    warmup: u32,
    payload: u32,
    window: u32,
    link_rate_bps: u64,
    link_pps: u64,
    flowlet_timeout_us: u64,
    dlb_load_age_us: u64,
    runs: Vec<RunOutcome>,
    /// The kernel's drops (rx, tx) on the network's interfaces that dropped any, over the
    /// whole experiment, by name.
    interface_drops: BTreeMap<String, [u64; 2]>,
    stopped_early: bool,
}

/// The experiment's fixed parts, for each run.
struct Run<'a> {
    args: &'a CollectiveArgs,
    fabric: &'a Fabric,
    /// Hosts in rank order, and their addresses joined for `--hosts`.
    hosts: Vec<String>,
    addresses: String,
    /// The ranks' retransmission timeout, if given.
    rto: Option<Duration>,
    /// The links' frames per second.
    pps: u64,
    controller: &'a Controller,
    stop: &'a StopFlag,
}

/// Runs the collective experiment on `fabric`.
pub fn run(args: &CollectiveArgs, fabric: &Fabric, stop: &StopFlag) -> anyhow::Result<()> {
    let runs = args.policies.len() * args.qps_per_conn.len();
    if runs == 0 || runs > MAX_RUNS {
        bail!("--policies × --qps-per-conn: 1 to {MAX_RUNS} runs");
    }
    let mut hosts = fabric.hosts();
    hosts.sort();
    if hosts.len() < 2 {
        bail!("a collective needs two hosts at least");
    }
    let addresses = hosts
        .iter()
        .map(|h| Ok(host_ip(fabric.host(h)?)?.to_string()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Every run's collective, as the ranks will expand it: the arguments checked before any
    // run, and the definition of its bandwidths.
    let collectives = args
        .qps_per_conn
        .iter()
        .map(|&q| Ok((q, collective_of(args, q, hosts.len() as u32)?)))
        .collect::<anyhow::Result<BTreeMap<u32, workload::Collective>>>()?;
    let frame_bytes =
        RoceFrame::untagged_overhead(host_ip(fabric.host(&hosts[0])?)?) + args.payload as usize;
    fabric.read_pauses_at_fabric_speed(&hosts)?;
    let pps = args
        .pacing
        .apply(fabric, frame_bytes)
        .context("--payload")?;
    let tuning = args.timers.tuning(args.pacing.link_rate, frame_bytes);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    println!(
        "collective: {} of {} per rank over {} ({} ranks), {} timed iteration(s) after {} \
         warm-up per run, on {:?}, every link {} Mb/s ({pps} frames of {frame_bytes} bytes a \
         second), window {} packets",
        args.collective.name(),
        args.size,
        hosts.join(","),
        hosts.len(),
        args.iters,
        args.warmup,
        fabric.kind,
        args.pacing.link_rate as f64 / 1e6,
        args.window,
    );
    let (flowlet_timeout_us, dlb_load_age_us) = (tuning.flowlet_timeout_us, tuning.dlb_load_age_us);
    let controller = Controller::start(fabric, tuning, false)?;
    let run = Run {
        args,
        fabric,
        hosts,
        addresses: addresses.join(","),
        rto: args.rto,
        pps,
        controller: &controller,
        stop,
    };
    let mut outcomes = Vec::new();
    let mut result = Ok(());
    'runs: for policy in &args.policies {
        for &qps in &args.qps_per_conn {
            if stop.is_stopped() {
                break 'runs;
            }
            match run.one(*policy, qps, &collectives[&qps]) {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => {
                    result = Err(e);
                    break 'runs;
                }
            }
        }
    }
    let hosts = run.hosts;
    controller.finish()?;
    result?;
    let any = collectives.values().next().expect("one run at least");
    let outcome = Outcome {
        experiment: "collective",
        switch: fabric.kind_name(),
        shape: [fabric.shape.spines, fabric.shape.leaves, fabric.shape.hosts],
        collective: args.collective.name(),
        hosts,
        size_bytes: any.bytes,
        iters: args.iters,
        warmup: args.warmup,
        payload: args.payload,
        window: args.window,
        link_rate_bps: args.pacing.link_rate,
        link_pps: pps,
        flowlet_timeout_us,
        dlb_load_age_us,
        runs: outcomes,
        interface_drops: fabric.interface_drops()?,
        stopped_early: stop.is_stopped(),
    };
    output::print_and_write_table(&args.out, &outcome, &table(&outcome), "table.md")
}

/// The collective `ranks` ranks run with `qps` QPs per connection, expanded by the one workload
/// parser from the short form the ranks are given.
fn collective_of(
    args: &CollectiveArgs,
    qps: u32,
    ranks: u32,
) -> anyhow::Result<workload::Collective> {
    let form = short_form(
        args.collective,
        &args.size,
        qps,
        args.qp_use,
        u64::from(args.iters) + u64::from(args.warmup),
    );
    let parsed = workload::Workload::parse_args(&[form], &workload::Sources::default())
        .context("--size, --qps-per-conn, --iters, --warmup")?;
    let flows = workload::expand(
        &parsed,
        &workload::Endpoints {
            count: ranks,
            rate_bps: args.pacing.link_rate,
        },
        0,
    )?;
    flows
        .collectives
        .first()
        .copied()
        .context("the workload holds no collective")
}

impl Run<'_> {
    /// The ranks' retransmission timeout with `qps` QPs per connection: given, or twice the
    /// time a link takes to carry every rank's window on each of them.
    fn rto(&self, qps: u32) -> Duration {
        self.rto.unwrap_or_else(|| {
            let packets =
                2 * u64::from(self.args.window) * u64::from(qps) * self.hosts.len() as u64;
            Duration::from_micros(packets * 1_000_000 / self.pps).clamp(RTO.min, RTO.max)
        })
    }

    /// `traffic collective` for `host` as rank `rank`, with `qps` QPs per connection.
    fn rank_args(&self, rank: usize, qps: u32) -> Vec<String> {
        let args = self.args;
        [
            "traffic",
            "collective",
            args.collective.name(),
            "--iface",
            HOST_IFACE,
            "--rank",
            &rank.to_string(),
            "--hosts",
            &self.addresses,
            "--size",
            &args.size,
            "--qps-per-conn",
            &qps.to_string(),
            "--qp-use",
            args.qp_use.name(),
            "--iters",
            &args.iters.to_string(),
            "--warmup",
            &args.warmup.to_string(),
            "--payload",
            &args.payload.to_string(),
            "--window",
            &args.window.to_string(),
            "--rto",
            &format!("{}us", self.rto(qps).as_micros()),
            "--timeout",
            &format!("{}ms", args.timeout.as_millis()),
            "--json",
        ]
        .map(String::from)
        .to_vec()
    }

    /// One run under `policy` with `qps` QPs per connection.
    fn one(
        &self,
        policy: Policy,
        qps: u32,
        collective: &workload::Collective,
    ) -> anyhow::Result<RunOutcome> {
        let fabric = self.fabric;
        fabric.wait_idle()?;
        self.controller.set_policy(policy)?;
        let rto = self.rto(qps);
        println!("{policy}, {qps} QP(s) per connection, RTO {rto:?}: running");
        let sampler = Sampler::start(fabric, SAMPLE_EVERY)?;
        let mut ranks = Vec::new();
        for (rank, host) in self.hosts.iter().enumerate() {
            let command = fabric.lossless_in(host, &self.rank_args(rank, qps))?;
            ranks.push((host.clone(), Spawned::start(command)?));
        }
        // Dropping `ranks` on any way out kills those still running.
        let deadline = Instant::now() + self.args.timeout + GRACE;
        while !ranks.iter_mut().all(|(_, r)| r.finished()) {
            if self.stop.is_stopped() {
                bail!("stopped");
            }
            if Instant::now() > deadline {
                let late: Vec<&str> = ranks
                    .iter_mut()
                    .filter_map(|(h, r)| (!r.finished()).then_some(h.as_str()))
                    .collect();
                bail!(
                    "{policy}, {qps} QPs: ranks on {} did not end",
                    late.join(",")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut summaries = Vec::new();
        for (host, rank) in ranks {
            let what = format!("{host}: traffic collective");
            let text = rank.output(&what)?;
            let summary: Value =
                serde_json::from_str(&text).with_context(|| format!("{what}: its summary"))?;
            summaries.push((host, summary));
        }
        let samples = sampler.finish()?;
        measure(policy, qps, rto, collective, &summaries, fabric, &samples)
    }
}

/// What a run measured: the ranks' summaries and the switches' counter samples.
fn measure(
    policy: Policy,
    qps: u32,
    rto: Duration,
    collective: &workload::Collective,
    summaries: &[(String, Value)],
    fabric: &Fabric,
    samples: &[super::CountSample],
) -> anyhow::Result<RunOutcome> {
    let ranks: Vec<RankOutcome> = summaries
        .iter()
        .map(|(host, s)| {
            let sent = || {
                s["qps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|q| &q["sent"])
                    .filter(|c| c.is_object())
            };
            RankOutcome {
                host: host.clone(),
                rank: count(s, "rank") as u32,
                time_us: s["time_us"].as_f64().unwrap_or(0.0),
                total_us: s["total_us"].as_f64().unwrap_or(0.0),
                iterations: s["iterations"].as_array().map_or(0, Vec::len),
                qps: s["qps"].as_array().map_or(0, Vec::len),
                resent: sent().map(|c| count(c, "resent")).sum(),
                naks: sent().map(|c| count(c, "naks")).sum(),
                timeouts: sent().map(|c| count(c, "timeouts")).sum(),
                cnps: count(s, "cnps"),
                pfc_honoured: s["pfc_honoured"].as_bool().unwrap_or(false),
                pfc_holds: count(s, "pfc_holds"),
            }
        })
        .collect();
    let by_time = |a: &&RankOutcome, b: &&RankOutcome| a.time_us.total_cmp(&b.time_us);
    let slowest = ranks.iter().max_by(by_time).context("no rank")?;
    let fastest = ranks.iter().min_by(by_time).context("no rank")?;
    let seconds = slowest.time_us / 1e6;
    let switches = fabric.switches();
    let switches_out = SwitchOutcome::over(&switches, samples)?;
    let total = |f: fn(&SwitchCounts) -> u64| SwitchOutcome::total(&switches_out, f);
    Ok(RunOutcome {
        policy,
        qps_per_conn: qps,
        rto_us: rto.as_micros(),
        time_us: slowest.time_us,
        total_us: ranks.iter().map(|r| r.total_us).fold(0.0, f64::max),
        algbw_gbps: collective.algbw(seconds) / 1e9,
        busbw_gbps: collective.busbw(seconds) / 1e9,
        slowest: slowest.host.clone(),
        fastest: fastest.host.clone(),
        spine_bytes: spine_bytes(&switches, samples)?,
        resent: ranks.iter().map(|r| r.resent).sum(),
        naks: ranks.iter().map(|r| r.naks).sum(),
        timeouts: ranks.iter().map(|r| r.timeouts).sum(),
        pauses: total(|c| c.pause_tx),
        ecn_marked: total(|c| c.ecn_marked),
        cnp_sent: total(|c| c.cnp_sent),
        switch_drops: total(|c| c.dropped),
        switches: switches_out,
        ranks,
    })
}

/// A Markdown table: one row per policy × QP count.
fn table(o: &Outcome) -> String {
    let mut head: Vec<String> = [
        "policy",
        "QPs",
        "time ms",
        "busbw MB/s",
        "slowest rank ms",
        "fastest rank ms",
        "total ms",
    ]
    .map(String::from)
    .to_vec();
    head.extend(spine_columns(o.runs.first().map(|r| &r.spine_bytes)));
    head.extend(
        [
            "resent",
            "NAKs",
            "RTOs",
            "pauses",
            "ECN marks",
            "CNPs",
            "drops",
        ]
        .map(String::from),
    );
    let mut t = table_head(&head);
    let ms = |host: &str, r: &RunOutcome| {
        let us = r
            .ranks
            .iter()
            .find(|k| k.host == host)
            .map_or(0.0, |k| k.time_us);
        format!("{host} {:.1}", us / 1e3)
    };
    for r in &o.runs {
        let mut cells = vec![
            r.policy.to_string(),
            r.qps_per_conn.to_string(),
            format!("{:.1}", r.time_us / 1e3),
            format!("{:.3}", r.busbw_gbps * 1e3),
            ms(&r.slowest, r),
            ms(&r.fastest, r),
            format!("{:.1}", r.total_us / 1e3),
        ];
        cells.extend(spine_cells(&r.spine_bytes));
        cells.extend(
            [
                r.resent,
                r.naks,
                r.timeouts,
                r.pauses,
                r.ecn_marked,
                r.cnp_sent,
                r.switch_drops,
            ]
            .map(|v| v.to_string()),
        );
        t += &table_row(&cells);
    }
    let drops: u64 = o.runs.iter().map(|r| r.switch_drops).sum();
    let verdict = format!(
        "{} runs of {} ranks, {drops} packets dropped in the lossless class",
        o.runs.len(),
        o.hosts.len()
    );
    t + &table_end(&o.interface_drops, &verdict, o.stopped_early)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CollectiveArgs,
    }

    fn parse(line: &[&str]) -> Result<CollectiveArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("collective").chain(line.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn runs_expand_what_the_ranks_run() {
        let args = parse(&["--size", "64KiB", "--iters", "2", "--qps-per-conn", "1,4"]).unwrap();
        assert_eq!(args.qps_per_conn, [1, 4]);
        assert_eq!(args.policies.len(), 5);
        let c = collective_of(&args, 4, 4).unwrap();
        // Two timed iterations after the default warm-up; nccl-tests' AllReduce factor 2(n−1)/n.
        assert_eq!((c.ranks, c.bytes, c.iterations), (4, 65536, 3));
        assert_eq!(c.busbw(1.0), 65536.0 * 1.5);
    }

    #[test]
    fn out_of_range_options_are_refused() {
        assert!(parse(&["--qps-per-conn", "0"]).is_err());
        assert!(parse(&["--qps-per-conn", "257"]).is_err());
        assert!(parse(&["--iters", "0"]).is_err());
        assert!(parse(&["--policies", "random"]).is_err());
        assert!(parse(&["--rto", "20s"]).is_err());
        assert_eq!(
            parse(&["--rto", "5"]).unwrap().rto,
            Some(Duration::from_millis(5))
        );
        // A size is read as one before anything starts; a comma would add keys to the ranks'
        // short form.
        for size in ["1XB", "1MB,ranks=9"] {
            let error = parse(&["--size", size]).unwrap_err().to_string();
            assert!(error.contains("--size"), "{error}");
        }
        // A size too small for the ranks is refused once their number is known.
        let args = parse(&["--size", "2B"]).unwrap();
        assert!(collective_of(&args, 4, 4).is_err());
    }
}
