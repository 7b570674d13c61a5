//! The network `lossless net up` builds, whatever file it came from: hosts (address, MAC,
//! gateway, static neighbours, commands), P4 switches (program, entries), links between
//! numbered ports, with a rate where the kernel can emulate one. Hosts, links and the checks
//! every reader shares are the `netfiles` crate's, which parses the files; here are the
//! switches as they run (program and entries found on disk), the rule by which the readers
//! find the files a topology names ([`resolve`]), and the refusal of a link delay, jitter or
//! loss, with why the kernel cannot emulate one ([`refuse_netem`]).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::bail;

use p4values::runtime_json::RuntimeConfig;

pub use netfiles::{End, Host, Link};

/// A network to bring up.
#[derive(Debug, Default)]
pub struct Network {
    /// Hosts, in the order given.
    pub hosts: Vec<Host>,
    /// Switches, in the order given; the index is the device id.
    pub switches: Vec<Switch>,
    /// Links.
    pub links: Vec<Link>,
    /// The CPU port of the switches that have one (the tutorials' `cpu_port`, BMv2's
    /// `--cpu-port`): where frames leave for the controller as PacketIn and PacketOut enters.
    pub cpu_ports: BTreeMap<String, u16>,
}

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

impl Network {
    /// Whether `name` is a host.
    pub fn is_host(&self, name: &str) -> bool {
        self.hosts.iter().any(|h| h.name == name)
    }

    /// Checks names, sizes, ports (each used once) and that every link joins known nodes
    /// ([`netfiles::check`]).
    pub fn check(&self) -> anyhow::Result<()> {
        netfiles::check(
            &self.hosts,
            self.switches.iter().map(|s| s.name.as_str()),
            &self.links,
            &self.cpu_ports,
        )
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

/// Refuses links with a delay, jitter or loss other than zero, which `lossless net` does not
/// emulate (it emulates rates only): the error names the first such link's key and value and,
/// when the kernel has no netem, says why it could not either (Mininet emulates them with
/// netem, and without it `tc` fails and Mininet only logs the error).
pub fn refuse_netem(links: &[Link]) -> anyhow::Result<()> {
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
