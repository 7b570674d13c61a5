//! Per-QP receive accounting: packets, bytes, ECN marks, PSN gaps and
//! reordering, goodput — and the summary the receiver reports.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Instant;

use serde::Serialize;

use wire::bth::MASK_24;
use wire::ip::Ecn;

/// Half the 24-bit PSN space: a PSN this far or farther ahead is taken as behind.
const HALF_PSN_SPACE: u32 = 1 << 23;

/// What one QP has received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QpCounters {
    /// What the QP's frames counted.
    pub frames: FrameCounts,
    /// Payload bytes (between BTH and ICRC).
    pub payload_bytes: u64,
    /// The PSN expected next (one past the highest seen).
    next_psn: Option<u32>,
    /// Arrival of the first frame and of the last, in nanoseconds.
    first_ns: u64,
    last_ns: u64,
    /// Payload of the first frame, which goodput leaves out (it starts the clock).
    first_payload: u64,
}

impl QpCounters {
    /// Counts a frame of `frame_len` bytes with `payload_len` payload bytes, PSN
    /// `psn` and ECN `ecn`, arrived at `now_ns`.
    pub fn record(
        &mut self,
        psn: u32,
        frame_len: usize,
        payload_len: usize,
        ecn: Ecn,
        now_ns: u64,
    ) {
        if self.frames.packets == 0 {
            self.first_ns = now_ns;
            self.first_payload = payload_len as u64;
        }
        self.frames.packets += 1;
        self.frames.bytes += frame_len as u64;
        self.payload_bytes += payload_len as u64;
        self.last_ns = now_ns;
        match ecn {
            Ecn::Ce => self.frames.ce += 1,
            Ecn::Ect0 | Ecn::Ect1 => self.frames.ect += 1,
            Ecn::NotEct => {}
        }
        let psn = psn & MASK_24;
        match self.next_psn {
            None => self.next_psn = Some((psn + 1) & MASK_24),
            Some(expected) => {
                let ahead = psn.wrapping_sub(expected) & MASK_24;
                if ahead >= HALF_PSN_SPACE {
                    self.frames.reordered += 1;
                } else {
                    self.frames.psn_gaps += u64::from(ahead);
                    self.next_psn = Some((psn + 1) & MASK_24);
                }
            }
        }
    }

    /// Payload bits per second between the first frame and the last.
    pub fn goodput_bps(&self) -> f64 {
        rate_bps(
            self.payload_bytes - self.first_payload,
            self.last_ns - self.first_ns,
        )
    }
}

/// `bytes` over `ns` nanoseconds in bits per second (0 over no time).
fn rate_bps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8e9 / ns as f64
    }
}

/// A flow as the receiver tells them apart: the sender's IP and the QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    /// Source IP.
    pub src: IpAddr,
    /// Destination QP of the BTH.
    pub qp: u32,
}

/// The counts of the RoCEv2 frames received, of one QP or over all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FrameCounts {
    /// Data frames.
    pub packets: u64,
    /// Frame bytes (without FCS).
    pub bytes: u64,
    /// Frames marked CE.
    pub ce: u64,
    /// Frames marked ECT(0) or ECT(1).
    pub ect: u64,
    /// PSNs skipped: sum over gaps of how many PSNs were missing when a later one arrived;
    /// frames lost = psn_gaps - reordered (without duplicates).
    pub psn_gaps: u64,
    /// Frames whose PSN was lower than expected (late, or duplicated).
    pub reordered: u64,
    /// Congestion notification packets (BTH opcode 0x81) addressed to the QPs, counted apart
    /// from data.
    pub cnps: u64,
    /// CNPs this receiver sent for the QPs (`recv --cnp`).
    pub cnp_sent: u64,
    /// CE marks not answered because the QP had a CNP less than an interval ago.
    pub cnp_suppressed: u64,
}

