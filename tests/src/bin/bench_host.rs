//! `cargo xtask bench host`: packets/s through a veth pair with (a) no program, (b) a minimal
//! XDP_PASS program, (c) the lossless ECN program, measured in one run, in alternating rounds,
//! reported as medians and ratios.

use std::{net::IpAddr, path::PathBuf, process::Command, time::Duration};

use anyhow::Context as _;
use lossless::{
    netns::{check, Namespace},
    traffic::{FixedRate, SendConfig, Sender},
    wire::ethernet::Address,
};
use lossless_tests::bed::{Attached, Link};

/// Frame size: the smallest RoCEv2 frame rounded up to Ethernet's minimum.
const FRAME: usize = 64;
const ROUNDS: usize = 3;
const SECONDS_PER_RUN: f64 = 2.0;

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    NoProgram,
    XdpPass,
    Ecn,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::NoProgram, Variant::XdpPass, Variant::Ecn];

    fn name(self) -> &'static str {
        match self {
            Variant::NoProgram => "(a) no program",
            Variant::XdpPass => "(b) XDP_PASS",
            Variant::Ecn => "(c) lossless ECN",
        }
    }
}

fn main() -> anyhow::Result<()> {
    let link = Link::new()?;
    let pass_object = compile_xdp_pass()?;
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); Variant::ALL.len()];
    for round in 0..ROUNDS {
        for (i, variant) in Variant::ALL.into_iter().enumerate() {
            let pps = measure(&link, variant, &pass_object)?;
            eprintln!(
                "round {}: {:<18} {:>12.0} packets/s",
                round + 1,
                variant.name(),
                pps
            );
            rates[i].push(pps);
        }
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    println!("\nhost benchmark: {FRAME}-byte RoCEv2 frames through a veth pair, median of {ROUNDS} rounds of {SECONDS_PER_RUN} s");
    for (variant, pps) in Variant::ALL.iter().zip(&medians) {
        println!("{:<18} {:>12.0} packets/s", variant.name(), pps);
    }
    println!("ratio c/b          {:>12.3}", medians[2] / medians[1]);
    println!("ratio c/a          {:>12.3}", medians[2] / medians[0]);
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs the sender flat out for a while and returns the packets/s the receiver counted.
fn measure(link: &Link, variant: Variant, pass_object: &PathBuf) -> anyhow::Result<f64> {
    let rx = &link.rx.ifname;
    let _attached = match variant {
        Variant::Ecn => Some(Attached::new(&link.rx_ns, rx, &["--mode", "native"])?),
        _ => None,
    };
    if variant == Variant::XdpPass {
        let object = pass_object.to_str().context("object path")?;
        link.rx_ns.ip(&[
            "link", "set", "dev", rx, "xdpdrv", "obj", object, "sec", "xdp",
        ])?;
    }
    let before = rx_packets(&link.rx_ns, rx)?;
    let mut config = SendConfig::new(link.tx.ifname.clone(), IpAddr::V4(link.rx.ipv4));
    config.dst_mac = Some(Address(link.rx.mac));
    config.size = FRAME;
    config.duration = Some(Duration::from_secs_f64(SECONDS_PER_RUN));
    let summary = link.tx_ns.run(|| {
        Sender::open(config)?.run(&mut [FixedRate {
            bps: 100_000_000_000,
        }])
    })??;
    let after = rx_packets(&link.rx_ns, rx)?;
    if variant == Variant::XdpPass {
        link.rx_ns
            .ip(&["link", "set", "dev", rx, "xdpdrv", "off"])?;
    }
    Ok((after - before) as f64 / summary.duration_s)
}

/// The interface's received-packets counter, from `ip -s -j link`.
fn rx_packets(ns: &Namespace, ifname: &str) -> anyhow::Result<u64> {
    let output = check(
        "ip -s -j link",
        Command::new("ip")
            .args(["-n", ns.name(), "-s", "-j", "link", "show", "dev", ifname])
            .output()?,
    )?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    json[0]["stats64"]["rx"]["packets"]
        .as_u64()
        .context("no rx packets in ip -s -j link")
}

/// Compiles tests/bench/xdp_pass.c with Debian's clang 22.
fn compile_xdp_pass() -> anyhow::Result<PathBuf> {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/xdp_pass.c");
    let object = std::env::temp_dir().join(format!("lossless-xdp-pass-{}.o", std::process::id()));
    let output = Command::new("clang-22")
        .args(["-O2", "-g", "-target", "bpf", "-c"])
        // Debian keeps <asm/types.h> under the multiarch include directory.
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::consts::ARCH
        ))
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .output()
        .context("running clang-22 (installed by cargo xtask setup)")?;
    check("clang-22 -target bpf", output)?;
    Ok(object)
}
