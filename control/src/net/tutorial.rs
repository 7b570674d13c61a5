//! The P4 tutorials' `topology.json`: `hosts` (name → `ip` with prefix, `mac`, `commands`),
//! `switches` (name → `runtime_json`, `cli_input`, `program`, `cpu_port`), `links` (`[a, b]`,
//! `[a, b, latency]`, `[a, b, latency, bandwidth Mb/s]`, where an end is a host or
//! `SWITCH-pPORT`). Relative files are found as the tutorials find them (from the current
//! directory, where `make run` runs, then beside the topology file:
//! [`resolve`](super::model::resolve)). A switch's `program` is P4 source or p4c's BMv2 JSON
//! ([`program::file`]).

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::Value;

use super::{
    model::{check_sizes, End, Host, Link, Network},
    program::{self, SwitchFiles},
};

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
    /// A number, or a string of one (the tutorials write `"cpu_port": "510"`).
    #[serde(default)]
    cpu_port: Option<Value>,
}

/// Reads a tutorials' topology file.
pub fn read(path: &Path) -> anyhow::Result<Network> {
    let text = super::state::read_bounded(path, MAX_TOPOLOGY_BYTES)?;
    let file: TopologyFile =
        serde_json::from_str(&text).with_context(|| format!("in {}", path.display()))?;
    let net = network(file, path).with_context(|| format!("in {}", path.display()))?;
    net.check()
        .with_context(|| format!("in {}", path.display()))?;
    Ok(net)
}

fn network(file: TopologyFile, path: &Path) -> anyhow::Result<Network> {
    check_sizes(file.hosts.len() + file.switches.len(), file.links.len())?;
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
        let switch = program::switch(
            &name,
            path,
            &format!("switches.{name}"),
            SwitchFiles {
                runtime_json: spec.runtime_json.as_deref(),
                cli_input: spec.cli_input.as_deref(),
                program: spec.program.as_deref(),
            },
        )?;
        if let Some(port) = &spec.cpu_port {
            let port = port
                .as_u64()
                .or_else(|| port.as_str().and_then(|s| s.trim().parse().ok()))
                .and_then(|p| u16::try_from(p).ok())
                .with_context(|| format!("switches.{name}.cpu_port: a port number, not {port}"))?;
            net.cpu_ports.insert(name.clone(), port);
        }
        net.switches.push(switch);
    }
    let hosts: HashSet<&str> = net.hosts.iter().map(|h| h.name.as_str()).collect();
    for (i, link) in file.links.iter().enumerate() {
        let link = self::link(&hosts, i, link)?;
        net.links.push(link);
    }
    Ok(net)
}

fn link(hosts: &HashSet<&str>, i: usize, link: &[Value]) -> anyhow::Result<Link> {
    let origin = format!("links[{i}]");
    if !(2..=4).contains(&link.len()) {
        bail!("{origin}: expected [a, b, latency?, bandwidth?]");
    }
    let end = |j: usize| -> anyhow::Result<End> {
        let text = link[j]
            .as_str()
            .with_context(|| format!("{origin}[{j}]: a node name, h1 or s1-p2"))?;
        if hosts.contains(text) {
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

    /// A directory with `topology.json` (TEXT) and the files it names, removed on drop.
    struct Files(std::path::PathBuf);

    impl Files {
        fn new(tag: &str, text: &str) -> Files {
            let dir =
                std::env::temp_dir().join(format!("lossless-tut-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(dir.join("build")).unwrap();
            std::fs::write(dir.join("topology.json"), text).unwrap();
            for file in [
                "s1-runtime.json",
                "s1-commands.txt",
                "build/fw.p4.p4info.txtpb",
            ] {
                std::fs::write(dir.join(file), "{}").unwrap();
            }
            std::fs::write(dir.join("build/fw.json"), "\n {\"header_types\": []}").unwrap();
            Files(dir)
        }

        fn parse(&self) -> anyhow::Result<Network> {
            read(&self.0.join("topology.json"))
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn reads_the_tutorials_shape() {
        let files = Files::new(
            "shape",
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                  "commands": ["route add default gw 10.0.1.10 dev eth0"]},
                "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"}},
                "switches": {"s1": {"runtime_json": "s1-runtime.json",
                                    "cli_input": "s1-commands.txt",
                                    "program": "build/fw.json", "cpu_port": "510"}},
                "links": [["h1", "s1-p1"], ["h2", "s1-p2", "0ms", 100]]}"#,
        );
        let net = files.parse().unwrap();
        let dir = &files.0;
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
        let s1 = &net.switches[0];
        assert_eq!(
            s1.entries.runtime_json(),
            Some(dir.join("s1-runtime.json").as_path())
        );
        assert_eq!(
            s1.entries.cli_input(),
            Some(dir.join("s1-commands.txt").as_path())
        );
        // The program is BMv2 JSON, with the P4Info make writes beside it.
        assert_eq!(
            s1.program,
            Some(super::super::model::Program::Bmv2Json {
                json: dir.join("build/fw.json"),
                p4info: dir.join("build/fw.p4.p4info.txtpb"),
            })
        );
        assert_eq!(net.cpu_ports["s1"], 510);
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let base = r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}},
                       "switches": {"s1": {}}, "links": [LINK]}"#;
        let chain = |link: &str| {
            format!(
                "{:#}",
                Files::new("refuse", &base.replace("LINK", link))
                    .parse()
                    .unwrap_err()
            )
        };
        assert!(chain(r#"["h1", "s1-p1", "5ms"]"#).contains("netem"));
        assert!(chain(r#"["h1", "s9-p1"]"#).contains("no node called s9"));
        assert!(chain(r#"["h1", "s1"]"#).contains("SWITCH-pPORT"));
        Files::new("refuse", &base.replace("LINK", r#"["h1", "s1-p1", "0ms"]"#))
            .parse()
            .unwrap();
        let missing = base.replace(
            r#""s1": {}"#,
            r#""s1": {"runtime_json": "pod-topo/s1.json"}"#,
        );
        let err = format!(
            "{:#}",
            Files::new("refuse", &missing.replace("LINK", r#"["h1", "s1-p1"]"#))
                .parse()
                .unwrap_err()
        );
        assert!(
            err.contains("switches.s1.runtime_json") && err.contains("current directory"),
            "{err}"
        );
    }

    #[test]
    fn a_file_of_too_many_links_is_refused_before_its_links_are_read() {
        // 65,536 links between nodes that do not exist: the count is what is refused.
        let links = vec![r#"["hx", "sx-p1"]"#; 65_536].join(",");
        let text = format!(r#"{{"hosts": {{}}, "switches": {{}}, "links": [{links}]}}"#);
        let err = format!("{:#}", Files::new("many", &text).parse().unwrap_err());
        assert!(err.ends_with("65536 links: at most 4096"), "{err}");
    }
}