impl<'a> std::iter::Sum<&'a FrameCounts> for FrameCounts {
    fn sum<I: Iterator<Item = &'a FrameCounts>>(counts: I) -> FrameCounts {
        counts.fold(FrameCounts::default(), |sum, c| FrameCounts {
            packets: sum.packets + c.packets,
            bytes: sum.bytes + c.bytes,
            ce: sum.ce + c.ce,
            ect: sum.ect + c.ect,
            psn_gaps: sum.psn_gaps + c.psn_gaps,
            reordered: sum.reordered + c.reordered,
            cnps: sum.cnps + c.cnps,
            cnp_sent: sum.cnp_sent + c.cnp_sent,
            cnp_suppressed: sum.cnp_suppressed + c.cnp_suppressed,
        })
    }
}

/// One QP's line of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QpSummary {
    /// Destination QP.
    pub qp: u32,
    /// Sender IP.
    pub src: IpAddr,
    /// What the QP received (in the JSON, at this level).
    #[serde(flatten)]
    pub frames: FrameCounts,
    /// Payload bits per second from the QP's first frame to its last.
    pub goodput_bps: f64,
    /// Arrival of the QP's first frame, nanoseconds since the receiver started.
    pub first_ns: u64,
    /// Arrival of the QP's last frame, nanoseconds since the receiver started.
    pub last_ns: u64,
}

/// What the receiver saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecvSummary {
    /// Seconds the receiver ran.
    pub duration_s: f64,
    /// What all QPs received (in the JSON, at this level).
    #[serde(flatten)]
    pub frames: FrameCounts,
    /// Payload bits per second from the first RoCEv2 frame to the last.
    pub goodput_bps: f64,
    /// RoCEv2 frames with a bad checksum or ICRC (not counted above).
    pub bad_frames: u64,
    /// Frames that were not RoCEv2 (ignored).
    pub other_frames: u64,
    /// Frames the kernel dropped because this receiver's socket buffer was full: the
    /// receiver fell behind (they never reached the counts above).
    pub socket_drops: u64,
    /// One entry per flow, ordered by sender and QP.
    pub qps: Vec<QpSummary>,
    /// Per-interval reports, when the receiver was asked for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// When the receiver's clock started: arrival times count from here.
    #[serde(skip)]
    pub started: Instant,
}

/// What one QP received during one reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalQp {
    /// Destination QP.
    pub qp: u32,
    /// Sender IP.
    pub src: IpAddr,
    /// Data frames.
    pub packets: u64,
    /// Data frames marked CE.
    pub ce: u64,
    /// CNPs.
    pub cnps: u64,
    /// Payload bits per second over the interval.
    pub goodput_bps: f64,
}

/// What the receiver saw during one reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// End of the interval, in seconds since the receiver started.
    pub t_s: f64,
    /// The flows that received anything during the interval.
    pub qps: Vec<IntervalQp>,
}

/// Counts of one flow since the last interval report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct IntervalCounts {
    packets: u64,
    payload_bytes: u64,
    ce: u64,
    cnps: u64,
}

/// The counters of every flow, and of what was not a flow.
#[derive(Debug, Clone, Default)]
pub struct RecvCounters {
    flows: BTreeMap<FlowKey, QpCounters>,
    interval: BTreeMap<FlowKey, IntervalCounts>,
    intervals: Vec<Interval>,
    packets: u64,
    /// RoCEv2 frames with a bad checksum or ICRC.
    pub bad_frames: u64,
    /// Frames that were not RoCEv2.
    pub other_frames: u64,
    /// Frames dropped at the receiving socket.
    pub socket_drops: u64,
}

impl RecvCounters {
    /// Counts a frame of flow `key`; see [`QpCounters::record`].
    pub fn record(
        &mut self,
        key: FlowKey,
        psn: u32,
        frame_len: usize,
        payload_len: usize,
        ecn: Ecn,
        now_ns: u64,
    ) {
        self.packets += 1;
        self.flows
            .entry(key)
            .or_default()
            .record(psn, frame_len, payload_len, ecn, now_ns);
        let interval = self.interval.entry(key).or_default();
        interval.packets += 1;
        interval.payload_bytes += payload_len as u64;
        interval.ce += u64::from(ecn == Ecn::Ce);
    }

