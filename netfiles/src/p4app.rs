//! p4-utils' `p4app.json`, its common keys: the program (`p4_src`, or `program`), and under
//! `topology` the `assignment_strategy` (`l2`, `mixed` (the default), `l3`, `manual`),
//! `default` link options (`bw` in Mb/s, `delay` and `jitter` in ms or with a unit, `loss` in
//! percent), `auto_arp_tables` and `auto_gw_arp`, `links` (`[a, b]` or
//! `[a, b, {options}]`, switch ports numbered in link order from 1), `hosts` and `switches`
//! (`program`, `cli_input` — simple_switch_CLI commands —, `runtime_json` — our addition, for
//! P4Runtime entries).
//! Addresses follow p4-utils' strategies: l2 puts host hN at 10.0.N/256.N%256/16; mixed at
//! 10.X/256.X%256.N/24 behind switch X (switches numbered by their names' last number, in
//! order), gateway .254; l3 at 10.X.N.2/24, gateway 10.X.N.1; manual takes each host's `ip`
//! and `gw`. Host MACs are 00:00 and the address, switch ports facing hosts 00:01 and it.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::Value;

use crate::model::{
    check_length, check_sizes, parse_cidr, parse_delay, parse_loss, End, Host, Link, Switch,
    Topology,
};

/// A parsed p4app.json: the network, and the program it names.
#[derive(Debug)]
pub struct P4App {
    /// The network.
    pub topology: Topology,
    /// `p4_src` (or `program`), as written: the program of switches that name none.
    pub program: Option<String>,
}

