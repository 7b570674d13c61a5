//! `lossless sim` beside htsim (`htsim_roce`, found by `LOSSLESS_HTSIM` or PATH; the skip rule
//! without it) on htsim's own 32-host permutation of 2 MB flows (`perm_32n_32c_2MB.cm`, read
//! unchanged by our workload reader), 2 tiers as htsim's `-tiers 2`, ECMP, PFC, no congestion
//! control, configured alike (`lossless_tests::htsim::SideBySide`).
//!
//! Each simulator's ECMP hash is its own, so which flows collide on a link is a draw of each:
//! the flow-completion times are compared over several draws of each (htsim's `-seed` salts its
//! switches' hashes, and its runs differ even at the same seed; ours draws the hosts' UDP source
//! ports, the same seed giving the same run), as the mean over draws of the p50 and the p99 of
//! each draw. The p99 of 32 flows is the slowest flow, so one draw's p99 spreads by 15–20%
//! either side; over 16 draws of each, the standard error of the difference of the means is
//! about 6%. They must agree within [`TOLERANCE`]: that spread and the models' own differences
//! (docs/sim.md, "Fidelity"). Both must finish every flow without losing or resending
//! anything.

use lossless_tests::htsim::{self, SideBySide};
use sim::report::Percentiles;
use sim::scenario::build;
use sim::simulation::RunEnd;
use sim::time::US;

/// htsim's draws.
const HTSIM_SEEDS: u64 = 16;
/// Ours.
const OUR_SEEDS: u64 = 16;
/// The largest relative difference of the means of p50 and of p99.
const TOLERANCE: f64 = 0.25;

fn side(matrix: std::path::PathBuf, seed: u64) -> SideBySide {
    SideBySide {
        hosts: 32,
        tiers: 2,
        matrix,
        end_us: 100_000,
        seed,
    }
}

/// Flow-completion times as htsim counts them: from the flow's start to its sender's
/// acknowledgement of the last byte, µs; p50 and p99 (nearest rank).
fn percentiles(mut fcts: Vec<f64>) -> (f64, f64) {
    let p = Percentiles::of(&mut fcts);
    (p.p50, p.p99)
}

fn htsim_draw(htsim: &htsim::Htsim, side: &SideBySide, workdir: &std::path::Path) -> (f64, f64) {
    let run = htsim::run(side.htsim_command(htsim, workdir).unwrap(), true).unwrap();
    assert!(run.completed, "htsim ran to its end");
    assert_eq!(run.connections, 32);
    assert_eq!(run.finished.len(), 32, "htsim finished every flow");
    assert_eq!(run.overflows, 0, "htsim kept its lossless queues");
    assert_eq!(run.retransmitted_bytes, 0, "htsim resent nothing");
    // Every flow of the permutation starts at 0.
    percentiles(run.finished.iter().map(|f| f.at_us).collect())
}

fn our_draw(side: &SideBySide) -> (f64, f64) {
    let scenario = side.scenario().unwrap();
    let mut b = build(
        &scenario,
        &sim::program::lossless(),
        &workload::Sources::default(),
        4 << 30,
        sim::simulation::Execution::Compiled,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.sim.run(b.time_limit, |_| true).unwrap(), RunEnd::Idle);
    let summary = sim::report::summarise(&b, RunEnd::Idle).0;
    let d = &summary.drops;
    assert_eq!(
        d.buffer_full + d.queue_full + d.program + d.link_down,
        0,
        "ours lost nothing: {d:?}"
    );
    assert_eq!(summary.transport.retransmitted, 0, "ours resent nothing");
    let fcts: Vec<f64> = b
        .sim
        .flows()
        .iter()
        .map(|(_, _, t)| {
            let (start, sent) = (t.start.unwrap(), t.sent.expect("every flow finished"));
            (sent - start) as f64 / US as f64
        })
        .collect();
    assert_eq!(fcts.len(), 32);
    percentiles(fcts)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn flow_completion_times_agree_with_htsims_on_its_32_host_permutation() {
    let test = "flow_completion_times_agree_with_htsims_on_its_32_host_permutation";
    let Some(htsim) = htsim::find_or_skip(test) else {
        return;
    };
    let matrix = htsim.matrices.join("perm_32n_32c_2MB.cm");
    // Where htsim writes its log and id map.
    let workdir = std::env::temp_dir().join(sysutil::netns::unique_name("llhtsim"));
    std::fs::create_dir_all(&workdir).unwrap();
    let theirs: Vec<(f64, f64)> = (1..=HTSIM_SEEDS)
        .map(|s| htsim_draw(&htsim, &side(matrix.clone(), s), &workdir))
        .collect();
    std::fs::remove_dir_all(&workdir).unwrap();
    let ours: Vec<(f64, f64)> = (1..=OUR_SEEDS)
        .map(|s| our_draw(&side(matrix.clone(), s)))
        .collect();
    let p50 = |v: &[(f64, f64)]| mean(&v.iter().map(|d| d.0).collect::<Vec<_>>());
    let p99 = |v: &[(f64, f64)]| mean(&v.iter().map(|d| d.1).collect::<Vec<_>>());
    let (ours50, ours99, theirs50, theirs99) = (p50(&ours), p99(&ours), p50(&theirs), p99(&theirs));
    eprintln!(
        "FCT µs, mean over draws: p50 ours {ours50:.1} htsim {theirs50:.1} ({:+.1}%), \
         p99 ours {ours99:.1} htsim {theirs99:.1} ({:+.1}%); draws: ours {ours:.1?}, htsim {theirs:.1?}",
        100.0 * (ours50 / theirs50 - 1.0),
        100.0 * (ours99 / theirs99 - 1.0),
    );
    assert!(
        (ours50 / theirs50 - 1.0).abs() <= TOLERANCE,
        "p50: ours {ours50:.1} µs, htsim {theirs50:.1} µs"
    );
    assert!(
        (ours99 / theirs99 - 1.0).abs() <= TOLERANCE,
        "p99: ours {ours99:.1} µs, htsim {theirs99:.1} µs"
    );
}