    /// Counts a CNP addressed to flow `key` (a QP of this host's sender).
    pub fn record_cnp(&mut self, key: FlowKey) {
        self.flows.entry(key).or_default().frames.cnps += 1;
        self.interval.entry(key).or_default().cnps += 1;
    }

    /// Counts a CNP sent for flow `key`, or one the rate limit suppressed.
    pub fn record_cnp_answer(&mut self, key: FlowKey, sent: bool) {
        let flow = self.flows.entry(key).or_default();
        if sent {
            flow.frames.cnp_sent += 1;
        } else {
            flow.frames.cnp_suppressed += 1;
        }
    }

    /// Closes the interval of `length_s` seconds ending at `t_s`: returns what
    /// each flow received in it (also kept for the summary) and starts the next.
    pub fn close_interval(&mut self, t_s: f64, length_s: f64) -> &Interval {
        let qps = std::mem::take(&mut self.interval)
            .into_iter()
            .map(|(key, c)| IntervalQp {
                qp: key.qp,
                src: key.src,
                packets: c.packets,
                ce: c.ce,
                cnps: c.cnps,
                goodput_bps: if length_s > 0.0 {
                    c.payload_bytes as f64 * 8.0 / length_s
                } else {
                    0.0
                },
            })
            .collect();
        self.intervals.push(Interval { t_s, qps });
        self.intervals.last().expect("just pushed")
    }

