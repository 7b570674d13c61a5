//! Fidelity: the simulator reproduces what the field's papers show. Two DCQCN senders into one
//! port converge to the fair share (DCQCN, SIGCOMM 2015); E-ECMP with several QPs per
//! connection shortens a ring AllReduce whose ranks sit in different pods against plain ECMP,
//! which puts all of a connection's QPs on one path (Meta, SIGCOMM 2024); and a run is
//! deterministic: the same seed gives the same summary, another seed another run. docs/sim.md's
//! "Fidelity" section records the figures these tests measure; the side-by-side with htsim is
//! `tests/tests/sim_htsim.rs`.
#![forbid(unsafe_code)]

mod common;

use sim::report::{summarise, Summary};
use sim::scenario::{build, Built, CnpSource, CongestionControl, Scenario};
use sim::simulation::{Execution, RunEnd};
use sim::time::{Ps, US};
use topology::Policy;

fn scenario(topology: &str, workload: &[String]) -> Scenario {
    Scenario {
        topology: topology.into(),
        workload: workload.to_vec(),
        tuning: Default::default(),
        hosts: Default::default(),
        failures: Vec::new(),
        seed: 1,
        time: "200ms".into(),
    }
}

fn built(s: &Scenario) -> Built {
    build(
        s,
        &sim::program::lossless(),
        &workload::Sources::default(),
        4 << 30,
        Execution::Compiled,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> Summary {
    let mut b = built(s);
    let end = b.sim.run(b.time_limit, |_| true).unwrap();
    summarise(&b, end).0
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has everything.
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * squares)
}

/// DCQCN's Figure (two flows into one 40 Gb/s port, the second joining later, converge to
/// half each) at 100 Gb/s: h12 sends to h11 from 0, h13 from 1 ms; both senders' rates are
/// sampled every 10 µs while both send. Over the second half of that time the two get the same
/// share (Jain's index near 1, by their DCQCN rates and by what the receiver acknowledged) and
/// together keep the port busy; the late sender, which starts at line rate, was cut to its
/// share, not the early one starved.
#[test]
fn two_dcqcn_senders_into_one_port_converge_to_the_fair_share() {
    let late = 1_000 * US;
    let s = scenario(
        "leaf-spine:1,1,3,speed=100G",
        &[
            "incast:senders=1,size=100MB".into(),
            format!("incast:senders=1,size=100MB,stride=2,start={}us", late / US),
        ],
    );
    assert_eq!(s.hosts.cc, CongestionControl::Dcqcn);
    assert_eq!(s.hosts.cnp, CnpSource::Host);
    let mut b = built(&s);
    let senders = [b.host_nodes[1], b.host_nodes[2]];
    let per = b.sim.host(senders[0]).unwrap().payload_per_packet() as f64;
    let step = 10 * US;
    // (time, [rate of each], [acked packets of each]) while both send.
    let mut samples: Vec<(Ps, [f64; 2], [u64; 2])> = Vec::new();
    let mut t = late;
    loop {
        let end = b.sim.run(t, |_| true).unwrap();
        let states: Vec<_> = senders
            .iter()
            .map(|&n| b.sim.host(n).unwrap().send_qps().next())
            .collect();
        let sending = |i: usize| {
            let f = b.sim.flows().times(i as u32);
            f.start.is_some() && f.sent.is_none()
        };
        if let [Some(a), Some(c)] = states[..] {
            if sending(0) && sending(1) {
                samples.push((
                    t,
                    [a.rate_bps as f64, c.rate_bps as f64],
                    [a.acked_packets, c.acked_packets],
                ));
            }
        }
        if end == RunEnd::Idle {
            break;
        }
        t += step;
    }
    assert!(
        samples.len() > 200,
        "both sent together for {} samples",
        samples.len()
    );
    let half = &samples[samples.len() / 2..];
    let span = (half[half.len() - 1].0 - half[0].0) as f64 / 1e12;
    let throughput: Vec<f64> = (0..2)
        .map(|i| (half[half.len() - 1].2[i] - half[0].2[i]) as f64 * per * 8.0 / span)
        .collect();
    let mean_rate: Vec<f64> = (0..2)
        .map(|i| half.iter().map(|s| s.1[i]).sum::<f64>() / half.len() as f64)
        .collect();
    let line = 100e9;
    eprintln!(
        "second half of {} µs together: throughput {:.1} and {:.1} Gb/s, DCQCN rates {:.1} and {:.1} Gb/s, Jain {:.4} and {:.4}",
        (samples[samples.len() - 1].0 - samples[0].0) / US,
        throughput[0] / 1e9,
        throughput[1] / 1e9,
        mean_rate[0] / 1e9,
        mean_rate[1] / 1e9,
        jain(&throughput),
        jain(&mean_rate)
    );
    assert!(jain(&throughput) > 0.99, "throughput {throughput:?}");
    assert!(jain(&mean_rate) > 0.99, "rates {mean_rate:?}");
    let total: f64 = throughput.iter().sum();
    assert!(
        total > 0.8 * line * (per / (per + 82.0)),
        "together they keep the port busy: {total}"
    );
    // Neither kept the line rate: both were cut and met near the middle.
    for r in &mean_rate {
        assert!((0.3 * line..0.7 * line).contains(r), "rates {mean_rate:?}");
    }
}

/// A ring AllReduce of 16 ranks on a fat-tree of radix 4, each rank's neighbours in other pods
/// (ranks 0, 4, 8, 12 in pods 0-3, then 1, 5, ...), 4 QPs per connection with each message split
/// over them. QPs of a connection share its UDP source port, so ECMP puts all four on the path
/// of their 5-tuple and connections collide on uplinks; E-ECMP hashes the destination QP too
/// and spreads them. Over three seeds (three draws of the source ports), E-ECMP's iteration is
/// shorter on average, by a fifth or more.
#[test]
fn e_ecmp_with_several_qps_shortens_a_ring_allreduce_across_pods() {
    let ranks: Vec<u32> = (0..4)
        .flat_map(|h| (0..4).map(move |p| p * 4 + h))
        .collect();
    let file = std::env::temp_dir().join(format!(
        "lossless-sim-fidelity-allreduce-{}.toml",
        std::process::id()
    ));
    std::fs::write(
        &file,
        format!(
            "[[part]]\nkind = \"allreduce\"\nhosts = {ranks:?}\nsize = \"2MB\"\nqps = 4\nqp_use = \"split\"\n"
        ),
    )
    .unwrap();
    let time = |policy: Policy, seed: u64| {
        let mut s = scenario("fat-tree:4,speed=100G", &[file.display().to_string()]);
        s.tuning.policy = policy;
        s.hosts.cc = CongestionControl::None;
        s.seed = seed;
        let summary = run(&s);
        assert_eq!(summary.flows.completed, summary.flows.total, "{policy}");
        assert_eq!(summary.drops.buffer_full + summary.drops.queue_full, 0);
        summary.collectives[0].mean_us
    };
    let seeds = [1, 2, 3];
    let ecmp: Vec<f64> = seeds.iter().map(|&s| time(Policy::Ecmp, s)).collect();
    let e_ecmp: Vec<f64> = seeds.iter().map(|&s| time(Policy::EEcmp, s)).collect();
    let _ = std::fs::remove_file(&file);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let gain = 1.0 - mean(&e_ecmp) / mean(&ecmp);
    eprintln!(
        "AllReduce iteration, µs: ecmp {ecmp:.1?}, e-ecmp {e_ecmp:.1?}: e-ecmp {:.0}% shorter",
        100.0 * gain
    );
    assert!(gain > 0.2, "ecmp {ecmp:?}, e-ecmp {e_ecmp:?}");
}

/// The same seed gives the same summary, for a run with DCQCN (floating point), a
/// time-driven policy (flowlet) and a link failure with its reroute; another seed draws other
/// source ports, and so another run.
#[test]
fn the_same_seed_gives_the_same_summary_and_another_seed_another() {
    let mut s = scenario(
        "leaf-spine:2,2,4,speed=100G",
        &[
            "permutation:size=1MB".into(),
            "incast:senders=3,size=500KB".into(),
        ],
    );
    s.tuning.policy = Policy::Flowlet;
    s.failures
        .push(common::link_failure("30us", "leaf1:5", Some("20us")));
    let first = run(&s);
    assert_eq!(first.end, RunEnd::Idle);
    assert_eq!(first.flows.completed, first.flows.total);
    assert!(
        first.ecn.cnps_received > 0,
        "DCQCN reacted: {:?}",
        first.ecn
    );
    assert_eq!(run(&s), first, "the same seed, the same summary");
    s.seed = 2;
    assert_ne!(run(&s), first, "another seed, another run");
}
