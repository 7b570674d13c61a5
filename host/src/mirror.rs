//! `lossless host mirror`: the interface's ERSPAN mirroring session (docs/telemetry.md), which
//! the `mirror` hook's programs read on every frame: where mirrors go (the collector's
//! addresses, the interface toward it), as what (ERSPAN II or III, the session id) and which
//! frames (CNPs, NAKs, priorities). One session per interface; `set` replaces it whole.

use std::net::{IpAddr, Ipv4Addr};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand, ValueEnum};
use dataplane_common::{
    mirror::{ErspanType, MirrorCounters, MirrorSession, MAX_HW_ID, MAX_SESSION},
    PRIORITIES,
};
use serde::Serialize;
use wire::ethernet::Address;

use crate::pinned_maps::PinnedMaps;
use hostconfig::attachment::Attachment;
use sysutil::interface::Interface;

/// `mirror` actions.
#[derive(Debug, Subcommand)]
pub enum MirrorAction {
    /// Mirror the selected frames (--cnp, --nak, --priority) this interface sends and receives
    /// to a collector, as ERSPAN over GRE out of --via; replaces the session there was.
    Set(MirrorSetArgs),
    /// Stop mirroring.
    Delete,
    /// Print the session.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The encapsulation, on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    /// ERSPAN type II (GRE 0x88BE): the index is this interface's ifindex.
    Ii,
    /// ERSPAN type III (GRE 0x22EB): a timestamp (100 ns units), the hardware id, the
    /// direction.
    Iii,
}

/// `mirror set`'s options.
#[derive(Debug, Args)]
pub struct MirrorSetArgs {
    /// The interface the mirrors leave by, toward the collector (this one or another of this
    /// network namespace); its MAC is the outer source MAC.
    #[arg(long)]
    pub via: String,
    /// The collector's IPv4 address.
    #[arg(long)]
    pub collector_ip: Ipv4Addr,
    /// The collector's MAC (or the next hop's toward it): the outer destination.
    #[arg(long)]
    pub collector_mac: String,
    /// The outer source address (default: an IPv4 address of --via).
    #[arg(long)]
    pub source_ip: Option<Ipv4Addr>,
    /// The ERSPAN session id (0..1023).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=MAX_SESSION as i64))]
    pub session: u32,
    /// The encapsulation.
    #[arg(long = "type", value_enum, default_value_t = TypeArg::Ii)]
    pub kind: TypeArg,
    /// Type III's hardware id (0..63).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=MAX_HW_ID as i64))]
    pub hw_id: u32,
    /// The outer DSCP.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// The outer TTL.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// Mirror the CNPs sent and received.
    #[arg(long)]
    pub cnp: bool,
    /// Mirror the NAKs and RNR NAKs sent and received.
    #[arg(long)]
    pub nak: bool,
    /// Mirror every frame of this priority sent and received (0..7; repeatable).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..PRIORITIES as i64))]
    pub priority: Vec<u8>,
}

impl MirrorSetArgs {
    /// The session these options describe, every name and address resolved in the calling
    /// thread's namespace; fails before anything is written.
    fn session(&self) -> anyhow::Result<MirrorSession> {
        if !self.cnp && !self.nak && self.priority.is_empty() {
            bail!("nothing to mirror: give --cnp, --nak or --priority");
        }
        let collector_mac: Address = self
            .collector_mac
            .parse()
            .with_context(|| format!("--collector-mac '{}'", self.collector_mac))?;
        if collector_mac.is_multicast() {
            bail!("--collector-mac {collector_mac} is a group address: give the collector's");
        }
        let via = Interface::lookup(&self.via).with_context(|| format!("--via {}", self.via))?;
        let source_ip = match self.source_ip {
            Some(ip) => ip,
            None => match via.address_like(IpAddr::V4(Ipv4Addr::UNSPECIFIED)) {
                Ok(IpAddr::V4(ip)) => ip,
                _ => bail!("{} has no IPv4 address: give --source-ip", self.via),
            },
        };
        let mut flags = 0;
        if self.cnp {
            flags |= MirrorSession::CNP;
        }
        if self.nak {
            flags |= MirrorSession::NAK;
        }
        Ok(MirrorSession {
            flags,
            priorities: self.priority.iter().fold(0, |bits, p| bits | 1 << p),
            via_ifindex: via.index,
            session: self.session,
            erspan_type: match self.kind {
                TypeArg::Ii => ErspanType::II,
                TypeArg::Iii => ErspanType::III,
            } as u32,
            hw_id: self.hw_id,
            src_ip: source_ip.octets(),
            dst_ip: self.collector_ip.octets(),
            src_mac: via.mac.0,
            dst_mac: collector_mac.0,
            dscp: self.dscp,
            ttl: self.ttl,
            reserved: [0; 2],
            sequence: 0,
        })
    }
}

