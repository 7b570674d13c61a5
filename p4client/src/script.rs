//! Running simple_switch_CLI commands over P4Runtime: the one-entry writes of `lossless p4
//! entries` and the lines of a commands.txt (`lossless p4 cli FILE`), in order, each written
//! before the next is read; the first that fails stops the run, its error naming its line.
//!
//! Multicast node handles are this run's: `mc_node_create` numbers nodes 0, 1, ... as a fresh
//! BMv2 does, and `mc_node_associate` rewrites the group with its nodes' (port, rid) replicas.

use std::{collections::BTreeMap, path::Path};

use anyhow::{bail, Context as _};
use p4runtime::p4::{
    config::v1::P4Info,
    v1::{
        entity, packet_replication_engine_entry, update, CloneSessionEntry, CounterData,
        CounterEntry, Index, MulticastGroupEntry,
    },
};
use p4values::runtime_json::ReplicaSpec;

use crate::{
    cells,
    client::Client,
    commands::{self, Line},
    entries::{self, Labelled},
    p4info::{self, by_name, AnyCounter, Named as _},
    render,
};

/// The commands `lossless p4 cli` runs.
pub const COMMANDS: &[&str] = &[
    "table_add",
    "table_modify",
    "table_delete",
    "table_set_default",
    "table_clear",
    "counter_read",
    "counter_reset",
    "register_read",
    "register_write",
    "mc_mgrp_create",
    "mc_mgrp_destroy",
    "mc_node_create",
    "mc_node_associate",
    "mc_node_dissociate",
    "mirroring_add",
    "mirroring_delete",
];

/// A connected client, the device's P4Info, and this run's multicast nodes and groups.
pub struct Session {
    /// The client.
    pub client: Client,
    /// The device's P4Info.
    pub p4info: P4Info,
    /// Multicast nodes by handle: their rid and ports.
    nodes: Vec<(u32, Vec<u32>)>,
    /// Multicast groups created in this run: their nodes' handles.
    groups: BTreeMap<u32, Vec<usize>>,
}

impl Session {
    /// Connects to the device and reads its P4Info.
    pub async fn connect(mut client: Client) -> anyhow::Result<Self> {
        let p4info = client.p4info().await?;
        Ok(Session {
            client,
            p4info,
            nodes: Vec::new(),
            groups: BTreeMap::new(),
        })
    }

    /// Writes one update.
    async fn write(
        &mut self,
        label: String,
        update: p4runtime::p4::v1::Update,
    ) -> anyhow::Result<()> {
        self.client.write(&[Labelled { label, update }]).await?;
        Ok(())
    }

    /// Writes one table entry (`kind`: INSERT, MODIFY or DELETE) given in `table_add` words
    /// (DELETE: `TABLE KEY... [PRIORITY]`).
    pub async fn entry(&mut self, kind: update::Type, words: &[String]) -> anyhow::Result<String> {
        let entry = if kind == update::Type::Delete {
            let [table, key @ ..] = words else {
                bail!("expected TABLE KEY... [PRIORITY]");
            };
            let table = by_name("table", &self.p4info.tables, table)?;
            let (matches, priority) = commands::key(table, key, true)?;
            entries::entry_key(table, &matches, priority)?
        } else {
            let spec = commands::entry(words, &self.p4info)?;
            entries::table_entry(&spec, &self.p4info)?
        };
        let shown = entries::describe(&entry, &self.p4info).describe();
        let update = entries::new_update(kind, entity::Entity::TableEntry(entry));
        self.write(shown.clone(), update).await?;
        Ok(shown)
    }

    /// Deletes every entry of `table` (its default action stays); returns how many.
    pub async fn clear(&mut self, table: &str) -> anyhow::Result<usize> {
        let table = by_name("table", &self.p4info.tables, table)?;
        let read = self.client.read(entries::read_all(table)).await?;
        let updates: Vec<_> = read
            .into_iter()
            .filter_map(|e| match e.entity {
                Some(entity::Entity::TableEntry(t)) if !t.is_default_action => Some(t),
                _ => None,
            })
            .map(|mut t| {
                t.action = None;
                t.counter_data = None;
                t.meter_config = None;
                Labelled {
                    label: entries::describe(&t, &self.p4info).describe(),
                    update: entries::new_update(
                        update::Type::Delete,
                        entity::Entity::TableEntry(t),
                    ),
                }
            })
            .collect();
        self.client.write(&updates).await?;
        Ok(updates.len())
    }

