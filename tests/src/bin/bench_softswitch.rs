//! `cargo xtask bench softswitch`, in one run, in alternating rounds, reported as medians and
//! ratios: packets/s of IPv4 forwarding (`tests/p4/ipv4_forward.p4`: LPM route, MAC rewrite, TTL,
//! checksum) from one veth to another through (a) a Linux bridge (the kernel's own forwarding,
//! no P4), (b) `softswitch run` on the same veths with AF_PACKET ports (the default) and (b')
//! with AF_XDP ports, (c) the softswitch interpreter alone, in this process, on the same
//! frame with no I/O, and BMv2 on the same veths running p4c's JSON of the same program: (d)
//! `simple_switch_nolog` and (f) `simple_switch_grpc`, BMv2's performance builds (no logging
//! macros, no event logger), and (e) `simple_switch`, its default build, when the toolchain
//! (`LOSSLESS_P4REF`, else PATH) has them.
//!
//! Arrivals are counted by the kernel (the receiving veth's rx_packets), so no user-space
//! receiver limits the rate. The load is the traffic tool's sender on its AF_XDP engine
//! (`lossless traffic send --engine afxdp`: 64-byte RoCEv2 frames, which the program routes as
//! any IPv4), and (g) its own rate into the switch's port with no switch running (counted by
//! that port's kernel) shows that it is not what limits a switch. A switch flooded beyond
//! what it forwards may forward less than at its best (BMv2 does), so each switch is measured
//! at offered loads from 10,000 packets/s up to flat out, and its best is kept. Everything
//! shares this machine's cores: the sender takes one while it sends. The ratios printed are
//! softswitch on ports over the interpreter alone, over the Linux bridge and over the first
//! BMv2 build the toolchain has (`simple_switch_nolog` where it exists), and the sender's
//! ceiling over the fastest softswitch. The scaling measurements (`scaling`) come first;
//! `--scaling-only` stops after them, `--ports-only` skips them. Last come issue 34's aims
//! with the ratios of this run ([`aims`]).

#[path = "bench_softswitch/aims.rs"]
mod aims;
#[path = "bench_softswitch/scaling.rs"]
mod scaling;

use aims::{Aim, Bound, Ratio};

use std::time::{Duration, Instant};

use anyhow::Context as _;
use lossless_tests::switch::{program, Bmv2Build, Host, SwitchBed, Topology};
use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::source::SourceMap;
use sysutil::netns::check;
use traffic::{pacing::wire_bits, Engine, FixedRate, SendConfig, Sender};
use wire::ethernet::Address;

const ROUNDS: usize = 3;
const SECONDS: f64 = 2.0;
const PROGRAM: &str = "ipv4_forward.p4";
/// Offered loads of a sweep, in packets/s, finer where BMv2 peaks; `None` is flat out.
const LOADS: [Option<f64>; 11] = [
    Some(10_000.0),
    Some(20_000.0),
    Some(30_000.0),
    Some(40_000.0),
    Some(50_000.0),
    Some(60_000.0),
    Some(80_000.0),
    Some(160_000.0),
    Some(320_000.0),
    Some(640_000.0),
    None,
];
/// Frame size: the smallest RoCEv2 frame rounded up to Ethernet's minimum.
const FRAME: usize = 64;

/// The sender's configuration: 64-byte RoCEv2 frames from host 1 (10.0.1.9) to 10.0.2.9
/// (routed to port 2) on the AF_XDP engine, for SECONDS.
fn send_config(from: &Host) -> SendConfig {
    let mut config = SendConfig::new(from.iface.clone(), [10, 0, 2, 9].into());
    config.src_ip = Some([10, 0, 1, 9].into());
    config.dst_mac = Some(Address([2, 0, 0, 0, 0, 0xfe]));
    config.size = FRAME;
    config.duration = Some(Duration::from_secs_f64(SECONDS));
    config.engine = Engine::Afxdp;
    config.honour_pfc = false;
    config
}

/// The frame the sender sends (its first, PSN 0), for the interpreter alone.
fn frame(from: &Host) -> anyhow::Result<Vec<u8>> {
    let config = send_config(from);
    let first = from
        .ns
        .run(move || Sender::open(config).map(|s| s.frames()[0]))??;
    let mut out = vec![0; first.buffer_len()];
    first.emit(&mut out, |_| {})?;
    Ok(out)
}

