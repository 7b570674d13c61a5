//! The P4 tutorials' `topology.json`: `hosts` (name → `ip` with prefix, `mac`, `commands`),
//! `switches` (name → `runtime_json`, `cli_input`, `program`, `cpu_port`), `links` (`[a, b]`,
//! `[a, b, latency]`, `[a, b, latency, bandwidth Mb/s]`, where an end is a host or
//! `SWITCH-pPORT`; a latency is a number of milliseconds or a string with a unit, `2us`).
//! One addition, the simulator's: a host's `gateway_mac`, the MAC of the switch port it sends
//! to (the tutorials set it with an `arp -s` command).

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::Value;

use crate::model::{check_length, check_sizes, parse_delay, End, Host, Link, Switch, Topology};

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
    /// The simulator's addition (dataplane-p4/topologies/leaf-spine).
    #[serde(default)]
    gateway_mac: Option<String>,
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

/// Parses and checks ([`Topology::check`]) a tutorials' topology file.
pub fn parse(text: &str) -> anyhow::Result<Topology> {
    check_length(text)?;
    let file: TopologyFile = serde_json::from_str(text)?;
    let net = topology(file)?;
    net.check()?;
    Ok(net)
}

fn topology(file: TopologyFile) -> anyhow::Result<Topology> {
    check_sizes(file.hosts.len() + file.switches.len(), file.links.len())?;
    let mut net = Topology::default();
    for (name, spec) in file.hosts {
        net.hosts.push(Host {
            name,
            ip: spec.ip,
            mac: spec.mac,
            gateway: None,
            neighbours: vec![],
            commands: spec.commands,
            gateway_mac: spec.gateway_mac,
        });
    }
    for (name, spec) in file.switches {
        if let Some(port) = &spec.cpu_port {
            let port = port
                .as_u64()
                .or_else(|| port.as_str().and_then(|s| s.trim().parse().ok()))
                .and_then(|p| u16::try_from(p).ok())
                .with_context(|| format!("switches.{name}.cpu_port: a port number, not {port}"))?;
            net.cpu_ports.insert(name.clone(), port);
        }
        net.switches.push(Switch {
            name,
            runtime_json: spec.runtime_json,
            cli_input: spec.cli_input,
            program: spec.program,
        });
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
            format!(
                "{origin}[{j}]: '{}' is no host; a switch end is SWITCH-pPORT",
                text.escape_debug()
            )
        })?;
        let port = port
            .parse()
            .with_context(|| format!("{origin}[{j}]: port '{}'", port.escape_debug()))?;
        Ok(End {
            node: node.into(),
            port,
            mac: None,
        })
    };
    let delay = match link.get(2) {
        None => Duration::ZERO,
        Some(latency) => parse_delay(&format!("{origin}[2]"), latency)?,
    };
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
        delay,
        jitter: Duration::ZERO,
        loss_percent: 0.0,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_tutorials_shape() {
        let net = parse(
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                  "gateway_mac": "00:AA:00:00:01:01",
                  "commands": ["route add default gw 10.0.1.10 dev eth0"]},
                "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"}},
                "switches": {"s1": {"runtime_json": "s1-runtime.json",
                                    "cli_input": "s1-commands.txt",
                                    "program": "build/fw.json", "cpu_port": "510"}},
                "links": [["h1", "s1-p1"], ["h2", "s1-p2", "2us", 100], ["s1-p3", "s1-p4", 5]]}"#,
        )
        .unwrap();
        assert_eq!(net.hosts[0].commands.len(), 1);
        assert_eq!(
            net.hosts[0].gateway_mac.as_deref(),
            Some("00:AA:00:00:01:01")
        );
        assert_eq!(net.hosts[1].gateway_mac, None);
        assert_eq!(net.links[0].delay, Duration::ZERO);
        assert_eq!(net.links[1].delay, Duration::from_micros(2));
        // A number is milliseconds.
        assert_eq!(net.links[2].delay, Duration::from_millis(5));
        let b = &net.links[1].b;
        assert_eq!((b.node.as_str(), b.port, b.mac.as_deref()), ("s1", 2, None));
        assert_eq!(net.links[1].bw_mbps, Some(100.0));
        assert_eq!(
            net.switches[0],
            Switch {
                name: "s1".into(),
                runtime_json: Some("s1-runtime.json".into()),
                cli_input: Some("s1-commands.txt".into()),
                program: Some("build/fw.json".into()),
            }
        );
        assert_eq!(net.cpu_ports["s1"], 510);
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let base = r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}},
                       "switches": {"s1": {}}, "links": [LINK]}"#;
        let parse = |link: &str| parse(&base.replace("LINK", link));
        let chain = |link: &str| format!("{:#}", parse(link).unwrap_err());
        let delay = chain(r#"["h1", "s1-p1", "5 parsecs"]"#);
        assert!(
            delay.starts_with(r#"links[0][2]: "5 parsecs": a number of ms"#),
            "{delay}"
        );
        assert!(chain(r#"["h1", "s1-p1", "11s"]"#).contains("from 0 to 10s"));
        assert!(chain(r#"["h1", "s1-p1", {"gateway_mac": "x"}]"#).contains("links[0][2]"));
        let mac = r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                       "gateway_mac": "00:aa"}}, "switches": {}, "links": []}"#;
        let mac = format!("{:#}", super::parse(mac).unwrap_err());
        assert!(mac.contains("host h1: gateway_mac: MAC '00:aa'"), "{mac}");
        assert!(chain(r#"["h1", "s9-p1"]"#).contains("no node called s9"));
        assert!(chain(r#"["h1", "s1"]"#).contains("SWITCH-pPORT"));
        assert!(chain(r#"["h1", "s1-p99999"]"#).contains("port '99999'"));
        parse(r#"["h1", "s1-p1", "0ms"]"#).unwrap();
    }

    #[test]
    fn a_file_of_too_many_links_is_refused_before_its_links_are_read() {
        // Links between nodes that do not exist: the count is what is refused.
        let too_many = crate::MAX_LINKS + 1;
        let links = vec![r#"["hx", "sx-p1"]"#; too_many].join(",");
        let text = format!(r#"{{"hosts": {{}}, "switches": {{}}, "links": [{links}]}}"#);
        let err = format!("{:#}", parse(&text).unwrap_err());
        assert!(
            err.ends_with(&format!("{too_many} links: at most {}", crate::MAX_LINKS)),
            "{err}"
        );
    }

    #[test]
    fn a_fabric_larger_than_mininet_runs_parses() {
        // 600 switches named longer than an interface name allows: the simulator's to run;
        // `lossless net` refuses it (its own limits).
        let switches: Vec<String> = (1..=600)
            .map(|s| format!(r#""switch{s:04}": {{}}"#))
            .collect();
        let text = format!(
            r#"{{"hosts": {{}}, "switches": {{{}}}, "links": [["switch0001-p1", "switch0600-p2"]]}}"#,
            switches.join(",")
        );
        let net = parse(&text).unwrap();
        assert_eq!((net.switches.len(), net.links.len()), (600, 1));
    }
}
