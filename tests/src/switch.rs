//! softswitch on real ports: host namespaces each joined by a veth to a switch namespace where
//! `softswitch run` — or BMv2's `simple_switch_grpc` — forwards between the switch-side ends.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use sysutil::netns::{add_veth, check, unique_name, Namespace};

use crate::{
    bed::{output_with_input, TIMEOUT},
    capture::RawSocket,
};

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
    ns.disable_ipv6()?;
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
            add_veth(&ns, &iface, &switch_ns, &switch_iface)?;
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

    /// The switch's ports as BMv2 and softswitch take them: `-i PORT@IFACE` for every host's
    /// switch-side interface.
    fn port_args(&self) -> Vec<String> {
        self.hosts
            .iter()
            .flat_map(|h| ["-i".to_owned(), format!("{}@{}", h.port, h.switch_iface)])
            .collect()
    }

    /// `program` in the switch namespace with the start of BMv2's command line, which
    /// softswitch under a BMv2 name takes too: `--device-id 0` and the ports.
    fn bmv2_command(&self, program: &Path) -> Command {
        let mut command = self.switch_ns.command(program);
        command.args(["--device-id", "0"]).args(self.port_args());
        command
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

/// The P4Runtime address of a switch in its namespace (each bed has its own loopback).
pub const P4RUNTIME_ADDR: &str = "127.0.0.1:9559";
/// BMv2's Thrift server (simple_switch_CLI's) in the switch namespace: BMv2's default port.
pub const THRIFT_ADDR: &str = "127.0.0.1:9090";

/// When a switch process is ready.
enum Ready {
    /// It logged a line containing this.
    Logged(&'static str),
    /// Its servers, in the switch namespace, accept connections at these addresses.
    Listening(&'static [&'static str]),
}

/// Which BMv2 build a bed runs, and so how it is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bmv2Build {
    /// `simple_switch` or `simple_switch_nolog`: a JSON given at start, the Thrift CLI.
    Thrift,
    /// `simple_switch_grpc`: the P4Runtime server too.
    Grpc,
}

