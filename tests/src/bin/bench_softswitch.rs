//! `cargo xtask bench softswitch`, in one run, in alternating rounds, reported as medians and
//! ratios: packets/s of IPv4 forwarding (`tests/p4/ipv4_forward.p4`: LPM route, MAC rewrite, TTL,
//! checksum) from one veth to another through (a) a Linux bridge (the kernel's own forwarding,
//! no P4), (b) `softswitch run` on the same veths, and (c) the softswitch interpreter alone, in
//! this process, on the same frames with no I/O.
//!
//! Arrivals are counted by the kernel (the receiving veth's rx_packets), so no user-space
//! receiver limits the rate. The load comes from one AF_PACKET sender, a send(2) per frame, on
//! this 2-core machine: its own rate is printed, and (a) is close to it.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use lossless::netns::check;
use lossless_tests::{
    bed::TEST_MAC,
    switch::{program, Host, SwitchBed, Topology},
};
use softswitch::{
    source::SourceMap,
    switch::{Clock, Switch},
};

const ROUNDS: usize = 3;
const SECONDS: f64 = 2.0;
const PROGRAM: &str = "ipv4_forward.p4";

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

/// Frames/s host 1 → host 2 and the sender's own rate: one thread sends flat out for SECONDS;
/// the kernel counts what arrives at host 2 (read again until it stops changing).
fn measure(topology: &Topology) -> anyhow::Result<(f64, f64)> {
    let (from, to) = (&topology.hosts[0], &topology.hosts[1]);
    let tx = from.socket();
    let frame = frame();
    let before = rx_packets(to)?;
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < SECONDS {
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

/// A bridge of the switch-side interfaces, removed again when done.
fn with_bridge(topology: &Topology) -> anyhow::Result<(f64, f64)> {
    let ns = &topology.switch_ns;
    ns.ip(&["link", "add", "br-bench", "type", "bridge"])?;
    for h in &topology.hosts {
        ns.ip(&["link", "set", &h.switch_iface, "master", "br-bench"])?;
    }
    ns.ip(&["link", "set", "br-bench", "up"])?;
    let rates = measure(topology);
    ns.ip(&["link", "del", "br-bench"])?;
    rates
}

/// Frames/s of the interpreter alone on the same program and frame.
fn interpreter() -> anyhow::Result<f64> {
    let path = program(PROGRAM);
    let mut map = SourceMap::new();
    let file = map.add(path.display().to_string(), std::fs::read_to_string(&path)?);
    let compiled =
        softswitch::compile(&mut map, file).map_err(|d| anyhow::anyhow!(d.render(&map)))?;
    let mut switch = Switch::new(compiled, Clock::Virtual(0));
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
    let out = std::process::Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&check("id -u", out)?.stdout).trim() != "0" {
        anyhow::bail!("the softswitch benchmark needs root (network namespaces)");
    }
    let mut topology = Topology::new(2).context("building the namespaces")?;
    let (mut bridge, mut switch, mut interp, mut offered) = (vec![], vec![], vec![], vec![]);
    for round in 1..=ROUNDS {
        eprintln!("round {round}: bridge");
        let (pps, sender) = with_bridge(&topology)?;
        bridge.push(pps);
        offered.push(sender);
        eprintln!("round {round}: softswitch run");
        let bed = SwitchBed::start(topology, Some(&program(PROGRAM)))?;
        let (pps, sender) = measure(bed.topology())?;
        switch.push(pps);
        offered.push(sender);
        topology = bed.into_topology()?;
        eprintln!("round {round}: interpreter alone");
        interp.push(interpreter()?);
    }
    let (b, s, i) = (median(bridge), median(switch), median(interp));
    println!(
        "IPv4 forwarding ({PROGRAM}), 64-byte frames, median of {ROUNDS} rounds of {SECONDS} s"
    );
    println!("{:<38} {:>14}", "variant", "packets/s");
    println!("{:<38} {:>14.0}", "(a) Linux bridge, veth to veth", b);
    println!("{:<38} {:>14.0}", "(b) softswitch run, veth to veth", s);
    println!("{:<38} {:>14.0}", "(c) softswitch interpreter alone", i);
    println!("{:<38} {:>14.0}", "the sender's own rate", median(offered));
    println!("ratios: b/a = {:.3}   b/c = {:.3}", s / b, s / i);
    Ok(())
}
