//! The P4 tutorials' `topology.json`: `hosts` (name → `ip` with prefix, `mac`, `commands`),
//! `switches` (name → `runtime_json` and/or `program`), `links` (`[a, b]`, `[a, b, latency]`,
//! `[a, b, latency, bandwidth Mb/s]`, where an end is a host or `SWITCH-pPORT`). Relative files
//! are found beside the topology file, as `make run` finds them beside the exercise.

use std::{collections::BTreeMap, path::Path};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::Value;

use super::model::{End, Entries, Host, Link, Network, Switch};

/// The largest topology file read, in bytes.
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    hosts: BTreeMap<String, HostSpec>,
    switches: BTreeMap<String, SwitchSpec>,
    links: Vec<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSpec {
    ip: String,
    mac: String,
    #[serde(default)]
    commands: Vec<String>,
    /// The in-process fabric's addition (dataplane-p4/topologies/leaf-spine); the commands
    /// already set the gateway's neighbour entry.
    #[serde(default, rename = "gateway_mac")]
    _gateway_mac: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchSpec {
    #[serde(default)]
    runtime_json: Option<String>,
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    cli_input: Option<String>,
}

/// Reads a tutorials' topology file.
pub fn read(path: &Path) -> anyhow::Result<Network> {
    let text = super::state::read_bounded(path, MAX_TOPOLOGY_BYTES)?;
    let file: TopologyFile =
        serde_json::from_str(&text).with_context(|| format!("in {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let net = network(file, dir).with_context(|| format!("in {}", path.display()))?;
    net.check()
        .with_context(|| format!("in {}", path.display()))?;
    Ok(net)
}

fn network(file: TopologyFile, dir: &Path) -> anyhow::Result<Network> {
    let mut net = Network::default();
    for (name, spec) in file.hosts {
        net.hosts.push(Host {
            name,
            ip: spec.ip,
            mac: spec.mac,
            gateway: None,
            neighbours: vec![],
            commands: spec.commands,
        });
    }
    for (name, spec) in file.switches {
        if spec.cli_input.is_some() {
            bail!(
                "switches.{name}.cli_input: simple_switch_CLI commands go over BMv2's Thrift \
                 server, which softswitch does not have; give the entries as runtime_json"
            );
        }
        let entries = match spec.runtime_json {
            Some(file) => Entries::File(dir.join(file)),
            None => Entries::None,
        };
        net.switches.push(Switch {
            name,
            program: spec.program.map(|p| dir.join(p)),
            entries,
        });
    }
    for (i, link) in file.links.iter().enumerate() {
        net.links.push(self::link(&net, i, link)?);
    }
    Ok(net)
}

fn link(net: &Network, i: usize, link: &[Value]) -> anyhow::Result<Link> {
    let origin = format!("links[{i}]");
    if !(2..=4).contains(&link.len()) {
        bail!("{origin}: expected [a, b, latency?, bandwidth?]");
    }
    let end = |j: usize| -> anyhow::Result<End> {
        let text = link[j]
            .as_str()
            .with_context(|| format!("{origin}[{j}]: a node name, h1 or s1-p2"))?;
        if net.is_host(text) {
            return Ok(End {
                node: text.into(),
                port: 0,
                mac: None,
            });
        }
        let (node, port) = text.rsplit_once("-p").with_context(|| {
            format!("{origin}[{j}]: '{text}' is no host; a switch end is SWITCH-pPORT")
        })?;
        let port = port
            .parse()
            .with_context(|| format!("{origin}[{j}]: port '{port}'"))?;
        Ok(End {
            node: node.into(),
            port,
            mac: None,
        })
    };
    if let Some(latency) = link.get(2) {
        super::model::refuse_delay(&origin, latency)?;
    }
    let bw_mbps = match link.get(3) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .with_context(|| format!("{origin}[3]: bandwidth in Mb/s, a number"))?,
        ),
    };
    Ok(Link {
        a: end(0)?,
        b: end(1)?,
        bw_mbps,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Network> {
        let net = network(serde_json::from_str(text)?, Path::new("/t"))?;
        net.check()?;
        Ok(net)
    }

    #[test]
    fn reads_the_tutorials_shape() {
        let net = parse(
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                  "commands": ["route add default gw 10.0.1.10 dev eth0"]},
                "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"}},
                "switches": {"s1": {"runtime_json": "s1-runtime.json"}},
                "links": [["h1", "s1-p1"], ["h2", "s1-p2", "0ms", 100]]}"#,
        )
        .unwrap();
        assert_eq!(net.hosts[0].commands.len(), 1);
        assert_eq!(
            net.links[1].b,
            End {
                node: "s1".into(),
                port: 2,
                mac: None
            }
        );
        assert_eq!(net.links[1].bw_mbps, Some(100.0));
        assert!(
            matches!(&net.switches[0].entries, Entries::File(p) if p == Path::new("/t/s1-runtime.json"))
        );
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let base = r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}},
                       "switches": {"s1": {}}, "links": [LINK]}"#;
        let err = |link: &str| parse(&base.replace("LINK", link)).unwrap_err().to_string();
        assert!(err(r#"["h1", "s1-p1", "5ms"]"#).contains("netem"));
        assert!(err(r#"["h1", "s9-p1"]"#).contains("no node called s9"));
        assert!(err(r#"["h1", "s1"]"#).contains("SWITCH-pPORT"));
        assert!(parse(&base.replace("LINK", r#"["h1", "s1-p1", "0ms"]"#)).is_ok());
        let cli = base.replace(r#""s1": {}"#, r#""s1": {"cli_input": "s1-commands.txt"}"#);
        assert!(parse(&cli.replace("LINK", r#"["h1", "s1-p1"]"#))
            .unwrap_err()
            .to_string()
            .contains("runtime_json"));
    }
}