/// A topology and a switch (`softswitch run`, or BMv2's `simple_switch_grpc`) on its
/// switch-side ports.
pub struct SwitchBed {
    topology: Option<Topology>,
    child: Option<Child>,
    log: mpsc::Receiver<String>,
    /// Every line the switch wrote to stdout or stderr so far.
    pub lines: Vec<String>,
    /// Whether the switch handles SIGTERM and exits 0 (softswitch), or dies of it (BMv2).
    exits_on_sigterm: bool,
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
        SwitchBed::start_with(topology, program, filter, None, &[])
    }

    /// [`SwitchBed::start`] with `softswitch run` options `options` too.
    pub fn start_with_options(
        topology: Topology,
        program: Option<&Path>,
        options: &[&str],
    ) -> anyhow::Result<SwitchBed> {
        SwitchBed::start_with(topology, program, None, None, options)
    }

    /// [`SwitchBed::start`] with ports of `--port-io` `io` (`afxdp` or `af-packet`; else the
    /// switch's default).
    pub fn start_on(
        topology: Topology,
        program: Option<&Path>,
        io: &str,
    ) -> anyhow::Result<SwitchBed> {
        SwitchBed::start_with(topology, program, None, Some(io), &[])
    }

    fn start_with(
        topology: Topology,
        program: Option<&Path>,
        filter: Option<&str>,
        io: Option<&str>,
        options: &[&str],
    ) -> anyhow::Result<SwitchBed> {
        let mut command = topology.switch_ns.command(softswitch_bin());
        command.arg("run").args(program).args(options);
        if let Some(io) = io {
            command.args(["--port-io", io]);
        }
        if let Some(filter) = filter {
            command.env("SOFTSWITCH_LOG", filter);
        }
        command.args(topology.port_args());
        SwitchBed::spawn(topology, command, Ready::Logged("P4Runtime on"), true)
    }

    /// BMv2 (`tool`, of build `build`) on `topology`'s ports with 8 priority queues per port,
    /// its notification socket in `dir` (BMv2's default path is the same for every switch of
    /// the machine, namespaces or not), started and ready (its servers listen): running
    /// p4c's JSON `json`, or without a pipeline (simple_switch_grpc: a controller sets one on
    /// [`P4RUNTIME_ADDR`]); with BMv2's options `options` too (`--log-console`: its trace on
    /// standard output).
    pub fn start_bmv2(
        topology: Topology,
        tool: &p4toolchain::Tool,
        build: Bmv2Build,
        json: Option<&Path>,
        dir: &Path,
        options: &[&str],
    ) -> anyhow::Result<SwitchBed> {
        let mut command = topology.bmv2_command(&tool.program);
        tool.set_env(&mut command);
        command.args(options);
        command
            .arg("--notifications-addr")
            .arg(format!("ipc://{}", dir.join("notifications.ipc").display()));
        match json {
            Some(json) => command.arg(json),
            None => command.arg("--no-p4"),
        };
        command.arg("--");
        let ready: &'static [&'static str] = match build {
            Bmv2Build::Grpc => {
                command.args(["--grpc-server-addr", P4RUNTIME_ADDR]);
                &[THRIFT_ADDR, P4RUNTIME_ADDR]
            }
            Bmv2Build::Thrift => &[THRIFT_ADDR],
        };
        command.args(["--priority-queues", "8"]);
        SwitchBed::spawn(topology, command, Ready::Listening(ready), false)
    }

    /// softswitch launched as the P4 tutorials launch BMv2: `simple_switch_grpc` is `link`, a
    /// symlink to softswitch with that name, given the tutorials' command line
    /// (`--device-id 0 -i 1@... --log-console --thrift-port 9090 --no-p4 --
    /// --grpc-server-addr ...`) on `topology`'s ports, with `--pcap pcaps` as the tutorials'
    /// `pcap_dump` adds, and BMv2's target options `target_options`; started and ready.
    pub fn start_as_simple_switch_grpc(
        topology: Topology,
        link: &Path,
        pcaps: &Path,
        target_options: &[&str],
    ) -> anyhow::Result<SwitchBed> {
        let mut command = topology.bmv2_command(link);
        command.arg("--pcap").arg(pcaps);
        command.args(["--log-console", "--thrift-port", "9090", "--no-p4", "--"]);
        command.args(["--grpc-server-addr", P4RUNTIME_ADDR]);
        command.args(target_options);
        SwitchBed::spawn(topology, command, Ready::Logged("P4Runtime on"), true)
    }

    /// softswitch launched as BMv2's `simple_switch`: `link` is a symlink to softswitch with
    /// that name, given BMv2's command line (`--device-id 0 -i 1@... --thrift-port 9090
    /// PROGRAM`, with BMv2's options `options`) on `topology`'s ports; started and ready (its
    /// Thrift server listens on [`THRIFT_ADDR`] in the switch namespace).
    pub fn start_as_simple_switch(
        topology: Topology,
        link: &Path,
        program: &Path,
        options: &[&str],
    ) -> anyhow::Result<SwitchBed> {
        let mut command = topology.bmv2_command(link);
        command.args(options);
        command.args(["--thrift-port", "9090"]).arg(program);
        SwitchBed::spawn(topology, command, Ready::Listening(&[THRIFT_ADDR]), true)
    }

    /// Runs BMv2's `simple_switch_CLI` (`cli`) in the switch namespace against the switch's
    /// Thrift server ([`THRIFT_ADDR`]), with `args` and the commands `commands` on its
    /// standard input, as the P4 tutorials feed it a commands file; its standard output.
    pub fn simple_switch_cli(
        &self,
        cli: &p4toolchain::Tool,
        args: &[&str],
        commands: &str,
    ) -> anyhow::Result<String> {
        let mut command = self.topology().switch_ns.command(&cli.program);
        cli.set_env(&mut command);
        let port = THRIFT_ADDR
            .rsplit(':')
            .next()
            .expect("an address with a port");
        command.args(["--thrift-port", port]).args(args);
        let out = output_with_input(&mut command, commands.as_bytes())
            .context("running simple_switch_CLI")?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "simple_switch_CLI exited with {}: {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(stdout)
    }

    /// Runs `command` (the switch) with its output read line by line, and waits until it is
    /// ready; `exits_on_sigterm` says whether it exits 0 on SIGTERM.
    fn spawn(
        topology: Topology,
        mut command: Command,
        ready: Ready,
        exits_on_sigterm: bool,
    ) -> anyhow::Result<SwitchBed> {
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {:?}", command.get_args().nth(2)))?;
        let (tx, log) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        forward_lines(stdout, tx.clone());
        forward_lines(stderr, tx);
        let mut bed = SwitchBed {
            topology: Some(topology),
            child: Some(child),
            log,
            lines: Vec::new(),
            exits_on_sigterm,
        };
        match ready {
            Ready::Logged(needle) => bed.wait_for_log(needle)?,
            Ready::Listening(addrs) => {
                for addr in addrs {
                    bed.wait_for_listener(addr)?;
                }
            }
        }
        Ok(bed)
    }

    /// Waits until a server in the switch namespace accepts connections at `addr`.
    fn wait_for_listener(&mut self, addr: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + TIMEOUT;
        let addr: std::net::SocketAddr = addr.parse().expect("an address");
        loop {
            let ns = &self.topology().switch_ns;
            let connected = ns.run(move || {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
            })?;
            if connected {
                return Ok(());
            }
            if !self.running() || Instant::now() > deadline {
                while let Ok(line) = self.log.try_recv() {
                    self.lines.push(line);
                }
                bail!(
                    "the switch never listened on {addr}; it logged:\n{}",
                    self.lines.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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
            "the switch never logged '{needle}'; it logged:\n{}",
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
        let died_of_sigterm =
            std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGTERM);
        if !status.success() && (self.exits_on_sigterm || !died_of_sigterm) {
            bail!("the switch exited with {status}");
        }
        Ok(self.topology.take().expect("the bed has its topology"))
    }

    /// Sends the switch SIGHUP (softswitch reads its TLS files again).
    pub fn hang_up(&self) {
        self.signal(libc::SIGHUP);
    }

    /// Sends the switch `signal` (SIGUSR1: softswitch writes its audit counts to its log).
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
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
                bail!("the switch did not stop within {TIMEOUT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Sends each line `stream` yields to `tx` until either ends.
fn forward_lines(stream: impl std::io::Read + Send + 'static, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
}

impl Drop for SwitchBed {
    /// Kills the switch if it still runs; a failing test gets the switch's log.
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            // SIGTERM, so the switch prints its frame counts.
            let _ = self.stop();
            eprintln!("the switch's log:\n{}", self.lines.join("\n"));
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
