//! The incast experiment on a generated fabric (`lossless net experiment incast`): every host
//! but one sends RoCEv2 in the lossless priority, each with DCQCN's reaction point, to the one
//! left, through leaves and spines running lossless.p4 with every queue paced at the link
//! rate. The receiver's leaf port is the bottleneck: the switches mark CE (RED), send CNPs back
//! to the senders, which cut their rates, and pause (PFC) hop by hop back to the senders' own
//! interfaces, whose XDP program records the pause the traffic tool honours. What it shows:
//! every frame sent arrives (zero drops in the lossless class), and where the fabric paused and
//! marked, per switch.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde::Serialize;
use serde_json::Value;

use super::{
    count, host_ip, CountSample, Fabric, Links, Receiving, Sampler, Spawned, SwitchCounts,
    SwitchOutcome, SAMPLE_EVERY,
};
use crate::output::{self, Line, Panel, Series};
use traffic::{Interval, StopFlag};
use units::parse_run_time;

/// How long frames still in the fabric may take to arrive once the senders are done (held
/// frames leave at the link rate, queue by queue).
const DRAIN: Duration = Duration::from_secs(10);

/// Options of `lossless net experiment incast`.
#[derive(Debug, Clone, clap::Args)]
pub struct IncastArgs {
    /// The receiver [default: the fabric's last host].
    #[arg(long)]
    pub receiver: Option<String>,
    /// The links.
    #[command(flatten)]
    pub links: Links,
    /// How long the senders send (1 ms to 1 day).
    #[arg(long, default_value = "3", value_parser = parse_run_time)]
    pub secs: Duration,
    /// Directory for summary.json, table.txt, counters.csv, goodput.csv, the senders' DCQCN
    /// rate logs and incast.svg.
    #[arg(long, default_value = "lab-output/net-incast")]
    pub out: PathBuf,
}

/// One sender's outcome.
#[derive(Debug, Serialize)]
struct SenderOutcome {
    host: String,
    ip: IpAddr,
    /// Frames it sent.
    sent: u64,
    /// Of them, those the receiver counted.
    received: u64,
    /// sent − received.
    lost: u64,
    /// PSNs the receiver found skipped, and frames it found out of order.
    psn_gaps: u64,
    reordered: u64,
    /// Frames the receiver found marked CE.
    ce_marked: u64,
    /// CNPs it received (from the switches).
    cnp_received: u64,
    /// Time it held its frames because its link was paused, ms.
    paused_ms: f64,
    /// Its achieved rate on the wire, b/s.
    wire_rate_bps: f64,
    /// Whether it honoured PFC, from its own summary.
    pfc: Value,
}

/// summary.json.
#[derive(Debug, Serialize)]
struct Outcome {
    switch: &'static str,
    shape: [u16; 3],
    receiver: String,
    link_rate_bps: u64,
    link_pps: u64,
    frame_bytes: usize,
    secs: f64,
    /// Frames sent, all senders.
    sent: u64,
    /// Frames received.
    received: u64,
    /// Frames of the lossless class lost end to end (sent − received).
    lossless_drops: u64,
    /// Frames of the lossless priority the switches' program dropped.
    switch_drops: u64,
    /// PAUSE frames the switches sent.
    pauses: u64,
    /// Packets the switches marked CE.
    ecn_marked: u64,
    /// CNPs the switches sent.
    cnp_sent: u64,
    /// CNPs the senders received.
    cnp_received: u64,
    /// The receiver's goodput over the run, b/s.
    goodput_bps: f64,
    senders: Vec<SenderOutcome>,
    switches: Vec<SwitchOutcome>,
    /// The kernel's drops (rx, tx) on the network's interfaces that dropped any, by name.
    interface_drops: std::collections::BTreeMap<String, [u64; 2]>,
    stopped_early: bool,
}

