//! A host endpoint of the fabric: open-loop RoCEv2 senders (one per flow, paced at a rate,
//! optionally cut by DCQCN on CNPs), a receiver that counts, spots reordering by PSN and may
//! answer CE marks with CNPs (the notification point), and a NIC that honours PFC pauses.

use crate::frame::{parse_pfc, Roce, OPCODE_CNP, OPCODE_SEND_ONLY};
use dcqcn::{Dcqcn, DcqcnParams};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use wire::ip::Ecn;
use wire::pfc::quanta_to_ns;

/// DSCP and priority of data and of CNPs, as the example topology classifies them.
pub const DSCP_DATA: u8 = 26;
/// Priority of DSCP 26.
pub const PRIORITY_DATA: u8 = 3;
/// DSCP of CNPs.
pub const DSCP_CNP: u8 = 48;
/// Priority of DSCP 48.
pub const PRIORITY_CNP: u8 = 6;

/// A flow to send: `packets` frames of `frame_bytes` to `dst_ip`'s QP `qp` (the same QP number
/// on both ends, so a CNP's DestQP names the sender's QP), from UDP source port `sport`.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Destination host address.
    pub dst_ip: u32,
    /// QP number, on both ends.
    pub qp: u32,
    /// UDP source port.
    pub sport: u16,
    /// Frames to send.
    pub packets: u64,
    /// Bytes per frame, without FCS.
    pub frame_bytes: usize,
    /// Sending rate, bits per second (the starting rate under DCQCN).
    pub rate_bps: f64,
    /// When to start, µs.
    pub start_us: u64,
    /// After every `burst` frames, stay idle `gap_us` (0: no gaps).
    pub burst: u64,
    /// The idle gap between bursts, µs.
    pub gap_us: u64,
    /// React to CNPs with DCQCN.
    pub dcqcn: Option<DcqcnParams>,
}

/// A flow being sent.
#[derive(Clone, Debug)]
pub struct Flow {
    /// What to send.
    pub spec: FlowSpec,
    /// Frames sent so far (also the next PSN).
    pub sent: u64,
    /// When the next frame may leave, µs (fractional: pacing keeps its remainder).
    next_send: f64,
    /// The reaction point, under DCQCN.
    pub rate: Option<Dcqcn>,
    /// CNPs received for this flow.
    pub cnps: u64,
    /// When the last frame left, µs.
    pub last_sent_us: u64,
}

/// What a receiver saw of one flow (source address, QP).
#[derive(Clone, Debug, Default)]
pub struct RxStats {
    /// Frames received.
    pub packets: u64,
    /// Frames received marked CE.
    pub ce: u64,
    /// Frames with a PSN below the highest seen (arrived after a later one).
    pub reordered: u64,
    /// The highest PSN seen plus one.
    pub next_psn: u64,
    /// When the last frame arrived, µs.
    pub last_us: u64,
}

/// A host.
#[derive(Debug)]
pub struct Host {
    /// Name in the topology.
    pub name: String,
    /// Address.
    pub ip: u32,
    /// MAC address.
    pub mac: [u8; 6],
    /// The MAC of the switch port it is wired to.
    pub gateway_mac: [u8; 6],
    /// Its link's rate, bits per second (for pause quanta).
    pub link_bps: u64,
    /// Flows it sends.
    pub flows: Vec<Flow>,
    /// What it received, per (source address, QP).
    pub received: BTreeMap<(u32, u32), RxStats>,
    /// Answer CE-marked frames with CNPs, at most one per flow per this many µs.
    pub cnp_interval_us: Option<u64>,
    /// PFC frames received.
    pub pauses_received: u64,
    /// RoCEv2 frames received with a wrong ICRC or IPv4 checksum, dropped as a RoCE NIC drops them.
    pub bad_icrc: u64,
    /// CNPs this host sent as a receiver.
    pub cnps_sent: u64,
    /// Per priority: paused until this µs.
    paused_until: [u64; 8],
    /// When this host last answered each flow (source address, QP) with a CNP, µs.
    last_cnp: BTreeMap<(u32, u32), u64>,
    outbox: VecDeque<Vec<u8>>,
}

