//! The microburst experiment on a generated fabric of softswitches (`lossless net experiment
//! microburst`): one host sends bursts of a known number of frames, back to back at a rate far
//! above the link's, at a known spacing, to another host; every switch queue drains at the link
//! rate, so each burst piles up in the first queue it meets (the egress port toward the
//! receiver, when both hosts share a leaf) and drains from there. The switches' traffic
//! managers measure each queue's sojourn times, occupancy and microbursts (episodes at or over a
//! threshold that end within a window, both set here on every queue); the experiment reads them
//! back over the Queues service and reports the bursts the switches detected — count, peak
//! occupancy, duration — and the sojourn-time histogram beside what was sent and what a queue
//! draining at the link rate makes of it. With `--no-bursts` the same frames are sent evenly
//! at a quarter of the link rate: no queue builds, and no burst may be reported.
//!
//! The verdict: every frame arrived, the queue the bursts pile up in (the receiver's leaf's
//! port toward it, in the frames' priority) detected exactly the bursts sent and every other
//! queue none, no episode lasted longer than the window and none is still under way at the
//! read; the experiment exits non-zero otherwise.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use p4client::cli::SwitchKind;
use p4client::client::Client;
use p4runtime::lossless::softswitch::v1::{QueueState, SetQueueRequest};
use serde::Serialize;

use super::{count, host_ip, Fabric, Links, Receiving, Spawned};
use crate::net::leaf_spine::Tuning;
use crate::output;
use traffic::StopFlag;

/// How long frames still queued may take to arrive once the sender is done.
const DRAIN: Duration = Duration::from_secs(10);
/// The rate a burst is sent at (the host's link is not paced: its frames come back to back).
const BURST_RATE_BPS: u64 = 1_000_000_000;
/// The most bursts one run sends.
const MAX_BURSTS: u32 = 1000;

/// Options of `lossless net experiment microburst`.
#[derive(Debug, Clone, clap::Args)]
pub struct MicroburstArgs {
    /// The sender [default: the host before the receiver, on its leaf in the generated
    /// fabrics].
    #[arg(long)]
    pub sender: Option<String>,
    /// The receiver [default: the fabric's last host].
    #[arg(long)]
    pub receiver: Option<String>,
    /// The links.
    #[command(flatten)]
    pub links: Links,
    /// Bursts sent (1 to 1000).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=MAX_BURSTS as i64))]
    pub bursts: u32,
    /// Frames per burst (2 to 4096), sent back to back.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub burst_frames: u32,
    /// From one burst's start to the next, ms (1 to 60000): long enough for a queue draining
    /// at the link rate to empty between bursts.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub every_ms: u64,
    /// The microburst threshold set on every queue, packets found ahead: at most
    /// --burst-frames − 2.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub threshold: u32,
    /// The microburst window set on every queue, µs (1 to 60000000).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=60_000_000))]
    pub window_us: u64,
    /// DSCP of the frames: by default 0, a lossy class, so that no PFC pause reshapes a burst.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// Send the same frames evenly at a quarter of the link rate instead: a run without bursts.
    #[arg(long)]
    pub no_bursts: bool,
    /// Directory for summary.json and table.txt.
    #[arg(long, default_value = "lab-output/net-microburst")]
    pub out: PathBuf,
}

/// What was sent.
#[derive(Debug, Serialize)]
struct Sent {
    bursts: u32,
    burst_frames: u32,
    every_ms: u64,
    /// Frames sent, all bursts.
    frames: u64,
    /// When each burst started, ms from the first (the spacing as it came out).
    starts_ms: Vec<f64>,
    /// Whether the frames were sent evenly instead (a run without bursts).
    evenly: bool,
}

