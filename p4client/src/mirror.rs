//! `lossless p4 mirror`: lossless.p4's ERSPAN mirroring (docs/telemetry.md), set and deleted in
//! one command. A session S is three things the program reads: clone session
//! [`MIRROR_SESSION_BASE`] + S to the collector's port, an `erspan_session` entry (type II or
//! III, the outer addresses), and the `mirror_policy` entries that send CNPs, NAKs or every
//! frame of a priority to S. Written through the same table_add words and clone-session writes
//! as `lossless p4 entries add` and `mirroring_add`.

use std::net::Ipv4Addr;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand, ValueEnum};
use p4runtime::p4::v1::{entity, update};

use crate::{client::Client, commands, entries, p4info::by_name, script::Session};

/// lossless.p4's clone session of ERSPAN session 0 (its `MIRROR_SESSION_BASE`).
pub const MIRROR_SESSION_BASE: u32 = 1024;
/// ERSPAN session ids: 10 bits.
pub const MAX_SESSION: u16 = 1023;

/// lossless.p4's `mirror_policy` kinds (its `MIRROR_KIND_*`), as ternary keys.
const KIND_CNP: &str = "1&&&3";
const KIND_NAK: &str = "2&&&3";
const ANY: &str = "0&&&0";
/// Entry priorities (P4Runtime's: higher wins): a CNP or NAK entry of one session before the
/// priority entry of another.
const PRIORITY_OF_KIND: &str = "20";
const PRIORITY_OF_PRIORITY: &str = "10";

/// `mirror` subcommands.
#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Set ERSPAN session S: its clone session (1024 + S) to the collector's port, its
    /// encapsulation and addresses, and what it mirrors (--cnp, --nak, --priority).
    Set(MirrorSetArgs),
    /// Delete ERSPAN session S: the mirror_policy entries that name it, its erspan_session
    /// entry and its clone session.
    Delete {
        /// The ERSPAN session id.
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..=MAX_SESSION as i64))]
        session: u16,
    },
}

/// ERSPAN's encapsulation types lossless.p4 builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ErspanType {
    /// Type II: GRE 0x88BE, an 8-byte header with the port index.
    Ii,
    /// Type III: GRE 0x22EB, a 12-byte header with a timestamp and a hardware id.
    Iii,
}

/// `mirror set`'s options.
#[derive(Debug, Args)]
pub struct MirrorSetArgs {
    /// The ERSPAN session id (0..1023).
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=MAX_SESSION as i64))]
    pub session: u16,
    /// The switch port toward the collector.
    #[arg(long)]
    pub port: u32,
    /// The encapsulation.
    #[arg(long = "type", value_enum, default_value_t = ErspanType::Ii)]
    pub kind: ErspanType,
    /// The outer source MAC (the switch's on that port).
    #[arg(long)]
    pub src_mac: String,
    /// The outer destination MAC (the collector's, or the next hop's toward it).
    #[arg(long)]
    pub dst_mac: String,
    /// The outer source IPv4 address (the switch's).
    #[arg(long)]
    pub src_ip: Ipv4Addr,
    /// The collector's IPv4 address.
    #[arg(long)]
    pub dst_ip: Ipv4Addr,
    /// The outer DSCP.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// The outer TTL.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// Type III's hardware id (0..63).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub hw_id: u8,
    /// Mirror the CNPs that leave the switch (of every priority).
    #[arg(long)]
    pub cnp: bool,
    /// Mirror the NAKs and RNR NAKs that leave the switch (of every priority).
    #[arg(long)]
    pub nak: bool,
    /// Mirror every IPv4 frame of this priority (0..7; repeatable).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..8))]
    pub priority: Vec<u8>,
}

/// The table_add words of `set`'s `erspan_session` entry.
fn session_words(a: &MirrorSetArgs) -> Vec<String> {
    let mut words: Vec<String> = vec![
        "erspan_session".into(),
        match a.kind {
            ErspanType::Ii => "erspan_ii".into(),
            ErspanType::Iii => "erspan_iii".into(),
        },
        a.session.to_string(),
        "=>".into(),
        a.src_mac.clone(),
        a.dst_mac.clone(),
        a.src_ip.to_string(),
        a.dst_ip.to_string(),
        a.dscp.to_string(),
        a.ttl.to_string(),
    ];
    if a.kind == ErspanType::Iii {
        words.push(a.hw_id.to_string());
    }
    words
}

