//! The P4 tutorials' two hosts around a switch, for the P4Runtime client: h1 10.0.1.1
//! (08:00:00:00:01:11) on port 1 and h2 10.0.2.2 (08:00:00:00:02:22) on port 2, each with a
//! static gateway, so the tutorials' runtime JSON routes between them unchanged. The switch —
//! softswitch, or BMv2's simple_switch_grpc — starts without a pipeline and listens on the
//! switch namespace's loopback; `lossless p4` runs in that namespace. Hosts have no IPv6 and static neighbours: every frame they send is one the
//! test sent.

use std::{
    net::{Ipv4Addr, UdpSocket},
    path::{Path, PathBuf},
    process::Output,
};

use anyhow::{bail, Context as _};
use sysutil::netns::{check, unique_name, Namespace};

use crate::{
    bed::{lossless_bin, TIMEOUT},
    switch::{Bmv2Build, Host, SwitchBed, Topology},
};

/// The P4Runtime address inside the switch namespace (each bed has its own loopback).
pub const SWITCH_ADDR: &str = crate::switch::P4RUNTIME_ADDR;

/// The hosts' addresses and MACs, on ports 1 and 2.
const HOSTS: [(Ipv4Addr, &str); 2] = [
    (Ipv4Addr::new(10, 0, 1, 1), "08:00:00:00:01:11"),
    (Ipv4Addr::new(10, 0, 2, 2), "08:00:00:00:02:22"),
];