/// Runs the generator ([`lossless_tests::load::send`]: pinned, real-time) in `from`'s namespace for SECONDS at
/// `load` packets/s (or flat out); returns the packets/s it sent.
fn send(from: &Host, load: Option<f64>) -> anyhow::Result<f64> {
    let config = send_config(from);
    let bps = load.map_or(100_000_000_000, |pps| {
        (pps * wire_bits(FRAME) as f64) as u64
    });
    let summary = lossless_tests::load::send(&from.ns, config, vec![FixedRate { bps }])?;
    Ok(summary.pps)
}

/// Frames/s host 1 → host 2 and the sender's own rate: the sender sends for SECONDS, at
/// `load` packets/s or flat out; the kernel counts what arrives at host 2 (read again until
/// it stops changing).
fn measure(topology: &Topology, load: Option<f64>) -> anyhow::Result<(f64, f64)> {
    let (from, to) = (&topology.hosts[0], &topology.hosts[1]);
    let before = to.ns.rx_packets(&to.iface)?;
    let sent = send(from, load)?;
    let mut after = to.ns.rx_packets(&to.iface)?;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = to.ns.rx_packets(&to.iface)?;
        if now == after {
            break;
        }
        after = now;
    }
    let arrived = (after - before) as f64 / SECONDS;
    eprintln!("  offered {load:?}: sent {sent:.0}/s, arrived {arrived:.0}/s");
    Ok((arrived, sent))
}

/// The sender alone, flat out, into the switch's port 1 with no switch running: (packets/s the
/// port's kernel counted, packets/s sent).
fn generator(topology: &Topology) -> anyhow::Result<(f64, f64)> {
    let from = &topology.hosts[0];
    let port = || topology.switch_ns.rx_packets(&from.switch_iface);
    let before = port()?;
    let sent = send(from, None)?;
    let arrived = (port()? - before) as f64 / SECONDS;
    Ok((arrived, sent))
}

/// A switch's best over the sweep of offered loads: (forwarded, offered) packets/s.
fn sweep(topology: &Topology) -> anyhow::Result<(f64, f64)> {
    let mut best = (0.0, 0.0);
    for load in LOADS {
        let (forwarded, offered) = measure(topology, load)?;
        if forwarded > best.0 {
            best = (forwarded, offered);
        }
    }
    Ok(best)
}

/// A BMv2 variant of the benchmark: its name and how to start it.
struct Bmv2Variant {
    label: &'static str,
    tool: p4toolchain::Tool,
    build: Bmv2Build,
}

/// The BMv2 builds the toolchain has, performance builds first; none without a toolchain.
fn bmv2_variants() -> Vec<Bmv2Variant> {
    let toolchain = match p4toolchain::Toolchain::find() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no BMv2 to compare with: {e}");
            return Vec::new();
        }
    };
    let mut variants = Vec::new();
    if let Some(tool) = toolchain.simple_switch_nolog.clone() {
        variants.push(Bmv2Variant {
            label: "(d) BMv2 simple_switch_nolog (perf build)",
            tool,
            build: Bmv2Build::Thrift,
        });
    }
    variants.push(Bmv2Variant {
        label: "(e) BMv2 simple_switch (default build)",
        tool: toolchain.simple_switch.clone(),
        build: Bmv2Build::Thrift,
    });
    if let Some(tool) = toolchain.simple_switch_grpc.clone() {
        variants.push(Bmv2Variant {
            label: "(f) BMv2 simple_switch_grpc (perf build)",
            tool,
            build: Bmv2Build::Grpc,
        });
    }
    variants
}

/// A bridge of the switch-side interfaces, removed again when done.
fn with_bridge(topology: &Topology) -> anyhow::Result<(f64, f64)> {
    let ns = &topology.switch_ns;
    ns.ip(&["link", "add", "br-bench", "type", "bridge"])?;
    for h in &topology.hosts {
        ns.ip(&["link", "set", &h.switch_iface, "master", "br-bench"])?;
    }
    ns.ip(&["link", "set", "br-bench", "up"])?;
    let rates = measure(topology, None);
    ns.ip(&["link", "del", "br-bench"])?;
    rates
}

