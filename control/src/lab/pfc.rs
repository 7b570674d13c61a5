//! The PFC lab: a sender faster than its receiver consumes. The receiver's ingress buffer
//! crosses XOFF and its kernel sends a PAUSE; the sender's XDP records it and the traffic
//! tool holds its frames until the pause runs out or a resume arrives. Nothing is dropped.
//! Prints a row every half second and writes the XOFF/XON cycles, sampled every 50 ms, as
//! pfc.csv and pfc.svg with a summary.json.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use dataplane_common::Hook;
use serde::Serialize;

use super::{
    output::{self, Line, Panel, Series, SAMPLE, SAMPLES_PER_ROW},
    shared::{Detach, PRIORITY},
};
use crate::{
    host::{
        attach::{self, AttachRequest, Mode},
        attachment::Attachment,
        config::HostConfig,
        pinned_maps::PinnedMaps,
    },
    netns::{veth_pair, Namespace},
    traffic::{FixedRate, Receiver, RecvConfig, SendConfig, Sender, StopFlag},
    units::{parse_rate_bps, parse_run_time},
};
use wire::ethernet::Address;

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

/// Both ends use this link speed to turn quanta into time (1 quantum = 512 ns).
const LINK_SPEED: &str = "1g";

/// Runs the lab until its end or until `stop` is set.
pub fn run(args: &PfcLab, stop: &StopFlag) -> anyhow::Result<()> {
    let sender_ns = Namespace::create("psnd")?;
    let receiver_ns = Namespace::create("prcv")?;
    let (sender, receiver) = veth_pair(
        &sender_ns,
        Ipv4Addr::new(10, 33, 0, 1),
        &receiver_ns,
        Ipv4Addr::new(10, 33, 0, 2),
    )
    .context("building the namespace test bed")?;

    let mut receiver_config = HostConfig::default();
    receiver_config.apply_assignments(&[
        format!("pfc.link_speed_bps={LINK_SPEED}"),
        format!("pfc.prio{PRIORITY}.enabled=true"),
        format!("pfc.prio{PRIORITY}.xoff_bytes={}", args.xoff),
        format!("pfc.prio{PRIORITY}.xon_bytes={}", args.xon),
        format!("pfc.prio{PRIORITY}.quanta={}", args.quanta),
        format!("pfc.prio{PRIORITY}.drain_bps={}", args.drain),
    ])?;
    let mut sender_config = HostConfig::default();
    sender_config.apply_assignments(&[format!("pfc.link_speed_bps={LINK_SPEED}")])?;
    // The receiver generates PFC (and counts what arrives with XDP); the sender's XDP honours
    // it (native: generic XDP skips frames redirected on this machine, see docs/host-pfc.md).
    let ends = [
        (
            &receiver_ns,
            &receiver.ifname,
            vec![Attachment::Xdp, Attachment::Pfc],
            receiver_config,
        ),
        (
            &sender_ns,
            &sender.ifname,
            vec![Attachment::Xdp],
            sender_config,
        ),
    ];
    let mut detach = Vec::new();
    for (ns, ifname, attachments, config) in ends {
        let request = AttachRequest {
            interface: ifname.clone(),
            mode: Mode::Native,
            attachments,
            config,
        };
        let attached = ns.run(|| attach::attach(&request))??;
        detach.push(Detach(attached.dir));
    }
    let [receiver_maps, sender_maps] =
        [&detach[0].0, &detach[1].0].map(|dir| PinnedMaps::at(dir.clone()));

    let mut send = SendConfig::new(sender.ifname.clone(), IpAddr::V4(receiver.ipv4));
    send.dst_mac = Some(Address(receiver.mac));
    send.duration = Some(args.secs);
    let receive = RecvConfig {
        iface: receiver.ifname.clone(),
        duration: None,
        count: None,
        idle_timeout: Some(Duration::from_secs(2)),
        cnp: None,
    };
    let mut sending = sender_ns.run(|| Sender::open(send))??;
    let mut receiving = receiver_ns.run(|| Receiver::open(receive))??;
    let (sender_stop, receiver_stop) = (sending.stop_flag(), receiving.stop_flag());

    println!(
        "PFC lab: sender ({} Mb/s) -> receiver consuming {} Mb/s, XOFF {} B, XON {} B, pause {} quanta",
        args.rate / 1_000_000,
        args.drain / 1_000_000,
        args.xoff,
        args.xon,
        args.quanta
    );
    println!(
        "{:>6} {:>11} {:>12} {:>9} {:>10} {:>10} {:>14} {:>10}",
        "time_s",
        "rx_Mbps",
        "buffer_bytes",
        "pause_tx",
        "resume_tx",
        "pause_rx",
        "sender_paused",
        "paused_ms"
    );
    let (completed, sent, received) = std::thread::scope(|scope| {
        let receiver_thread = scope.spawn(move || receiving.run());
        let sender_thread = scope.spawn(move || sending.run(&mut [FixedRate { bps: args.rate }]));
        let completed = watch(args, &receiver_maps, &sender_maps, stop);
        if !matches!(completed, Ok(Some(_))) {
            sender_stop.stop();
            receiver_stop.stop();
        }
        let sent = sender_thread.join().expect("sender thread");
        let received = receiver_thread.join().expect("receiver thread");
        (completed, sent, received)
    });
    let Some(series) = completed? else {
        return Ok(());
    };
    let (sent, received) = (sent?, received?);
    let stats = receiver_maps.read_pfc_tx_counters()?;
    println!(
        "sender: {} frames sent, paused {:.1} ms in all, {} frames held; receiver: {} RoCEv2 frames ({} PSN gaps); \
         receiver sent {} PAUSE and {} resume frames",
        sent.packets,
        sent.pfc_paused_ns as f64 / 1e6,
        sent.pfc_holds,
        received.packets,
        received.psn_gaps,
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
        received_frames: received.packets,
        psn_gaps: received.psn_gaps,
        pause_tx: stats.pause_tx[PRIORITY],
        resume_tx: stats.resume_tx[PRIORITY],
        lossless: received.packets == sent.packets && received.psn_gaps == 0,
    };
    write_outputs(args, &series, &summary)
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
    output::write_file(&args.out, "pfc.csv", |f| Ok(series.write_csv(f)?))?;
    output::write_summary(&args.out, summary)?;
    let x = 0.0..series.rows.last().map_or(0.0, |r| r[0]);
    let time = "time (s)".to_owned();
    let buffer = Panel {
        caption: "the receiver's ingress buffer: XOFF sends a PAUSE, below XON a resume".into(),
        x_desc: time.clone(),
        y_desc: "bytes".into(),
        x: x.clone(),
        y: 0.0..(series.max("buffer_bytes").max(f64::from(args.xoff)) * 1.1),
        lines: vec![
            Line::solid("buffer_bytes", series.points("buffer_bytes")),
            Line::level("XOFF", f64::from(args.xoff), &x),
            Line::level("XON", f64::from(args.xon), &x),
        ],
    };
    let frames = Panel {
        caption: "PFC frames: sent by the receiver, recorded by the sender's XDP".into(),
        x_desc: time.clone(),
        y_desc: "frames (cumulative)".into(),
        x: x.clone(),
        y: 0.0..(series.max("pause_tx").max(series.max("pause_rx")).max(1.0) * 1.1),
        lines: vec![
            Line::solid("PAUSE sent", series.points("pause_tx")),
            Line::solid("resume sent", series.points("resume_tx")),
            Line::solid("PAUSE received", series.points("pause_rx")),
        ],
    };
    let rate = Panel {
        caption: "what the receiver consumes while the sender holds".into(),
        x_desc: time,
        y_desc: "Mb/s".into(),
        x: x.clone(),
        y: 0.0..(series.max("rx_Mbps").max(args.rate as f64 / 1e6) * 1.1),
        lines: vec![
            Line::solid("received", series.points("rx_Mbps")),
            Line::level("sender's rate", args.rate as f64 / 1e6, &x),
            Line::level("drain", args.drain as f64 / 1e6, &x),
        ],
    };
    output::draw_panels(
        &args.out.join("pfc.svg"),
        (1000, 360),
        &[buffer, frames, rate],
    )?;
    println!(
        "wrote pfc.svg, pfc.csv and summary.json to {}",
        args.out.display()
    );
    Ok(())
}

