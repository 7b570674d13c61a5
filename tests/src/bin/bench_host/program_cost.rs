//! Program cost: nanoseconds per packet of each eBPF program, run by the kernel on one frame
//! over and over with `BPF_PROG_TEST_RUN` (aya's `TestRun`), with no device, queue or sender
//! in the way. The programs are a second load of the object over the maps of interfaces that
//! `lossless host attach` attached and `lossless host set` configured (ECN on one, the load
//! balancer over three live uplinks on another), so they take their real paths with their real
//! state. Baselines: an XDP_PASS and a TC pass program (clang); XDP_PASS with one clock read
//! (`bpf_ktime_get_ns`) or one random number (`bpf_get_prandom_u32`), the price of those
//! helpers here; and a deliberately slowed XDP_PASS (a bounded loop) that must show up as a
//! clear rise, or the benchmark fails.
//!
//! Every XDP program measured is also attached in native mode to an idle veth of its own: the
//! kernel runs native XDP programs through its XDP dispatcher, and a test run of a program the
//! dispatcher does not hold adds it and takes it out again, two RCU grace periods per call
//! (tens of milliseconds here) that would make many calls impossible.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use aya::{
    programs::{SchedClassifier, TestRun, TestRunOptions, Xdp, XdpMode},
    Ebpf,
};
use dataplane_common::{lb::Policy, pfc::build_pfc_frame, programs};
use etherparse::{Ipv4Header, Ipv4HeaderSlice};
use host::attach::load_over_pinned_maps;
use lossless_tests::{
    bed::{subnet_link, Attached, Link, TEST_MAC},
    craft::{Ecn, FrameSpec},
};
use sysutil::{
    netns::{Endpoint, Namespace},
    pins::PinDir,
};

use super::lb_bed::Uplinks;
use super::{compile_xdp, median};

/// Runs of a program per `BPF_PROG_TEST_RUN` call. The kernel runs them on one copy of the
/// frame, so what a run writes the next one sees: kept below a fresh frame's TTL (255), so the
/// balancer, which decrements it, forwards on every run of a call.
const REPEAT: u32 = 200;
/// Calls per measurement (the kernel reports each call's mean in whole nanoseconds; the mean of
/// the calls keeps the fraction).
const CALLS: u32 = 1000;
/// Rounds; the figure is their median.
const ROUNDS: usize = 5;
/// Steps of the slowed baseline's loop.
const SLOW_STEPS: u32 = 256;
/// How many times the plain XDP_PASS's cost the slowed one must at least cost (it is ~30 times
/// here): a wide margin, so only a figure that cannot see a loop fails.
const SLOW_MIN_RATIO: f64 = 2.0;
/// Idle interfaces: one per XDP program measured (the balancer's policies share one).
const IDLE: u8 = 6;
/// The destination of the frames: inside the balancer's owned prefix.
const DESTINATION: [u8; 4] = [10, 99, 0, 7];

/// The hook a program runs at, which sets its baseline.
#[derive(Clone, Copy, PartialEq)]
enum Hook {
    Xdp,
    Tc,
}

/// A program measured: its label, where it is, and its hook.
struct Subject {
    label: String,
    /// Index into the loaded objects.
    object: usize,
    program: &'static str,
    hook: Hook,
    /// The balancer policy to set before running it, if it is the balancer.
    policy: Option<&'static str>,
}

/// The frames every program runs on.
fn frames() -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
    let roce = |ecn| {
        let mut spec = FrameSpec::roce(TEST_MAC, [2, 0, 0, 0, 0, 1], [10, 89, 0, 1], DESTINATION);
        spec.ecn = ecn;
        spec.payload = 16;
        with_ttl(spec.build(), 255)
    };
    let ect = roce(Ecn::Ect0)?;
    // A whole IPv4 header, cut inside the UDP header (shorter IPv4 frames the kernel refuses to
    // run a TC program on).
    let truncated = ect[..40].to_vec();
    Ok(vec![
        ("RoCEv2 ECT(0)", ect),
        ("RoCEv2 CE", roce(Ecn::Ce)?),
        ("RoCEv2 Not-ECT", roce(Ecn::NotEct)?),
        (
            "PFC PAUSE prio 3",
            build_pfc_frame(&TEST_MAC, 3, 0xffff).to_vec(),
        ),
        ("truncated IPv4 (40 B)", truncated),
    ])
}

