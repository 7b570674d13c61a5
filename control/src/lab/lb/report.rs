//! What the load-balancing lab shows: a header, a table row per run, which policy did best and
//! worst on each measure, summary.json, and lb.svg (per workload: the uplinks' shares, the
//! reordering and the completion times of every policy).

use std::path::Path;

use anyhow::Context as _;
use plotters::{
    coord::{
        ranged1d::{AsRangedCoord, ValueFormatter},
        Shift,
    },
    prelude::*,
};
use serde::Serialize;

use super::{closed_loop::LoopCounts, topology::Topology, LbLab, PolicyRun};
use crate::output;

/// Prints what the lab runs on.
pub fn print_header(args: &LbLab, topology: &Topology) {
    let rates: Vec<String> = topology
        .uplinks
        .iter()
        .map(|u| format!("{}", u.rate_bps / 1_000_000))
        .collect();
    let flow_control = if args.closed_loop.open_loop {
        "open loop: no ECN, PFC or DCQCN"
    } else {
        "closed loop: spines mark ECN and pause, the balancer relays pauses, DCQCN senders"
    };
    println!(
        "load-balancing lab: {} sender(s) -> balancer (XDP lb on each downlink) -> {} uplinks \
         (paths of {} Mb/s) -> leaf -> receiver; load {:.2}, {} B frames; {flow_control}",
        topology.senders.len(),
        topology.uplinks.len(),
        rates.join(", "),
        args.load,
        args.size,
    );
    println!(
        "{:<10} {:<8} {:>9} {:>6} {:>10} {:>10} {:>10} {:>6} {:>6} {:>7} {:>6} {:>6}  MB per uplink",
        "workload",
        "policy",
        "imbalance",
        "jain",
        "reorder_%",
        "fct_p50_ms",
        "fct_p99_ms",
        "flows",
        "lost",
        "pauses",
        "marks",
        "cnps"
    );
}

/// A completion time for the table: two decimals, or "no figure" when no flow arrived whole.
fn completion_ms(ms: Option<f64>) -> String {
    ms.map_or_else(|| "no figure".to_owned(), |ms| format!("{ms:.2}"))
}

/// Prints one run's row.
pub fn print_row(run: &PolicyRun) {
    let megabytes: Vec<String> = run
        .uplinks
        .iter()
        .map(|u| format!("{:.1}", u.tx_bytes as f64 / 1e6))
        .collect();
    let counts = |what: fn(&LoopCounts) -> u64| {
        run.closed_loop
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| what(c).to_string())
    };
    println!(
        "{:<10} {:<8} {:>9.3} {:>6.3} {:>10.3} {:>10} {:>10} {:>6} {:>6} {:>7} {:>6} {:>6}  {}",
        run.workload,
        run.policy,
        run.balance.imbalance,
        run.balance.jain,
        run.reordered_fraction * 100.0,
        completion_ms(run.fct.p50_ms),
        completion_ms(run.fct.p99_ms),
        format!("{}/{}", run.fct.flows, run.flows),
        run.lost(),
        counts(|c| c.pauses_sent),
        counts(|c| c.ecn_marked),
        counts(|c| c.cnps_sent),
        megabytes.join(" ")
    );
    if let Some(c) = &run.collective {
        println!(
            "  allreduce: {} ranks, {} B per rank, {} QPs per connection, {} steps; time {:.1} ms, \
             algbw {:.2} Mb/s, busbw {:.2} Mb/s (nccl-tests' definitions)",
            c.ranks,
            c.bytes,
            c.qps_per_conn,
            c.steps,
            c.time_ms,
            c.algbw_bps / 1e6,
            c.busbw_bps / 1e6
        );
    }
    if run.receiver_drops > 0 {
        println!(
            "  ({} frames reached the receiver's host but not its count: its socket fell behind; \
             flows short of them are not whole)",
            run.receiver_drops
        );
    }
}