/// Frames/s of the interpreter alone on the same program and `frame`.
fn interpreter(frame: &[u8]) -> anyhow::Result<f64> {
    let path = program(PROGRAM);
    let mut map = SourceMap::new();
    let file = map.add(path.display().to_string(), std::fs::read_to_string(&path)?);
    let compiled = softswitch_frontend::compile(&mut map, file)
        .map_err(|d| anyhow::anyhow!(d.render(&map)))?;
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    let start = Instant::now();
    let mut forwarded = 0usize;
    while start.elapsed().as_secs_f64() < SECONDS {
        for _ in 0..1000 {
            switch.receive(1, frame.to_vec());
        }
        forwarded += switch.drain_outputs().count();
    }
    Ok(forwarded as f64 / start.elapsed().as_secs_f64())
}

/// A column of figures over the rounds: the median, then the fastest to slowest round.
fn figure(rounds: &[f64]) -> String {
    let (min, median, max) = aims::spread(rounds);
    format!("{median:>12.0} {:>19}", format!("{min:.0}-{max:.0}"))
}

fn main() -> anyhow::Result<()> {
    let flag = |name: &str| std::env::args().any(|arg| arg == name);
    let scaling = if flag("--ports-only") {
        None
    } else {
        let scaling = scaling::measure()?;
        scaling::report(
            &scaling,
            &testkit::workspace_root().join("target/bench/softswitch-scaling.svg"),
        )?;
        Some(scaling)
    };
    let mut aims = aims::compiled();
    aims.extend(aims::tables(scaling.as_ref()));
    if !flag("--scaling-only") {
        aims.extend(ports()?);
    }
    aims::report(&aims);
    if flag("--scaling-only") {
        println!("  the ports' aims: not measured in this run (--scaling-only)");
    }
    Ok(())
}

