//! `stats`: the counters and queues of an attached interface, as JSON or as a table.

use std::{collections::BTreeMap, time::Duration};

use dataplane_common::{
    cnp::CnpCounters,
    counters::{HookCounters, ParseError, PrioCounters},
    maps::{NAK_COUNTERS, NAK_QPS},
    nak::NakCounters,
    Hook, PRIORITIES,
};
use serde::Serialize;

use crate::{
    lb::stats::{LbStats, UplinkStats},
    mirror::MirrorStats,
    pinned_maps::PinnedMaps,
};
use hostconfig::attachment::Attachment;
use sysutil::clock::monotonic_ns;

/// One priority's counters, summed over hooks, with its phantom queue.
#[derive(Clone, Debug, Serialize)]
pub struct PriorityStats {
    /// The priority.
    pub priority: usize,
    /// Its counters.
    #[serde(flatten)]
    pub counters: PrioCounters,
    /// Malformed frames: the data path accounts every one at priority 0, so this is the
    /// total on priority 0 and zero elsewhere.
    pub parse_errors: u64,
    /// Backlog of its phantom queue after the last packet (largest over hooks).
    pub vq_bytes: u64,
    /// Largest backlog since attach (largest over hooks).
    pub vq_high_water_bytes: u64,
}

/// Everything `lossless host stats` reports about one interface.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// The interface.
    pub interface: String,
    /// Counters summed over priorities and hooks.
    #[serde(flatten)]
    pub totals: PrioCounters,
    /// Malformed frames, all kinds.
    pub parse_errors: u64,
    /// Malformed frames by kind.
    pub parse_errors_by_kind: BTreeMap<&'static str, u64>,
    /// Eight entries, by priority.
    pub per_priority: Vec<PriorityStats>,
    /// Counters summed over priorities, by hook (`xdp`, `tc`).
    pub per_hook: BTreeMap<&'static str, PrioCounters>,
    /// PFC PAUSE frames received, by priority.
    pub pfc_pause_rx: [u64; PRIORITIES],
    /// PFC resume (XON) frames received, by priority.
    pub pfc_resume_rx: [u64; PRIORITIES],
    /// Time each priority has been paused by received PFC frames, in ns.
    pub pfc_paused_ns: [u64; PRIORITIES],
    /// Pause storms the watchdog saw, by priority.
    pub pfc_storms: [u64; PRIORITIES],
    /// Frames that left (TC egress) while their priority was paused, by priority.
    pub pfc_violations: [u64; PRIORITIES],
    /// PAUSE frames this host sent (first ones and refreshes), by priority.
    pub pfc_pause_tx: [u64; PRIORITIES],
    /// Resume (XON) frames this host sent, by priority.
    pub pfc_resume_tx: [u64; PRIORITIES],
    /// PAUSE frames received and passed on to the `pfc.relay` interfaces, by priority.
    pub pfc_relayed: [u64; PRIORITIES],
    /// This host's ingress buffer occupancy after the last packet, by priority.
    pub pfc_buffer_bytes: [u64; PRIORITIES],
    /// Notification-point totals: `cnp_sent`, `cnp_suppressed`, `cnp_received`,
    /// `cnp_unsupported`.
    #[serde(flatten)]
    pub cnp: CnpCounters,
    /// CNPs per receiver QP.
    pub cnp_qps: Vec<CnpQpStats>,
    /// NAKs that arrived (XDP), by syndrome; absent when not counted: without the `xdp` hook
    /// (`lb` takes its place) or with programs pinned before NAK counting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nak_received: Option<NakCounters>,
    /// NAKs that left (TC egress), by syndrome; absent when not counted: without the `tc`
    /// hook or with programs pinned before NAK counting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nak_sent: Option<NakCounters>,
    /// NAKs per QP (the BTH DestQP: the requester's QP, on both ends).
    pub nak_qps: Vec<NakQpStats>,
    /// The pinned programs predate NAK counting (an upgrade that adopted them): the table says
    /// so; nothing of NAKs is read or exported.
    #[serde(skip)]
    pub nak_unpinned: bool,
    /// The load balancer, when the `lb` hook is attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lb: Option<LbStats>,
    /// The load balancer's uplinks (empty without the `lb` hook).
    pub uplinks: Vec<UplinkStats>,
    /// ERSPAN mirroring, when the `mirror` hook is attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<MirrorStats>,
}

/// The CNPs of one receiver QP.
#[derive(Clone, Debug, Serialize)]
pub struct CnpQpStats {
    /// The receiver QP (the data packets' DestQP).
    pub qp: u32,
    /// CNPs sent for it.
    pub cnp_sent: u64,
    /// CE packets inside its interval, not answered.
    pub cnp_suppressed: u64,
}