/// Prints, per workload, which policy was the most and the least balanced, the most
/// reordered, and which completed its flows soonest (closed loop: all complete) or delivered
/// the most flows whole (open loop).
pub fn print_verdict(runs: &[PolicyRun]) {
    for workload in workloads(runs) {
        let of: Vec<&PolicyRun> = runs.iter().filter(|r| r.workload == workload).collect();
        let pick = |key: fn(&PolicyRun) -> f64, most: bool| {
            let order = |a: &&&PolicyRun, b: &&&PolicyRun| key(a).total_cmp(&key(b));
            let chosen = if most {
                of.iter().max_by(order)
            } else {
                of.iter().min_by(order)
            };
            chosen.map_or("none", |r| r.policy)
        };
        // With flow control every flow completes, and what differs is how long they took.
        let closed_loop = of.iter().all(|r| r.closed_loop.is_some());
        let (which, best) = if closed_loop {
            (
                "shortest fct_p99",
                pick(|r| r.fct.p99_ms.unwrap_or(f64::INFINITY), false),
            )
        } else {
            ("most flows whole", pick(|r| r.fct.flows as f64, true))
        };
        println!(
            "{workload}: most balanced {}, least balanced {}, most reordered {}, {which} {best}",
            pick(|r| r.balance.imbalance, false),
            pick(|r| r.balance.imbalance, true),
            pick(|r| r.reordered_fraction, true),
        );
    }
}

/// The workloads of `runs`, in their order.
fn workloads(runs: &[PolicyRun]) -> Vec<&str> {
    let mut names: Vec<&str> = runs.iter().map(|r| r.workload.as_str()).collect();
    names.dedup();
    names
}

/// Writes summary.json and lb.svg into `out`.
pub fn write(out: &Path, summary: &impl Serialize, runs: &[PolicyRun]) -> anyhow::Result<()> {
    output::write_summary(out, summary)?;
    let plot = out.join("lb.svg");
    draw(&plot, runs).with_context(|| format!("drawing {}", plot.display()))?;
    println!("wrote summary.json and lb.svg to {}", out.display());
    Ok(())
}

/// Height of one workload's row of panels in the plot.
const ROW_HEIGHT: u32 = 340;

/// One row per workload, three panels each: the uplinks' shares of the bytes, the reordered
/// fraction, and the median and 99th-percentile completion times, per policy.
fn draw(path: &Path, runs: &[PolicyRun]) -> anyhow::Result<()> {
    let workloads = workloads(runs);
    let rows = u32::try_from(workloads.len().max(1))?;
    let root = SVGBackend::new(path, (1500, ROW_HEIGHT * rows)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, workload) in root
        .split_evenly((workloads.len(), 1))
        .iter()
        .zip(workloads)
    {
        let of: Vec<&PolicyRun> = runs.iter().filter(|r| r.workload == workload).collect();
        let panels = area.split_evenly((1, 3));
        draw_shares(&panels[0], workload, &of)?;
        draw_reordering(&panels[1], workload, &of)?;
        draw_completion(&panels[2], workload, &of)?;
    }
    root.present()?;
    Ok(())
}

/// A measure of each run, with its name in the legend.
type Measure<'a> = (String, Box<dyn Fn(&PolicyRun) -> f64 + 'a>);

/// Each uplink's share of the bytes, per policy; an even split is a dashed line.
fn draw_shares(
    area: &DrawingArea<SVGBackend, Shift>,
    workload: &str,
    of: &[&PolicyRun],
) -> anyhow::Result<()> {
    let uplinks = of.first().map_or(0, |r| r.uplinks.len());
    let even = 1.0 / uplinks.max(1) as f64;
    let measures: Vec<Measure> = (0..uplinks)
        .map(|u| {
            let rate = of[0].uplinks[u].rate_bps / 1_000_000;
            let share: Box<dyn Fn(&PolicyRun) -> f64> = Box::new(move |r| share(r)[u]);
            (format!("uplink {u}: {rate} Mb/s"), share)
        })
        .collect();
    let top = of.iter().flat_map(|r| share(r)).fold(even, f64::max);
    let bars = Bars {
        caption: format!("{workload}: share of bytes per uplink"),
        measures,
        y: 0.0..top * 1.5,
        floor: 0.0,
        whole_flows_at: None,
        even: Some(even),
    };
    draw_bars(area, of, bars)
}

/// The reordered fraction per policy.
fn draw_reordering(
    area: &DrawingArea<SVGBackend, Shift>,
    workload: &str,
    of: &[&PolicyRun],
) -> anyhow::Result<()> {
    let (_, top) = value_range(of.iter().map(|r| r.reordered_fraction * 100.0));
    let bars = Bars {
        caption: format!("{workload}: frames reordered (%)"),
        measures: vec![(
            "reordered".into(),
            Box::new(|r: &PolicyRun| r.reordered_fraction * 100.0),
        )],
        y: 0.0..top * 1.15,
        floor: 0.0,
        whole_flows_at: None,
        even: None,
    };
    draw_bars(area, of, bars)
}