    /// Runs every command of the commands file at `path`, printing what each reads or writes.
    pub async fn run_file(&mut self, path: &Path) -> anyhow::Result<()> {
        let text = read_limited(path)?;
        let lines = commands::parse_file(&text).with_context(|| path.display().to_string())?;
        for line in &lines {
            let said = self.run(line).await.with_context(|| {
                format!(
                    "{}:{}: {} {}",
                    path.display(),
                    line.number,
                    line.command,
                    line.args.join(" ")
                )
            })?;
            print!("{said}");
        }
        Ok(())
    }

    /// Runs one command; returns what it prints.
    async fn run(&mut self, line: &Line) -> anyhow::Result<String> {
        let args = &line.args;
        let number = |i: usize, what: &str| -> anyhow::Result<u32> {
            let text = args.get(i).with_context(|| format!("missing {what}"))?;
            text.parse()
                .with_context(|| format!("{what} {text:?} is not a number"))
        };
        Ok(match line.command.as_str() {
            "table_add" => format!("added {}\n", self.entry(update::Type::Insert, args).await?),
            "table_modify" => format!(
                "modified {} (P4Runtime has no handles: the entry is named by its key)\n",
                self.entry(update::Type::Modify, args).await?
            ),
            "table_delete" => format!(
                "deleted {} (P4Runtime has no handles: the entry is named by its key)\n",
                self.entry(update::Type::Delete, args).await?
            ),
            "table_set_default" => {
                let spec = commands::default_entry(args, &self.p4info)?;
                let entry = entries::table_entry(&spec, &self.p4info)?;
                let update =
                    entries::new_update(update::Type::Modify, entity::Entity::TableEntry(entry));
                self.write(spec.describe(), update).await?;
                format!("default of {}: {}\n", spec.table, spec.describe())
            }
            "table_clear" => {
                let [table] = args.as_slice() else {
                    bail!("expected TABLE");
                };
                format!("{table}: {} entries deleted\n", self.clear(table).await?)
            }
            "counter_read" => {
                let [name, index] = args.as_slice() else {
                    bail!("expected COUNTER INDEX");
                };
                let index: i64 = index
                    .parse()
                    .with_context(|| format!("index {index:?} is not a number"))?;
                let counter = p4info::counter(&self.p4info, name)?;
                let read = self
                    .client
                    .read(vec![cells::counter_entity(counter, Some(index))?])
                    .await?;
                render::counter_table(&cells::counter_cells(&read, &self.p4info), true)
            }
            "counter_reset" => {
                let [name] = args.as_slice() else {
                    bail!("expected COUNTER");
                };
                let AnyCounter::Indirect(counter) = p4info::counter(&self.p4info, name)? else {
                    bail!("{name} is a direct counter: reset its entries' cells by rewriting them");
                };
                let updates: Vec<_> = (0..counter.size)
                    .map(|index| Labelled {
                        label: format!("{}[{index}]", counter.name()),
                        update: entries::new_update(
                            update::Type::Modify,
                            entity::Entity::CounterEntry(CounterEntry {
                                counter_id: counter.id(),
                                index: Some(Index { index }),
                                data: Some(CounterData::default()),
                            }),
                        ),
                    })
                    .collect();
                self.client.write(&updates).await?;
                format!("{}: {} cells reset\n", counter.name(), counter.size)
            }
            "register_read" => {
                let (name, index) = match args.as_slice() {
                    [name] => (name, None),
                    [name, index] => (
                        name,
                        Some(
                            index
                                .parse::<i64>()
                                .with_context(|| format!("index {index:?} is not a number"))?,
                        ),
                    ),
                    _ => bail!("expected REGISTER [INDEX]"),
                };
                let register = by_name("register", &self.p4info.registers, name)?;
                let read = self
                    .client
                    .read(vec![cells::register_entity(register, index)?])
                    .await?;
                render::register_lines(&cells::register_cells(&read, &self.p4info), true)
            }
            "register_write" => {
                let [name, index, value] = args.as_slice() else {
                    bail!("expected REGISTER INDEX VALUE");
                };
                let index: i64 = index
                    .parse()
                    .with_context(|| format!("index {index:?} is not a number"))?;
                let register = by_name("register", &self.p4info.registers, name)?;
                let update = cells::register_write(register, index, value)?;
                self.client.write(std::slice::from_ref(&update)).await?;
                format!("{}\n", update.label)
            }
            "mc_mgrp_create" => {
                let group = number(0, "group id")?;
                self.groups.insert(group, Vec::new());
                self.write_group(update::Type::Insert, group).await?;
                format!("multicast group {group} created\n")
            }
            "mc_mgrp_destroy" => {
                let group = number(0, "group id")?;
                self.write_group(update::Type::Delete, group).await?;
                self.groups.remove(&group);
                format!("multicast group {group} destroyed\n")
            }
            "mc_node_create" => {
                let rid = number(0, "rid")?;
                let ports = (1..args.len())
                    .map(|i| number(i, "port"))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                if ports.is_empty() {
                    bail!("expected RID PORT...");
                }
                self.nodes.push((rid, ports));
                format!("node created with handle {}\n", self.nodes.len() - 1)
            }
            "mc_node_associate" | "mc_node_dissociate" => {
                let group = number(0, "group id")?;
                let node = number(1, "node handle")? as usize;
                if node >= self.nodes.len() {
                    bail!("no node {node}: this run created {}", self.nodes.len());
                }
                let nodes = self.groups.get_mut(&group).with_context(|| {
                    format!("group {group} was not created by this run (mc_mgrp_create)")
                })?;
                if line.command == "mc_node_associate" {
                    nodes.push(node);
                } else {
                    nodes.retain(|n| *n != node);
                }
                self.write_group(update::Type::Modify, group).await?;
                format!(
                    "multicast group {group}: {} node(s)\n",
                    self.groups[&group].len()
                )
            }
            "mirroring_add" => {
                let session = number(0, "session id")?;
                let port = number(1, "port")?;
                self.write_session(update::Type::Insert, session, port)
                    .await?;
                format!("clone session {session} to port {port}\n")
            }
            "mirroring_delete" => {
                let session = number(0, "session id")?;
                self.write_session(update::Type::Delete, session, 0).await?;
                format!("clone session {session} deleted\n")
            }
            other => bail!(
                "{other:?} is not a command lossless p4 cli runs; it runs {}",
                COMMANDS.join(", ")
            ),
        })
    }