/// `frame` (Ethernet + IPv4) with its TTL set and the header checksum recomputed.
fn with_ttl(mut frame: Vec<u8>, ttl: u8) -> anyhow::Result<Vec<u8>> {
    let header = Ipv4HeaderSlice::from_slice(&frame[14..])
        .context("an IPv4 frame")?
        .to_header();
    let header = Ipv4Header {
        time_to_live: ttl,
        ..header
    };
    let header = Ipv4Header {
        header_checksum: header.calc_header_checksum(),
        ..header
    };
    let mut out = &mut frame[14..14 + header.header_len()];
    header.write(&mut out)?;
    Ok(frame)
}

/// One program's cost on one frame: ns per run (the mean of [`CALLS`] calls of [`REPEAT`]
/// runs) and the verdict it returned.
fn cost(ebpf: &Ebpf, subject: &Subject, frame: &[u8]) -> anyhow::Result<(f64, u32)> {
    let program = ebpf
        .program(subject.program)
        .with_context(|| format!("no program {}", subject.program))?;
    let run = |opts| match subject.hook {
        Hook::Xdp => <&Xdp>::try_from(program)?.test_run(opts),
        Hook::Tc => <&SchedClassifier>::try_from(program)?.test_run(opts),
    };
    let mut total = Duration::ZERO;
    let mut verdict = 0;
    for _ in 0..CALLS {
        let result = run(TestRunOptions {
            data_in: Some(frame),
            repeat: REPEAT,
            ..TestRunOptions::default()
        })
        .with_context(|| format!("BPF_PROG_TEST_RUN of {}", subject.label))?;
        total += result.duration;
        verdict = result.return_value;
    }
    Ok((total.as_nanos() as f64 / f64::from(CALLS), verdict))
}

/// The name of a verdict at `hook`.
fn verdict_name(hook: Hook, verdict: u32) -> String {
    let name = match (hook, verdict) {
        (Hook::Xdp, 1) => "DROP",
        (Hook::Xdp, 2) => "PASS",
        (Hook::Xdp, 3) => "TX",
        (Hook::Xdp, 4) => "REDIRECT",
        (Hook::Tc, 0) => "OK",
        (Hook::Tc, 2) => "SHOT",
        (Hook::Tc, v) if v == u32::MAX => "NEXT",
        _ => return verdict.to_string(),
    };
    name.to_owned()
}

/// Loads and verifies the programs of `ebpf`, the XDP ones (program, idle interface) attached
/// in native mode to their interface (see the module's comment).
fn load_programs(ebpf: &mut Ebpf, xdp: &[(&str, &str)], tc: &[&str]) -> anyhow::Result<()> {
    for (name, interface) in xdp {
        let program: &mut Xdp = ebpf
            .program_mut(name)
            .with_context(|| format!("no program {name}"))?
            .try_into()?;
        program.load().with_context(|| format!("loading {name}"))?;
        program
            .attach(interface, XdpMode::Driver)
            .with_context(|| format!("attaching {name} to {interface}"))?;
    }
    for name in tc {
        let program: &mut SchedClassifier = ebpf
            .program_mut(name)
            .with_context(|| format!("no program {name}"))?
            .try_into()?;
        program.load().with_context(|| format!("loading {name}"))?;
    }
    Ok(())
}

/// A clang-built baseline object, its one program loaded (an XDP one attached to `idle`).
fn baseline(
    source: &str,
    defines: &[String],
    hook: Hook,
    name: &str,
    idle: &str,
) -> anyhow::Result<Ebpf> {
    let object = compile_xdp(source, defines)?;
    let mut ebpf = Ebpf::load_file(&object).with_context(|| format!("loading {source}"))?;
    let _ = std::fs::remove_file(&object);
    match hook {
        Hook::Xdp => load_programs(&mut ebpf, &[(name, idle)], &[])?,
        Hook::Tc => load_programs(&mut ebpf, &[], &[name])?,
    }
    Ok(ebpf)
}