/// The two tests of one check on a [`TutorialBed`]: `$softswitch` runs `$check` on softswitch
/// ([`TutorialBed::new`]), `$bmv2` on BMv2's simple_switch_grpc ([`TutorialBed::bmv2`]), the
/// reference. Each applies the skip rule for what it needs, naming itself; attributes (doc
/// comments) written before a name go to its test.
#[macro_export]
macro_rules! on_softswitch_and_bmv2 {
    ($check:ident: $(#[$soft:meta])* $softswitch:ident, $(#[$ref:meta])* $bmv2:ident $(,)?) => {
        $(#[$soft])*
        #[test]
        fn $softswitch() {
            if $crate::bed::privileged(stringify!($softswitch)) {
                $check(&$crate::tutorial_bed::TutorialBed::new().unwrap());
            }
        }

        $(#[$ref])*
        #[test]
        fn $bmv2() {
            if let Some(grpc) = $crate::bed::privileged_and(
                stringify!($bmv2),
                ::testkit::bmv2::simple_switch_grpc_or_skip,
            ) {
                $check(&$crate::tutorial_bed::TutorialBed::bmv2(grpc).unwrap());
            }
        }
    };
}

/// A switch between the tutorials' h1 and h2.
pub struct TutorialBed {
    /// The switch and its topology.
    pub bed: SwitchBed,
    /// A directory of this bed's own (generated files), removed on drop.
    pub dir: PathBuf,
    /// Whether the switch is BMv2's simple_switch_grpc (else softswitch).
    pub bmv2: bool,
    /// Whether the switch takes p4c's BMv2 JSON (`pipeline set --target bmv2`): BMv2, or
    /// softswitch standing in for it.
    pub json: bool,
}

impl TutorialBed {
    /// Builds the hosts and starts softswitch on ports 1 and 2, without a pipeline.
    pub fn new() -> anyhow::Result<Self> {
        TutorialBed::logging(None)
    }

    /// [`TutorialBed::new`] with softswitch's `SOFTSWITCH_LOG` set to `filter`.
    pub fn logging(filter: Option<&str>) -> anyhow::Result<Self> {
        let (topology, dir) = Self::hosts()?;
        Ok(TutorialBed {
            bed: SwitchBed::start_logging(topology, None, filter)?,
            dir,
            bmv2: false,
            json: false,
        })
    }

    /// Builds the hosts and starts BMv2's simple_switch_grpc (`tool`) on ports 1 and 2,
    /// without a pipeline; `pipeline set --program` compiles programs for it with p4c.
    pub fn bmv2(tool: &p4toolchain::Tool) -> anyhow::Result<Self> {
        let (topology, dir) = Self::hosts()?;
        Ok(TutorialBed {
            bed: SwitchBed::start_bmv2(topology, tool, Bmv2Build::Grpc, None, &dir, &[])?,
            dir,
            bmv2: true,
            json: true,
        })
    }

    /// Builds the hosts and starts softswitch in BMv2's place: through a symlink named
    /// `simple_switch_grpc`, with the tutorials' command line, without a pipeline, writing its
    /// pcap files in `dir/pcaps`;
    /// `pipeline set --program` compiles programs with p4c and pushes BMv2 JSON and P4Info, as
    /// to BMv2.
    pub fn softswitch_as_bmv2() -> anyhow::Result<Self> {
        TutorialBed::softswitch_as_bmv2_with(&[])
    }

    /// [`TutorialBed::softswitch_as_bmv2`] with more of BMv2's target options (after `--`).
    pub fn softswitch_as_bmv2_with(target_options: &[&str]) -> anyhow::Result<Self> {
        let (topology, dir) = Self::hosts()?;
        let link = dir.join("simple_switch_grpc");
        std::os::unix::fs::symlink(crate::switch::softswitch_bin(), &link)
            .with_context(|| format!("linking {}", link.display()))?;
        let pcaps = dir.join("pcaps");
        std::fs::create_dir_all(&pcaps)?;
        Ok(TutorialBed {
            bed: SwitchBed::start_as_simple_switch_grpc(topology, &link, &pcaps, target_options)?,
            dir,
            bmv2: false,
            json: true,
        })
    }

    /// The two hosts, addressed, and a directory of the bed's own.
    fn hosts() -> anyhow::Result<(Topology, PathBuf)> {
        let topology = Topology::new(2)?;
        for (host, (ip, mac)) in topology.hosts.iter().zip(HOSTS) {
            address(host, ip, mac)?;
        }
        let dir = std::env::temp_dir().join(unique_name("llp4bed"));
        std::fs::create_dir_all(&dir)?;
        Ok((topology, dir))
    }

    /// h1, on port 1.
    pub fn h1(&self) -> &Host {
        &self.bed.hosts()[0]
    }

    /// h2, on port 2.
    pub fn h2(&self) -> &Host {
        &self.bed.hosts()[1]
    }

    /// The switch's namespace.
    pub fn switch_ns(&self) -> &Namespace {
        &self.bed.topology().switch_ns
    }

    /// Runs `lossless p4 ARGS` in the switch namespace, whatever its outcome.
    pub fn p4(&self, args: &[&str]) -> Output {
        self.switch_ns()
            .command(lossless_bin())
            .arg("p4")
            .args(args)
            .output()
            .expect("running lossless")
    }

    /// Runs `lossless p4 ARGS`, failing with its stderr; returns its stdout.
    pub fn p4_ok(&self, args: &[&str]) -> String {
        let output = self.p4(args);
        assert!(
            output.status.success(),
            "lossless p4 {} failed: {}\nthe switch: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr),
            self.bed.lines.join("\n")
        );
        String::from_utf8(output.stdout).expect("UTF-8 output")
    }

    /// Runs `lossless p4 ARGS`, which must fail; returns its stderr.
    pub fn p4_refused(&self, args: &[&str]) -> String {
        let output = self.p4(args);
        assert!(
            !output.status.success(),
            "lossless p4 {} succeeded",
            args.join(" ")
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// `lossless p4 ARGS --json`, parsed.
    pub fn p4_json(&self, args: &[&str]) -> serde_json::Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.p4_ok(&args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// Pushes `program` (compiled for the bed's switch) and applies the runtime JSON
    /// `entries`.
    pub fn program(&self, program: &Path, entries: &Path) {
        let program = program.to_str().expect("UTF-8 path");
        let mut args = vec!["pipeline", "set", "--program", program];
        if self.json {
            args.extend(["--target", "bmv2"]);
        }
        self.p4_ok(&args);
        self.p4_ok(&["entries", "apply", entries.to_str().expect("UTF-8 path")]);
    }

    /// `ping -c COUNT` from h1 to h2; whether every echo was answered.
    pub fn ping(&self, count: u32) -> bool {
        let output = self
            .h1()
            .ns
            .command("ping")
            .args(["-c", &count.to_string(), "-i", "0.05", "-W", "2", "-q"])
            .arg(HOSTS[1].0.to_string())
            .output()
            .expect("running ping");
        output.status.success()
    }

    /// Asserts that h1 pings h2 ([`TutorialBed::ping`]); a failure names `what` was tried and
    /// shows the switch's log.
    pub fn assert_pings(&self, count: u32, what: &str) {
        assert!(
            self.ping(count),
            "ping h1 -> h2 {what} failed; the switch's log:\n{}",
            self.bed.lines.join("\n")
        );
    }

    /// Sends `count` UDP datagrams of `len` bytes from h1 to h2 and returns the payloads h2's
    /// kernel delivered (it checks the IPv4 and UDP checksums), waiting at most [`TIMEOUT`] for
    /// each.
    pub fn udp(&self, count: usize, len: usize) -> anyhow::Result<Vec<Vec<u8>>> {
        let h2_ip = HOSTS[1].0;
        let receiver = self.h2().ns.run(move || UdpSocket::bind((h2_ip, 9000)))??;
        receiver.set_read_timeout(Some(TIMEOUT))?;
        let sender = self
            .h1()
            .ns
            .run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)))??;
        let mut received = Vec::new();
        let mut buf = vec![0u8; 65536];
        for i in 0..count {
            let payload: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
            sender.send_to(&payload, (h2_ip, 9000))?;
            // One at a time: no queue anywhere overflows, and a loss shows at once.
            match receiver.recv(&mut buf) {
                Ok(n) => received.push(buf[..n].to_vec()),
                Err(e) => bail!("datagram {i} never reached h2: {e}"),
            }
        }
        Ok(received)
    }
}

impl Drop for TutorialBed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Gives `host` the address `ip/24` and MAC `mac`, and a default route through a gateway
/// `.254` whose MAC is static (`08:00:00:00:0X:00`, as in the tutorials).
fn address(host: &Host, ip: Ipv4Addr, mac: &str) -> anyhow::Result<()> {
    let [a, b, c, _] = ip.octets();
    let gateway = Ipv4Addr::new(a, b, c, 254).to_string();
    let gateway_mac = format!("08:00:00:00:{c:02x}:00");
    let iface = host.iface.as_str();
    let ns = &host.ns;
    ns.ip(&["link", "set", "dev", iface, "address", mac])?;
    ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", iface])?;
    ns.ip(&[
        "neigh",
        "replace",
        &gateway,
        "lladdr",
        &gateway_mac,
        "dev",
        iface,
        "nud",
        "permanent",
    ])?;
    ns.ip(&["route", "add", "default", "via", &gateway])
}

/// What the kernel counted as sent on `host`'s interface: (packets, bytes).
pub fn tx_counts(host: &Host) -> anyhow::Result<(u64, u64)> {
    let output = host
        .ns
        .command("ip")
        .args(["-s", "-j", "link", "show", "dev", &host.iface])
        .output()?;
    let json: serde_json::Value = serde_json::from_slice(&check("ip -s link", output)?.stdout)?;
    let tx = &json[0]["stats64"]["tx"];
    let field = |key: &str| {
        tx[key]
            .as_u64()
            .with_context(|| format!("no tx {key} in {json}"))
    };
    Ok((field("packets")?, field("bytes")?))
}