/// Runs the incast on `fabric`; stops early when `stop` is set (and still writes its outputs).
pub fn run(args: &IncastArgs, fabric: &Fabric, stop: &StopFlag) -> anyhow::Result<()> {
    let hosts = fabric.hosts();
    let receiver = match &args.receiver {
        Some(name) => name.clone(),
        None => hosts.last().context("the fabric has no hosts")?.clone(),
    };
    let receiver_node = fabric.host(&receiver)?;
    let receiver_ip = host_ip(receiver_node)?;
    let senders: Vec<String> = hosts.into_iter().filter(|h| *h != receiver).collect();
    if senders.is_empty() {
        bail!("an incast needs a host besides the receiver");
    }
    fabric.read_pauses_at_fabric_speed(senders.iter().chain([&receiver]))?;
    let pps = args.links.apply(fabric)?;
    // Absolute: the senders write their rate logs from inside their hosts' mount namespaces.
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let args = &IncastArgs {
        out: std::path::absolute(&args.out)?,
        ..args.clone()
    };
    println!(
        "incast: {} -> {receiver} ({receiver_ip}) on {:?}, every link {} Mb/s ({pps} frames of {} \
         bytes a second), {:?}",
        senders.join(", "),
        fabric.kind,
        args.links.pacing.link_rate as f64 / 1e6,
        args.links.size,
        args.secs
    );

    let receiving = Receiving::start(&format!("/proc/{}/ns/net", receiver_node.pid))?;
    let sampler = Sampler::start(fabric, SAMPLE_EVERY)?;
    let started = Instant::now();
    let mut running = Vec::new();
    for host in &senders {
        let log = args.out.join(format!("{host}-rates.json"));
        let mut send = args.links.dcqcn_sender(receiver_ip);
        send.extend([
            "--duration".to_string(),
            format!("{}ms", args.secs.as_millis()),
        ]);
        send.extend(["--rate-log".to_string(), log.display().to_string()]);
        running.push((
            host.clone(),
            Spawned::start(fabric.lossless_in(host, &send)?)?,
        ));
    }
    while !running.iter_mut().all(|(_, s)| s.finished()) && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut sent = Vec::new();
    for (host, sender) in running {
        if stop.is_stopped() {
            break;
        }
        let text = sender.output(&format!("{host}: traffic send"))?;
        let summary: Value =
            serde_json::from_str(&text).with_context(|| format!("{host}: the sender's summary"))?;
        sent.push((host, summary));
    }
    let expected: u64 = sent.iter().map(|(_, s)| count(s, "packets")).sum();
    let drain_until = Instant::now() + DRAIN;
    while receiving.received() < expected && Instant::now() < drain_until && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (summary, goodput) = receiving.finish()?;
    let samples = sampler.finish()?;
    let interface_drops = fabric.interface_drops()?;
    let elapsed = started.elapsed();

    let switches = fabric.switches();
    let mut senders_out = Vec::new();
    for (host, s) in &sent {
        let ip = host_ip(fabric.host(host)?)?;
        let qps = || summary.qps.iter().filter(|q| q.src == ip);
        let received = qps().map(|q| q.frames.packets).sum();
        let sent = count(s, "packets");
        senders_out.push(SenderOutcome {
            host: host.clone(),
            ip,
            sent,
            received,
            lost: sent.saturating_sub(received),
            psn_gaps: qps().map(|q| q.frames.psn_gaps).sum(),
            reordered: qps().map(|q| q.frames.reordered).sum(),
            ce_marked: qps().map(|q| q.frames.ce).sum(),
            cnp_received: count(s, "cnp_received"),
            paused_ms: count(s, "pfc_paused_ns") as f64 / 1e6,
            wire_rate_bps: s["wire_rate_bps"].as_f64().unwrap_or(0.0),
            pfc: s["pfc"].clone(),
        });
    }
    let switches_out = SwitchOutcome::over(&switches, &samples)?;
    let total = |f: fn(&SwitchCounts) -> u64| SwitchOutcome::total(&switches_out, f);
    let sent_total: u64 = senders_out.iter().map(|s| s.sent).sum();
    let received_total: u64 = senders_out.iter().map(|s| s.received).sum();
    let outcome = Outcome {
        switch: fabric.kind_name(),
        shape: [fabric.shape.spines, fabric.shape.leaves, fabric.shape.hosts],
        receiver,
        link_rate_bps: args.links.pacing.link_rate,
        link_pps: pps,
        frame_bytes: args.links.size,
        secs: elapsed.as_secs_f64(),
        sent: sent_total,
        received: received_total,
        lossless_drops: sent_total.saturating_sub(received_total),
        switch_drops: total(|c| c.dropped),
        pauses: total(|c| c.pause_tx),
        ecn_marked: total(|c| c.ecn_marked),
        cnp_sent: total(|c| c.cnp_sent),
        cnp_received: senders_out.iter().map(|s| s.cnp_received).sum(),
        goodput_bps: summary.goodput_bps,
        senders: senders_out,
        switches: switches_out,
        interface_drops,
        stopped_early: stop.is_stopped(),
    };
    let table = table(&outcome);
    print!("{table}");
    write_outputs(args, &outcome, &table, &samples, &switches, &goodput)
}