/// The namespace of the attached interfaces: `ecn` (the XDP, TC, CNP and PFC hooks) and
/// `down` (the balancer over three uplinks), and idle interfaces that hold the XDP programs
/// measured.
struct Bed {
    ns: Namespace,
    _peer: Namespace,
    ecn: Endpoint,
    down: Endpoint,
    uplinks: Uplinks,
    idle: Vec<String>,
}

impl Bed {
    fn new() -> anyhow::Result<Bed> {
        let ns = Namespace::create("bpc")?;
        let peer = Namespace::create("bpp")?;
        let (ecn, _) = subnet_link(&ns, &peer, [10, 88, 0])?;
        // The balancer's downlink is the peer's .2, as the sender is in the forwarding bed.
        let (_, down) = subnet_link(&peer, &ns, [10, 89, 0])?;
        let uplinks = Uplinks::new(&ns, &peer)?;
        let mut idle = Vec::new();
        for i in 0..IDLE {
            let (end, _) = subnet_link(&ns, &peer, [10, 90, i])?;
            idle.push(end.ifname);
        }
        Ok(Bed {
            ns,
            _peer: peer,
            ecn,
            down,
            uplinks,
            idle,
        })
    }

    /// Attaches the ECN interface and the balancer, configured by the CLI.
    fn attach(&self) -> anyhow::Result<[Attached<'_>; 2]> {
        let ecn = Attached::new(
            &self.ns,
            &self.ecn.ifname,
            &["--mode", "native", "--hooks", "xdp,tc,cnp,pfc"],
        )?;
        let lb = self.uplinks.attach(&self.ns, &self.down.ifname, &[])?;
        Ok([ecn, lb])
    }

    /// `lossless host set DOWN lb.policy=POLICY`.
    fn set_policy(&self, policy: &str) -> anyhow::Result<()> {
        Link::lossless(
            &self.ns,
            &[
                "host",
                "set",
                &self.down.ifname,
                &format!("lb.policy={policy}"),
            ],
        )
        .map(drop)
    }
}

