//! Where a running network is recorded: `/run/lossless/net/NAME/` holds the plan the Mininet
//! glue builds from (`plan.json`), what it reports once up (`status.json`: nodes, pids,
//! interfaces, switches' gRPC addresses and device ids, links), every process it started, as
//! it starts it (`processes.json`), the control plane's own record (`up.json`: its process and
//! the glue's, the network namespace the whole network lives in), the switches' logs, and the
//! Python package it ran. `status`, `exec`, `down` and `lossless p4 --switch NAME` find the
//! network from here.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

/// Where networks are recorded.
pub const STATE_ROOT: &str = "/run/lossless/net";
/// The network name when none is given (also from `LOSSLESS_NET`).
pub const DEFAULT_NAME: &str = "default";
/// The largest state file read.
const MAX_STATE_BYTES: u64 = 16 << 20;

/// Reads at most `max` bytes of text from `path`; more is an error naming the file.
pub fn read_bounded(path: &Path, max: u64) -> anyhow::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_string(&mut text))
        .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > max {
        bail!("{} is longer than {max} bytes", path.display());
    }
    Ok(text)
}

/// A network name: letters, digits, `-`, `_`, at most 32 bytes (it names a directory).
pub fn check_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.len() > 32
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!(
            "network name '{}': 1 to 32 letters, digits, - or _",
            name.escape_debug()
        );
    }
    Ok(())
}

/// The directory of network `name`.
pub fn dir(name: &str) -> anyhow::Result<PathBuf> {
    check_name(name)?;
    Ok(Path::new(STATE_ROOT).join(name))
}

/// A process as recorded: its pid, and when it started (clock ticks after boot, the 22nd field
/// of /proc/PID/stat), which tells it from a later process that is given the same pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    /// Its pid.
    pub pid: u32,
    /// When it started.
    pub started: u64,
}

impl ProcessId {
    /// Process `pid` as it runs now, if it does (a zombie, which has ended, does not).
    pub fn of(pid: u32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may hold spaces and parentheses: count after the
        // last one. The fields after it are the 3rd (state) on; starttime is the 22nd.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        if matches!(fields.next()?, "Z" | "X") {
            return None;
        }
        let started = fields.nth(18)?.parse().ok()?;
        Some(ProcessId { pid, started })
    }

    /// This process.
    pub fn own() -> ProcessId {
        ProcessId::of(std::process::id()).expect("/proc has this process")
    }

    /// Whether it still runs (a process of this pid that started when it did).
    pub fn alive(&self) -> bool {
        ProcessId::of(self.pid) == Some(*self)
    }

    /// Sends it `signal` if it still runs; whether it did.
    pub fn signal(&self, signal: i32) -> bool {
        // SAFETY: a signal to the recorded process, checked to be that process (a pid is
        // reused only after its process is reaped, and the start time tells them apart).
        self.alive() && unsafe { libc::kill(self.pid as i32, signal) } == 0
    }
}

/// The control plane's record of a running network.
#[derive(Debug, Serialize, Deserialize)]
pub struct UpRecord {
    /// The pid of `lossless net up`.
    pub pid: u32,
    /// When it started (see [`ProcessId`]).
    pub started: u64,
    /// The Mininet glue it runs, once started.
    #[serde(default)]
    pub glue: Option<ProcessId>,
    /// The network namespace the network lives in (`ip netns` name).
    pub netns: String,
    /// softswitch or bmv2.
    pub switch_kind: String,
    /// A generated fabric's spines, leaves and hosts per leaf.
    #[serde(default)]
    pub shape: Option<[u16; 3]>,
}

/// A process the glue started, recorded as it starts it (`processes.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The node it belongs to.
    pub node: String,
    /// `host` (the host's shell: everything in its network namespace is the host's), `switch`,
    /// or `capture`.
    pub role: String,
    /// The process.
    #[serde(flatten)]
    pub process: ProcessId,
}

/// What the Mininet glue reports once the network is up.
#[derive(Debug, Serialize, Deserialize)]
pub struct Status {
    /// The network's name.
    pub name: String,
    /// Hosts and switches.
    pub nodes: Vec<NodeStatus>,
    /// Links, as pairs of interface names.
    pub links: Vec<[String; 2]>,
}

/// One node.
#[derive(Debug, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Its name.
    pub name: String,
    /// `host` or `switch`.
    pub kind: String,
    /// Its process: the host's shell, the switch's process.
    pub pid: u32,
    /// Its Mininet shell (the host's namespace; for a switch, the network's).
    pub shell_pid: u32,
    /// Its interfaces.
    pub intfs: Vec<IntfStatus>,
    /// A switch's P4Runtime address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
    /// A switch's P4Runtime device id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<u64>,
    /// A switch's log file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// A BMv2 switch's Thrift port (its runtime CLI's, `simple_switch_CLI --thrift-port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thrift_port: Option<u16>,
}