    /// Writes multicast group `group` with the replicas of its nodes.
    async fn write_group(&mut self, kind: update::Type, group: u32) -> anyhow::Result<()> {
        let specs: Vec<ReplicaSpec> = self
            .groups
            .get(&group)
            .into_iter()
            .flatten()
            .flat_map(|node| {
                let (rid, ports) = &self.nodes[*node];
                ports.iter().map(|port| ReplicaSpec {
                    egress_port: *port,
                    instance: *rid,
                })
            })
            .collect();
        let entry =
            packet_replication_engine_entry::Type::MulticastGroupEntry(MulticastGroupEntry {
                multicast_group_id: group,
                replicas: entries::replicas(&specs),
                metadata: Vec::new(),
            });
        self.write(
            format!("multicast group {group}"),
            entries::pre_update(kind, entry),
        )
        .await
    }

    /// Writes clone session `session` sending copies to `port` (DELETE: `port` unused).
    pub async fn write_session(
        &mut self,
        kind: update::Type,
        session: u32,
        port: u32,
    ) -> anyhow::Result<()> {
        let replicas = if kind == update::Type::Delete {
            Vec::new()
        } else {
            entries::replicas(&[ReplicaSpec {
                egress_port: port,
                instance: 0,
            }])
        };
        let entry = packet_replication_engine_entry::Type::CloneSessionEntry(CloneSessionEntry {
            session_id: session,
            replicas,
            class_of_service: 0,
            packet_length_bytes: 0,
        });
        self.write(
            format!("clone session {session}"),
            entries::pre_update(kind, entry),
        )
        .await
    }
}

/// The text of a commands file, refused past [`commands::MAX_FILE_BYTES`].
fn read_limited(path: &Path) -> anyhow::Result<String> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if size > commands::MAX_FILE_BYTES {
        bail!(
            "{}: {size} bytes, more than the {} a commands file may have",
            path.display(),
            commands::MAX_FILE_BYTES
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}