impl Host {
    /// A host with no flows.
    pub fn new(name: &str, ip: u32, mac: [u8; 6], gateway_mac: [u8; 6], link_bps: u64) -> Self {
        Host {
            name: name.to_string(),
            ip,
            mac,
            gateway_mac,
            link_bps,
            flows: Vec::new(),
            received: BTreeMap::new(),
            cnp_interval_us: None,
            pauses_received: 0,
            bad_icrc: 0,
            cnps_sent: 0,
            paused_until: [0; 8],
            last_cnp: BTreeMap::new(),
            outbox: VecDeque::new(),
        }
    }

    /// Adds a flow.
    ///
    /// # Panics
    ///
    /// If the flow's DCQCN parameters do not suit its rate (`DcqcnParams::validate`).
    pub fn add_flow(&mut self, spec: FlowSpec) {
        let rate = spec.dcqcn.map(|p| {
            Dcqcn::new(spec.rate_bps as u64, p)
                .unwrap_or_else(|e| panic!("flow to QP {}: {e}", spec.qp))
        });
        self.flows.push(Flow {
            next_send: spec.start_us as f64,
            spec,
            sent: 0,
            rate,
            cnps: 0,
            last_sent_us: 0,
        });
    }

    /// Whether every flow has sent all its frames and nothing waits in the outbox.
    pub fn done(&self) -> bool {
        self.outbox.is_empty() && self.flows.iter().all(|f| f.sent >= f.spec.packets)
    }

    /// The earliest µs at or after `free_us` (when its link is free) at which it has a frame
    /// to send.
    pub fn next_send_us(&self, free_us: u64) -> Option<u64> {
        if !self.outbox.is_empty() {
            return Some(free_us.max(self.paused_until[usize::from(PRIORITY_CNP)]));
        }
        self.flows
            .iter()
            .filter(|f| f.sent < f.spec.packets)
            .map(|f| {
                (f.next_send.ceil() as u64)
                    .max(free_us)
                    .max(self.paused_until[usize::from(PRIORITY_DATA)])
            })
            .min()
    }

    /// The frame to send at `now_us` (the caller has checked [`Self::next_send_us`]): a CNP
    /// first, else the flow that has waited longest.
    pub fn send(&mut self, now_us: u64) -> Option<Vec<u8>> {
        if let Some(f) = self.outbox.pop_front() {
            return Some(f);
        }
        if self.paused_until[usize::from(PRIORITY_DATA)] > now_us {
            return None;
        }
        let (mac, gw, ip) = (self.mac, self.gateway_mac, self.ip);
        let flow = self
            .flows
            .iter_mut()
            .filter(|f| f.sent < f.spec.packets && f.next_send <= now_us as f64)
            .min_by(|a, b| a.next_send.total_cmp(&b.next_send))?;
        let s = &flow.spec;
        let frame = Roce {
            src_mac: mac,
            dst_mac: gw,
            src_ip: ip,
            dst_ip: s.dst_ip,
            dscp: DSCP_DATA,
            ecn: Ecn::Ect0,
            sport: s.sport,
            opcode: OPCODE_SEND_ONLY,
            qp: s.qp,
            psn: (flow.sent & 0xff_ffff) as u32,
        }
        .emit(s.frame_bytes);
        flow.sent += 1;
        flow.last_sent_us = now_us;
        let rate = match &mut flow.rate {
            Some(rp) => {
                rp.on_sent(Duration::from_micros(now_us), frame.len() as u64 * 8);
                rp.rate_bps() as f64
            }
            None => s.rate_bps,
        };
        let mut next = flow.next_send.max(now_us as f64) + (frame.len() * 8) as f64 * 1e6 / rate;
        if s.burst > 0 && flow.sent % s.burst == 0 {
            next += s.gap_us as f64;
        }
        flow.next_send = next;
        Some(frame)
    }