#[derive(Deserialize)]
struct AppFile {
    #[serde(default)]
    p4_src: Option<String>,
    #[serde(default)]
    program: Option<String>,
    topology: TopologySpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologySpec {
    #[serde(default)]
    assignment_strategy: Option<String>,
    #[serde(default)]
    default: BTreeMap<String, Value>,
    #[serde(default)]
    auto_arp_tables: Option<bool>,
    #[serde(default)]
    auto_gw_arp: Option<bool>,
    links: Vec<Vec<Value>>,
    #[serde(default)]
    hosts: BTreeMap<String, HostSpec>,
    #[serde(default)]
    switches: BTreeMap<String, SwitchSpec>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostSpec {
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    gw: Option<Ipv4Addr>,
    #[serde(default)]
    mac: Option<String>,
}

#[derive(Clone, Deserialize, Default)]
struct SwitchSpec {
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    runtime_json: Option<String>,
    #[serde(default)]
    cli_input: Option<String>,
}

/// Parses and checks ([`Topology::check`]) a p4app.json.
pub fn parse(text: &str) -> anyhow::Result<P4App> {
    check_length(text)?;
    let file: AppFile = serde_json::from_str(text)?;
    let topology = topology(file.topology)?;
    topology.check()?;
    Ok(P4App {
        topology,
        program: file.p4_src.or(file.program),
    })
}

fn number_of(name: &str) -> Option<u32> {
    let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let start = name.len() - digits.len();
    name[start..].parse().ok()
}

fn host_mac(ip: Ipv4Addr, second: u8) -> String {
    let [a, b, c, d] = ip.octets();
    format!("00:{second:02x}:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

fn topology(topo: TopologySpec) -> anyhow::Result<Topology> {
    check_sizes(topo.hosts.len() + topo.switches.len(), topo.links.len())?;
    let strategy = topo.assignment_strategy.as_deref().unwrap_or("mixed");
    if !["l2", "mixed", "l3", "manual"].contains(&strategy) {
        bail!("topology.assignment_strategy '{strategy}': l2, mixed, l3 or manual");
    }
    let default = |key: &str| topo.default.get(key).unwrap_or(&Value::Null);
    let default_bw = default("bw").as_f64();
    let default_delay = parse_delay("topology.default.delay", default("delay"))?;
    let default_jitter = parse_delay("topology.default.jitter", default("jitter"))?;
    let default_loss = parse_loss("topology.default.loss", default("loss"))?;
    // Switches: every node a link names that is not a host.
    let mut switch_names: BTreeSet<String> = topo.switches.keys().cloned().collect();
    for link in &topo.links {
        for end in link.iter().take(2).filter_map(Value::as_str) {
            if !topo.hosts.contains_key(end) {
                switch_names.insert(end.to_string());
            }
        }
    }
    let mut ordered: Vec<String> = switch_names.into_iter().collect();
    ordered.sort_by_key(|n| (number_of(n).unwrap_or(u32::MAX), n.clone()));
    let switch_id: BTreeMap<String, u32> = ordered
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i as u32 + 1))
        .collect();
    let mut net = Topology::default();
    for name in &ordered {
        let spec = topo.switches.get(name).cloned().unwrap_or_default();
        net.switches.push(Switch {
            name: name.clone(),
            runtime_json: spec.runtime_json,
            cli_input: spec.cli_input,
            program: spec.program,
        });
    }
    let mut next_port: BTreeMap<String, u16> = BTreeMap::new();
    let mut port_of = |node: &str| {
        let p = next_port.entry(node.to_string()).or_insert(0);
        *p += 1;
        *p
    };
    // (host, its link's index, the switch's end) for each host link, in link order.
    let mut host_links = Vec::new();
    // p4-utils gives a host one interface: a second link is refused here, before the hosts
    // (and their neighbour tables, host by host) are built from the links.
    let mut linked_hosts = BTreeSet::new();
    for (i, link) in topo.links.iter().enumerate() {
        let origin = format!("topology.links[{i}]");
        if !(2..=3).contains(&link.len()) {
            bail!("{origin}: expected [a, b] or [a, b, {{options}}]");
        }
        let name = |j: usize| {
            link[j]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("{origin}[{j}]: a node name"))
        };
        let (a, b) = (name(0)?, name(1)?);
        let mut bw = default_bw;
        let (mut delay, mut jitter, mut loss) = (default_delay, default_jitter, default_loss);
        if let Some(options) = link.get(2) {
            let options = options
                .as_object()
                .with_context(|| format!("{origin}[2]: an object"))?;
            for (key, value) in options {
                match key.as_str() {
                    "bw" => {
                        bw = Some(
                            value
                                .as_f64()
                                .with_context(|| format!("{origin}.bw: Mb/s"))?,
                        )
                    }
                    "delay" => delay = parse_delay(&format!("{origin}.delay"), value)?,
                    "jitter" => jitter = parse_delay(&format!("{origin}.jitter"), value)?,
                    "loss" => loss = parse_loss(&format!("{origin}.loss"), value)?,
                    "weight" | "queue_length" | "max_queue_size" => {}
                    other => bail!("{origin}: unknown option '{other}'"),
                }
            }
        }
        let end = |node: &str, port: &mut dyn FnMut(&str) -> u16| End {
            node: node.into(),
            port: if topo.hosts.contains_key(node) {
                0
            } else {
                port(node)
            },
            mac: None,
        };
        let a_end = end(&a, &mut port_of);
        let b_end = end(&b, &mut port_of);
        let host_link = match (topo.hosts.contains_key(&a), topo.hosts.contains_key(&b)) {
            (true, false) => Some((a.clone(), i, b_end.clone())),
            (false, true) => Some((b.clone(), i, a_end.clone())),
            (true, true) => bail!("{origin}: two hosts linked directly"),
            _ => None,
        };
        if let Some(link) = host_link {
            if !linked_hosts.insert(link.0.clone()) {
                bail!(
                    "{origin}: host {} has a link already (a p4-utils host has one interface)",
                    link.0
                );
            }
            host_links.push(link);
        }
        net.links.push(Link {
            a: a_end,
            b: b_end,
            bw_mbps: bw,
            delay,
            jitter,
            loss_percent: loss,
            origin,
        });
    }
    let auto_arp = topo.auto_arp_tables.unwrap_or(true);
    let auto_gw_arp = topo.auto_gw_arp.unwrap_or(true);
    for (host, link, sw) in &host_links {
        let spec = &topo.hosts[host];
        let n = number_of(host).filter(|n| *n >= 1 && host.starts_with('h'));
        let id = switch_id[&sw.node];
        let (hi, lo) = ((id >> 8) as u8, id as u8);
        let need_n = || {
            n.with_context(|| format!("host {host}: p4-utils' {strategy} strategy needs names hN"))
        };
        let (ip, len, gateway) = match strategy {
            "l2" => {
                let n = need_n()?;
                (Ipv4Addr::new(10, 0, (n >> 8) as u8, n as u8), 16, None)
            }
            "mixed" => {
                let n = need_n()?;
                if n >= 254 {
                    bail!("host {host}: mixed addresses hosts 1..=253");
                }
                (
                    Ipv4Addr::new(10, hi, lo, n as u8),
                    24,
                    Some(Ipv4Addr::new(10, hi, lo, 254)),
                )
            }
            "l3" => {
                let n = need_n()?;
                if n >= 254 || id >= 254 {
                    bail!("host {host}: l3 addresses hosts and switches 1..=253");
                }
                (
                    Ipv4Addr::new(10, id as u8, n as u8, 2),
                    24,
                    Some(Ipv4Addr::new(10, id as u8, n as u8, 1)),
                )
            }
            _ => {
                let text = spec.ip.as_deref().with_context(|| {
                    format!("topology.hosts.{host}.ip: the manual strategy needs it")
                })?;
                let (ip, len) = parse_cidr(text)?;
                (ip, len, spec.gw)
            }
        };
        let mac = match &spec.mac {
            Some(m) => m.clone(),
            None => host_mac(ip, 0),
        };
        let mut neighbours = Vec::new();
        if let (Some(gw), true) = (gateway, auto_gw_arp) {
            neighbours.push((gw, host_mac(ip, 1)));
        }
        net.hosts.push(Host {
            name: host.clone(),
            ip: format!("{ip}/{len}"),
            mac,
            gateway,
            neighbours,
            commands: vec![],
            gateway_mac: gateway.map(|_| host_mac(ip, 1)),
        });
        // The switch port facing the host gets the MAC the host's gateway entry names.
        let link = &mut net.links[*link];
        for end in [&mut link.a, &mut link.b] {
            if end.node == sw.node && end.port == sw.port {
                end.mac = Some(host_mac(ip, 1));
            }
        }
    }
    if auto_arp {
        let all: Vec<(String, Ipv4Addr, u8, String)> = net
            .hosts
            .iter()
            .map(|h| {
                let (ip, len) = parse_cidr(&h.ip).expect("made above");
                (h.name.clone(), ip, len, h.mac.clone())
            })
            .collect();
        for host in &mut net.hosts {
            let (ip, len) = parse_cidr(&host.ip)?;
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            for (name, other, _, mac) in &all {
                if *name != host.name && (u32::from(*other) & mask) == (u32::from(ip) & mask) {
                    host.neighbours.push((*other, mac.clone()));
                }
            }
        }
    }
    let linked: BTreeSet<&str> = net.hosts.iter().map(|h| h.name.as_str()).collect();
    if let Some(name) = topo.hosts.keys().find(|h| !linked.contains(h.as_str())) {
        bail!("topology.hosts.{name}: no link joins it to a switch");
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parse(text: &str) -> anyhow::Result<Topology> {
        let net = topology(serde_json::from_str(text)?)?;
        net.check()?;
        Ok(net)
    }

    #[test]
    fn mixed_addresses_and_ports_in_link_order() {
        let net = parse(
            r#"{"links": [["h1", "s1"], ["h2", "s1"], ["s1", "s2", {"bw": 10}], ["h3", "s2"]],
                "hosts": {"h1": {}, "h2": {}, "h3": {}}, "switches": {"s1": {}, "s2": {}}}"#,
        )
        .unwrap();
        let h1 = &net.hosts[0];
        assert_eq!(
            (h1.ip.as_str(), h1.mac.as_str()),
            ("10.0.1.1/24", "00:00:0a:00:01:01")
        );
        assert_eq!(h1.gateway, Some(Ipv4Addr::new(10, 0, 1, 254)));
        assert!(h1
            .neighbours
            .contains(&(Ipv4Addr::new(10, 0, 1, 2), "00:00:0a:00:01:02".into())));
        assert_eq!(net.hosts[2].ip, "10.0.2.3/24");
        let ends = |l: &Link| [&l.a, &l.b].map(|e| (e.node.clone(), e.port, e.mac.clone()));
        assert_eq!(
            ends(&net.links[2]),
            [("s1".into(), 3, None), ("s2".into(), 1, None)]
        );
        assert_eq!(net.links[2].bw_mbps, Some(10.0));
    }

    #[test]
    fn a_host_linked_twice_is_refused_before_hosts_are_built() {
        // 512 hosts linked 8 times each once took a second and a gigabyte before a refusal.
        let links: Vec<String> = (1..=512)
            .flat_map(|h| std::iter::repeat_n(format!(r#"["h{h}", "s1"]"#), 8))
            .collect();
        let hosts: Vec<String> = (1..=512).map(|h| format!(r#""h{h}": {{}}"#)).collect();
        let text = format!(
            r#"{{"links": [{}], "hosts": {{{}}}, "assignment_strategy": "l2"}}"#,
            links.join(","),
            hosts.join(",")
        );
        let refused = parse(&text).unwrap_err().to_string();
        assert!(
            refused.starts_with("topology.links[1]: host h1 has a link already"),
            "{refused}"
        );
    }

    #[test]
    fn l3_and_refusals() {
        let net = parse(
            r#"{"links": [["h1", "s1"]], "hosts": {"h1": {}}, "topology_ignored": 1,
                "assignment_strategy": "l3"}"#,
        );
        assert!(net.is_err(), "unknown topology keys are refused");
        let net =
            parse(r#"{"links": [["h1", "s1"]], "hosts": {"h1": {}}, "assignment_strategy": "l3"}"#)
                .unwrap();
        assert_eq!(net.hosts[0].ip, "10.1.1.2/24");
        assert!(
            parse(r#"{"links": [["h1", "s1", {"delay": "5 parsecs"}]], "hosts": {"h1": {}}}"#)
                .unwrap_err()
                .to_string()
                .starts_with(r#"topology.links[0].delay: "5 parsecs": a number of ms"#)
        );
        assert!(parse(
            r#"{"links": [["h1", "s1"]], "hosts": {"h1": {}}, "default": {"loss": 101}}"#
        )
        .unwrap_err()
        .to_string()
        .starts_with("topology.default.loss: 101: a percentage"));
        // The defaults apply to every link, a link's own options over them.
        let netem = parse(
            r#"{"links": [["h1", "s1"], ["h2", "s1", {"delay": "1ms", "loss": 0}]],
                "hosts": {"h1": {}, "h2": {}},
                "default": {"delay": 5, "jitter": "100us", "loss": 1.5}}"#,
        )
        .unwrap();
        let [one, two] = &netem.links[..] else {
            panic!("two links")
        };
        assert_eq!(
            (one.delay, one.jitter, one.loss_percent),
            (Duration::from_millis(5), Duration::from_micros(100), 1.5)
        );
        assert_eq!(
            (two.delay, two.jitter, two.loss_percent),
            (Duration::from_millis(1), Duration::from_micros(100), 0.0)
        );
        assert_eq!(
            netem.hosts[0].gateway_mac.as_deref(),
            Some("00:01:0a:00:01:01")
        );
        let named = parse(
            r#"{"links": [["h1", "s1"]], "hosts": {"h1": {}},
                "switches": {"s1": {"cli_input": "s1-none.txt"}}}"#,
        )
        .unwrap();
        assert_eq!(named.switches[0].cli_input.as_deref(), Some("s1-none.txt"));
        let app = super::parse(r#"{"p4_src": "basic.p4", "topology": {"links": []}}"#).unwrap();
        assert_eq!(app.program.as_deref(), Some("basic.p4"));
    }
}