/// One interface.
#[derive(Debug, Serialize, Deserialize)]
pub struct IntfStatus {
    /// Its name.
    pub name: String,
    /// Its port number.
    pub port: u32,
    /// Its MAC.
    #[serde(default)]
    pub mac: Option<String>,
    /// Its address.
    #[serde(default)]
    pub ip: Option<String>,
}

/// What `plan.json` says the network is made of (`up`'s plan for the glue; the fields read
/// back here, others ignored): hosts, switches in device-id order, links between their ports.
#[derive(Debug, Deserialize)]
pub struct PlanRecord {
    /// Hosts.
    pub hosts: Vec<PlannedHost>,
    /// Switches.
    pub switches: Vec<PlannedSwitch>,
    /// Links.
    pub links: Vec<PlannedLink>,
}

/// A host of the plan.
#[derive(Debug, Deserialize)]
pub struct PlannedHost {
    /// Its name.
    pub name: String,
    /// Its address with prefix length (`10.0.1.1/24`).
    pub ip: String,
}

/// A switch of the plan.
#[derive(Debug, Deserialize)]
pub struct PlannedSwitch {
    /// Its name.
    pub name: String,
}

impl netfiles::Named for PlannedSwitch {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A link of the plan: its ends (a host's without a port) and its rate.
#[derive(Debug, Deserialize)]
pub struct PlannedLink {
    /// One end's node.
    pub node1: String,
    /// Its switch port.
    pub port1: Option<u16>,
    /// The other end's node.
    pub node2: String,
    /// Its switch port.
    pub port2: Option<u16>,
    /// The rate, Mb/s, if limited.
    pub bw: Option<f64>,
}

/// A running network as recorded.
pub struct Running {
    /// Its directory.
    pub dir: PathBuf,
    /// The control plane's record.
    pub up: UpRecord,
    /// The glue's report (absent while it is coming up).
    pub status: Option<Status>,
}

/// The processes the glue recorded in `dir` (none if it recorded none, or the file is not
/// what it writes).
pub fn processes(dir: &Path) -> Vec<ProcessRecord> {
    read_bounded(&dir.join("processes.json"), MAX_STATE_BYTES)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

impl Running {
    /// The network `name`, if one is recorded.
    pub fn find(name: &str) -> anyhow::Result<Running> {
        let dir = dir(name)?;
        let up_path = dir.join("up.json");
        if !up_path.exists() {
            bail!(
                "no network called {name} is up (nothing in {})",
                dir.display()
            );
        }
        let up: UpRecord = serde_json::from_str(&read_bounded(&up_path, MAX_STATE_BYTES)?)
            .with_context(|| format!("in {}", up_path.display()))?;
        let status_path = dir.join("status.json");
        let status = match status_path.exists() {
            true => Some(
                serde_json::from_str(&read_bounded(&status_path, MAX_STATE_BYTES)?)
                    .with_context(|| format!("in {}", status_path.display()))?,
            ),
            false => None,
        };
        Ok(Running { dir, up, status })
    }

    /// Its node `name`.
    pub fn node(&self, name: &str) -> anyhow::Result<&NodeStatus> {
        let status = self
            .status
            .as_ref()
            .context("the network is still coming up")?;
        status
            .nodes
            .iter()
            .find(|n| n.name == name)
            .with_context(|| {
                let names: Vec<_> = status.nodes.iter().map(|n| n.name.as_str()).collect();
                format!("no node called {name}; there are {}", names.join(", "))
            })
    }

    /// What its plan says it is made of.
    pub fn plan(&self) -> anyhow::Result<PlanRecord> {
        let path = self.dir.join("plan.json");
        serde_json::from_str(&read_bounded(&path, MAX_STATE_BYTES)?)
            .with_context(|| format!("in {}", path.display()))
    }

    /// The `lossless net up` that recorded it.
    pub fn up_process(&self) -> ProcessId {
        ProcessId {
            pid: self.up.pid,
            started: self.up.started,
        }
    }

    /// Whether the `lossless net up` that recorded it still runs.
    pub fn alive(&self) -> bool {
        self.up_process().alive()
    }

    /// The network namespace's bind mount.
    pub fn netns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.up.netns)
    }

    /// `nsenter`'s namespace options for `node`: a host's network and mount namespaces, as
    /// Mininet's own `h1 CMD` (mnexec gives each host its own /sys, and so its own
    /// /sys/fs/bpf); a switch's network namespace is the network's.
    pub fn nsenter_args(&self, node: &NodeStatus) -> Vec<String> {
        match node.kind.as_str() {
            "host" => vec![
                format!("--net=/proc/{}/ns/net", node.pid),
                format!("--mount=/proc/{}/ns/mnt", node.pid),
            ],
            _ => vec![format!("--net={}", self.netns_path().display())],
        }
    }
}
