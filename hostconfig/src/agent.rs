//! The agent's TOML file: the interfaces it keeps attached, with their hooks, XDP mode and
//! profile, the profiles (tables of the `host set` keys, read by the host's own parser), the
//! metrics address and whether to detach on exit. Read whole and checked before anything is
//! applied; written limits on size and counts (docs/agent.md).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};
use clap::ValueEnum as _;
use serde::Deserialize;

use crate::{
    attachment::{Attachment, Mode},
    config::{parse_toml, read_config_file, HostConfig},
};
use sysutil::pins::check_interface_name;

/// Most interfaces one agent manages.
pub const MAX_INTERFACES: usize = 256;
/// Most profiles one file names.
pub const MAX_PROFILES: usize = 64;
/// Longest profile name.
const MAX_PROFILE_NAME: usize = 64;

/// One interface the agent keeps attached.
#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceSpec {
    /// The interface name.
    pub name: String,
    /// What to attach, sorted, without repeats.
    pub hooks: Vec<Attachment>,
    /// The XDP mode.
    pub mode: Mode,
    /// The profile's name, if any (for logs).
    pub profile: Option<String>,
    /// The configuration its programs run with.
    pub config: HostConfig,
}

/// The agent's whole configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// Where to serve `/metrics` and `/healthz` (the command line's `--metrics-addr` wins).
    pub metrics_addr: Option<SocketAddr>,
    /// The web configuration (TLS and basic auth of `/metrics`, exporter-toolkit's YAML),
    /// relative to the agent's file when read with [`AgentConfig::from_file`] (the command
    /// line's `--web.config.file` wins).
    pub web_config_file: Option<PathBuf>,
    /// Where to serve gNMI (plain gRPC); none by default (the command line's
    /// `--gnmi.listen-address` wins).
    pub gnmi_listen_address: Option<SocketAddr>,
    /// Whether to detach the managed interfaces when the agent stops.
    pub detach_on_exit: bool,
    /// The interfaces, by name.
    pub interfaces: BTreeMap<String, InterfaceSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    metrics_addr: Option<String>,
    web_config_file: Option<PathBuf>,
    gnmi_listen_address: Option<String>,
    #[serde(default)]
    detach_on_exit: bool,
    #[serde(default)]
    profiles: BTreeMap<String, toml::Table>,
    #[serde(default)]
    interfaces: Vec<InterfaceShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InterfaceShape {
    name: String,
    hooks: Option<Vec<String>>,
    mode: Option<String>,
    profile: Option<String>,
}

impl AgentConfig {
    /// Reads and checks the agent's file (at most 1 MiB, as every config file).
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = read_config_file(path)?;
        let mut config = Self::from_toml(&text)
            .with_context(|| format!("in agent config {}", path.display()))?;
        if let Some(web) = &mut config.web_config_file {
            *web = path.parent().unwrap_or(Path::new(".")).join(&*web);
        }
        Ok(config)
    }

    /// Parses and checks the agent's TOML.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let file: FileShape = parse_toml(text)?;
        if file.profiles.len() > MAX_PROFILES {
            bail!(
                "{} profiles: at most {MAX_PROFILES} are accepted",
                file.profiles.len()
            );
        }
        if file.interfaces.len() > MAX_INTERFACES {
            bail!(
                "{} interfaces: one agent manages at most {MAX_INTERFACES}",
                file.interfaces.len()
            );
        }
        let mut profiles = BTreeMap::new();
        for (name, table) in file.profiles {
            if name.is_empty() || name.len() > MAX_PROFILE_NAME {
                bail!("profile names are 1 to {MAX_PROFILE_NAME} bytes long");
            }
            let config =
                HostConfig::from_table(table).with_context(|| format!("in profile '{name}'"))?;
            profiles.insert(name, config);
        }
        let mut interfaces = BTreeMap::new();
        for entry in file.interfaces {
            let spec = interface(entry, &profiles)?;
            if interfaces.contains_key(&spec.name) {
                bail!("interface {} is named twice", spec.name);
            }
            interfaces.insert(spec.name.clone(), spec);
        }
        let address = |key: &str, text: Option<String>| {
            text.map(|text| {
                text.parse()
                    .with_context(|| format!("{key}: '{text}' is not ADDRESS:PORT"))
            })
            .transpose()
        };
        let metrics_addr = address("metrics_addr", file.metrics_addr)?;
        let gnmi_listen_address = address("gnmi_listen_address", file.gnmi_listen_address)?;
        if file
            .web_config_file
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            bail!("web_config_file is empty: name the file or leave the key out");
        }
        Ok(AgentConfig {
            metrics_addr,
            web_config_file: file.web_config_file,
            gnmi_listen_address,
            detach_on_exit: file.detach_on_exit,
            interfaces,
        })
    }
}