    /// RoCEv2 data frames counted over all flows (CNPs not included).
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The summary of a receiver that started at `started`, now.
    pub fn summary(&self, started: Instant) -> RecvSummary {
        let qps: Vec<QpSummary> = self
            .flows
            .iter()
            .map(|(key, c)| QpSummary {
                qp: key.qp,
                src: key.src,
                frames: c.frames,
                goodput_bps: c.goodput_bps(),
                first_ns: c.first_ns,
                last_ns: c.last_ns,
            })
            .collect();
        let first = self.flows.values().min_by_key(|c| c.first_ns);
        let last_ns = self.flows.values().map(|c| c.last_ns).max().unwrap_or(0);
        let payload: u64 = self.flows.values().map(|c| c.payload_bytes).sum();
        let goodput_bps = first.map_or(0.0, |f| {
            rate_bps(payload - f.first_payload, last_ns - f.first_ns)
        });
        RecvSummary {
            duration_s: started.elapsed().as_secs_f64(),
            frames: qps.iter().map(|q| &q.frames).sum(),
            goodput_bps,
            bad_frames: self.bad_frames,
            other_frames: self.other_frames,
            socket_drops: self.socket_drops,
            qps,
            intervals: self.intervals.clone(),
            started,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(psns: &[u32]) -> QpCounters {
        let mut counters = QpCounters::default();
        for (i, psn) in psns.iter().enumerate() {
            counters.record(*psn, 100, 50, Ecn::Ect0, i as u64 * 1000);
        }
        counters
    }

    #[test]
    fn in_order() {
        let c = feed(&[5, 6, 7, 8]);
        assert_eq!(
            (c.frames.packets, c.frames.psn_gaps, c.frames.reordered),
            (4, 0, 0)
        );
        assert_eq!(
            (c.frames.bytes, c.payload_bytes, c.frames.ect, c.frames.ce),
            (400, 200, 4, 0)
        );
    }

    #[test]
    fn gaps_count_missing_psns() {
        let c = feed(&[0, 1, 4, 5, 9]);
        assert_eq!((c.frames.psn_gaps, c.frames.reordered), (2 + 3, 0));
    }

    #[test]
    fn late_and_duplicate_frames_are_reordered() {
        // 2 arrives after 3: one gap of one PSN, then one late frame; 3 again is a duplicate.
        let c = feed(&[0, 1, 3, 2, 4, 3]);
        assert_eq!((c.frames.psn_gaps, c.frames.reordered), (1, 2));
    }

    #[test]
    fn psn_wraps_at_24_bits() {
        let c = feed(&[0xfffffe, 0xffffff, 0, 1, 3]);
        assert_eq!((c.frames.psn_gaps, c.frames.reordered), (1, 0));
        let c = feed(&[1, 0xffffff]);
        assert_eq!((c.frames.psn_gaps, c.frames.reordered), (0, 1));
    }

    #[test]
    fn ecn_marks() {
        let mut c = QpCounters::default();
        for (psn, ecn) in [Ecn::Ce, Ecn::Ect0, Ecn::Ect1, Ecn::NotEct, Ecn::Ce]
            .into_iter()
            .enumerate()
        {
            c.record(psn as u32, 100, 50, ecn, 0);
        }
        assert_eq!((c.frames.ce, c.frames.ect), (2, 2));
    }

    #[test]
    fn goodput_leaves_out_the_first_frame() {
        // 11 frames of 125 payload bytes, 1 us apart: 10 * 1000 bits in 10 us = 1 Gb/s.
        let mut c = QpCounters::default();
        for i in 0..11u32 {
            c.record(i, 200, 125, Ecn::Ect0, u64::from(i) * 1000);
        }
        assert_eq!(c.goodput_bps(), 1e9);
        assert_eq!(feed(&[1]).goodput_bps(), 0.0);
    }

    #[test]
    fn summary_adds_up_flows() {
        let mut counters = RecvCounters::default();
        let src: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..11u32 {
            counters.record(
                FlowKey { src, qp: 1 + i % 2 },
                i / 2,
                200,
                125,
                Ecn::Ce,
                u64::from(i) * 1000,
            );
        }
        counters.other_frames = 3;
        counters.record_cnp(FlowKey { src, qp: 7 });
        counters.record_cnp_answer(FlowKey { src, qp: 1 }, true);
        counters.record_cnp_answer(FlowKey { src, qp: 1 }, false);
        counters.record_cnp_answer(FlowKey { src, qp: 2 }, false);
        assert_eq!(counters.packets(), 11);
        let summary = counters.summary(Instant::now());
        assert_eq!(summary.frames.packets, 11);
        assert_eq!(summary.frames.ce, 11);
        assert_eq!(summary.qps.len(), 3);
        assert_eq!(
            (
                summary.frames.cnps,
                summary.qps[2].frames.cnps,
                summary.qps[2].frames.packets
            ),
            (1, 1, 0)
        );
        assert_eq!((summary.qps[0].qp, summary.qps[0].frames.packets), (1, 6));
        assert_eq!(
            (summary.frames.cnp_sent, summary.frames.cnp_suppressed),
            (1, 2)
        );
        assert_eq!(
            (
                summary.qps[0].frames.cnp_sent,
                summary.qps[0].frames.cnp_suppressed
            ),
            (1, 1)
        );
        assert_eq!(summary.goodput_bps, 1e9);
        let json = serde_json::to_value(&summary).unwrap();
        for key in [
            "qp",
            "packets",
            "bytes",
            "ce",
            "ect",
            "psn_gaps",
            "reordered",
            "goodput_bps",
            "first_ns",
            "last_ns",
        ] {
            assert!(json["qps"][0].get(key).is_some(), "{key}");
        }
        assert_eq!(json["other_frames"], 3);
        assert!(json.get("intervals").is_none());
    }

    #[test]
    fn intervals_restart_their_counts() {
        let mut counters = RecvCounters::default();
        let key = FlowKey {
            src: "10.0.0.1".parse().unwrap(),
            qp: 5,
        };
        for psn in 0..4 {
            counters.record(key, psn, 200, 125, Ecn::Ce, u64::from(psn));
        }
        counters.record_cnp(key);
        let first = counters.close_interval(1.0, 0.5).clone();
        assert_eq!(first.t_s, 1.0);
        assert_eq!(
            (first.qps[0].packets, first.qps[0].ce, first.qps[0].cnps),
            (4, 4, 1)
        );
        assert_eq!(first.qps[0].goodput_bps, 4.0 * 125.0 * 8.0 / 0.5);
        assert!(counters.close_interval(1.5, 0.5).qps.is_empty());
        let summary = counters.summary(Instant::now());
        assert_eq!((summary.frames.packets, summary.intervals.len()), (4, 2));
    }
}
