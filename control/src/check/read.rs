//! What `lossless check` reads: FABRIC, and the hosts' configurations.
//!
//! FABRIC is a generated fabric's spec (`leaf-spine:2,3,2`, with the entries the control plane
//! computes for it, from `--tuning`), a P4 tutorials' `topology.json` or p4-utils' `p4app.json`
//! (each switch's runtime JSON found as `lossless net` finds it), or one switch's runtime JSON
//! (a fabric of one switch without links). Files are read within the parsers' limits: a
//! topology at most [`netfiles::MAX_BYTES`], a runtime JSON at most p4values'
//! `MAX_RUNTIME_JSON_BYTES`, a host or agent config at most hostconfig's `MAX_CONFIG_BYTES`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use check::fabric::{Fabric, LinkDefaults, Nic};
use hostconfig::{
    agent::AgentConfig,
    config::{parse_toml, read_config_file, HostConfig},
};
use p4values::runtime_json::RuntimeConfig;
use topology::{spec, Spec, Tuning};

use crate::net::{program, state::read_bounded};

/// A fabric as FABRIC names it.
pub enum Source {
    /// A generated fabric and the tuning of its computed entries.
    Generated(Box<topology::Fabric>, Tuning),
    /// A fabric read from files, and the files.
    Files(Fabric, Files),
    /// A running network's fabric, its entries read live from its switches (`--net`).
    Live(Fabric),
}

/// The files a fabric was read from, for `--fix`'s copies.
pub struct Files {
    /// FABRIC.
    pub path: PathBuf,
    /// Whether FABRIC is a P4 tutorials' topology.json (whose copy names the fixed files).
    pub tutorial: bool,
    /// Each switch's runtime JSON and its entries, in the fabric's order.
    pub runtime: Vec<Option<(PathBuf, RuntimeConfig)>>,
}

/// Reads FABRIC (`text`): a spec when it starts with a shape's name and `:`, else a file.
pub fn fabric(text: &str, tuning: Option<&Path>, defaults: LinkDefaults) -> anyhow::Result<Source> {
    let generated = text
        .split_once(':')
        .is_some_and(|(name, _)| spec::shape_names().any(|n| n == name.trim()));
    if generated {
        let spec = Spec::parse(text).with_context(|| format!("'{text}'"))?;
        let tuning = match tuning {
            Some(path) => {
                let tuning: Tuning = parse_toml(&read_config_file(path)?)
                    .with_context(|| format!("in {}", path.display()))?;
                tuning
                    .check()
                    .with_context(|| format!("in {}", path.display()))?;
                tuning
            }
            None => Tuning::default(),
        };
        return Ok(Source::Generated(Box::new(topology::build(&spec)), tuning));
    }
    if tuning.is_some() {
        bail!("--tuning tunes a generated fabric's computed entries; {text} is a file");
    }
    let (fabric, files) = files(Path::new(text), defaults)?;
    Ok(Source::Files(fabric, files))
}

/// The fabric the files at `path` describe, and the files.
fn files(path: &Path, defaults: LinkDefaults) -> anyhow::Result<(Fabric, Files)> {
    let text = read_bounded(path, netfiles::MAX_BYTES as u64)?;
    let within = || format!("in {}", path.display());
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if value.get("table_entries").is_some() {
        let config = RuntimeConfig::parse(&text).with_context(within)?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("switch");
        let name = stem.strip_suffix("-runtime").unwrap_or(stem);
        let topology = netfiles::Topology {
            hosts: Vec::new(),
            switches: vec![netfiles::Switch {
                name: name.to_owned(),
                runtime_json: None,
                cli_input: None,
                program: None,
            }],
            links: Vec::new(),
            cpu_ports: Default::default(),
        };
        let fabric = Fabric::from_topology(&topology, &[Some(config.clone())], defaults)
            .with_context(within)?;
        let files = Files {
            path: path.to_path_buf(),
            tutorial: false,
            runtime: vec![Some((path.to_path_buf(), config))],
        };
        return Ok((fabric, files));
    }
    let tutorial = value.get("topology").is_none();
    let topology = if !tutorial {
        netfiles::p4app::parse(&text).with_context(within)?.topology
    } else {
        netfiles::tutorial::parse(&text).with_context(within)?
    };
    let network = program::network(topology, path, "switches").with_context(within)?;
    let runtime = network
        .switches
        .iter()
        .map(|s| {
            s.entries
                .runtime_json()
                .map(|file| anyhow::Ok((file.to_path_buf(), RuntimeConfig::from_file(file)?)))
                .transpose()
                .with_context(|| format!("switch {}", s.name))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let entries: Vec<Option<RuntimeConfig>> = runtime
        .iter()
        .map(|r| r.as_ref().map(|(_, c)| c.clone()))
        .collect();
    let fabric = Fabric::from_topology(&network, &entries, defaults).with_context(within)?;
    let files = Files {
        path: path.to_path_buf(),
        tutorial,
        runtime,
    };
    Ok((fabric, files))
}

/// A `--host-config` file and what it holds.
pub struct HostFile {
    /// The file.
    pub path: PathBuf,
    /// Whether it is an agent's TOML (its interfaces' keys in their profiles), not a host
    /// config.
    pub agent: bool,
}

/// Gives the hosts their configurations: each `[HOST=]FILE` of `--host-config` is an agent's
/// TOML (its interfaces, each a NIC) or a host config (one NIC), for HOST or every host.
/// Returns the files read and, per host, the one its NICs came from (the last naming it).
pub fn host_configs(
    fabric: &mut Fabric,
    given: &[String],
) -> anyhow::Result<(Vec<HostFile>, Vec<Option<usize>>)> {
    let mut files = Vec::new();
    let mut from = vec![None; fabric.hosts.len()];
    for (index, item) in given.iter().enumerate() {
        let (host, file) = match item.split_once('=') {
            Some((host, file)) => (Some(host), file),
            None => (None, item.as_str()),
        };
        let path = Path::new(file);
        let text = read_config_file(path)?;
        let within = || format!("in {}", path.display());
        let table: toml::Table = parse_toml(&text).with_context(within)?;
        let agent = table.contains_key("interfaces");
        let nics: Vec<Nic> = if agent {
            AgentConfig::from_toml(&text)
                .with_context(within)?
                .interfaces
                .into_values()
                .map(|i| Nic {
                    interface: i.name,
                    config: i.config,
                })
                .collect()
        } else {
            vec![Nic {
                interface: path
                    .file_name()
                    .map_or_else(|| file.to_owned(), |n| n.to_string_lossy().into_owned()),
                config: HostConfig::from_toml(&text).with_context(within)?,
            }]
        };
        match host {
            Some(name) => {
                let h = fabric
                    .hosts
                    .iter()
                    .position(|h| h.name == name)
                    .with_context(|| format!("--host-config {item}: no host {name}"))?;
                fabric.hosts[h].nics = nics;
                from[h] = Some(index);
            }
            None => {
                for (h, host) in fabric.hosts.iter_mut().enumerate() {
                    host.nics = nics.clone();
                    from[h] = Some(index);
                }
            }
        }
        files.push(HostFile {
            path: path.to_path_buf(),
            agent,
        });
    }
    Ok((files, from))
}
