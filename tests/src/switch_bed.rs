//! A P4 switch on veths: two hosts in their own namespaces, each wired to a port of softswitch
//! running in a third, with its P4Runtime server on the switch namespace's loopback. The hosts
//! are those of the P4 tutorials: h1 10.0.1.1 (08:00:00:00:01:11) on port 1, h2 10.0.2.2
//! (08:00:00:00:02:22) on port 2, each with a static gateway, so the tutorials' runtime JSON
//! routes between them unchanged. IPv6 is off and neighbours are static, so every frame a host
//! sends is one the test sent.

use std::{
    net::{Ipv4Addr, UdpSocket},
    path::{Path, PathBuf},
    process::{Child, Output, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use lossless::netns::{check, veth_pair, Endpoint, Namespace};

use crate::bed::{lossless_bin, TIMEOUT};

/// The P4Runtime address inside the switch namespace (each bed has its own loopback).
pub const SWITCH_ADDR: &str = "127.0.0.1:9559";

/// One host of the bed.
pub struct Host {
    /// Its namespace.
    pub ns: Namespace,
    /// Its interface (wired to a switch port).
    pub iface: Endpoint,
    /// Its address.
    pub ip: Ipv4Addr,
}

/// Two hosts, one softswitch between them.
pub struct SwitchBed {
    /// On switch port 1.
    pub h1: Host,
    /// On switch port 2.
    pub h2: Host,
    /// The switch's namespace.
    pub sw: Namespace,
    /// The switch's interfaces: port 1, port 2.
    pub ports: [Endpoint; 2],
    /// A directory of this bed's own (logs, generated files), removed on drop.
    pub dir: PathBuf,
    switch: Option<Child>,
}

/// The files of the tests' P4 programs (`tests/p4/`).
pub fn p4_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("p4").join(name)
}

/// The softswitch binary: beside the `lossless` binary under test.
pub fn softswitch_bin() -> PathBuf {
    lossless_bin().with_file_name("softswitch")
}

impl SwitchBed {
    /// Builds the namespaces and veths and starts softswitch on ports 1 and 2, without a
    /// pipeline: the control plane pushes one.
    pub fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(lossless::netns::unique_name("llp4bed"));
        std::fs::create_dir_all(&dir)?;
        let sw = quiet_namespace("lsw")?;
        let (h1, port1) = host(&sw, "lh1", Ipv4Addr::new(10, 0, 1, 1), "08:00:00:00:01:11")?;
        let (h2, port2) = host(&sw, "lh2", Ipv4Addr::new(10, 0, 2, 2), "08:00:00:00:02:22")?;
        let mut bed = SwitchBed {
            h1,
            h2,
            sw,
            ports: [port1, port2],
            dir,
            switch: None,
        };
        bed.start_switch()?;
        Ok(bed)
    }

    fn start_switch(&mut self) -> anyhow::Result<()> {
        let log = std::fs::File::create(self.dir.join("softswitch.log"))?;
        let child = self
            .sw
            .command(softswitch_bin())
            .arg("run")
            .args(["-i", &format!("1@{}", self.ports[0].ifname)])
            .args(["-i", &format!("2@{}", self.ports[1].ifname)])
            .args(["--grpc-server-addr", SWITCH_ADDR, "--device-id", "0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting softswitch")?;
        self.switch = Some(child);
        // Ready when its gRPC port accepts a connection.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.switch.as_mut().expect("started").try_wait()? {
                bail!("softswitch exited ({status}): {}", self.switch_log());
            }
            let up = self
                .sw
                .run(|| std::net::TcpStream::connect(SWITCH_ADDR).is_ok())?;
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "softswitch's P4Runtime server never came up: {}",
                    self.switch_log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What softswitch wrote on stderr so far.
    pub fn switch_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("softswitch.log")).unwrap_or_default()
    }

    /// softswitch's process id, if it is still running.
    pub fn switch_pid(&mut self) -> Option<u32> {
        let child = self.switch.as_mut()?;
        match child.try_wait() {
            Ok(None) => Some(child.id()),
            _ => None,
        }
    }

    /// Runs `lossless p4 ARGS` in the switch namespace, whatever its outcome.
    pub fn p4(&self, args: &[&str]) -> Output {
        self.sw
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
            "lossless p4 {} failed: {}\nsoftswitch: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr),
            self.switch_log()
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

    /// Pushes `program` and applies the runtime JSON `entries`.
    pub fn program(&self, program: &Path, entries: &Path) {
        let program = program.to_str().expect("UTF-8 path");
        self.p4_ok(&["pipeline", "set", "--program", program]);
        self.p4_ok(&["entries", "apply", entries.to_str().expect("UTF-8 path")]);
    }

    /// `ping -c COUNT` from h1 to h2; whether every echo was answered.
    pub fn ping(&self, count: u32) -> bool {
        let output = self
            .h1
            .ns
            .command("ping")
            .args(["-c", &count.to_string(), "-i", "0.05", "-W", "2", "-q"])
            .arg(self.h2.ip.to_string())
            .output()
            .expect("running ping");
        output.status.success()
    }

    /// Sends `count` UDP datagrams of `len` bytes from h1 to h2 and returns the payloads h2's
    /// kernel delivered (it checks the IPv4 and UDP checksums), waiting at most [`TIMEOUT`].
    pub fn udp(&self, count: usize, len: usize) -> anyhow::Result<Vec<Vec<u8>>> {
        let h2_ip = self.h2.ip;
        let receiver = self.h2.ns.run(move || UdpSocket::bind((h2_ip, 9000)))??;
        receiver.set_read_timeout(Some(TIMEOUT))?;
        let sender = self
            .h1
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

impl Drop for SwitchBed {
    fn drop(&mut self) {
        if let Some(mut child) = self.switch.take() {
            // SAFETY: signals our own child by its pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A namespace whose interfaces start without IPv6 (no router solicitations, no MLD).
fn quiet_namespace(prefix: &str) -> anyhow::Result<Namespace> {
    let ns = Namespace::create(prefix)?;
    for key in ["all", "default"] {
        let output = ns
            .command("sysctl")
            .args(["-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=1")])
            .output()?;
        check("sysctl disable_ipv6", output)?;
    }
    Ok(ns)
}

/// A host namespace wired to `sw`: address `ip/24`, MAC `mac`, a default route through a
/// gateway `.254` whose MAC is static (`08:00:00:00:0X:00`, as in the tutorials), offloads the
/// switch would otherwise see half-done turned off. Returns the host and the switch's end.
fn host(sw: &Namespace, prefix: &str, ip: Ipv4Addr, mac: &str) -> anyhow::Result<(Host, Endpoint)> {
    let ns = quiet_namespace(prefix)?;
    let [a, b, c, _] = ip.octets();
    let gateway = Ipv4Addr::new(a, b, c, 254);
    // veth_pair addresses both ends; the switch's end loses its address below.
    let (mut iface, port) = veth_pair(&ns, ip, sw, gateway)?;
    sw.ip(&["addr", "flush", "dev", &port.ifname])?;
    ns.ip(&["link", "set", "dev", &iface.ifname, "address", mac])?;
    iface.mac = parse_mac(mac);
    let gateway_mac = format!("08:00:00:00:{c:02x}:00");
    ns.ip(&[
        "neigh",
        "replace",
        &gateway.to_string(),
        "lladdr",
        &gateway_mac,
        "dev",
        &iface.ifname,
        "nud",
        "permanent",
    ])?;
    ns.ip(&["route", "add", "default", "via", &gateway.to_string()])?;
    for (namespace, name) in [(&ns, &iface.ifname), (sw, &port.ifname)] {
        let output = namespace
            .command("ethtool")
            .args([
                "-K", name, "tx", "off", "gro", "off", "gso", "off", "tso", "off",
            ])
            .output()?;
        check(&format!("ethtool -K {name}"), output)?;
    }
    Ok((Host { ns, iface, ip }, port))
}

fn parse_mac(text: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (byte, part) in mac.iter_mut().zip(text.split(':')) {
        *byte = u8::from_str_radix(part, 16).expect("a MAC");
    }
    mac
}

/// What the kernel counted as sent on `iface` of `ns`: (packets, bytes).
pub fn tx_counts(ns: &Namespace, iface: &str) -> anyhow::Result<(u64, u64)> {
    let output = ns
        .command("ip")
        .args(["-s", "-j", "link", "show", "dev", iface])
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
