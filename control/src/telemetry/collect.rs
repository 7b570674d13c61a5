//! `lossless telemetry collect`: an ERSPAN collector. Reads the IPv4 frames arriving on one
//! interface (an AF_PACKET socket: the kernel may have no GRE or ERSPAN device), keeps those that
//! are ERSPAN II or III ([`wire::erspan`]), writes them as they arrived (the outer frames, which
//! Wireshark decodes) to a pcap file, and counts the RoCEv2 CNPs and NAKs they carry per time
//! bucket, destination and QP. Stops on a count of ERSPAN frames, a duration or a stop request
//! (Ctrl-C), and reports.
//!
//! What it keeps is bounded: the table holds at most `max_rows` rows (frames past it are
//! counted, not tabled), the pcap file at most `max_pcap_bytes` (frames past it are counted, not
//! written).

use std::{
    collections::BTreeMap,
    fs::File,
    io::{BufWriter, Write as _},
    net::Ipv4Addr,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde::Serialize;
use traffic::{packet_socket::PacketSocket, StopFlag};
use wire::{
    aeth::{self, Syndrome},
    bth::Opcode,
    erspan,
    roce::RoceFrame,
};

/// The longest frame read whole; a longer one is counted as truncated and skipped.
const FRAME_BUFFER: usize = 16 * 1024;
/// How often the stop conditions are looked at while no frame arrives.
const POLL: Duration = Duration::from_millis(50);
/// Bytes of a pcap file's header, and of each record's header.
const PCAP_HEADER_BYTES: u64 = 24;
const PCAP_RECORD_HEADER_BYTES: u64 = 16;

/// What a collector is asked to do.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    /// The interface the ERSPAN frames arrive on.
    pub interface: String,
    /// The pcap file to write, if any.
    pub pcap: Option<PathBuf>,
    /// The width of a time bucket of the table.
    pub bucket: Duration,
    /// Stop after this many ERSPAN frames.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Most rows the table keeps.
    pub max_rows: usize,
    /// Most bytes the pcap file takes.
    pub max_pcap_bytes: u64,
}

/// One row of the table: CNPs and NAKs to one QP in one time bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Row {
    /// The bucket's start, seconds since the collector started.
    pub bucket_start_s: f64,
    /// The mirrored frame's destination address.
    pub destination: Ipv4Addr,
    /// Its BTH destination QP.
    pub qp: u32,
    /// CNPs (BTH opcode 0x81).
    pub cnps: u64,
    /// NAKs and RNR NAKs (RC Acknowledges whose AETH syndrome says so).
    pub naks: u64,
}

/// What a collector received.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Collected {
    /// ERSPAN frames received, by session id.
    pub sessions: BTreeMap<u16, u64>,
    /// ERSPAN frames received.
    pub erspan_frames: u64,
    /// IPv4 frames that were not ERSPAN (or malformed ERSPAN).
    pub other_frames: u64,
    /// Frames longer than the collector reads whole (skipped).
    pub truncated_frames: u64,
    /// Frames the kernel dropped before the socket.
    pub kernel_drops: u64,
    /// Mirrored frames that were CNPs, NAKs, and neither.
    pub cnps: u64,
    /// See `cnps`.
    pub naks: u64,
    /// See `cnps`.
    pub other_mirrored: u64,
    /// CNPs and NAKs left out of the table because it was full.
    pub untabled: u64,
    /// ERSPAN frames written to the pcap file, and left out because it was full.
    pub pcap_frames: u64,
    /// See `pcap_frames`.
    pub pcap_skipped: u64,
    /// Seconds the collector ran.
    pub seconds: f64,
    /// The table, by bucket, destination and QP.
    pub table: Vec<Row>,
}

/// What a mirrored frame is to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cnp,
    Nak,
}

