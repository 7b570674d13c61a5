//! The PFC lab: a sender faster than its receiver consumes. The receiver's ingress buffer
//! crosses XOFF and its kernel sends a PAUSE; the sender's XDP records it and the traffic
//! tool holds its frames until the pause runs out or a resume arrives. Nothing is dropped.
//! Prints a row every half second and writes the XOFF/XON cycles, sampled every 50 ms, as
//! pfc.csv and pfc.svg with a summary.json.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use dataplane_common::{counters::PrioCounters, pfc::PfcTxCounters, Hook};
use serde::Serialize;

use super::harness::{self, Bed, LabPorts, Port, Sampler, Sending, Shape, PRIORITY};
use crate::output::{self, Panel, Series};
use host::pinned_maps::PinnedMaps;
use hostconfig::{
    attachment::Attachment,
    config::{HostConfig, Setting},
};
use traffic::{FixedRate, StopFlag};
use units::{parse_rate_bps, parse_run_time};

/// Options of `lossless lab pfc`.
#[derive(Debug, clap::Args)]
pub struct PfcLab {
    /// The sender's rate.
    #[arg(long, default_value = "100mbit", value_parser = parse_rate_bps)]
    rate: u64,
    /// How fast the receiver consumes (its ingress buffer's drain rate).
    #[arg(long, default_value = "40mbit", value_parser = parse_rate_bps)]
    drain: u64,
    /// XOFF threshold of the receiver's buffer, in bytes.
    #[arg(long, default_value_t = 60_000)]
    xoff: u32,
    /// XON threshold of the receiver's buffer, in bytes.
    #[arg(long, default_value_t = 30_000)]
    xon: u32,
    /// Pause time the receiver asks for, in quanta (at 1 Gb/s, as both ends are configured).
    #[arg(long, default_value_t = 10_000)]
    quanta: u32,
    /// Seconds to run (1 ms to 1 day).
    #[arg(long, default_value = "6", value_parser = parse_run_time)]
    secs: Duration,
    /// Directory for the plot (pfc.svg), the samples (pfc.csv) and summary.json.
    #[arg(long, default_value = "lab-output/pfc")]
    out: PathBuf,
}

/// Both ends use this link speed to turn quanta into time (1 quantum = 512 ns): 1 Gb/s.
const LINK_SPEED_BPS: u64 = 1_000_000_000;

/// sender ns —veth— receiver ns.
const SHAPE: Shape = Shape {
    net: 33,
    sender: "psnd",
    senders: 1,
    router: None,
    receiver: "prcv",
};

/// Runs the lab until its end or until `stop` is set.
pub fn run(args: &PfcLab, stop: &StopFlag) -> anyhow::Result<()> {
    let bed = Bed::build(&SHAPE).context("building the namespace test bed")?;
    let mut receiver_config = HostConfig::default();
    receiver_config.set_all([
        Setting::LinkSpeedBps(LINK_SPEED_BPS),
        Setting::PfcEnabled(PRIORITY, true),
        Setting::PfcXoffBytes(PRIORITY, args.xoff),
        Setting::PfcXonBytes(PRIORITY, args.xon),
        Setting::PfcQuanta(PRIORITY, args.quanta),
        Setting::PfcDrainBps(PRIORITY, args.drain),
    ])?;
    let mut sender_config = HostConfig::default();
    sender_config.set_all([Setting::LinkSpeedBps(LINK_SPEED_BPS)])?;
    // The receiver generates PFC (and counts what arrives with XDP); the sender's XDP honours
    // it (native: generic XDP skips frames redirected on this machine, see docs/host-pfc.md).
    let receiver_maps = bed.attach(
        Port::Receiver,
        vec![Attachment::Xdp, Attachment::Pfc],
        receiver_config,
    )?;
    let sender_maps = bed.attach(Port::Sender(0), vec![Attachment::Xdp], sender_config)?;

    let mut send = bed.send_config(0);
    send.duration = Some(args.secs);
    let sending = Sending {
        sender: bed.open_sender(0, send)?,
        rates: vec![FixedRate { bps: args.rate }],
        start: Duration::ZERO,
    };
    let receiver = bed.open_receiver()?;

    println!(
        "PFC lab: sender ({} Mb/s) -> receiver consuming {} Mb/s, XOFF {} B, XON {} B, pause {} quanta",
        args.rate / 1_000_000,
        args.drain / 1_000_000,
        args.xoff,
        args.xon,
        args.quanta
    );
    println!(
        "{}",
        output::table_header(&COLUMNS, &[6, 11, 12, 9, 10, 10, 14, 10])
    );
    let Some(ran) = harness::run(vec![sending], receiver, None, stop, |running| {
        watch(args, &receiver_maps, &sender_maps, running.start, stop)
    })?
    else {
        return Ok(());
    };
    let (sent, received) = (&ran.sent[0].0, &ran.received);
    let stats = receiver_maps.read_pfc_tx_counters()?;
    println!(
        "sender: {} frames sent, paused {:.1} ms in all, {} frames held; receiver: {} RoCEv2 frames ({} PSN gaps); \
         receiver sent {} PAUSE and {} resume frames",
        sent.packets,
        sent.pfc_paused_ns as f64 / 1e6,
        sent.pfc_holds,
        received.frames.packets,
        received.frames.psn_gaps,
        stats.pause_tx[PRIORITY],
        stats.resume_tx[PRIORITY]
    );
    let summary = PfcSummary {
        rate_bps: args.rate,
        drain_bps: args.drain,
        xoff_bytes: args.xoff,
        xon_bytes: args.xon,
        quanta: args.quanta,
        secs: args.secs.as_secs_f64(),
        sent_frames: sent.packets,
        sender_paused_ms: sent.pfc_paused_ns as f64 / 1e6,
        sender_held_frames: sent.pfc_holds,
        received_frames: received.frames.packets,
        psn_gaps: received.frames.psn_gaps,
        pause_tx: stats.pause_tx[PRIORITY],
        resume_tx: stats.resume_tx[PRIORITY],
        lossless: received.frames.packets == sent.packets && received.frames.psn_gaps == 0,
    };
    write_outputs(args, &ran.watched, &summary)
}