/// The NAKs of one QP.
#[derive(Clone, Debug, Serialize)]
pub struct NakQpStats {
    /// The QP (the NAKs' DestQP).
    pub qp: u32,
    /// NAKs for it that arrived, by syndrome (absent as [`Stats::nak_received`] is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<NakCounters>,
    /// NAKs for it that left, by syndrome (absent as [`Stats::nak_sent`] is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<NakCounters>,
}

impl Stats {
    /// Reads the live counters and queues.
    pub fn read(maps: &PinnedMaps) -> anyhow::Result<Stats> {
        let mut all = HookCounters::default();
        let mut per_hook = BTreeMap::new();
        let mut vq = [(0u64, 0u64); PRIORITIES];
        for hook in Hook::ALL {
            let counters = maps.read_counters(hook)?;
            let mut hook_total = PrioCounters::default();
            counters
                .per_priority
                .iter()
                .for_each(|c| hook_total.accumulate(c));
            per_hook.insert(hook.name(), hook_total);
            all.accumulate(&counters);
            for (slot, queue) in vq.iter_mut().zip(maps.read_queues(hook)?) {
                slot.0 = slot.0.max(queue.backlog_bytes);
                slot.1 = slot.1.max(queue.high_water_bytes);
            }
        }
        let mut totals = PrioCounters::default();
        all.per_priority.iter().for_each(|c| totals.accumulate(c));
        let parse_errors = all.parse_errors.iter().sum();
        let now = monotonic_ns();
        let pfc = maps.read_pfc_states()?;
        let pfc_tx = maps.read_pfc_tx_counters()?;
        let hooks = maps.read_attach_info()?.hooks;
        let nak_unpinned = !(maps.is_pinned(&NAK_COUNTERS) && maps.is_pinned(&NAK_QPS));
        let (naks, nak_qps) = if nak_unpinned {
            (Default::default(), Vec::new())
        } else {
            (maps.read_nak_counters()?, maps.read_nak_qps()?)
        };
        let counted = |attachment: Attachment, hook: Hook, naks: &[NakCounters; Hook::COUNT]| {
            (!nak_unpinned && hooks & attachment.bit() != 0).then_some(naks[hook as usize])
        };
        let (lb, uplinks) = if hooks & Attachment::Lb.bit() != 0 {
            let (lb, uplinks) = LbStats::read(maps)?;
            (Some(lb), uplinks)
        } else {
            (None, Vec::new())
        };
        let mirror = if hooks & Attachment::Mirror.bit() != 0 {
            Some(MirrorStats::read(maps)?)
        } else {
            None
        };
        Ok(Stats {
            interface: maps.dir().interface().to_owned(),
            totals,
            parse_errors,
            parse_errors_by_kind: ParseError::ALL
                .iter()
                .map(|kind| (kind.name(), all.parse_errors[*kind as usize]))
                .collect(),
            per_priority: (0..PRIORITIES)
                .map(|priority| PriorityStats {
                    priority,
                    counters: all.per_priority[priority],
                    parse_errors: if priority == 0 { parse_errors } else { 0 },
                    vq_bytes: vq[priority].0,
                    vq_high_water_bytes: vq[priority].1,
                })
                .collect(),
            per_hook,
            pfc_pause_rx: all.per_priority.map(|c| c.pfc_pause_rx),
            pfc_resume_rx: all.per_priority.map(|c| c.pfc_resume_rx),
            pfc_paused_ns: pfc.map(|state| state.paused_ns(now)),
            pfc_storms: all.per_priority.map(|c| c.pfc_storms),
            pfc_violations: all.per_priority.map(|c| c.pfc_violations),
            pfc_pause_tx: pfc_tx.pause_tx,
            pfc_resume_tx: pfc_tx.resume_tx,
            pfc_relayed: pfc_tx.relayed,
            pfc_buffer_bytes: maps.read_pfc_buffers()?.map(|b| b.queue.backlog_bytes),
            cnp: maps.read_cnp_counters()?,
            cnp_qps: maps
                .read_cnp_qps()?
                .into_iter()
                .map(|(qp, state)| CnpQpStats {
                    qp,
                    cnp_sent: state.sent,
                    cnp_suppressed: state.suppressed,
                })
                .collect(),
            nak_received: counted(Attachment::Xdp, Hook::Xdp, &naks),
            nak_sent: counted(Attachment::Tc, Hook::TcEgress, &naks),
            nak_qps: nak_qps
                .into_iter()
                .map(|(qp, counters)| NakQpStats {
                    qp,
                    received: counted(Attachment::Xdp, Hook::Xdp, &counters.per_hook),
                    sent: counted(Attachment::Tc, Hook::TcEgress, &counters.per_hook),
                })
                .collect(),
            nak_unpinned,
            lb,
            uplinks,
            mirror,
        })
    }