/// The CNP or NAK `frame` is, with its destination and QP; `None` for anything else.
fn classify(frame: &[u8]) -> Option<(Kind, Ipv4Addr, u32)> {
    let (roce, payload) = RoceFrame::parse(frame).ok()?;
    let std::net::IpAddr::V4(destination) = roce.dst_ip else {
        return None;
    };
    let kind = match roce.bth.opcode {
        Opcode::Cnp => Kind::Cnp,
        Opcode::RcAck => {
            let header = aeth::Packet::new_checked(payload).ok()?;
            match aeth::Repr::parse(&header).syndrome {
                Syndrome::Nak(_) | Syndrome::RnrNak(_) => Kind::Nak,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((kind, destination, roce.bth.dest_qp))
}

/// The output file at `path` (the pcap file, the table), created or truncated, not through a
/// symbolic link (the collector runs as root, maybe in a directory others write to).
pub fn create_output(path: &Path) -> anyhow::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// The pcap file at `path`, as [`create_output`] makes it.
fn create_pcap(path: &Path) -> anyhow::Result<PcapWriter<BufWriter<File>>> {
    let file = create_output(path)?;
    PcapWriter::new(BufWriter::new(file))
        .with_context(|| format!("writing the pcap header of {}", path.display()))
}

/// The table's rows, keyed by (bucket, destination, QP) while collecting.
#[derive(Default)]
struct Table {
    rows: BTreeMap<(u64, Ipv4Addr, u32), (u64, u64)>,
}

impl Table {
    /// Counts one CNP or NAK; false if it would need a row past `max_rows`.
    fn count(&mut self, key: (u64, Ipv4Addr, u32), kind: Kind, max_rows: usize) -> bool {
        if !self.rows.contains_key(&key) && self.rows.len() >= max_rows {
            return false;
        }
        let cell = self.rows.entry(key).or_default();
        match kind {
            Kind::Cnp => cell.0 += 1,
            Kind::Nak => cell.1 += 1,
        }
        true
    }

    fn into_rows(self, bucket: Duration) -> Vec<Row> {
        self.rows
            .into_iter()
            .map(|((index, destination, qp), (cnps, naks))| Row {
                bucket_start_s: index as f64 * bucket.as_secs_f64(),
                destination,
                qp,
                cnps,
                naks,
            })
            .collect()
    }
}

/// Collects ERSPAN frames in the current network namespace until a stop condition; the socket
/// is closed and the pcap file flushed however it ends.
pub fn collect(config: &CollectConfig, stop: &StopFlag) -> anyhow::Result<Collected> {
    let ifindex = sysutil::interface::ifindex(&config.interface)?;
    let socket = PacketSocket::open(ifindex, true)
        .with_context(|| format!("opening a packet socket on {}", config.interface))?;
    socket.ignore_outgoing()?;
    socket.stamp_arrivals()?;
    tracing::info!("collecting ERSPAN on {}", config.interface);
    let mut pcap = config.pcap.as_deref().map(create_pcap).transpose()?;
    let mut pcap_bytes = PCAP_HEADER_BYTES;
    let mut collected = Collected::default();
    let mut table = Table::default();
    let started = Instant::now();
    let started_wall = SystemTime::now();
    let mut buffer = vec![0u8; FRAME_BUFFER];
    let bucket_ns = config.bucket.as_nanos().max(1);
    // Looked at between frames too: a steady stream never leaves the socket empty.
    let finished = |collected: &Collected| {
        stop.is_stopped()
            || config.duration.is_some_and(|d| started.elapsed() >= d)
            || config.count.is_some_and(|n| collected.erspan_frames >= n)
    };
    loop {
        if finished(&collected) {
            break;
        }
        let elapsed = started.elapsed();
        let wait = config
            .duration
            .map_or(POLL, |d| d.saturating_sub(elapsed).min(POLL));
        if !socket.wait_readable(wait)? {
            continue;
        }
        while let Some(received) = socket.try_recv(&mut buffer)? {
            if received.outgoing {
                continue;
            }
            if received.len > buffer.len() {
                collected.truncated_frames += 1;
                continue;
            }
            let frame = &buffer[..received.len];
            let Ok((header, inner)) = erspan::decapsulate(frame) else {
                collected.other_frames += 1;
                continue;
            };
            collected.erspan_frames += 1;
            *collected.sessions.entry(header.session).or_default() += 1;
            let arrived = received.arrived.unwrap_or_else(SystemTime::now);
            if let Some(writer) = pcap.as_mut() {
                let record = PCAP_RECORD_HEADER_BYTES + frame.len() as u64;
                if pcap_bytes + record > config.max_pcap_bytes {
                    collected.pcap_skipped += 1;
                } else {
                    let stamp = arrived.duration_since(UNIX_EPOCH).unwrap_or_default();
                    writer
                        .write_packet(&PcapPacket::new(stamp, frame.len() as u32, frame))
                        .context("writing the pcap file")?;
                    pcap_bytes += record;
                    collected.pcap_frames += 1;
                }
            }
            match classify(inner) {
                Some((kind, destination, qp)) => {
                    match kind {
                        Kind::Cnp => collected.cnps += 1,
                        Kind::Nak => collected.naks += 1,
                    }
                    let since = arrived
                        .duration_since(started_wall)
                        .unwrap_or_default()
                        .as_nanos();
                    let index = u64::try_from(since / bucket_ns).unwrap_or(u64::MAX);
                    if !table.count((index, destination, qp), kind, config.max_rows) {
                        collected.untabled += 1;
                    }
                }
                None => collected.other_mirrored += 1,
            }
            if finished(&collected) {
                break;
            }
        }
    }
    if let Some(writer) = pcap {
        writer
            .into_writer()
            .flush()
            .context("writing the pcap file")?;
    }
    collected.kernel_drops = socket.take_drops().unwrap_or(0);
    collected.seconds = started.elapsed().as_secs_f64();
    collected.table = table.into_rows(config.bucket);
    Ok(collected)
}

/// The table as CSV: `bucket_start_s,destination,qp,cnps,naks`.
pub fn table_csv(rows: &[Row]) -> String {
    let mut out = String::from("bucket_start_s,destination,qp,cnps,naks\n");
    for row in rows {
        out.push_str(&format!(
            "{:.6},{},{},{},{}\n",
            row.bucket_start_s, row.destination, row.qp, row.cnps, row.naks
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_keeps_at_most_max_rows_and_counts_into_existing_ones() {
        let mut table = Table::default();
        let a = Ipv4Addr::new(10, 0, 0, 1);
        assert!(table.count((0, a, 5), Kind::Cnp, 2));
        assert!(table.count((0, a, 6), Kind::Nak, 2));
        assert!(!table.count((1, a, 5), Kind::Cnp, 2));
        assert!(table.count((0, a, 5), Kind::Nak, 2));
        let rows = table.into_rows(Duration::from_millis(500));
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].qp, rows[0].cnps, rows[0].naks), (5, 1, 1));
        assert_eq!((rows[1].qp, rows[1].cnps, rows[1].naks), (6, 0, 1));
        assert_eq!(
            table_csv(&rows).lines().nth(1),
            Some("0.000000,10.0.0.1,5,1,1")
        );
    }
}
