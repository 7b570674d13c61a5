//! softswitch on real ports: host namespaces each joined by a veth to a switch namespace where
//! `softswitch run` forwards between the switch-side ends.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use lossless::netns::{check, ip, unique_name, Namespace};

use crate::{bed::TIMEOUT, capture::RawSocket};

/// The `softswitch` binary under test: `$SOFTSWITCH_BIN`, else the one beside `lossless`.
pub fn softswitch_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("SOFTSWITCH_BIN") {
        return PathBuf::from(path);
    }
    crate::bed::lossless_bin().with_file_name("softswitch")
}

/// The test programs of `tests/p4/`.
pub fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("p4").join(name)
}

/// A file of `dataplane-p4/`: the P4 program users run and its example topologies.
pub fn dataplane_p4(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dataplane-p4")
        .join(path)
}

/// A host attached to switch port `port`.
pub struct Host {
    /// Its namespace.
    pub ns: Namespace,
    /// Its interface.
    pub iface: String,
    /// The switch-side end of its veth (in the switch namespace).
    pub switch_iface: String,
    /// The switch port.
    pub port: u16,
}

impl Host {
    /// A raw socket on the host's interface.
    pub fn socket(&self) -> RawSocket {
        let iface = self.iface.clone();
        self.ns
            .run(move || RawSocket::open(&iface))
            .unwrap()
            .unwrap()
    }
}

/// The offloads a softswitch port and its peers need off: checksums the sender leaves to "the
/// NIC" would never be filled, and GRO/GSO/TSO would hand the switch frames larger than the MTU.
pub const OFFLOADS_OFF: &[&str] = &[
    "rx", "off", "tx", "off", "gro", "off", "gso", "off", "tso", "off",
];

/// A namespace whose interfaces come up without IPv6, so hosts send no router solicitations or
/// MLD reports of their own: every frame is one a test sent.
fn quiet_namespace(prefix: &str) -> anyhow::Result<Namespace> {
    let ns = Namespace::create(prefix)?;
    for key in ["all", "default"] {
        let out = ns
            .command("sysctl")
            .args(["-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=1")])
            .output()?;
        check("sysctl disable_ipv6", out)?;
    }
    Ok(ns)
}

/// A switch namespace and hosts joined to it, each by a veth, offloads off on both ends, IPv6
/// off.
pub struct Topology {
    /// The switch's namespace.
    pub switch_ns: Namespace,
    /// Hosts on ports 1, 2, ...
    pub hosts: Vec<Host>,
}

impl Topology {
    /// `hosts` hosts, on ports 1..=hosts.
    pub fn new(hosts: u16) -> anyhow::Result<Topology> {
        let switch_ns = quiet_namespace("lsw")?;
        let mut list = Vec::new();
        for port in 1..=hosts {
            let ns = quiet_namespace("lh")?;
            let iface = unique_name("hv");
            let switch_iface = unique_name("sv");
            ip(&[
                "link",
                "add",
                &iface,
                "netns",
                ns.name(),
                "type",
                "veth",
                "peer",
                "name",
                &switch_iface,
                "netns",
                switch_ns.name(),
            ])?;
            for (n, i) in [(&ns, &iface), (&switch_ns, &switch_iface)] {
                n.ip(&["link", "set", i, "up"])?;
                let out = n
                    .command("ethtool")
                    .arg("-K")
                    .arg(i)
                    .args(OFFLOADS_OFF)
                    .output()?;
                check(&format!("ethtool -K {i}"), out)?;
            }
            list.push(Host {
                ns,
                iface,
                switch_iface,
                port,
            });
        }
        Ok(Topology {
            switch_ns,
            hosts: list,
        })
    }

    /// Sets the MTU of both ends of host `index`'s veth.
    pub fn set_mtu(&self, index: usize, mtu: u32) -> anyhow::Result<()> {
        let host = &self.hosts[index];
        let mtu = mtu.to_string();
        host.ns.ip(&["link", "set", &host.iface, "mtu", &mtu])?;
        self.switch_ns
            .ip(&["link", "set", &host.switch_iface, "mtu", &mtu])?;
        Ok(())
    }
}

/// A topology and `softswitch run` on its switch-side ports.
pub struct SwitchBed {
    topology: Option<Topology>,
    child: Option<Child>,
    log: mpsc::Receiver<String>,
    /// Every line the switch wrote to stderr so far.
    pub lines: Vec<String>,
}

impl SwitchBed {
    /// `hosts` hosts on ports 1..=hosts, and `softswitch run PROGRAM` with those ports, started
    /// and ready (its P4Runtime server is listening).
    pub fn new(program: &Path, hosts: u16) -> anyhow::Result<SwitchBed> {
        SwitchBed::start(Topology::new(hosts)?, Some(program))
    }

    /// `softswitch run [PROGRAM]` on `topology`'s ports, started and ready; without a program
    /// the switch forwards nothing until a controller sets a pipeline.
    pub fn start(topology: Topology, program: Option<&Path>) -> anyhow::Result<SwitchBed> {
        SwitchBed::start_logging(topology, program, None)
    }

    /// [`SwitchBed::start`] with `SOFTSWITCH_LOG` set to `filter` (else the switch's default).
    pub fn start_logging(
        topology: Topology,
        program: Option<&Path>,
        filter: Option<&str>,
    ) -> anyhow::Result<SwitchBed> {
        let mut command = topology.switch_ns.command(softswitch_bin());
        command.arg("run").args(program);
        if let Some(filter) = filter {
            command.env("SOFTSWITCH_LOG", filter);
        }
        for h in &topology.hosts {
            command
                .arg("-i")
                .arg(format!("{}@{}", h.port, h.switch_iface));
        }
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .context("starting softswitch run")?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut bed = SwitchBed {
            topology: Some(topology),
            child: Some(child),
            log,
            lines: Vec::new(),
        };
        bed.wait_for_log("P4Runtime on")?;
        Ok(bed)
    }

    /// Waits for a line of the switch's stderr containing `needle`.
    pub fn wait_for_log(&mut self, needle: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + TIMEOUT;
        if self.lines.iter().any(|l| l.contains(needle)) {
            return Ok(());
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.lines.push(line);
                    if found {
                        return Ok(());
                    }
                }
                Err(_) => break,
            }
        }
        bail!(
            "softswitch never logged '{needle}'; it logged:\n{}",
            self.lines.join("\n")
        )
    }

    /// Whether the switch process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The namespaces and links.
    pub fn topology(&self) -> &Topology {
        self.topology.as_ref().expect("the bed has its topology")
    }

    /// The hosts, on ports 1, 2, ...
    pub fn hosts(&self) -> &[Host] {
        &self.topology().hosts
    }

    /// Stops the switch (SIGTERM) and gives the topology back.
    pub fn into_topology(mut self) -> anyhow::Result<Topology> {
        let status = self.stop()?;
        if !status.success() {
            bail!("softswitch exited with {status}");
        }
        Ok(self.topology.take().expect("the bed has its topology"))
    }

    /// Sends SIGTERM and waits for the switch to exit.
    pub fn stop(&mut self) -> anyhow::Result<ExitStatus> {
        let mut child = self
            .child
            .take()
            .context("the switch was stopped already")?;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                while let Ok(line) = self.log.recv_timeout(Duration::from_millis(100)) {
                    self.lines.push(line);
                }
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("softswitch did not stop within {TIMEOUT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for SwitchBed {
    /// Kills the switch if it still runs; a failing test gets the switch's log.
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            // SIGTERM, so the switch prints its frame counts.
            let _ = self.stop();
            eprintln!("softswitch's log:\n{}", self.lines.join("\n"));
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