/// What a queue draining at the link rate makes of one burst arriving at once.
#[derive(Debug, Serialize)]
struct Expected {
    /// Occupancy at the burst's top, packets: the most frames one of the burst finds ahead of
    /// it, every other one (frames − 1; frames − 2 when the first has left before the last
    /// arrives).
    peak_packets: u32,
    /// Time in the burst, µs: from its first frames until the (frames − ⌊threshold / 2⌋)th
    /// leaves half the threshold behind, frames − 1 − ⌊threshold / 2⌋ link-frame-times.
    duration_us: f64,
    /// The last frame's sojourn, µs.
    max_sojourn_us: f64,
}

/// One switch queue that carried frames.
#[derive(Debug, Serialize)]
struct QueueOutcome {
    switch: String,
    port: u32,
    priority: u32,
    /// Packets that left it.
    packets: u64,
    microbursts: u64,
    bursts_over_window: u64,
    last_burst_peak_packets: u32,
    last_burst_duration_us: u64,
    /// Whether an episode was still under way at the read, its peak so far and how long it
    /// had lasted, µs.
    in_burst: bool,
    open_burst_peak_packets: u32,
    open_burst_us: u64,
    sojourn_p50_us: u64,
    sojourn_p99_us: u64,
    sojourn_max_us: u64,
    /// Bucket 0: under 1 µs; bucket i: [2^(i−1), 2^i) µs.
    sojourn_us_buckets: Vec<u64>,
    occupancy_p50_packets: u32,
    occupancy_p99_packets: u32,
    occupancy_max_packets: u32,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    sender: String,
    receiver: String,
    link_rate_bps: u64,
    link_pps: u64,
    frame_bytes: usize,
    threshold_packets: u32,
    window_us: u64,
    sent: Sent,
    /// Frames the receiver counted.
    received: u64,
    expected: Expected,
    /// Microbursts the switches detected, all queues.
    detected: u64,
    /// Episodes over the threshold longer than the window, all queues.
    over_window: u64,
    /// Episodes still under way at the read, all queues.
    open_bursts: u64,
    /// The queue the bursts pile up in: switch, port, priority.
    congested: (String, u32, u32),
    /// The queues that carried frames, most packets first.
    queues: Vec<QueueOutcome>,
    /// Whether the switches detected exactly what was sent; why not if not.
    pass: bool,
    failures: Vec<String>,
    stopped_early: bool,
}

