//! `cargo xtask bench softswitch`, in one run, in alternating rounds, reported as medians and
//! ratios: packets/s of IPv4 forwarding (`tests/p4/ipv4_forward.p4`: LPM route, MAC rewrite, TTL,
//! checksum) from one veth to another through (a) a Linux bridge (the kernel's own forwarding,
//! no P4), (b) `softswitch run` on the same veths, (c) the softswitch interpreter alone, in
//! this process, on the same frames with no I/O, and BMv2 on the same veths running p4c's JSON
//! of the same program: (d) `simple_switch_nolog` and (f) `simple_switch_grpc`, BMv2's
//! performance builds (no logging macros, no event logger), and (e) `simple_switch`, its
//! default build, when the toolchain (`LOSSLESS_P4REF`, else PATH) has them.
//!
//! Arrivals are counted by the kernel (the receiving veth's rx_packets), so no user-space
//! receiver limits the rate. The load comes from one AF_PACKET sender, a send(2) per frame, on
//! this 2-core machine: its own rate is printed, and (a) is close to it. A switch flooded
//! beyond what it forwards may forward less than at its best (BMv2 does), so each switch is
//! measured at offered loads from 10,000 packets/s up to flat out, and its best is kept.

#[path = "bench_softswitch/scaling.rs"]
mod scaling;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use lossless::netns::check;
use lossless_tests::{
    bed::TEST_MAC,
    switch::{program, Bmv2Build, Host, SwitchBed, Topology},
};
use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::source::SourceMap;

const ROUNDS: usize = 3;
const SECONDS: f64 = 2.0;
const PROGRAM: &str = "ipv4_forward.p4";
/// Offered loads of a sweep, in packets/s, finer where BMv2 peaks; `None` is flat out.
const LOADS: [Option<f64>; 9] = [
    Some(10_000.0),
    Some(20_000.0),
    Some(30_000.0),
    Some(40_000.0),
    Some(50_000.0),
    Some(60_000.0),
    Some(80_000.0),
    Some(160_000.0),
    None,
];

/// A 64-byte UDP frame to 10.0.2.9 (routed to port 2).
fn frame() -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2(TEST_MAC, [2, 0, 0, 0, 0, 0xfe])
        .ipv4([10, 0, 1, 9], [10, 0, 2, 9], 64)
        .udp(4000, 5000)
        .write(&mut out, &[0u8; 18])
        .unwrap();
    out
}

/// The kernel's rx_packets of `host`'s interface.
fn rx_packets(host: &Host) -> anyhow::Result<u64> {
    let out = std::process::Command::new("ip")
        .args([
            "-n",
            host.ns.name(),
            "-s",
            "-j",
            "link",
            "show",
            "dev",
            &host.iface,
        ])
        .output()?;
    let json: serde_json::Value = serde_json::from_slice(&check("ip -s -j link", out)?.stdout)?;
    json[0]["stats64"]["rx"]["packets"]
        .as_u64()
        .context("no rx packet count in ip -s -j link")
}

/// Frames/s host 1 → host 2 and the sender's own rate: one thread sends for SECONDS, at
/// `load` packets/s (paced against the clock) or flat out; the kernel counts what arrives at
/// host 2 (read again until it stops changing).
fn measure(topology: &Topology, load: Option<f64>) -> anyhow::Result<(f64, f64)> {
    let (from, to) = (&topology.hosts[0], &topology.hosts[1]);
    let tx = from.socket();
    let frame = frame();
    let before = rx_packets(to)?;
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed >= SECONDS {
            break;
        }
        if load.is_some_and(|rate| sent as f64 >= elapsed * rate) {
            std::hint::spin_loop();
            continue;
        }
        if tx.send(&frame).is_ok() {
            sent += 1;
        }
    }
    let mut after = rx_packets(to)?;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = rx_packets(to)?;
        if now == after {
            break;
        }
        after = now;
    }
    let arrived = (after - before) as f64;
    eprintln!("  sent {sent}, arrived {arrived}");
    Ok((arrived / SECONDS, sent as f64 / SECONDS))
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

