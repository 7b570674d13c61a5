//! The network `lossless net up` builds, whatever file it came from: hosts (address, MAC,
//! gateway, static neighbours, commands), P4 switches (program, entries), links between
//! numbered ports, with a rate where the kernel can emulate one. The network, its hosts, links
//! and the checks every reader shares are the `netfiles` crate's, which parses the files; here
//! are the switches as they run (program and entries found on disk), the rule by which the
//! readers find the files a topology names ([`resolve`]), and what Mininet on one machine
//! cannot build ([`refuse_unemulable`]): more nodes, links or a faster rate than its limits,
//! node names too long for their interfaces, a link delay, jitter or loss.

use std::path::{Path, PathBuf};

use anyhow::bail;

use p4values::runtime_json::RuntimeConfig;

pub use netfiles::{End, Host, Link};

/// The most nodes `lossless net` brings up (Mininet is happy with a few hundred on one
/// machine).
pub const MAX_NODES: usize = 512;
/// The most links `lossless net` brings up.
pub const MAX_LINKS: usize = 4096;
/// The longest node name: its interfaces are called NAME-ethPORT, and Linux allows 15 bytes.
pub const MAX_NAME: usize = 8;
/// The highest rate a link is shaped to, in Mb/s (an HTB qdisc on a veth).
pub const MAX_RATE_MBPS: f64 = 100_000.0;

/// A network to bring up: switches in the order given, the index is the device id.
pub type Network = netfiles::Topology<Switch>;

/// A P4 switch.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Its name (`s1`, `leaf1`).
    pub name: String,
    /// Its program: the topology's for it until `net::program::settle` gives every switch
    /// its own (none: it starts without a pipeline, for a controller to set).
    pub program: Option<Program>,
    /// The entries to write once the pipeline is set.
    pub entries: Entries,
}

/// A program file, as a switch loads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// P4_16 source: softswitch runs it, BMv2 gets it compiled by p4c.
    Source(PathBuf),
    /// p4c-bm2-ss's BMv2 JSON with its P4Info, loaded as they are by both switches.
    Bmv2Json {
        /// The JSON.
        json: PathBuf,
        /// Its P4Info (p4c's `--p4runtime-files` output).
        p4info: PathBuf,
    },
}

/// What a switch is programmed with.
#[derive(Clone, Debug)]
pub enum Entries {
    /// Nothing.
    None,
    /// Files: runtime JSON written over P4Runtime (the tutorials' `runtime_json`), then
    /// simple_switch_CLI commands over Thrift (`cli_input`, p4-utils' and the tutorials').
    Files {
        /// The runtime-JSON file.
        runtime_json: Option<PathBuf>,
        /// The simple_switch_CLI command file.
        cli_input: Option<PathBuf>,
    },
    /// Entries computed by the control plane.
    Computed(Box<RuntimeConfig>),
}

impl Entries {
    /// The entries of a topology's switch: its runtime JSON and CLI command files, if any.
    pub fn files(runtime_json: Option<PathBuf>, cli_input: Option<PathBuf>) -> Entries {
        if runtime_json.is_none() && cli_input.is_none() {
            return Entries::None;
        }
        Entries::Files {
            runtime_json,
            cli_input,
        }
    }

    /// The runtime-JSON file, if the entries come from one.
    pub fn runtime_json(&self) -> Option<&Path> {
        match self {
            Entries::Files {
                runtime_json: Some(file),
                ..
            } => Some(file),
            _ => None,
        }
    }

    /// The simple_switch_CLI command file, if there is one.
    pub fn cli_input(&self) -> Option<&Path> {
        match self {
            Entries::Files {
                cli_input: Some(file),
                ..
            } => Some(file),
            _ => None,
        }
    }
}

