//! What `lossless sim` prints and writes: per run `summary.json` (the scenario and its
//! [`Record`]), `flows.csv` (every completed flow: size, FCT, ideal FCT, slowdown, its part and
//! collective step), `links.csv` (every link direction: bytes, utilisation, losses),
//! `queues.csv` (every switch queue: sojourn times, occupancy, microbursts, time paused) and
//! `slowdown.svg`; for a comparison of policies, a table on the terminal and
//! `comparison.json` and `comparison.svg` beside the runs' folders.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sim::report::{FlowRow, QueueReport, Summary, SIZE_BUCKETS};
use sim::scenario::{Built, Scenario};

use crate::output::{draw_panels, queue_percentiles, write_file, write_summary, Line, Panel};

/// The switch queues printed per run: those with the longest sojourns.
const PRINTED_QUEUES: usize = 8;

/// One run's record: what was run and what it measured, `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The scenario, as run (its policy the one of this run).
    pub scenario: Scenario,
    /// What it measured.
    pub summary: Summary,
    /// CPU seconds the run took (building excluded).
    pub cpu_seconds: f64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Events per CPU second.
    pub events_per_cpu_second: f64,
    /// Packet hops (frames sent on links) per CPU second.
    pub hops_per_cpu_second: f64,
    /// The process' peak resident memory when the run ended, bytes.
    pub peak_rss_bytes: u64,
    /// The estimate the run was checked against before it started, bytes.
    pub estimated_bytes: u64,
}

/// Writes one run's files into `out`.
pub fn write_run(
    out: &Path,
    built: &Built,
    record: &Record,
    flows: &[FlowRow],
) -> anyhow::Result<()> {
    write_summary(out, record)?;
    write_file(out, "flows.csv", |f| {
        writeln!(
            f,
            "flow,src,dst,bytes,part,collective,iteration,step,fct_us,ideal_us,slowdown"
        )?;
        for row in flows {
            let flow = &built.flows.flows[row.flow as usize];
            let (c, i, s) = flow
                .step
                .map_or((String::new(), String::new(), String::new()), |st| {
                    (
                        st.collective.to_string(),
                        st.iteration.to_string(),
                        st.step.to_string(),
                    )
                });
            writeln!(
                f,
                "{},{},{},{},{},{c},{i},{s},{:.3},{:.3},{:.4}",
                row.flow,
                built.fabric.hosts[flow.src as usize].name,
                built.fabric.hosts[flow.dst as usize].name,
                flow.bytes,
                flow.part,
                row.fct_us,
                row.ideal_us,
                row.slowdown
            )?;
        }
        Ok(())
    })?;
    let now = built.sim.last_frame().max(1) as f64;
    write_file(out, "links.csv", |f| {
        writeln!(f, "from,to,rate_bps,frames,bytes,utilisation,lost")?;
        let name = |e: sim::link::End| {
            let node = built.sim.nodes()[e.node as usize].name();
            match &built.sim.nodes()[e.node as usize] {
                sim::simulation::Node::Switch(_) => format!("{node}:{}", e.port),
                sim::simulation::Node::Host(_) => node.to_string(),
            }
        };
        for l in built.sim.links() {
            writeln!(
                f,
                "{},{},{},{},{},{:.4},{}",
                name(l.from),
                name(l.to),
                l.rate_bps,
                l.stats.frames,
                l.stats.bytes,
                l.stats.busy_ps as f64 / now,
                l.stats.lost
            )?;
        }
        Ok(())
    })?;
    write_file(out, "queues.csv", |f| {
        writeln!(
            f,
            "switch,port,priority,packets,sojourn_p50_us,sojourn_p99_us,sojourn_max_us,\
             occupancy_p50_packets,occupancy_p99_packets,occupancy_max_packets,microbursts,\
             bursts_over_window,last_burst_peak_packets,last_burst_duration_us,paused_us"
        )?;
        for q in &record.summary.queues {
            writeln!(
                f,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3}",
                q.switch,
                q.port,
                q.priority,
                q.packets,
                q.sojourn_p50_us,
                q.sojourn_p99_us,
                q.sojourn_max_us,
                q.occupancy_p50_packets,
                q.occupancy_p99_packets,
                q.occupancy_max_packets,
                q.microbursts,
                q.bursts_over_window,
                q.last_burst_peak_packets,
                q.last_burst_duration_us,
                q.paused_us
            )?;
        }
        Ok(())
    })?;
    draw_panels(
        &out.join("slowdown.svg"),
        (1000, 360),
        &[slowdown_panel(std::slice::from_ref(record))],
    )?;
    Ok(())
}