/// Frames/s of the interpreter alone on the same program and frame.
fn interpreter() -> anyhow::Result<f64> {
    let path = program(PROGRAM);
    let mut map = SourceMap::new();
    let file = map.add(path.display().to_string(), std::fs::read_to_string(&path)?);
    let compiled = softswitch_frontend::compile(&mut map, file)
        .map_err(|d| anyhow::anyhow!(d.render(&map)))?;
    let mut switch = Switch::new(compiled.program, Clock::Virtual(0));
    let frame = frame();
    let start = Instant::now();
    let mut forwarded = 0usize;
    while start.elapsed().as_secs_f64() < SECONDS {
        for _ in 0..1000 {
            switch.receive(1, frame.clone());
        }
        forwarded += switch.drain_outputs().count();
    }
    Ok(forwarded as f64 / start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let scaling = scaling::measure()?;
    scaling::report(
        &scaling,
        &testkit::workspace_root().join("target/bench/softswitch-scaling.svg"),
    )?;
    if std::env::args().any(|arg| arg == "--scaling-only") {
        return Ok(());
    }
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
    let (mut bridge, mut interp, mut offered) = (vec![], vec![], vec![]);
    let mut switch = (vec![], vec![]);
    let mut bmv2: Vec<(Vec<f64>, Vec<f64>)> = variants.iter().map(|_| (vec![], vec![])).collect();
    for round in 1..=ROUNDS {
        eprintln!("round {round}: bridge");
        let (pps, sender) = with_bridge(&topology)?;
        bridge.push(pps);
        offered.push(sender);
        eprintln!("round {round}: softswitch run");
        let bed = SwitchBed::start(topology, Some(&program(PROGRAM)))?;
        let (pps, at) = sweep(bed.topology())?;
        switch.0.push(pps);
        switch.1.push(at);
        topology = bed.into_topology()?;
        for (variant, results) in variants.iter().zip(&mut bmv2) {
            eprintln!("round {round}: {}", variant.label);
            let json = json.as_deref().expect("compiled when there is a variant");
            let bed = SwitchBed::start_bmv2(
                topology,
                &variant.tool,
                variant.build,
                Some(json),
                &dir,
                false,
            )?;
            let (pps, at) = sweep(bed.topology())?;
            results.0.push(pps);
            results.1.push(at);
            topology = bed.into_topology()?;
        }
        eprintln!("round {round}: interpreter alone");
        interp.push(interpreter()?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (b, s, i) = (median(bridge), median(switch.0), median(interp));
    println!(
        "IPv4 forwarding ({PROGRAM}), 64-byte frames, median of {ROUNDS} rounds of {SECONDS} s \
         per offered load"
    );
    println!("{:<48} {:>12} {:>12}", "variant", "packets/s", "offered at");
    println!(
        "{:<48} {:>12.0} {:>12}",
        "(a) Linux bridge, veth to veth", b, "flat out"
    );
    println!(
        "{:<48} {:>12.0} {:>12.0}",
        "(b) softswitch run, veth to veth",
        s,
        median(switch.1)
    );
    println!(
        "{:<48} {:>12.0} {:>12}",
        "(c) softswitch interpreter alone", i, "-"
    );
    let mut fastest: Option<(&str, f64)> = None;
    for (variant, (pps, at)) in variants.iter().zip(bmv2) {
        let pps = median(pps);
        println!("{:<48} {:>12.0} {:>12.0}", variant.label, pps, median(at));
        if fastest.is_none_or(|(_, best)| pps > best) {
            fastest = Some((variant.label, pps));
        }
    }
    println!(
        "{:<48} {:>12.0}",
        "the sender's own rate (flat out)",
        median(offered)
    );
    println!("ratios: b/a = {:.3}   b/c = {:.3}", s / b, s / i);
    if let Some((label, pps)) = fastest {
        println!("softswitch / the fastest BMv2, {label}: {:.2}", s / pps);
    }
    Ok(())
}