/// The table_add words of `set`'s `mirror_policy` entries.
fn policy_words(a: &MirrorSetArgs) -> Vec<Vec<String>> {
    let entry = |kind: &str, priority: String, entry_priority: &str| -> Vec<String> {
        [
            "mirror_policy",
            "mirror_to",
            kind,
            &priority,
            "=>",
            &a.session.to_string(),
            entry_priority,
        ]
        .map(String::from)
        .to_vec()
    };
    let mut all = Vec::new();
    if a.cnp {
        all.push(entry(KIND_CNP, ANY.into(), PRIORITY_OF_KIND));
    }
    if a.nak {
        all.push(entry(KIND_NAK, ANY.into(), PRIORITY_OF_KIND));
    }
    for p in &a.priority {
        all.push(entry(ANY, format!("{p}&&&7"), PRIORITY_OF_PRIORITY));
    }
    all
}

/// Runs one `mirror` subcommand on `client`'s device; returns what it prints.
pub async fn run(client: Client, command: MirrorCommand) -> anyhow::Result<String> {
    let mut session = Session::connect(client).await?;
    match command {
        MirrorCommand::Set(args) => {
            let policies = policy_words(&args);
            if policies.is_empty() {
                bail!("say what to mirror: --cnp, --nak and/or --priority P");
            }
            let all: Vec<Vec<String>> = std::iter::once(session_words(&args))
                .chain(policies)
                .collect();
            // Every entry encoded (MACs, addresses, against the program's P4Info) before the
            // switch is written, so bad input leaves nothing behind.
            for words in &all {
                commands::entry(words, &session.p4info)
                    .and_then(|spec| entries::table_entry(&spec, &session.p4info))
                    .with_context(|| words.join(" "))?;
            }
            let clone = MIRROR_SESSION_BASE + u32::from(args.session);
            session
                .write_session(update::Type::Insert, clone, args.port)
                .await
                .with_context(|| format!("clone session {clone}"))?;
            let mut said = format!("clone session {clone} to port {}\n", args.port);
            for words in &all {
                let shown = session.entry(update::Type::Insert, words).await?;
                said.push_str(&format!("added {shown}\n"));
            }
            Ok(said)
        }
        MirrorCommand::Delete { session: id } => {
            let deleted = delete_policies(&mut session, id).await?;
            let mut said = format!("{deleted} mirror_policy entries of session {id} deleted\n");
            match session
                .entry(
                    update::Type::Delete,
                    &["erspan_session".into(), id.to_string()],
                )
                .await
            {
                Ok(shown) => said.push_str(&format!("deleted {shown}\n")),
                Err(e) if format!("{e:#}").contains("NOT_FOUND") => {}
                Err(e) => return Err(e),
            }
            let clone = MIRROR_SESSION_BASE + u32::from(id);
            session
                .write_session(update::Type::Delete, clone, 0)
                .await
                .with_context(|| format!("clone session {clone}"))?;
            said.push_str(&format!("clone session {clone} deleted\n"));
            Ok(said)
        }
    }
}

/// Deletes the `mirror_policy` entries whose action names session `id`; returns how many.
async fn delete_policies(session: &mut Session, id: u16) -> anyhow::Result<usize> {
    let table = by_name("table", &session.p4info.tables, "mirror_policy")?.clone();
    let read = session.client.read(entries::read_all(&table)).await?;
    let mut updates = Vec::new();
    for found in read {
        let Some(entity::Entity::TableEntry(mut entry)) = found.entity else {
            continue;
        };
        if entry.is_default_action {
            continue;
        }
        let described = entries::describe(&entry, &session.p4info);
        let names_it = described
            .action_params
            .values()
            .any(|v| v.as_u64() == Some(u64::from(id)) || v.as_str() == Some(&id.to_string()));
        if !names_it {
            continue;
        }
        entry.action = None;
        entry.counter_data = None;
        entry.meter_config = None;
        updates.push(entries::Labelled {
            label: described.describe(),
            update: entries::new_update(update::Type::Delete, entity::Entity::TableEntry(entry)),
        });
    }
    session.client.write(&updates).await?;
    Ok(updates.len())
}