/// The tables: senders, then switches, then the verdict.
fn table(o: &Outcome) -> String {
    let mut t = format!(
        "{:<8} {:>8} {:>9} {:>6} {:>9} {:>8} {:>10} {:>10}\n",
        "sender", "sent", "received", "lost", "ce_marked", "cnp_rx", "paused_ms", "rate_Mbps"
    );
    for s in &o.senders {
        t += &format!(
            "{:<8} {:>8} {:>9} {:>6} {:>9} {:>8} {:>10.1} {:>10.2}\n",
            s.host,
            s.sent,
            s.received,
            s.lost,
            s.ce_marked,
            s.cnp_received,
            s.paused_ms,
            s.wire_rate_bps / 1e6
        );
    }
    t += &format!(
        "\n{:<8} {:>9} {:>10} {:>7} {:>9} {:>12} {:>10} {:>8} {:>13}\n",
        "switch",
        "pause_tx",
        "resume_tx",
        "pfc_rx",
        "held",
        "hold_expired",
        "ecn_marked",
        "cnp_tx",
        "dropped_prio3"
    );
    for s in &o.switches {
        let c = &s.counts;
        t += &format!(
            "{:<8} {:>9} {:>10} {:>7} {:>9} {:>12} {:>10} {:>8} {:>13}\n",
            s.name,
            c.pause_tx,
            c.resume_tx,
            c.pfc_rx,
            c.held,
            c.hold_expired,
            c.ecn_marked,
            c.cnp_sent,
            c.dropped
        );
    }
    for (name, [rx, tx]) in &o.interface_drops {
        t += &format!("kernel drops on {name}: {rx} received, {tx} sent\n");
    }
    t += &format!(
        "\n{} frames sent, {} received: {} lost in the lossless class ({} dropped by the \
         switches); {} PAUSEs, {} CE marks, {} CNPs sent ({} reached the senders); goodput {:.2} \
         Mb/s{}\n",
        o.sent,
        o.received,
        o.lossless_drops,
        o.switch_drops,
        o.pauses,
        o.ecn_marked,
        o.cnp_sent,
        o.cnp_received,
        o.goodput_bps / 1e6,
        if o.stopped_early {
            " (stopped early)"
        } else {
            ""
        }
    );
    t
}

/// summary.json, table.txt, counters.csv, goodput.csv and incast.svg.
fn write_outputs(
    args: &IncastArgs,
    outcome: &Outcome,
    table: &str,
    samples: &[CountSample],
    switches: &[super::SwitchRef],
    goodput: &[Interval],
) -> anyhow::Result<()> {
    output::write_summary(&args.out, outcome)?;
    output::write_text(&args.out, "table.txt", table)?;
    let mut columns = vec!["time_s".to_string()];
    for s in switches {
        columns.push(format!("{}_pause_tx", s.name));
        columns.push(format!("{}_ecn_marked", s.name));
    }
    let mut counters = Series::new(&columns);
    let first = &samples[0];
    for sample in samples {
        let mut row = vec![sample.t_s];
        for (now, before) in sample.counts.iter().zip(&first.counts) {
            let c = now.since(before);
            row.extend([c.pause_tx as f64, c.ecn_marked as f64]);
        }
        counters.push(row);
    }
    output::write_file(&args.out, "counters.csv", |f| Ok(counters.write_csv(f)?))?;
    let mut columns = vec!["time_s".to_string()];
    columns.extend(outcome.senders.iter().map(|s| format!("{}_Mbps", s.host)));
    let mut rates = Series::new(&columns);
    for interval in goodput {
        let mut row = vec![interval.t_s];
        for s in &outcome.senders {
            let bps: f64 = interval
                .qps
                .iter()
                .filter(|q| q.src == s.ip)
                .map(|q| q.goodput_bps)
                .fold(0.0, |a, b| a + b);
            row.push(bps / 1e6);
        }
        rates.push(row);
    }
    output::write_file(&args.out, "goodput.csv", |f| Ok(rates.write_csv(f)?))?;
    draw(args, outcome, &counters, &rates)?;
    println!(
        "wrote summary.json, table.txt, counters.csv, goodput.csv, the senders' rate logs and \
         incast.svg to {}",
        args.out.display()
    );
    Ok(())
}