/// Measures every program on every frame and prints the table; fails if the slowed baseline
/// does not stand out.
pub fn run() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let bed = Bed::new()?;
    let _attached = bed.attach()?;
    eprintln!(
        "program cost: attached in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let frames = frames()?;
    let (ecn_if, down_if) = (bed.ecn.ifname.clone(), bed.down.ifname.clone());
    let idle: Vec<&str> = bed.idle.iter().map(String::as_str).collect();
    // Loaded and run inside the namespace: the pins are per namespace, and a TC test run's
    // packet belongs to the namespace's loopback device.
    let table = bed.ns.run(|| -> anyhow::Result<_> {
        let mut ecn = load_over_pinned_maps(&PinDir::new(&ecn_if)?)?;
        load_programs(
            &mut ecn,
            &[(programs::XDP, idle[0])],
            &[programs::TC, programs::INGRESS, programs::EMIT],
        )?;
        let mut lb = load_over_pinned_maps(&PinDir::new(&down_if)?)?;
        load_programs(&mut lb, &[(programs::LB, idle[1])], &[])?;
        let objects = [
            baseline("xdp_pass.c", &[], Hook::Xdp, "xdp_pass", idle[2])?,
            baseline("tc_pass.c", &[], Hook::Tc, "tc_pass", "")?,
            baseline(
                "xdp_pass.c",
                &[format!("-DSLOW_STEPS={SLOW_STEPS}")],
                Hook::Xdp,
                "xdp_pass",
                idle[3],
            )?,
            ecn,
            lb,
            baseline(
                "xdp_pass.c",
                &["-DCALL_KTIME".into()],
                Hook::Xdp,
                "xdp_pass",
                idle[4],
            )?,
            baseline(
                "xdp_pass.c",
                &["-DCALL_PRANDOM".into()],
                Hook::Xdp,
                "xdp_pass",
                idle[5],
            )?,
        ];
        let subject = |label: &str, object, program, hook, policy| Subject {
            label: label.to_owned(),
            object,
            program,
            hook,
            policy,
        };
        let mut subjects = vec![
            subject("XDP_PASS (baseline)", 0, "xdp_pass", Hook::Xdp, None),
            subject("TC pass (baseline)", 1, "tc_pass", Hook::Tc, None),
            subject(
                &format!("XDP_PASS + {SLOW_STEPS}-step loop"),
                2,
                "xdp_pass",
                Hook::Xdp,
                None,
            ),
            subject("XDP_PASS + a clock read", 5, "xdp_pass", Hook::Xdp, None),
            subject("XDP_PASS + a random number", 6, "xdp_pass", Hook::Xdp, None),
            subject("ECN + PFC rx, XDP", 3, programs::XDP, Hook::Xdp, None),
            subject("ECN, TC egress", 3, programs::TC, Hook::Tc, None),
            subject(
                "CNP + PFC gen, TC ingress",
                3,
                programs::INGRESS,
                Hook::Tc,
                None,
            ),
            subject("CNP/PFC emit, TC egress", 3, programs::EMIT, Hook::Tc, None),
        ];
        for policy in Policy::ALL.map(Policy::name) {
            subjects.push(subject(
                &format!("LB {policy}, XDP"),
                4,
                programs::LB,
                Hook::Xdp,
                Some(policy),
            ));
        }
        let mut samples = vec![vec![Vec::new(); frames.len()]; subjects.len()];
        let mut verdicts = vec![vec![0; frames.len()]; subjects.len()];
        for round in 0..ROUNDS {
            for (s, subject) in subjects.iter().enumerate() {
                if let Some(policy) = subject.policy {
                    bed.set_policy(policy)?;
                }
                for (f, (_, frame)) in frames.iter().enumerate() {
                    let (ns, verdict) = cost(&objects[subject.object], subject, frame)?;
                    samples[s][f].push(ns);
                    verdicts[s][f] = verdict;
                }
            }
            eprintln!("program cost: round {} of {ROUNDS}", round + 1);
        }
        let medians: Vec<Vec<f64>> = samples
            .into_iter()
            .map(|per_frame| {
                per_frame
                    .into_iter()
                    .map(|v| median(v.into_iter()))
                    .collect()
            })
            .collect();
        Ok((subjects, medians, verdicts))
    })??;
    report(&frames, &table.0, &table.1, &table.2)
}

/// Prints the table and checks the slowed baseline.
fn report(
    frames: &[(&str, Vec<u8>)],
    subjects: &[Subject],
    medians: &[Vec<f64>],
    verdicts: &[Vec<u32>],
) -> anyhow::Result<()> {
    let baseline = |hook: Hook| match hook {
        Hook::Xdp => &medians[0],
        Hook::Tc => &medians[1],
    };
    println!(
        "\nprogram cost: ns/packet through BPF_PROG_TEST_RUN ({CALLS} calls of {REPEAT} runs on \
         one frame), median of {ROUNDS} rounds; (+N) is the difference to the pass program of \
         the same hook (XDP_PASS or TC pass), then the verdict"
    );
    print!("{:<28}", "program");
    for (name, _) in frames {
        print!(" {name:>26}");
    }
    println!();
    for ((subject, costs), verdicts) in subjects.iter().zip(medians).zip(verdicts) {
        print!("{:<28}", subject.label);
        for (f, ns) in costs.iter().enumerate() {
            let cell = format!(
                "{ns:.1} ({:+.1}) {}",
                ns - baseline(subject.hook)[f],
                verdict_name(subject.hook, verdicts[f])
            );
            print!(" {cell:>26}");
        }
        println!();
    }
    let pass = median(medians[0].iter().copied());
    let slowed = median(medians[2].iter().copied());
    println!(
        "check: the deliberately slowed XDP_PASS ({SLOW_STEPS}-step loop) costs {slowed:.1} ns \
         against {pass:.1} ns ({:.1}x; the benchmark fails below {SLOW_MIN_RATIO}x)",
        slowed / pass
    );
    ensure!(
        slowed >= SLOW_MIN_RATIO * pass,
        "the program-cost figure does not see a {SLOW_STEPS}-step loop: {slowed:.1} ns against \
         {pass:.1} ns"
    );
    Ok(())
}