/// A session as `show` and `stats` print it.
#[derive(Clone, Debug, Serialize)]
pub struct SessionView {
    /// The ERSPAN session id.
    pub session: u32,
    /// `ii` or `iii`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The collector's address.
    pub collector_ip: Ipv4Addr,
    /// The outer destination MAC.
    pub collector_mac: String,
    /// The outer source address.
    pub source_ip: Ipv4Addr,
    /// The interface the mirrors leave by (its ifindex when it is gone).
    pub via: String,
    /// What is mirrored: `cnp`, `nak`, `priority N`.
    pub selects: Vec<String>,
    /// The GRE sequence number of the next mirror.
    pub next_sequence: u32,
}

impl SessionView {
    /// The view of `session`, or `None` when it is off.
    pub fn of(session: &MirrorSession) -> Option<Self> {
        if !session.is_on() {
            return None;
        }
        let mut selects = Vec::new();
        if session.flags & MirrorSession::CNP != 0 {
            selects.push("cnp".to_owned());
        }
        if session.flags & MirrorSession::NAK != 0 {
            selects.push("nak".to_owned());
        }
        selects.extend(
            (0..PRIORITIES)
                .filter(|p| session.priorities & (1 << p) != 0)
                .map(|p| format!("priority {p}")),
        );
        Some(SessionView {
            session: session.session,
            kind: match session.kind() {
                Some(ErspanType::III) => "iii",
                _ => "ii",
            },
            collector_ip: Ipv4Addr::from(session.dst_ip),
            collector_mac: Address(session.dst_mac).to_string(),
            source_ip: Ipv4Addr::from(session.src_ip),
            via: Interface::name_of(session.via_ifindex)
                .unwrap_or_else(|| format!("ifindex {}", session.via_ifindex)),
            selects,
            next_sequence: session.sequence,
        })
    }

    /// One line.
    pub fn summary(&self) -> String {
        format!(
            "ERSPAN {} session {} to {} ({}) from {} via {}: {}",
            self.kind.to_uppercase(),
            self.session,
            self.collector_ip,
            self.collector_mac,
            self.source_ip,
            self.via,
            self.selects.join(", ")
        )
    }
}

/// What `stats` reports of mirroring, with the `mirror` hook.
#[derive(Clone, Debug, Serialize)]
pub struct MirrorStats {
    /// The session (absent when off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionView>,
    /// Frames mirrored, by direction and kind; skipped and failed.
    #[serde(flatten)]
    pub counters: MirrorCounters,
    /// Every frame mirrored.
    pub mirrored: u64,
}

impl MirrorStats {
    /// Reads the session and the counters.
    pub fn read(maps: &PinnedMaps) -> anyhow::Result<Self> {
        let counters = maps.read_mirror_counters()?;
        Ok(MirrorStats {
            session: SessionView::of(&maps.read_mirror_session()?),
            mirrored: counters.mirrored(),
            counters,
        })
    }

    /// The lines of `stats`' table.
    pub fn table(&self) -> String {
        let c = &self.counters;
        let session = self
            .session
            .as_ref()
            .map_or_else(|| "off".to_owned(), SessionView::summary);
        format!(
            "mirror {session}\nmirror rx cnp {} nak {} priority {}, tx cnp {} nak {} priority {}, \
             skipped {} failed {}\n",
            c.rx_cnps,
            c.rx_naks,
            c.rx_priority,
            c.tx_cnps,
            c.tx_naks,
            c.tx_priority,
            c.skipped,
            c.failed
        )
    }
}

/// Runs one `mirror` action on `iface`.
pub fn run(iface: &str, action: MirrorAction) -> anyhow::Result<()> {
    let maps = PinnedMaps::open(iface)?;
    if maps.read_attach_info()?.hooks & Attachment::Mirror.bit() == 0 {
        bail!("{iface}: the mirror hook is not attached (attach with --hooks mirror)");
    }
    match action {
        MirrorAction::Set(args) => {
            let session = args.session()?;
            maps.write_mirror_session(&session)?;
            let view = SessionView::of(&session).context("the session selects nothing")?;
            println!("{iface}: {}", view.summary());
        }
        MirrorAction::Delete => {
            if !maps.read_mirror_session()?.is_on() {
                bail!("{iface}: no mirroring session");
            }
            maps.write_mirror_session(&MirrorSession::default())?;
            println!("{iface}: mirroring off");
        }
        MirrorAction::Show { json } => {
            let view = SessionView::of(&maps.read_mirror_session()?);
            if json {
                println!("{}", serde_json::to_string(&view)?);
            } else {
                match view {
                    Some(view) => println!("{iface}: {}", view.summary()),
                    None => println!("{iface}: mirroring off"),
                }
            }
        }
    }
    Ok(())
}