/// The median and 99th-percentile completion time of the whole flows per policy, on a log
/// scale when they span decades (web search), and how many flows arrived whole.
fn draw_completion(
    area: &DrawingArea<SVGBackend, Shift>,
    workload: &str,
    of: &[&PolicyRun],
) -> anyhow::Result<()> {
    let measures = || -> Vec<Measure> {
        vec![
            // No flow whole: no bar.
            (
                "p50".into(),
                Box::new(|r: &PolicyRun| r.fct.p50_ms.unwrap_or(0.0)),
            ),
            (
                "p99".into(),
                Box::new(|r: &PolicyRun| r.fct.p99_ms.unwrap_or(0.0)),
            ),
        ]
    };
    let (bottom, top) = value_range(
        of.iter()
            .flat_map(|r| [r.fct.p50_ms, r.fct.p99_ms])
            .flatten(),
    );
    let caption = format!("{workload}: completion of whole flows (ms)");
    if top / bottom > 20.0 {
        let bars = Bars {
            caption,
            measures: measures(),
            y: (bottom / 2.0..top * 8.0).log_scale(),
            floor: bottom / 2.0,
            whole_flows_at: Some(top * 1.6),
            even: None,
        };
        draw_bars(area, of, bars)
    } else {
        let bars = Bars {
            caption,
            measures: measures(),
            y: 0.0..top * 1.5,
            floor: 0.0,
            whole_flows_at: Some(top * 1.2),
            even: None,
        };
        draw_bars(area, of, bars)
    }
}

/// The x range that centres policy `i` on `i`.
fn policy_axis(n: usize) -> std::ops::Range<f64> {
    -0.5..n as f64 - 0.5
}

/// The policy name under an integer x, nothing elsewhere.
fn policy_label(of: &[&PolicyRun], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    of.get(i as usize)
        .map_or(String::new(), |r| r.policy.to_owned())
}

/// Each uplink's share of a run's bytes.
fn share(run: &PolicyRun) -> Vec<f64> {
    let total: u64 = run.uplinks.iter().map(|u| u.tx_bytes).sum();
    run.uplinks
        .iter()
        .map(|u| {
            if total == 0 {
                0.0
            } else {
                u.tx_bytes as f64 / total as f64
            }
        })
        .collect()
}

/// The y range of `values`: their smallest value above zero and their largest.
fn value_range(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let top = values.clone().fold(0.0, f64::max).max(1e-3);
    let bottom = values.filter(|v| *v > 0.0).fold(top, f64::min);
    (bottom, top)
}

/// A panel of bars: one or more measures per policy.
struct Bars<'a, Y> {
    caption: String,
    measures: Vec<Measure<'a>>,
    /// The y axis.
    y: Y,
    /// Its lowest value, where the bars start.
    floor: f64,
    /// Where to write how many flows of each run arrived whole, if at all.
    whole_flows_at: Option<f64>,
    /// Where to draw a dashed line for an even split, if at all.
    even: Option<f64>,
}

/// Draws `bars` for the runs `of`; a legend when there are several measures.
fn draw_bars<Y>(
    area: &DrawingArea<SVGBackend, Shift>,
    of: &[&PolicyRun],
    bars: Bars<'_, Y>,
) -> anyhow::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&bars.caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .build_cartesian_2d(policy_axis(of.len()), bars.y)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(of.len() * 2 + 1)
        .x_label_formatter(&|x| policy_label(of, *x))
        .draw()?;
    let width = 0.8 / bars.measures.len().max(1) as f64;
    let floor = bars.floor;
    for (m, (name, measure)) in bars.measures.iter().enumerate() {
        let color = Palette99::pick(m).to_rgba();
        chart
            .draw_series(of.iter().enumerate().map(|(i, r)| {
                let x0 = i as f64 - 0.4 + width * m as f64;
                Rectangle::new(
                    [(x0, floor), (x0 + width, measure(r).max(floor))],
                    color.filled(),
                )
            }))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    if let Some(even) = bars.even {
        chart.draw_series(DashedLineSeries::new(
            [(-0.5, even), (of.len() as f64 - 0.5, even)],
            6,
            4,
            BLACK.stroke_width(1),
        ))?;
    }
    if let Some(y) = bars.whole_flows_at {
        chart.draw_series(of.iter().enumerate().map(|(i, r)| {
            Text::new(
                format!("{}/{} whole", r.fct.flows, r.flows),
                (i as f64 - 0.35, y),
                ("sans-serif", 12),
            )
        }))?;
    }
    if bars.measures.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flow_whole_is_no_figure() {
        assert_eq!(completion_ms(None), "no figure");
        assert_eq!(completion_ms(Some(2933.414)), "2933.41");
    }
}