/// The slowdown panel: p50 and p99 per size bucket, a pair of lines per record.
fn slowdown_panel(records: &[Record]) -> Panel {
    let mut lines = Vec::new();
    let mut top: f64 = 1.0;
    for r in records {
        let name = r.scenario.tuning.policy.name();
        let at = |b: &sim::report::Bucket| {
            SIZE_BUCKETS
                .iter()
                .position(|(_, n)| *n == b.sizes.as_str())
                .unwrap_or(0) as f64
        };
        let points = |of: fn(&sim::report::Bucket) -> f64| -> Vec<(f64, f64)> {
            let buckets = r.summary.flows.buckets.iter();
            buckets.map(|b| (at(b), of(b))).collect()
        };
        let p50 = points(|b| b.slowdown.p50);
        let p99 = points(|b| b.slowdown.p99);
        top = top.max(p99.iter().map(|p| p.1).fold(0.0, f64::max));
        lines.push(Line::solid(format!("{name} p50"), p50));
        lines.push(Line::solid(format!("{name} p99"), p99));
    }
    Panel {
        caption:
            "FCT slowdown by flow size (0: <10KB, 1: 10-100KB, 2: 0.1-1MB, 3: 1-10MB, 4: >=10MB)"
                .into(),
        x_desc: "flow-size bucket".into(),
        y_desc: "slowdown (FCT / ideal FCT)".into(),
        x: 0.0..(SIZE_BUCKETS.len() - 1) as f64,
        y: 0.0..top * 1.1,
        lines,
    }
}

/// Writes `comparison.json` and `comparison.svg` for runs compared, into `out`.
pub fn write_comparison(out: &Path, records: &[Record]) -> anyhow::Result<()> {
    write_file(out, "comparison.json", |f| {
        serde_json::to_writer_pretty(&mut *f, records)?;
        Ok(writeln!(f)?)
    })?;
    draw_panels(
        &out.join("comparison.svg"),
        (1000, 360),
        &[slowdown_panel(records)],
    )?;
    eprintln!(
        "wrote comparison.json and comparison.svg to {}",
        out.display()
    );
    Ok(())
}