    /// Takes a frame that arrived at `now_us`.
    pub fn receive(&mut self, now_us: u64, frame: &[u8]) {
        if let Some(pfc) = parse_pfc(frame) {
            self.pauses_received += 1;
            for (p, &quanta) in pfc.pause_times.iter().enumerate() {
                if pfc.class_enable >> p & 1 == 1 {
                    self.paused_until[p] =
                        now_us + quanta_to_ns(quanta, self.link_bps).div_ceil(1000);
                }
            }
            return;
        }
        let r = match Roce::parse(frame) {
            Ok(r) => r,
            Err(wire::Error::Checksum) => {
                self.bad_icrc += 1;
                return;
            }
            Err(_) => return,
        };
        if r.opcode == OPCODE_CNP {
            if let Some(flow) = self.flows.iter_mut().find(|f| f.spec.qp == r.qp) {
                flow.cnps += 1;
                if let Some(rp) = &mut flow.rate {
                    rp.on_cnp(Duration::from_micros(now_us));
                }
            }
            return;
        }
        let rx = self.received.entry((r.src_ip, r.qp)).or_default();
        rx.packets += 1;
        rx.last_us = now_us;
        let psn = u64::from(r.psn);
        if psn < rx.next_psn {
            rx.reordered += 1;
        } else {
            rx.next_psn = psn + 1;
        }
        if r.ecn == Ecn::Ce {
            rx.ce += 1;
            self.answer_ce(now_us, &r);
        }
    }

    /// The notification point: a CNP for a CE-marked frame, at most one per flow per interval.
    fn answer_ce(&mut self, now_us: u64, r: &Roce) {
        let Some(interval) = self.cnp_interval_us else {
            return;
        };
        let flow = (r.src_ip, r.qp);
        if self
            .last_cnp
            .get(&flow)
            .is_some_and(|&last| now_us < last + interval)
        {
            return;
        }
        self.last_cnp.insert(flow, now_us);
        self.cnps_sent += 1;
        self.outbox.push_back(
            Roce {
                src_mac: self.mac,
                dst_mac: self.gateway_mac,
                src_ip: self.ip,
                dst_ip: r.src_ip,
                dscp: DSCP_CNP,
                ecn: Ecn::NotEct,
                sport: r.sport,
                opcode: OPCODE_CNP,
                qp: r.qp,
                psn: 0,
            }
            .emit(0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::OPCODE_SEND_ONLY;

    #[test]
    fn the_notification_point_answers_once_per_interval_from_time_zero() {
        let mut h31 = Host::new(
            "h31",
            0x0a00_0301,
            [8, 0, 0, 0, 3, 1],
            [0, 0xaa, 0, 0, 3, 1],
            1_000_000_000,
        );
        h31.cnp_interval_us = Some(50);
        let marked = Roce {
            src_mac: [0, 0xaa, 0, 0, 3, 1],
            dst_mac: [8, 0, 0, 0, 3, 1],
            src_ip: 0x0a00_0101,
            dst_ip: 0x0a00_0301,
            dscp: DSCP_DATA,
            ecn: Ecn::Ce,
            sport: 49152,
            opcode: OPCODE_SEND_ONLY,
            qp: 0x12,
            psn: 0,
        }
        .emit(100);
        for t in [0, 49, 50, 99, 100] {
            h31.receive(t, &marked);
        }
        assert_eq!(h31.cnps_sent, 3, "CNPs at 0, 50 and 100 µs");
        let cnp = Roce::parse(&h31.send(100).expect("a CNP")).unwrap();
        assert_eq!(
            (cnp.opcode, cnp.dst_ip, cnp.qp),
            (OPCODE_CNP, 0x0a00_0101, 0x12)
        );
    }

    #[test]
    #[should_panic(expected = "invalid DCQCN parameter increase_period")]
    fn a_zero_timer_period_is_refused() {
        let mut h11 = Host::new(
            "h11",
            0x0a00_0101,
            [8, 0, 0, 0, 1, 1],
            [0; 6],
            1_000_000_000,
        );
        h11.add_flow(FlowSpec {
            dst_ip: 0x0a00_0301,
            qp: 0x12,
            sport: 49152,
            packets: 1,
            frame_bytes: 100,
            rate_bps: 1e9,
            start_us: 0,
            burst: 0,
            gap_us: 0,
            dcqcn: Some(DcqcnParams {
                increase_period: std::time::Duration::ZERO,
                ..DcqcnParams::default()
            }),
        });
    }
}
