//! `lossless check --net NAME`: the fabric of a running `lossless net` network, its entries
//! read live from every switch over P4Runtime. The topology (hosts, switches, links and their
//! rates) is the network's plan as `lossless net up` recorded it; each switch is reached at the
//! gRPC address and device id the network's status gives, from inside the network's
//! namespace, and every entry of every table of its pipeline is read (one Read, within
//! [`LIMITS`]) and turned into runtime-JSON entries by p4client's `entries::describe`, the
//! form `lossless p4 entries list --json` prints.

use anyhow::{bail, Context as _};
use check::fabric::{Fabric, LinkDefaults};
use p4client::{
    client::{Client, ElectionId, ReadLimits, Target},
    entries,
};
use p4runtime::p4::v1::entity;
use p4values::runtime_json::{RuntimeConfig, MAX_RUNTIME_JSON_BYTES};
use sysutil::netns::run_in;

use crate::net::state::{PlanRecord, PlannedSwitch, Running};

/// The most a switch may answer: a million entities, and the bytes a runtime JSON may hold.
pub const LIMITS: ReadLimits = ReadLimits {
    entities: 1 << 20,
    bytes: MAX_RUNTIME_JSON_BYTES,
};

/// The fabric of the running network `name`, its switches' entries read live; what the
/// network does not say comes from `defaults` (every link's cable and MTU, a link's rate where
/// it has none, the queues' depth).
pub fn fabric(name: &str, defaults: LinkDefaults) -> anyhow::Result<Fabric> {
    let running = Running::find(name)?;
    if !running.alive() {
        bail!(
            "network {name}: its lossless net up (pid {}) is gone; `lossless net --name {name} \
             down` removes what it left",
            running.up.pid
        );
    }
    let plan = running.plan().with_context(|| format!("network {name}"))?;
    let mut targets = Vec::new();
    for switch in &plan.switches {
        let node = running
            .node(&switch.name)
            .with_context(|| format!("network {name}"))?;
        let (Some(address), Some(device_id)) = (node.grpc.clone(), node.device_id) else {
            bail!(
                "network {name}: switch {} reports no P4Runtime address",
                switch.name
            );
        };
        targets.push(Target {
            address,
            device_id,
            // Reads need no arbitration: the id is never claimed.
            election_id: ElectionId::Fixed(1),
            tls: None,
        });
    }
    let read = run_in(&running.netns_path(), || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(async {
                let mut configs = Vec::new();
                for (switch, target) in plan.switches.iter().zip(&targets) {
                    let config = entries_of(target.clone()).await.with_context(|| {
                        format!(
                            "network {name}: switch {} ({}, device {})",
                            switch.name, target.address, target.device_id
                        )
                    })?;
                    configs.push(config);
                }
                anyhow::Ok(configs)
            })
    })
    .with_context(|| format!("network {name}: entering its namespace (root)"))?;
    let configs = read?;
    let topology = topology(plan);
    Fabric::from_topology(&topology, &configs, defaults).with_context(|| format!("network {name}"))
}

/// Every table entry of the switch at `target`, in runtime-JSON form; `None` when it has no
/// pipeline.
async fn entries_of(target: Target) -> anyhow::Result<Option<RuntimeConfig>> {
    let mut client = Client::connect(target).await?;
    let Some(p4info) = client.pipeline(false).await?.and_then(|c| c.p4info) else {
        return Ok(None);
    };
    let wanted = p4info.tables.iter().flat_map(entries::read_all).collect();
    let read = client.read_within(wanted, LIMITS).await?;
    let table_entries = read
        .iter()
        .filter_map(|e| match &e.entity {
            Some(entity::Entity::TableEntry(t)) => Some(entries::describe(t, &p4info)),
            _ => None,
        })
        .collect();
    Ok(Some(RuntimeConfig {
        table_entries,
        ..Default::default()
    }))
}

/// The plan as a topology file's network: hosts with their addresses, switches in the plan's
/// order, links with their rate (no delay: `lossless net` emulates none).
fn topology(plan: PlanRecord) -> netfiles::Topology<PlannedSwitch> {
    let hosts = plan
        .hosts
        .into_iter()
        .map(|h| netfiles::Host {
            name: h.name,
            ip: h.ip,
            mac: String::new(),
            gateway: None,
            neighbours: Vec::new(),
            commands: Vec::new(),
            gateway_mac: None,
        })
        .collect();
    let end = |node: String, port: Option<u16>| netfiles::End {
        node,
        port: port.unwrap_or(0),
        mac: None,
    };
    let links = plan
        .links
        .into_iter()
        .enumerate()
        .map(|(i, l)| netfiles::Link {
            a: end(l.node1, l.port1),
            b: end(l.node2, l.port2),
            bw_mbps: l.bw,
            delay: std::time::Duration::ZERO,
            jitter: std::time::Duration::ZERO,
            loss_percent: 0.0,
            origin: format!("plan.json links[{i}]"),
        })
        .collect();
    netfiles::Topology {
        hosts,
        switches: plan.switches,
        links,
        cpu_ports: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_switch_is_named() {
        // A port just freed: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = Target {
            address: format!("127.0.0.1:{port}"),
            device_id: 0,
            election_id: ElectionId::Fixed(1),
            tls: None,
        };
        let error = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(entries_of(target))
            .unwrap_err();
        let text = format!("{error:#}");
        assert!(
            text.contains(&format!(
                "cannot reach a P4Runtime server at 127.0.0.1:{port}"
            )),
            "{text}"
        );
    }
}