impl netfiles::Named for Switch {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Where a file a topology names is: an absolute path as it is; a relative one, as the P4
/// tutorials take it, from the current directory (where `make run` runs: the exercise folder),
/// else beside `file`, the topology (or runtime JSON) that names it, where lossless's own
/// topologies keep theirs. When both exist and are different files, the current directory's
/// is taken, and a note says so. Neither: an error that names both places.
pub fn resolve(relative: &str, file: &Path) -> anyhow::Result<PathBuf> {
    let path = Path::new(relative);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let beside = file.parent().unwrap_or(Path::new("")).join(path);
    match (path.exists(), beside.exists()) {
        (true, true) => {
            if !same_file(path, &beside) {
                eprintln!(
                    "lossless net: {relative} (named in {}) is taken from the current \
                     directory, as the P4 tutorials do, not beside the file ({})",
                    file.display(),
                    beside.display()
                );
            }
            Ok(path.to_path_buf())
        }
        (true, false) => Ok(path.to_path_buf()),
        (false, true) => Ok(beside),
        (false, false) => bail!(
            "{relative} (named in {}) is neither in the current directory, where the P4 \
             tutorials take it from (run from the exercise folder, as `make run` does), nor \
             beside the file ({})",
            file.display(),
            beside.display()
        ),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Refuses what `lossless net` cannot build of a network `netfiles` checked: more than
/// [`MAX_NODES`] nodes or [`MAX_LINKS`] links, a node name longer than [`MAX_NAME`], a rate
/// above [`MAX_RATE_MBPS`] ([`refuse_beyond_mininet`]), a link delay, jitter or loss
/// ([`refuse_netem`]).
pub fn refuse_unemulable<S: netfiles::Named>(
    network: &netfiles::Topology<S>,
) -> anyhow::Result<()> {
    refuse_beyond_mininet(network)?;
    refuse_netem(&network.links)
}

/// Refuses a network larger than Mininet's limits here, or with names too long for their
/// interfaces or rates faster than a veth is shaped to.
fn refuse_beyond_mininet<S: netfiles::Named>(
    network: &netfiles::Topology<S>,
) -> anyhow::Result<()> {
    let nodes = network.hosts.len() + network.switches.len();
    if nodes > MAX_NODES {
        bail!("{nodes} nodes: at most {MAX_NODES}");
    }
    if network.links.len() > MAX_LINKS {
        bail!("{} links: at most {MAX_LINKS}", network.links.len());
    }
    if let Some(name) = network.node_names().find(|n| n.len() > MAX_NAME) {
        bail!(
            "node name '{name}': at most {MAX_NAME} bytes (its interfaces are NAME-ethPORT, \
             and Linux allows 15)"
        );
    }
    for link in &network.links {
        if let Some(bw) = link.bw_mbps.filter(|bw| *bw > MAX_RATE_MBPS) {
            bail!(
                "{}: bw {bw} Mb/s: from more than 0 to {MAX_RATE_MBPS}",
                link.origin
            );
        }
    }
    Ok(())
}

/// Refuses links with a delay, jitter or loss other than zero, which `lossless net` does not
/// emulate (it emulates rates only): the error names the first such link's key and value and,
/// when the kernel has no netem, says why it could not either (Mininet emulates them with
/// netem, and without it `tc` fails and Mininet only logs the error).
fn refuse_netem(links: &[Link]) -> anyhow::Result<()> {
    let Some((link, what)) = links.iter().find_map(|l| {
        let what = if !l.delay.is_zero() {
            format!("delay {:?}", l.delay)
        } else if !l.jitter.is_zero() {
            format!("jitter {:?}", l.jitter)
        } else if l.loss_percent != 0.0 {
            format!("loss {}%", l.loss_percent)
        } else {
            return None;
        };
        Some((l, what))
    }) else {
        return Ok(());
    };
    let error = anyhow::anyhow!(
        "{}: {what}: lossless net emulates rates only, not delay, jitter or loss",
        link.origin
    );
    if netem_available() {
        return Err(error);
    }
    Err(error.context(
        "Mininet emulates delay and loss with netem, and this kernel has no netem (sch_netem \
         is not loaded or built in); remove the delay, or run on a kernel with netem",
    ))
}

/// Whether the running kernel has netem (the module is loaded or built in).
fn netem_available() -> bool {
    std::path::Path::new("/sys/module/sch_netem").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_beyond_mininet_parses_and_is_refused_here() {
        // 600 switches: netfiles (and the simulator) take them, Mininet here does not.
        let switches: Vec<String> = (1..=600).map(|s| format!(r#""s{s}": {{}}"#)).collect();
        let text = format!(
            r#"{{"hosts": {{}}, "switches": {{{}}}, "links": []}}"#,
            switches.join(",")
        );
        let topology = netfiles::tutorial::parse(&text).unwrap();
        let err = refuse_unemulable(&topology).unwrap_err().to_string();
        assert_eq!(err, "600 nodes: at most 512");

        let one = |link: &str| {
            format!(
                r#"{{"hosts": {{"h1": {{"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}}}},
                    "switches": {{"leaf_0001": {{}}}}, "links": [{link}]}}"#
            )
        };
        let topology = netfiles::tutorial::parse(&one(r#"["h1", "leaf_0001-p1"]"#)).unwrap();
        let err = refuse_unemulable(&topology).unwrap_err().to_string();
        assert!(err.contains("'leaf_0001': at most 8 bytes"), "{err}");
        let fast = one(r#"["h1", "leaf_0001-p1", 0, 400000]"#).replace("leaf_0001", "s1");
        let topology = netfiles::tutorial::parse(&fast).unwrap();
        let err = refuse_unemulable(&topology).unwrap_err().to_string();
        assert_eq!(err, "links[0]: bw 400000 Mb/s: from more than 0 to 100000");
        let slow = one(r#"["h1", "s1-p1", 0, 100000]"#).replace("leaf_0001", "s1");
        refuse_unemulable(&netfiles::tutorial::parse(&slow).unwrap()).unwrap();
    }

    #[test]
    fn relative_files_are_taken_from_the_current_directory_then_beside_the_topology() {
        let dir = std::env::temp_dir().join(format!("lossless-resolve-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("topo")).unwrap();
        std::fs::write(dir.join("topo/s1-runtime.json"), "{}").unwrap();
        let topology = dir.join("topo/topology.json");
        // Not in the current directory (the crate's): beside the topology.
        assert_eq!(
            resolve("s1-runtime.json", &topology).unwrap(),
            dir.join("topo/s1-runtime.json")
        );
        // In the current directory: taken from there, as the tutorials do.
        assert_eq!(
            resolve("Cargo.toml", &topology).unwrap(),
            Path::new("Cargo.toml")
        );
        assert_eq!(resolve("/abs/x", &topology).unwrap(), Path::new("/abs/x"));
        let err = resolve("pod-topo/s9-runtime.json", &topology)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("current directory") && err.contains("topo/pod-topo/s9-runtime.json"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