/// DCQCN rates, goodput per sender, and PAUSEs and marks per switch over time.
fn draw(
    args: &IncastArgs,
    outcome: &Outcome,
    counters: &Series,
    goodput: &Series,
) -> anyhow::Result<()> {
    let end = outcome.secs;
    let x = 0.0..end;
    let link = args.links.pacing.link_rate as f64 / 1e6;
    let mut rate_lines = Vec::new();
    for s in &outcome.senders {
        rate_lines.push(Line::solid(
            format!("{} DCQCN rate", s.host),
            rate_log(&args.out.join(format!("{}-rates.json", s.host)))?,
        ));
    }
    let fair = link / outcome.senders.len() as f64;
    rate_lines.push(Line::level("fair share", fair, &x));
    let per = |series: &Series, suffix: &str| -> Vec<Line> {
        series
            .columns
            .iter()
            .filter_map(|c| c.strip_suffix(suffix))
            .map(|name| Line::solid(name, series.points(&format!("{name}{suffix}"))))
            .collect()
    };
    let panel = |caption: String, y_desc: &str, y_max: f64, lines: Vec<Line>| Panel {
        caption,
        x_desc: "time (s)".into(),
        y_desc: y_desc.into(),
        x: x.clone(),
        y: 0.0..y_max * 1.05,
        lines,
    };
    let max_of = |series: &Series, suffix: &str| {
        series
            .columns
            .iter()
            .filter(|c| c.ends_with(suffix))
            .map(|c| series.max(c))
            .fold(1.0, f64::max)
    };
    let panels = [
        panel(
            format!(
                "DCQCN rate per sender ({} senders into one {link} Mb/s link)",
                outcome.senders.len()
            ),
            "rate (Mb/s)",
            link,
            rate_lines,
        ),
        panel(
            "goodput at the receiver, per sender".into(),
            "goodput (Mb/s)",
            link,
            per(goodput, "_Mbps"),
        ),
        panel(
            "PAUSE frames sent, per switch (cumulative)".into(),
            "PAUSEs",
            max_of(counters, "_pause_tx"),
            per(counters, "_pause_tx"),
        ),
        panel(
            "packets marked CE, per switch (cumulative)".into(),
            "marks",
            max_of(counters, "_ecn_marked"),
            per(counters, "_ecn_marked"),
        ),
    ];
    output::draw_panels(&args.out.join("incast.svg"), (1000, 320), &panels)
}

/// A sender's DCQCN rate log (the traffic tool's JSON) as (seconds, Mb/s) steps.
fn rate_log(path: &Path) -> anyhow::Result<Vec<(f64, f64)>> {
    let text = crate::net::state::read_bounded(path, 256 << 20)?;
    let timelines: Value =
        serde_json::from_str(&text).with_context(|| format!("in {}", path.display()))?;
    let mut points = Vec::new();
    for point in timelines
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["points"].as_array().into_iter().flatten())
    {
        let t = point["time_ns"].as_f64().unwrap_or(0.0) / 1e9;
        let rate = point["rate_bps"].as_f64().unwrap_or(0.0) / 1e6;
        if let Some(&(_, previous)) = points.last() {
            points.push((t, previous));
        }
        points.push((t, rate));
    }
    Ok(points)
}