fn interface(
    entry: InterfaceShape,
    profiles: &BTreeMap<String, HostConfig>,
) -> anyhow::Result<InterfaceSpec> {
    let name = entry.name;
    check_interface_name(&name)?;
    let hooks = entry.hooks.unwrap_or_else(|| vec!["xdp".to_owned()]);
    let mut parsed = Vec::new();
    for hook in &hooks {
        parsed.push(Attachment::from_str(hook, false).map_err(|_| {
            anyhow::anyhow!("{name}: '{hook}' is not a hook (xdp, tc, cnp, pfc, lb)")
        })?);
    }
    parsed.sort();
    parsed.dedup();
    if parsed.is_empty() {
        bail!("{name}: hooks is empty; name at least one (xdp, tc, cnp, pfc, lb)");
    }
    if parsed.contains(&Attachment::Xdp) && parsed.contains(&Attachment::Lb) {
        bail!("{name}: hooks xdp and lb both need the XDP hook; choose one");
    }
    let mode = match entry.mode {
        None => Mode::Auto,
        Some(mode) => Mode::from_str(&mode, false)
            .map_err(|_| anyhow::anyhow!("{name}: mode '{mode}' is not native, skb or auto"))?,
    };
    let config = match &entry.profile {
        None => HostConfig::default(),
        Some(profile) => profiles
            .get(profile)
            .with_context(|| format!("{name}: no profile named '{profile}'"))?
            .clone(),
    };
    Ok(InterfaceSpec {
        name,
        hooks: parsed,
        mode,
        profile: entry.profile,
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
metrics_addr = "127.0.0.1:9477"
web_config_file = "web.yml"
gnmi_listen_address = "[::1]:57400"

[profiles.roce]
ecn.prio3.kmin_bytes = 20000
pfc.link_speed_bps = "25g"

[[interfaces]]
name = "eth0"
hooks = ["xdp", "cnp", "pfc", "cnp"]
mode = "skb"
profile = "roce"

[[interfaces]]
name = "eth1"
"#;

    #[test]
    fn reads_interfaces_profiles_and_the_address() {
        let config = AgentConfig::from_toml(EXAMPLE).unwrap();
        assert_eq!(config.metrics_addr, Some("127.0.0.1:9477".parse().unwrap()));
        assert_eq!(config.web_config_file, Some(PathBuf::from("web.yml")));
        assert_eq!(
            config.gnmi_listen_address,
            Some("[::1]:57400".parse().unwrap())
        );
        assert!(!config.detach_on_exit);
        let eth0 = &config.interfaces["eth0"];
        assert_eq!(
            eth0.hooks,
            [Attachment::Xdp, Attachment::Cnp, Attachment::Pfc]
        );
        assert_eq!(eth0.mode, Mode::Skb);
        assert_eq!(eth0.config.profiles[3].kmin_bytes, 20000);
        assert_eq!(eth0.config.settings.link_speed_bps, 25_000_000_000);
        let eth1 = &config.interfaces["eth1"];
        assert_eq!(
            (eth1.hooks.as_slice(), eth1.mode),
            (&[Attachment::Xdp][..], Mode::Auto)
        );
        assert_eq!(eth1.config, HostConfig::default());
    }

    #[test]
    fn refuses_what_it_cannot_apply() {
        for (text, message) in [
            (
                "[[interfaces]]\nname = \"a/b\"",
                "not a valid interface name",
            ),
            (
                "[[interfaces]]\nname = \"e\"\nhooks = [\"xdp\", \"lb\"]",
                "choose one",
            ),
            ("[[interfaces]]\nname = \"e\"\nhooks = []", "hooks is empty"),
            (
                "[[interfaces]]\nname = \"e\"\nhooks = [\"tcx\"]",
                "'tcx' is not a hook",
            ),
            (
                "[[interfaces]]\nname = \"e\"\nmode = \"fast\"",
                "not native, skb or auto",
            ),
            (
                "[[interfaces]]\nname = \"e\"\nprofile = \"x\"",
                "no profile named 'x'",
            ),
            (
                "[[interfaces]]\nname = \"e\"\n[[interfaces]]\nname = \"e\"",
                "named twice",
            ),
            ("[profiles.p]\necn.prio9.kmin_bytes = 1", "in profile 'p'"),
            ("metrics_addr = \"localhost\"", "not ADDRESS:PORT"),
            (
                "gnmi_listen_address = \":57400\"",
                "gnmi_listen_address: ':57400' is not ADDRESS:PORT",
            ),
            ("interface = []", "unknown field"),
        ] {
            let error = format!("{:#}", AgentConfig::from_toml(text).unwrap_err());
            assert!(error.contains(message), "{text}: {error}");
        }
        let many: String = (0..=MAX_INTERFACES)
            .map(|i| format!("[[interfaces]]\nname = \"e{i}\"\n"))
            .collect();
        assert!(AgentConfig::from_toml(&many).is_err());
    }

    /// `--config /etc/shadow`: a file that is not TOML gets its error's place and the token
    /// there, escaped, and no line of it.
    #[test]
    fn a_file_that_is_not_a_config_is_not_quoted() {
        let path = std::env::temp_dir().join(format!("agent-{}-shadow", std::process::id()));
        std::fs::write(
            &path,
            "root:$y$j9T$SECRET:19000:0:99999:7:::\ndaemon:*:SECRET::::::\n",
        )
        .unwrap();
        let error = format!("{:#}", AgentConfig::from_file(&path).unwrap_err());
        std::fs::remove_file(&path).unwrap();
        assert!(!error.contains("SECRET"), "{error}");
        assert!(error.contains("line 1, column 5"), "{error}");
        assert_eq!(error.lines().count(), 1, "{error}");
        // The token an error is about is quoted escaped, and cut.
        let long = format!("{} = 1\n", "k\u{1b}".repeat(100));
        let error = format!("{:#}", AgentConfig::from_toml(&long).unwrap_err());
        assert!(!error.contains('\u{1b}') && error.len() < 400, "{error}");
    }
}