/// The port part: measures and prints the variants and their ratios; returns the ports' aims.
fn ports() -> anyhow::Result<Vec<Aim>> {
    let out = std::process::Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&check("id -u", out)?.stdout).trim() != "0" {
        anyhow::bail!("the softswitch benchmark needs root (network namespaces)");
    }
    let variants = bmv2_variants();
    let dir = std::env::temp_dir().join(format!("bench-softswitch-{}", std::process::id()));
    let json = match variants.first() {
        Some(_) => {
            let toolchain = p4toolchain::Toolchain::find()?;
            Some(toolchain.compile(&program(PROGRAM), &dir)?.json)
        }
        None => None,
    };
    let mut topology = Topology::new(2).context("building the namespaces")?;
    let frame = frame(&topology.hosts[0])?;
    let (mut bridge, mut interp, mut generated) = (vec![], vec![], vec![]);
    // softswitch with each kind of port: (best packets/s, offered at) per round.
    let port_ios = [
        ("(b) softswitch run, AF_PACKET ports (default)", "af-packet"),
        ("(b') softswitch run, AF_XDP ports", "afxdp"),
    ];
    let mut switch: Vec<(Vec<f64>, Vec<f64>)> = port_ios.iter().map(|_| (vec![], vec![])).collect();
    let mut bmv2: Vec<(Vec<f64>, Vec<f64>)> = variants.iter().map(|_| (vec![], vec![])).collect();
    for round in 1..=ROUNDS {
        eprintln!("round {round}: the sender alone into the switch's port");
        let (arrived, sent) = generator(&topology)?;
        eprintln!("  sent {sent:.0}/s, arrived {arrived:.0}/s");
        generated.push((arrived, sent));
        eprintln!("round {round}: bridge");
        bridge.push(with_bridge(&topology)?.0);
        for ((label, io), results) in port_ios.iter().zip(&mut switch) {
            eprintln!("round {round}: {label}");
            let bed = SwitchBed::start_on(topology, Some(&program(PROGRAM)), io)?;
            let (pps, at) = sweep(bed.topology())?;
            results.0.push(pps);
            results.1.push(at);
            topology = bed.into_topology()?;
        }
        for (variant, results) in variants.iter().zip(&mut bmv2) {
            eprintln!("round {round}: {}", variant.label);
            let json = json.as_deref().expect("compiled when there is a variant");
            let bed = SwitchBed::start_bmv2(
                topology,
                &variant.tool,
                variant.build,
                Some(json),
                &dir,
                &[],
            )?;
            let (pps, at) = sweep(bed.topology())?;
            results.0.push(pps);
            results.1.push(at);
            topology = bed.into_topology()?;
        }
        eprintln!("round {round}: interpreter alone");
        interp.push(interpreter(&frame)?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let generated_arrived: Vec<f64> = generated.iter().map(|r| r.0).collect();
    let generated_sent: Vec<f64> = generated.iter().map(|r| r.1).collect();
    println!(
        "IPv4 forwarding ({PROGRAM}), {FRAME}-byte RoCEv2 frames from the traffic tool's AF_XDP \
         sender, median of {ROUNDS} rounds of {SECONDS} s per offered load (each switch's best), \
         with the fastest and slowest round"
    );
    println!(
        "{:<48} {:>12} {:>19} {:>12}",
        "variant", "packets/s", "rounds", "offered at"
    );
    println!(
        "{:<48} {} {:>12}",
        "(a) Linux bridge, veth to veth",
        figure(&bridge),
        "flat out"
    );
    for ((label, _), (pps, at)) in port_ios.iter().zip(&switch) {
        println!("{label:<48} {} {:>12.0}", figure(pps), aims::spread(at).1);
    }
    println!(
        "{:<48} {} {:>12}",
        "(c) softswitch interpreter alone",
        figure(&interp),
        "-"
    );
    for (variant, (pps, at)) in variants.iter().zip(&bmv2) {
        println!(
            "{:<48} {} {:>12.0}",
            variant.label,
            figure(pps),
            aims::spread(at).1
        );
    }
    println!(
        "{:<48} {} {:>12.0}",
        "(g) the sender alone into the switch's port",
        figure(&generated_arrived),
        aims::spread(&generated_sent).1
    );
    // The BMv2 to compare with: the first the toolchain has, performance builds first.
    let bmv2_first = variants
        .first()
        .zip(bmv2.first())
        .map(|(variant, (pps, _))| {
            let name = variant
                .label
                .split_once(' ')
                .map_or(variant.label, |(_, rest)| rest);
            (name, pps)
        });
    println!("ratios, measured in this run (median, with the range the rounds allow):");
    let mut aims = Vec::new();
    for ((label, _), (pps, _)) in port_ios.iter().zip(&switch) {
        let name = label.split_once(' ').map_or(*label, |(letter, _)| letter);
        let line = |what: String, ratio: &Ratio| println!("  {what}: {}", ratio.show());
        line(
            format!("softswitch on ports {name} / interpreter alone (c)"),
            &Ratio::of_rounds(pps, &interp),
        );
        let what = format!("softswitch on veth ports {name} / Linux bridge (a)");
        line(what.clone(), &Ratio::of_rounds(pps, &bridge));
        aims.push(Aim {
            what,
            bound: Bound::AtLeast(1.0),
            ratio: Ok(Ratio::of_rounds(pps, &bridge)),
        });
        let what = match bmv2_first {
            Some((bmv2, _)) => format!("softswitch on veth ports {name} / {bmv2}"),
            None => format!("softswitch on veth ports {name} / BMv2 simple_switch_nolog"),
        };
        let ratio = match bmv2_first {
            Some((_, bmv2_pps)) => {
                let ratio = Ratio::of_rounds(pps, bmv2_pps);
                line(what.clone(), &ratio);
                Ok(ratio)
            }
            None => Err("no BMv2 in the toolchain".to_owned()),
        };
        aims.push(Aim {
            what,
            bound: Bound::AtLeast(30.0),
            ratio,
        });
    }
    println!(
        "  (b) AF_PACKET / (b') AF_XDP ports: {}",
        Ratio::of_rounds(&switch[0].0, &switch[1].0).show()
    );
    let fastest = switch
        .iter()
        .map(|r| aims::spread(&r.0).1)
        .fold(0.0, f64::max);
    let g = aims::spread(&generated_arrived).1;
    println!(
        "  the sender alone (g) / the fastest softswitch: {:.2} ({})",
        g / fastest,
        if g > 1.2 * fastest {
            "the sender was not what limited the switch"
        } else {
            "the sender may have limited the switch: its ceiling is close to what it forwarded"
        }
    );
    Ok(aims)
}
