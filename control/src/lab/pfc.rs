//! The PFC lab: a sender faster than its receiver consumes. The receiver's ingress buffer
//! crosses XOFF and its kernel sends a PAUSE; the sender's XDP records it and the traffic
//! tool holds its frames until the pause runs out or a resume arrives. Nothing is dropped.

use std::{
    net::{IpAddr, Ipv4Addr},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use dataplane_common::Hook;

use super::shared::{Detach, PRIORITY};
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
    wire::ethernet::Address,
};

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
        if !matches!(completed, Ok(true)) {
            sender_stop.stop();
            receiver_stop.stop();
        }
        let sent = sender_thread.join().expect("sender thread");
        let received = receiver_thread.join().expect("receiver thread");
        (completed, sent, received)
    });
    if !completed? {
        return Ok(());
    }
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
    Ok(())
}

/// Prints a row every half second until the run's end; false if stopped early.
fn watch(
    args: &PfcLab,
    receiver: &PinnedMaps,
    sender: &PinnedMaps,
    stop: &StopFlag,
) -> anyhow::Result<bool> {
    let start = Instant::now();
    let end = start + args.secs;
    let tick = Duration::from_millis(500);
    let mut before = receiver.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
    let mut last = Instant::now();
    while Instant::now() < end {
        if stop.is_stopped() {
            return Ok(false);
        }
        std::thread::sleep(tick.min(end.saturating_duration_since(Instant::now())));
        let now = receiver.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        let tx = receiver.read_pfc_tx_counters()?;
        let buffer = receiver.read_pfc_buffers()?[PRIORITY].queue.backlog_bytes;
        let rx = sender.read_counters(Hook::Xdp)?.per_priority[PRIORITY];
        let state = sender.read_pfc_states()?[PRIORITY];
        let clock = crate::host::stats::monotonic_ns()?;
        let elapsed = last.elapsed().as_secs_f64();
        last = Instant::now();
        println!(
            "{:>6.1} {:>11.1} {:>12} {:>9} {:>10} {:>10} {:>14} {:>10.1}",
            start.elapsed().as_secs_f64(),
            (now.rx_bytes - before.rx_bytes) as f64 * 8.0 / elapsed / 1e6,
            buffer,
            tx.pause_tx[PRIORITY],
            tx.resume_tx[PRIORITY],
            rx.pfc_pause_rx,
            if state.is_paused(clock) {
                "paused"
            } else {
                "sending"
            },
            state.paused_ns(clock) as f64 / 1e6,
        );
        before = now;
    }
    Ok(true)
}