    /// An aligned table; with `previous` (the reading `interval` ago) it adds rates.
    pub fn table(&self, previous: Option<(&Stats, Duration)>) -> String {
        let mut out = format!("{}\n", self.interface);
        let rates = previous.is_some();
        out += &format!(
            "{:>4} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>10} {:>10} {:>12}",
            "prio",
            "rx_packets",
            "rx_bytes",
            "roce",
            "ect",
            "ce_in",
            "ecn_marked",
            "would_mark",
            "vq_bytes",
            "vq_high"
        );
        if rates {
            out += &format!(" {:>10} {:>10} {:>8}", "pkt/s", "Mb/s", "ect_mark%");
        }
        out.push('\n');
        let rows = self.per_priority.iter().map(|p| {
            (
                p.priority.to_string(),
                &p.counters,
                p.vq_bytes,
                p.vq_high_water_bytes,
                previous.map(|(s, d)| (&s.per_priority[p.priority].counters, d)),
            )
        });
        let deepest = |depth: fn(&PriorityStats) -> u64| {
            self.per_priority.iter().map(depth).max().unwrap_or(0)
        };
        let total_vq = deepest(|p| p.vq_bytes);
        let total_high = deepest(|p| p.vq_high_water_bytes);
        let total = std::iter::once((
            "all".to_owned(),
            &self.totals,
            total_vq,
            total_high,
            previous.map(|(s, d)| (&s.totals, d)),
        ));
        for (label, c, vq_bytes, vq_high, before) in rows.chain(total) {
            out += &format!(
                "{:>4} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>10} {:>10} {:>12}",
                label,
                c.rx_packets,
                c.rx_bytes,
                c.roce_packets,
                c.ect_packets,
                c.ce_on_arrival,
                c.ecn_marked,
                c.would_mark_not_ect,
                vq_bytes,
                vq_high
            );
            if let Some((b, interval)) = before {
                let secs = interval.as_secs_f64().max(1e-9);
                let packets = c.rx_packets.saturating_sub(b.rx_packets);
                let marked = c.ecn_marked.saturating_sub(b.ecn_marked);
                let ect = c.ect_packets.saturating_sub(b.ect_packets);
                out += &format!(
                    " {:>10.0} {:>10.1} {:>8.2}",
                    packets as f64 / secs,
                    c.rx_bytes.saturating_sub(b.rx_bytes) as f64 * 8.0 / secs / 1e6,
                    if ect == 0 {
                        0.0
                    } else {
                        100.0 * marked as f64 / ect as f64
                    }
                );
            }
            out.push('\n');
        }
        let errors: Vec<String> = self
            .parse_errors_by_kind
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| format!("{kind}={n}"))
            .collect();
        if self
            .pfc_pause_rx
            .iter()
            .chain(&self.pfc_resume_rx)
            .any(|n| *n > 0)
        {
            let paused_ms: Vec<String> = self
                .pfc_paused_ns
                .iter()
                .map(|ns| format!("{:.3}", *ns as f64 / 1e6))
                .collect();
            out += &format!(
                "pfc (prio 0..7) pause_rx {:?} resume_rx {:?} paused_ms [{}] storms {:?} violations {:?} pause_tx {:?} resume_tx {:?} relayed {:?}\n",
                self.pfc_pause_rx,
                self.pfc_resume_rx,
                paused_ms.join(", "),
                self.pfc_storms,
                self.pfc_violations,
                self.pfc_pause_tx,
                self.pfc_resume_tx,
                self.pfc_relayed
            );
        }
        let cnp = &self.cnp;
        if cnp.cnp_sent + cnp.cnp_suppressed + cnp.cnp_received + cnp.cnp_unsupported > 0 {
            out += &format!(
                "cnp sent {} suppressed {} received {} unsupported {}\n",
                cnp.cnp_sent, cnp.cnp_suppressed, cnp.cnp_received, cnp.cnp_unsupported
            );
        }
        if self.nak_unpinned {
            out += "nak not counted: the programs pinned predate NAK counting \
                    (`lossless host detach` and attach again to count)\n";
        }
        for (direction, naks) in [("received", &self.nak_received), ("sent", &self.nak_sent)] {
            if let Some(naks) = naks.filter(|naks| naks.total() > 0) {
                let named: Vec<String> = naks
                    .by_syndrome()
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(name, n)| format!("{name}={n}"))
                    .collect();
                out += &format!("nak {direction} {} ({})\n", naks.total(), named.join(", "));
            }
        }
        if let Some(lb) = &self.lb {
            out += &lb.table(&self.uplinks);
        }
        if let Some(mirror) = &self.mirror {
            out += &mirror.table();
        }
        out += &format!(
            "parse_errors {}{}\n",
            self.parse_errors,
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join(", "))
            }
        );
        out
    }
}