/// summary.json of the PFC lab.
#[derive(Debug, Serialize)]
struct PfcSummary {
    rate_bps: u64,
    drain_bps: u64,
    xoff_bytes: u32,
    xon_bytes: u32,
    quanta: u32,
    secs: f64,
    sent_frames: u64,
    sender_paused_ms: f64,
    sender_held_frames: u64,
    received_frames: u64,
    psn_gaps: u64,
    pause_tx: u64,
    resume_tx: u64,
    /// Every frame sent arrived, in order.
    lossless: bool,
}

/// The columns of pfc.csv, as the table prints them (`sender_paused` 1 or 0).
const COLUMNS: [&str; 8] = [
    "time_s",
    "rx_Mbps",
    "buffer_bytes",
    "pause_tx",
    "resume_tx",
    "pause_rx",
    "sender_paused",
    "paused_ms",
];

/// Writes pfc.csv, pfc.svg and summary.json into `--out`.
fn write_outputs(args: &PfcLab, series: &Series, summary: &PfcSummary) -> anyhow::Result<()> {
    let (xoff, xon) = (f64::from(args.xoff), f64::from(args.xon));
    let buffer = Panel::bytes_between(
        "the receiver's ingress buffer: XOFF sends a PAUSE, below XON a resume",
        series,
        "buffer_bytes",
        [("XOFF", xoff), ("XON", xon)],
    );
    let frames = Panel::of_columns(
        "PFC frames: sent by the receiver, recorded by the sender's XDP",
        "frames (cumulative)",
        series,
        &[
            ("PAUSE sent", "pause_tx"),
            ("resume sent", "resume_tx"),
            ("PAUSE received", "pause_rx"),
        ],
        &[],
    );
    let rate = Panel::of_columns(
        "what the receiver consumes while the sender holds",
        "Mb/s",
        series,
        &[("received", "rx_Mbps")],
        &[
            ("sender's rate", args.rate as f64 / 1e6),
            ("drain", args.drain as f64 / 1e6),
        ],
    );
    output::write_sampled(&args.out, "pfc", series, summary, &[buffer, frames, rate])
}

/// What both ends show at one moment.
#[derive(Clone)]
struct Ends {
    /// The receiver's XDP counters of the lab's priority.
    received: PrioCounters,
    /// The PFC frames the receiver sent.
    tx: PfcTxCounters,
    /// The receiver's ingress buffer.
    buffer_bytes: u64,
    /// PAUSE frames the sender's XDP recorded.
    pause_rx: u64,
    /// Whether the sender is paused, and how long it has been paused in all.
    paused: bool,
    paused_ms: f64,
}

impl Ends {
    fn read(receiver: &PinnedMaps, sender: &PinnedMaps) -> anyhow::Result<Ends> {
        let state = sender.read_pfc_states()?[PRIORITY];
        let clock = sysutil::clock::monotonic_ns();
        Ok(Ends {
            received: receiver.read_counters(Hook::Xdp)?.per_priority[PRIORITY],
            tx: receiver.read_pfc_tx_counters()?,
            buffer_bytes: receiver.read_pfc_buffers()?[PRIORITY].queue.backlog_bytes,
            pause_rx: sender.read_counters(Hook::Xdp)?.per_priority[PRIORITY].pfc_pause_rx,
            paused: state.is_paused(clock),
            paused_ms: state.paused_ns(clock) as f64 / 1e6,
        })
    }
}

/// Samples both ends every [`output::SAMPLE`] and prints a row every
/// [`output::SAMPLES_PER_ROW`] samples until the run's end; `None` if stopped early.
fn watch(
    args: &PfcLab,
    receiver: &PinnedMaps,
    sender: &PinnedMaps,
    start: Instant,
    stop: &StopFlag,
) -> anyhow::Result<Option<Series>> {
    let mut series = Series::new(&COLUMNS);
    let mut sampler = Sampler::new(Ends::read(receiver, sender)?);
    let read = || Ends::read(receiver, sender);
    let completed = sampler.until(start + args.secs, stop, read, |r| {
        let now = r.now;
        let mbps = |(before, secs): (&Ends, f64)| {
            (now.received.rx_bytes - before.received.rx_bytes) as f64 * 8.0 / secs / 1e6
        };
        let t = start.elapsed().as_secs_f64();
        let (pause_tx, resume_tx) = (now.tx.pause_tx[PRIORITY], now.tx.resume_tx[PRIORITY]);
        series.push(vec![
            t,
            mbps(r.since_sample),
            now.buffer_bytes as f64,
            pause_tx as f64,
            resume_tx as f64,
            now.pause_rx as f64,
            if now.paused { 1.0 } else { 0.0 },
            now.paused_ms,
        ]);
        if let Some(since_row) = r.since_row {
            println!(
                "{:>6.1} {:>11.1} {:>12} {:>9} {:>10} {:>10} {:>14} {:>10.1}",
                t,
                mbps(since_row),
                now.buffer_bytes,
                pause_tx,
                resume_tx,
                now.pause_rx,
                if now.paused { "paused" } else { "sending" },
                now.paused_ms,
            );
        }
        Ok(())
    })?;
    Ok(completed.then_some(series))
}