/// Samples both ends every [`SAMPLE`] and prints a row every [`SAMPLES_PER_ROW`] samples until
/// the run's end; `None` if stopped early.
fn watch(
    args: &PfcLab,
    receiver: &PinnedMaps,
    sender: &PinnedMaps,
    stop: &StopFlag,
) -> anyhow::Result<Option<Series>> {
    let start = Instant::now();
    let end = start + args.secs;
    let mut series = Series::new(&COLUMNS);
    let first = receiver.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    let (mut sample_before, mut sample_at) = (first, Instant::now());
    let (mut row_before, mut row_at) = (first, Instant::now());
    let mut samples = 0u32;
    while Instant::now() < end {
        if stop.is_stopped() {
            return Ok(None);
        }
        std::thread::sleep(SAMPLE.min(end.saturating_duration_since(Instant::now())));
        let now = receiver.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        let tx = receiver.read_pfc_tx_counters()?;
        let buffer = receiver.read_pfc_buffers()?[PRIORITY].queue.backlog_bytes;
        let rx = sender.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        let state = sender.read_pfc_states()?[PRIORITY];
        let clock = crate::host::stats::monotonic_ns()?;
        let paused = state.is_paused(clock);
        let mbps = |before: &dataplane_common::counters::PrioCounters, since: Instant| {
            (now.rx_bytes - before.rx_bytes) as f64 * 8.0 / since.elapsed().as_secs_f64() / 1e6
        };
        let t = start.elapsed().as_secs_f64();
        let paused_ms = state.paused_ns(clock) as f64 / 1e6;
        series.push(vec![
            t,
            mbps(&sample_before, sample_at),
            buffer as f64,
            tx.pause_tx[PRIORITY] as f64,
            tx.resume_tx[PRIORITY] as f64,
            rx.pfc_pause_rx as f64,
            if paused { 1.0 } else { 0.0 },
            paused_ms,
        ]);
        (sample_before, sample_at) = (now, Instant::now());
        samples += 1;
        if samples.is_multiple_of(SAMPLES_PER_ROW) {
            println!(
                "{:>6.1} {:>11.1} {:>12} {:>9} {:>10} {:>10} {:>14} {:>10.1}",
                t,
                mbps(&row_before, row_at),
                buffer,
                tx.pause_tx[PRIORITY],
                tx.resume_tx[PRIORITY],
                rx.pfc_pause_rx,
                if paused { "paused" } else { "sending" },
                paused_ms,
            );
            (row_before, row_at) = (now, Instant::now());
        }
    }
    Ok(Some(series))
}