/// Prints the runs side by side: flows and slowdown, collectives, the fabric's uplinks, PFC,
/// ECN, drops; then slowdown per size bucket.
pub fn print(records: &[Record]) {
    println!(
        "{:<8} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>9} {:>10} {:>9} {:>8} {:>7} {:>8}",
        "policy",
        "flows",
        "sd_p50",
        "sd_p95",
        "sd_p99",
        "coll_us",
        "busbw_GB/s",
        "up_imb",
        "pauses",
        "paused_us",
        "marks",
        "cnps",
        "drops",
        "retx"
    );
    for r in records {
        let s = &r.summary;
        let coll = s.collectives.first();
        let imbalance = s
            .tiers
            .iter()
            .filter(|t| t.tier > 1)
            .map(|t| t.imbalance)
            .fold(0.0, f64::max);
        let drops = s.drops.total();
        println!(
            "{:<8} {:>11} {:>9.2} {:>9.2} {:>9.2} {:>11} {:>11} {:>8.2} {:>9} {:>10.1} {:>9} {:>8} {:>7} {:>8}",
            r.scenario.tuning.policy.name(),
            format!("{}/{}", s.flows.completed, s.flows.total),
            s.flows.slowdown.p50,
            s.flows.slowdown.p95,
            s.flows.slowdown.p99,
            coll.map_or("-".into(), |c| format!("{:.1}", c.mean_us)),
            coll.map_or("-".into(), |c| format!("{:.2}", c.busbw_gbps)),
            imbalance,
            s.pfc.pauses_sent,
            s.pfc.paused_us_total,
            s.ecn.marked,
            s.ecn.cnps_from_switches + s.ecn.cnps_from_hosts,
            drops,
            s.transport.retransmitted
        );
    }
    println!("\nslowdown p50 / p99 by flow size");
    print!("{:<8}", "policy");
    for (_, name) in SIZE_BUCKETS {
        print!(" {name:>17}");
    }
    println!();
    for r in records {
        print!("{:<8}", r.scenario.tuning.policy.name());
        for (_, name) in SIZE_BUCKETS {
            match r.summary.flows.buckets.iter().find(|b| b.sizes == name) {
                Some(b) => print!(
                    " {:>17}",
                    format!("{:.2} / {:.2}", b.slowdown.p50, b.slowdown.p99)
                ),
                None => print!(" {:>17}", "-"),
            }
        }
        println!();
    }
    for r in records {
        for c in &r.summary.collectives {
            println!(
                "\n{} {}: {} ranks, {} bytes per rank, {}/{} iterations; nccl-tests' time {:.1} us, algbw {:.2} GB/s, busbw {:.2} GB/s",
                r.scenario.tuning.policy.name(),
                c.kind,
                c.ranks,
                c.bytes,
                c.completed,
                c.iterations,
                c.mean_us,
                c.algbw_gbps,
                c.busbw_gbps
            );
        }
    }
    for r in records {
        let s = &r.summary;
        println!(
            "\n{}: {:?} at {:.1} us simulated; {} events, {} packet hops in {:.2} CPU s ({:.0} hops/CPU s); peak memory {} MB",
            r.scenario.tuning.policy.name(),
            s.end,
            s.simulated_us,
            s.events,
            s.packet_hops,
            r.cpu_seconds,
            r.hops_per_cpu_second,
            r.peak_rss_bytes >> 20
        );
        for c in s.checks.iter().filter(|c| !c.agrees) {
            println!(
                "  check failed: {}: program {} vs simulator {}",
                c.what, c.program, c.simulator
            );
        }
    }
    for r in records {
        print_queues(r);
    }
}

/// Prints a run's switch queues with the longest sojourns (all of them are in queues.csv).
fn print_queues(r: &Record) {
    let mut queues: Vec<&QueueReport> = r.summary.queues.iter().collect();
    if queues.is_empty() {
        return;
    }
    queues.sort_by_key(|q| std::cmp::Reverse((q.sojourn_max_us, q.packets)));
    println!(
        "\n{}: switch queues, longest sojourns first (of {}; sojourn and occupancy p50/p99/max, \
         microbursts+longer episodes, the last microburst peak@duration)",
        r.scenario.tuning.policy.name(),
        queues.len()
    );
    println!(
        "{:<22} {:>10} {:>18} {:>16} {:>10} {:>12} {:>11}",
        "queue", "packets", "sojourn_us", "occupancy", "bursts", "last_burst", "paused_us"
    );
    for q in queues.into_iter().take(PRINTED_QUEUES) {
        let (sojourn, occupancy) = queue_percentiles(
            [q.sojourn_p50_us, q.sojourn_p99_us, q.sojourn_max_us],
            [
                q.occupancy_p50_packets,
                q.occupancy_p99_packets,
                q.occupancy_max_packets,
            ],
        );
        println!(
            "{:<22} {:>10} {:>18} {:>16} {:>10} {:>12} {:>11.1}",
            format!("{}:{} prio {}", q.switch, q.port, q.priority),
            q.packets,
            sojourn,
            occupancy,
            format!("{}+{}", q.microbursts, q.bursts_over_window),
            format!("{}@{}", q.last_burst_peak_packets, q.last_burst_duration_us),
            q.paused_us
        );
    }
}