/// Runs the experiment on `fabric`; stops early when `stop` is set (and still reports).
pub fn run(args: &MicroburstArgs, fabric: &Fabric, stop: &StopFlag) -> anyhow::Result<()> {
    if fabric.kind != SwitchKind::Softswitch {
        bail!("the microburst experiment reads softswitch's queue measures; BMv2 has none");
    }
    if u64::from(args.threshold) + 2 > u64::from(args.burst_frames) {
        bail!(
            "--threshold {} is over --burst-frames {} − 2: a burst whose first frame leaves at \
             once finds at most that many ahead, and might not reach it",
            args.threshold,
            args.burst_frames
        );
    }
    let hosts = fabric.hosts();
    let receiver = match &args.receiver {
        Some(name) => name.clone(),
        None => hosts.last().context("the fabric has no hosts")?.clone(),
    };
    let sender = match &args.sender {
        Some(name) => name.clone(),
        None => hosts
            .iter()
            .rev()
            .find(|h| **h != receiver)
            .context("a microburst needs a host besides the receiver")?
            .clone(),
    };
    let receiver_node = fabric.host(&receiver)?;
    let receiver_ip = host_ip(receiver_node)?;
    fabric.host(&sender)?;
    let (leaf, port) = fabric.port_toward(&receiver)?;
    let priority = Tuning::default()
        .classes
        .iter()
        .find(|c| c.dscp == args.dscp)
        .map_or(0, |c| c.priority);
    let congested = (leaf.name, port, u32::from(priority));
    let pps = args.links.apply(fabric)?;
    let drain_ms = u64::from(args.burst_frames) * 1000 / pps;
    if args.every_ms < 2 * drain_ms.max(1) {
        bail!(
            "bursts of {} frames take {drain_ms} ms to drain at {pps} frames a second: \
             --every-ms {} would merge them (give at least twice that)",
            args.burst_frames,
            args.every_ms
        );
    }
    set_burst_rule(fabric, args.threshold, args.window_us)?;
    println!(
        "microburst: {sender} -> {receiver} ({receiver_ip}), {} {} of {} frames of {} bytes every \
         {} ms, links {} Mb/s ({pps} frames a second); threshold {} packets, window {} us",
        args.bursts,
        if args.no_bursts {
            "lots sent evenly instead of bursts"
        } else {
            "bursts"
        },
        args.burst_frames,
        args.links.size,
        args.every_ms,
        args.links.pacing.link_rate as f64 / 1e6,
        args.threshold,
        args.window_us
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;

    let receiving = Receiving::start(&format!("/proc/{}/ns/net", receiver_node.pid))?;
    let send = |frames: u64, rate_bps: u64| -> anyhow::Result<Spawned> {
        let mut command = args.links.sender(receiver_ip, rate_bps);
        command.extend(
            [
                "--count",
                &frames.to_string(),
                "--dscp",
                &args.dscp.to_string(),
            ]
            .map(String::from),
        );
        Spawned::start(fabric.lossless_in(&sender, &command)?)
    };
    let mut starts_ms = Vec::new();
    let mut frames = 0;
    let started = Instant::now();
    if args.no_bursts {
        let all = u64::from(args.bursts) * u64::from(args.burst_frames);
        starts_ms.push(0.0);
        let text = send(all, args.links.pacing.link_rate / 4)?
            .output(&format!("{sender}: traffic send"))?;
        frames += sent_frames(&text)?;
    } else {
        for i in 0..args.bursts {
            let at = started + Duration::from_millis(u64::from(i) * args.every_ms);
            // Pacing the bursts: waiting for a time, not for a condition.
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if stop.is_stopped() {
                break;
            }
            starts_ms.push(started.elapsed().as_secs_f64() * 1e3);
            let text = send(u64::from(args.burst_frames), BURST_RATE_BPS)?
                .output(&format!("{sender}: traffic send (burst {i})"))?;
            frames += sent_frames(&text)?;
        }
    }
    let drain_until = Instant::now() + DRAIN;
    while receiving.received() < frames && Instant::now() < drain_until && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (received, _) = receiving.finish()?;
    let received = received.qps.iter().map(|q| q.frames.packets).sum();
    let mut queues = read_queues(fabric)?;
    queues.sort_by_key(|q| std::cmp::Reverse(q.packets));
    let sent_bursts = if args.no_bursts {
        0
    } else {
        starts_ms.len() as u64
    };

    let n = f64::from(args.burst_frames);
    let per_frame_us = 1e6 / pps as f64;
    let outcome = Outcome {
        sender,
        receiver,
        link_rate_bps: args.links.pacing.link_rate,
        link_pps: pps,
        frame_bytes: args.links.size,
        threshold_packets: args.threshold,
        window_us: args.window_us,
        sent: Sent {
            bursts: args.bursts,
            burst_frames: args.burst_frames,
            every_ms: args.every_ms,
            frames,
            starts_ms,
            evenly: args.no_bursts,
        },
        received,
        expected: Expected {
            peak_packets: args.burst_frames - 1,
            duration_us: (n - 1.0 - f64::from(args.threshold / 2)) * per_frame_us,
            max_sojourn_us: (n - 1.0) * per_frame_us,
        },
        detected: queues.iter().map(|q| q.microbursts).sum(),
        over_window: queues.iter().map(|q| q.bursts_over_window).sum(),
        open_bursts: queues.iter().filter(|q| q.in_burst).count() as u64,
        failures: verdict(&queues, &congested, sent_bursts, frames, received),
        pass: false,
        congested,
        queues,
        stopped_early: stop.is_stopped(),
    };
    let outcome = Outcome {
        pass: outcome.failures.is_empty() && !outcome.stopped_early,
        ..outcome
    };
    let mut failures = outcome.failures.clone();
    if outcome.stopped_early {
        failures.push("stopped early".into());
    }
    super::report(&args.out, &outcome, &table(&outcome), &failures)
}

/// What the switches detected that was not what was sent (nothing: the verdict passes):
/// `bursts` microbursts on the `congested` queue, none elsewhere, none longer than the window
/// nor still under way, and every frame arrived.
fn verdict(
    queues: &[QueueOutcome],
    congested: &(String, u32, u32),
    bursts: u64,
    sent: u64,
    received: u64,
) -> Vec<String> {
    let mut failures = Vec::new();
    if received != sent {
        failures.push(format!("{received} frames of {sent} arrived"));
    }
    let is_congested = |q: &QueueOutcome| {
        (&q.switch, q.port, q.priority) == (&congested.0, congested.1, congested.2)
    };
    if bursts > 0 && !queues.iter().any(is_congested) {
        failures.push(format!(
            "{}:{} priority {} carried nothing",
            congested.0, congested.1, congested.2
        ));
    }
    for q in queues {
        let name = format!("{}:{} priority {}", q.switch, q.port, q.priority);
        let want = if is_congested(q) { bursts } else { 0 };
        if q.microbursts != want {
            failures.push(format!(
                "{name} detected {} microbursts, not {want}",
                q.microbursts
            ));
        }
        if q.bursts_over_window > 0 {
            failures.push(format!(
                "{name}: {} episodes longer than the window",
                q.bursts_over_window
            ));
        }
        if q.in_burst {
            failures.push(format!(
                "{name} was still in a burst at the read (peak {} for {} us)",
                q.open_burst_peak_packets, q.open_burst_us
            ));
        }
    }
    failures
}

/// Frames a `traffic send --json` summary says it sent.
fn sent_frames(text: &str) -> anyhow::Result<u64> {
    let summary: serde_json::Value = serde_json::from_str(text).context("the sender's summary")?;
    Ok(count(&summary, "packets"))
}

/// Sets the microburst rule of every queue of every switch and forgets what they measured.
fn set_burst_rule(fabric: &Fabric, threshold: u32, window_us: u64) -> anyhow::Result<()> {
    let request = SetQueueRequest {
        burst_threshold_packets: Some(threshold),
        burst_window_us: Some(window_us),
        reset_measures: true,
        ..Default::default()
    };
    fabric.set_queue_everywhere(&[request], "setting its burst rule")
}

/// Every switch queue that carried a packet, as its switch measured it.
fn read_queues(fabric: &Fabric) -> anyhow::Result<Vec<QueueOutcome>> {
    let switches = fabric.switches();
    let read = fabric.in_network(async {
        let mut all = Vec::new();
        for switch in &switches {
            let mut client = Client::connect(switch.target.clone()).await?;
            let queues = client
                .queues()
                .await
                .with_context(|| format!("{}: reading its queues", switch.name))?;
            all.push((switch.name.clone(), queues));
        }
        Ok(all)
    })?;
    Ok(read
        .into_iter()
        .flat_map(|(switch, queues)| {
            queues
                .into_iter()
                .map(move |q| outcome_of(&switch, q))
                .filter(|q| q.packets > 0 || q.in_burst)
        })
        .collect())
}

fn outcome_of(switch: &str, q: QueueState) -> QueueOutcome {
    QueueOutcome {
        switch: switch.to_string(),
        port: q.port,
        priority: q.priority,
        packets: q.sojourn_us_buckets.iter().sum(),
        microbursts: q.microbursts,
        bursts_over_window: q.bursts_over_window,
        last_burst_peak_packets: q.last_burst_peak_packets,
        last_burst_duration_us: q.last_burst_duration_us,
        in_burst: q.in_burst,
        open_burst_peak_packets: q.open_burst_peak_packets,
        open_burst_us: q.open_burst_us,
        sojourn_p50_us: q.sojourn_p50_us,
        sojourn_p99_us: q.sojourn_p99_us,
        sojourn_max_us: q.sojourn_max_us,
        sojourn_us_buckets: q.sojourn_us_buckets,
        occupancy_p50_packets: q.occupancy_p50_packets,
        occupancy_p99_packets: q.occupancy_p99_packets,
        occupancy_max_packets: q.occupancy_max_packets,
    }
}

/// What was sent and expected, each queue that carried frames, its sojourn histogram, and the
/// verdict.
fn table(o: &Outcome) -> String {
    let e = &o.expected;
    let mut t = format!(
        "sent: {} {} of {} frames every {} ms (started at {} ms); received {} of {}\n\
         a burst at the link rate: peak {} packets, {:.0} us over the threshold, last sojourn \
         {:.0} us\n\n",
        o.sent.bursts,
        if o.sent.evenly {
            "evenly sent lots"
        } else {
            "bursts"
        },
        o.sent.burst_frames,
        o.sent.every_ms,
        o.sent
            .starts_ms
            .iter()
            .map(|t| format!("{t:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        o.received,
        o.sent.frames,
        e.peak_packets,
        e.duration_us,
        e.max_sojourn_us
    );
    t.push_str(&format!(
        "{:<16} {:>8} {:>11} {:>10} {:>11} {:>11} {:>18} {:>14}\n",
        "queue",
        "packets",
        "microbursts",
        "longer",
        "last_burst",
        "open_burst",
        "sojourn_us",
        "occupancy"
    ));
    for q in &o.queues {
        let (sojourn, occupancy) = output::queue_percentiles(
            [q.sojourn_p50_us, q.sojourn_p99_us, q.sojourn_max_us],
            [
                q.occupancy_p50_packets,
                q.occupancy_p99_packets,
                q.occupancy_max_packets,
            ]
            .map(u64::from),
        );
        let open = if q.in_burst {
            format!("{}@{}us", q.open_burst_peak_packets, q.open_burst_us)
        } else {
            "-".to_string()
        };
        t.push_str(&format!(
            "{:<16} {:>8} {:>11} {:>10} {:>11} {:>11} {:>18} {:>14}\n",
            format!("{}:{} prio {}", q.switch, q.port, q.priority),
            q.packets,
            q.microbursts,
            q.bursts_over_window,
            format!(
                "{}@{}us",
                q.last_burst_peak_packets, q.last_burst_duration_us
            ),
            open,
            sojourn,
            occupancy
        ));
    }
    if let Some(q) = o.queues.iter().max_by_key(|q| q.microbursts) {
        t.push_str(&format!(
            "\nsojourn times at {}:{} priority {} (µs: packets)\n",
            q.switch, q.port, q.priority
        ));
        for (i, &c) in q
            .sojourn_us_buckets
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
        {
            let range = if i == 0 {
                "<1".to_string()
            } else {
                format!("{}-{}", 1u64 << (i - 1), (1u64 << i) - 1)
            };
            t.push_str(&format!("  {range:>14}: {c}\n"));
        }
    }
    t.push_str(&format!(
        "\ndetected {} microbursts ({} longer than the window, {} under way) of {} {} sent\n",
        o.detected,
        o.over_window,
        o.open_bursts,
        if o.sent.evenly { 0 } else { o.sent.bursts },
        if o.sent.evenly {
            "bursts (frames sent evenly)"
        } else {
            "bursts"
        }
    ));
    let verdict = if o.pass {
        format!(
            "PASS: {}:{} priority {} detected every burst sent, no other queue any",
            o.congested.0, o.congested.1, o.congested.2
        )
    } else {
        format!("FAIL: {}", o.failures.join("; "))
    };
    t + &super::table_end(&Default::default(), &verdict, o.stopped_early)
}
