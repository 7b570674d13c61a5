//! A host: a RoCEv2 NIC on one link. It sends its QPs' messages as RC SEND packets of up to an
//! MTU, round-robin between the QPs that may send, each QP paced at its DCQCN rate (the `dcqcn`
//! crate's reaction point, cut by CNPs) or at line rate without congestion control; honours
//! PFC per priority; as a receiver it delivers in order, sends a CNP for CE-marked packets (at
//! most one per QP per interval: DCQCN's notification point), acknowledges each message's last
//! packet and answers a PSN gap with a NAK, on which the sender goes back N (as RoCE NICs
//! recover from a loss); a retransmission timeout covers a lost tail. Control frames (CNP,
//! ACK, NAK) go before data. A host's receive side never fills: hosts send no PAUSE.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use dcqcn::{Dcqcn, DcqcnParams};
use roce_rc::{Arrival, Requester, Responder};
use wire::aeth::Syndrome;
use wire::bth::Opcode;
use wire::ip::Ecn;
use wire::pfc;

use crate::event::{Event, EventQueue, FlowId, LinkId, NodeId};
use crate::flows::Flows;
use crate::frame::{self, Addresses, DataTemplate, Frame, Received, RoceHeaders};
use crate::link::Wires;
use crate::time::{bits_ps, duration, frame_ps, Ps, WIRE_OVERHEAD_BYTES};

/// PFC priorities.
const PRIORITIES: usize = pfc::PRIORITIES;

/// A host's settings.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Its name.
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: [u8; 6],
    /// The MAC of the switch port it is cabled to (every frame's next hop).
    pub gateway_mac: [u8; 6],
    /// The IP MTU: a packet's payload is at most this less IPv4, UDP, BTH and ICRC.
    pub mtu: u32,
    /// DSCP and PFC priority of data, ACKs and NAKs.
    pub data_class: (u8, u8),
    /// DSCP and PFC priority of CNPs.
    pub cnp_class: (u8, u8),
    /// DCQCN's reaction point on every QP, or none (line rate, PFC alone).
    pub dcqcn: Option<DcqcnParams>,
    /// The notification point: a CNP per QP at most this often for CE-marked packets, or none.
    pub cnp_interval: Option<Ps>,
    /// Retransmission timeout: a QP with packets unacknowledged this long goes back to the
    /// first of them.
    pub rto: Ps,
}

/// What a host did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostStats {
    /// Data packets sent (retransmissions included).
    pub data_packets: u64,
    /// Data packets sent again (go-back-N after a NAK or a timeout).
    pub retransmitted: u64,
    /// Retransmission timeouts that went back.
    pub timeouts: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// CNPs sent.
    pub cnps_sent: u64,
    /// CNPs received (from switches or receivers).
    pub cnps_received: u64,
    /// Data packets received marked CE.
    pub ce_received: u64,
    /// Data packets received out of order and dropped (after a loss).
    pub out_of_order: u64,
    /// PFC frames received that paused a priority.
    pub pauses_received: u64,
    /// Time the data priority was paused, picoseconds.
    pub paused_ps: Ps,
    /// Payload bytes delivered in order.
    pub bytes_delivered: u64,
}

/// One sending QP as it stands, for sampling rates over a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendQpSample {
    /// Its QP number (the BTH destination QP).
    pub qpn: u32,
    /// The receiving host.
    pub peer: Ipv4Addr,
    /// The rate it sends at: DCQCN's current rate, or the line rate without congestion control.
    pub rate_bps: u64,
    /// Packets the receiver has acknowledged so far.
    pub acked_packets: u64,
}

/// A QP's sending side.
#[derive(Debug)]
struct SendQp {
    template: DataTemplate,
    /// Its messages and PSNs (no window: the QP is paced and PFC holds it).
    requester: Requester<FlowId>,
    /// Not before this time (pacing).
    not_before: Ps,
    dcqcn: Option<Dcqcn>,
    /// Whether it is in the host's ready queue or timed heap.
    scheduled: bool,
    /// The retransmission timer's generation and whether it is armed.
    rto_generation: u32,
    rto_armed: bool,
}

/// A QP's receiving side.
#[derive(Debug, Default)]
struct RecvQp {
    /// The PSN it expects.
    responder: Responder,
    /// When the last CNP for it was sent.
    last_cnp: Option<Ps>,
    /// Messages posted to it, in order: flow and bytes.
    messages: VecDeque<(FlowId, u64)>,
}

/// A host node.
pub struct HostNode {
    /// Its settings.
    pub config: HostConfig,
    out: Option<LinkId>,
    rate_bps: u64,
    busy: bool,
    paused_until: [Ps; PRIORITIES],
    wake_at: Ps,
    /// Control frames to send, with their priority, before any data.
    control: VecDeque<(u8, Frame)>,
    qps: Vec<SendQp>,
    /// QP indices by (peer, QPN), for ACKs, NAKs and CNPs.
    qp_index: HashMap<(Ipv4Addr, u32), u32>,
    /// QPs that may send now, round-robin.
    ready: VecDeque<u32>,
    /// QPs paced until a time.
    timed: BinaryHeap<Reverse<(Ps, u32)>>,
    receivers: HashMap<(Ipv4Addr, u32), RecvQp>,
    /// What it did.
    pub stats: HostStats,
}

impl HostNode {
    /// A host with `config`.
    pub fn new(config: HostConfig) -> Self {
        HostNode {
            config,
            out: None,
            rate_bps: 0,
            busy: false,
            paused_until: [0; PRIORITIES],
            wake_at: 0,
            control: VecDeque::new(),
            qps: Vec::new(),
            qp_index: HashMap::new(),
            ready: VecDeque::new(),
            timed: BinaryHeap::new(),
            receivers: HashMap::new(),
            stats: HostStats::default(),
        }
    }

    /// Connects the NIC to `link` of `rate_bps`.
    pub fn attach(&mut self, link: LinkId, rate_bps: u64) {
        self.out = Some(link);
        self.rate_bps = rate_bps;
    }

    /// Its link, if cabled.
    pub fn link(&self) -> Option<LinkId> {
        self.out
    }

    /// Payload bytes per packet.
    pub fn payload_per_packet(&self) -> u64 {
        u64::from(self.config.mtu.saturating_sub(frame::IP_OVERHEAD).max(1))
    }

    /// Its sending QPs as they stand, in the order they were first used.
    pub fn send_qps(&self) -> impl Iterator<Item = SendQpSample> + '_ {
        let mut by_index: Vec<(u32, (Ipv4Addr, u32))> =
            self.qp_index.iter().map(|(&key, &i)| (i, key)).collect();
        by_index.sort_unstable();
        by_index.into_iter().map(|(i, (peer, qpn))| {
            let qp = &self.qps[i as usize];
            SendQpSample {
                qpn,
                peer,
                rate_bps: qp.dcqcn.as_ref().map_or(self.rate_bps, Dcqcn::rate_bps),
                acked_packets: qp.requester.acknowledged(),
            }
        })
    }

    /// Time the data priority was paused up to `end`.
    pub fn paused_ps(&self, end: Ps) -> Ps {
        self.stats.paused_ps
            - self.paused_until[usize::from(self.config.data_class.1)].saturating_sub(end)
    }

    /// Posts `flow` (`bytes` to `peer` on QP `qpn` with UDP source port `sport`) to its QP.
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(
        &mut self,
        node: NodeId,
        flow: FlowId,
        bytes: u64,
        peer: Ipv4Addr,
        qpn: u32,
        sport: u16,
        now: Ps,
        wires: &mut Wires<'_>,
    ) {
        let index = match self.qp_index.get(&(peer, qpn)) {
            Some(&i) => i,
            None => {
                let per = self.payload_per_packet();
                let addresses = Addresses {
                    src_mac: self.config.mac,
                    dst_mac: self.config.gateway_mac,
                    src_ip: self.config.ip,
                    dst_ip: peer,
                };
                // RoCEv2 data is ECN-capable, whether or not this sender reacts to CNPs.
                let ecn = Ecn::Ect0;
                let dcqcn = self.config.dcqcn.map(|p| {
                    Dcqcn::new(self.rate_bps, p)
                        .expect("DCQCN parameters are checked before the run")
                });
                self.qps.push(SendQp {
                    template: DataTemplate::new(
                        &addresses,
                        self.config.data_class.0,
                        ecn,
                        sport,
                        qpn,
                    ),
                    requester: Requester::new(per, u64::MAX),
                    not_before: 0,
                    dcqcn,
                    scheduled: false,
                    rto_generation: 0,
                    rto_armed: false,
                });
                let i = (self.qps.len() - 1) as u32;
                self.qp_index.insert((peer, qpn), i);
                i
            }
        };
        let qp = &mut self.qps[index as usize];
        qp.requester.post(flow, bytes);
        if !qp.scheduled {
            qp.scheduled = true;
            if qp.not_before <= now {
                self.ready.push_back(index);
            } else {
                self.timed.push(Reverse((qp.not_before, index)));
            }
        }
        self.send(node, now, wires);
    }

    /// Expects `flow` (`bytes` from `peer` on QP `qpn`) on the receiving side of that QP.
    pub fn post_receive(&mut self, flow: FlowId, bytes: u64, peer: Ipv4Addr, qpn: u32) {
        self.receivers
            .entry((peer, qpn))
            .or_default()
            .messages
            .push_back((flow, bytes));
    }

    /// The transmitter is free at `now`: the frame it sent is out.
    pub fn transmitted(&mut self, node: NodeId, now: Ps, wires: &mut Wires<'_>) {
        self.busy = false;
        self.send(node, now, wires);
    }

    /// A wake-up comes due.
    pub fn wake(&mut self, node: NodeId, now: Ps, wires: &mut Wires<'_>) {
        if self.wake_at == now {
            self.wake_at = 0;
            self.send(node, now, wires);
        }
    }

    /// A frame arrives at `now`.
    #[allow(clippy::too_many_arguments)]
    pub fn receive(
        &mut self,
        node: NodeId,
        f: Frame,
        now: Ps,
        wires: &mut Wires<'_>,
        flows: &mut Flows,
    ) {
        match frame::read(&f.data) {
            Received::Pfc(p) => self.pause(&p, now),
            Received::Roce(h) if h.dst_ip == self.config.ip => match h.opcode {
                Opcode::Cnp => self.on_cnp(&h, now),
                Opcode::RcAck => self.on_acknowledge(node, &h, now, wires.events, flows),
                _ => self.on_data(&h, now, wires.events, flows),
            },
            _ => {}
        }
        self.send(node, now, wires);
    }

    fn pause(&mut self, p: &pfc::Repr, now: Ps) {
        let data = usize::from(self.config.data_class.1);
        for prio in 0..PRIORITIES {
            if p.class_enable & (1 << prio) == 0 {
                continue;
            }
            let quanta = p.pause_times[prio];
            let until = now + bits_ps(u64::from(quanta) * pfc::BITS_PER_QUANTUM, self.rate_bps);
            if prio == data {
                // Counted to the pause's end when it starts; a pause replacing one takes back
                // what had not elapsed.
                self.stats.paused_ps = self.stats.paused_ps
                    - self.paused_until[prio].saturating_sub(now)
                    + (until - now);
                if quanta > 0 {
                    self.stats.pauses_received += 1;
                }
            }
            self.paused_until[prio] = until;
        }
    }

    fn on_cnp(&mut self, h: &RoceHeaders, now: Ps) {
        self.stats.cnps_received += 1;
        if let Some(&i) = self.qp_index.get(&(h.src_ip, h.qp)) {
            if let Some(d) = self.qps[i as usize].dcqcn.as_mut() {
                d.on_cnp(duration(now));
            }
        }
    }

    fn on_acknowledge(
        &mut self,
        node: NodeId,
        h: &RoceHeaders,
        now: Ps,
        events: &mut EventQueue,
        flows: &mut Flows,
    ) {
        let Some(&i) = self.qp_index.get(&(h.src_ip, h.qp)) else {
            return;
        };
        let qp = &mut self.qps[i as usize];
        let done = match h.syndrome {
            Some(Syndrome::Ack(_)) => qp.requester.on_ack(h.psn),
            // Go back N: resend from the PSN the receiver expects.
            Some(Syndrome::Nak(0)) => qp.requester.on_nak(h.psn),
            _ => return,
        };
        let Some(done) = done else {
            return; // stale or not ours
        };
        if h.syndrome == Some(Syndrome::Nak(0)) {
            self.stats.naks_received += 1;
        }
        for message in done {
            flows.sent(message.flow, now, events);
        }
        // Progress restarts the timer.
        qp.rto_generation = qp.rto_generation.wrapping_add(1);
        qp.rto_armed = false;
        if qp.requester.unacknowledged() {
            qp.rto_armed = true;
            events.at(
                now + self.config.rto,
                Event::Retransmit(node, i, qp.rto_generation),
            );
        }
        if qp.requester.can_send() && !qp.scheduled {
            qp.scheduled = true;
            self.ready.push_back(i);
        }
    }

    /// The retransmission timer of QP `index`, generation `generation`, comes due.
    pub fn retransmit_timer(
        &mut self,
        node: NodeId,
        index: u32,
        generation: u32,
        now: Ps,
        wires: &mut Wires<'_>,
    ) {
        let rto = self.config.rto;
        let Some(qp) = self.qps.get_mut(index as usize) else {
            return;
        };
        if qp.rto_generation != generation || !qp.rto_armed {
            return;
        }
        qp.rto_armed = false;
        if qp.requester.unacknowledged() {
            self.stats.timeouts += 1;
            qp.requester.go_back();
            qp.rto_generation = qp.rto_generation.wrapping_add(1);
            qp.rto_armed = true;
            wires
                .events
                .at(now + rto, Event::Retransmit(node, index, qp.rto_generation));
            if !qp.scheduled {
                qp.scheduled = true;
                self.ready.push_back(index);
            }
        }
        self.send(node, now, wires);
    }

    fn on_data(&mut self, h: &RoceHeaders, now: Ps, events: &mut EventQueue, flows: &mut Flows) {
        let Some(rx) = self.receivers.get_mut(&(h.src_ip, h.qp)) else {
            return;
        };
        let peer = Addresses {
            src_mac: self.config.mac,
            dst_mac: self.config.gateway_mac,
            src_ip: self.config.ip,
            dst_ip: h.src_ip,
        };
        let data_dscp = self.config.data_class;
        if h.ecn == Ecn::Ce {
            self.stats.ce_received += 1;
            if let Some(interval) = self.config.cnp_interval {
                if rx.last_cnp.is_none_or(|t| now >= t + interval) {
                    rx.last_cnp = Some(now);
                    let (dscp, prio) = self.config.cnp_class;
                    self.control
                        .push_back((prio, frame::cnp(&peer, dscp, h.qp)));
                    self.stats.cnps_sent += 1;
                }
            }
        }
        match rx.responder.arrive(h.psn, h.ack_req) {
            Arrival::InOrder => {}
            Arrival::Ahead(nak) => {
                self.stats.out_of_order += 1;
                if let Some(psn) = nak {
                    self.stats.naks_sent += 1;
                    let nak =
                        frame::acknowledge(&peer, data_dscp.0, 0xC000, h.qp, psn, Syndrome::Nak(0));
                    self.control.push_back((data_dscp.1, nak));
                }
                return;
            }
            Arrival::Duplicate(ack) => {
                // A duplicate the sender resent after a timeout: say again what arrived.
                if let Some(psn) = ack {
                    let ack = frame::acknowledge(
                        &peer,
                        data_dscp.0,
                        0xC000,
                        h.qp,
                        psn,
                        Syndrome::Ack(0x1f),
                    );
                    self.control.push_back((data_dscp.1, ack));
                    self.stats.acks_sent += 1;
                }
                return;
            }
        }
        if matches!(h.opcode, Opcode::RcSendLast | Opcode::RcSendOnly) {
            if let Some((flow, bytes)) = rx.messages.pop_front() {
                self.stats.bytes_delivered += bytes;
                flows.delivered(flow, now, events);
            }
        }
        if h.ack_req {
            let ack =
                frame::acknowledge(&peer, data_dscp.0, 0xC000, h.qp, h.psn, Syndrome::Ack(0x1f));
            self.control.push_back((data_dscp.1, ack));
            self.stats.acks_sent += 1;
        }
    }

    /// Sends the next frame if the transmitter is free: a control frame of an unpaused
    /// priority, else the next ready QP's next packet; if nothing may go now but something will,
    /// schedules a wake-up for then.
    fn send(&mut self, node: NodeId, now: Ps, wires: &mut Wires<'_>) {
        let Some(link) = self.out else { return };
        if self.busy {
            return;
        }
        while let Some(&Reverse((at, i))) = self.timed.peek() {
            if at > now {
                break;
            }
            self.timed.pop();
            self.ready.push_back(i);
        }
        if let Some(pos) = self
            .control
            .iter()
            .position(|(p, _)| self.paused_until[usize::from(*p)] <= now)
        {
            let (_, frame) = self.control.remove(pos).expect("the position is in range");
            self.busy = true;
            wires.links[link as usize].send(link, now, frame, wires.events);
            return;
        }
        let data_paused = self.paused_until[usize::from(self.config.data_class.1)];
        if data_paused > now {
            if !self.ready.is_empty() || !self.timed.is_empty() {
                self.wake_later(node, data_paused, wires.events);
            }
            return;
        }
        while let Some(i) = self.ready.pop_front() {
            let qp = &mut self.qps[i as usize];
            if !qp.requester.can_send() {
                qp.scheduled = false;
                continue;
            }
            let frame = self.packet(i, now, wires.events, node);
            self.busy = true;
            wires.links[link as usize].send(link, now, frame, wires.events);
            return;
        }
        if let Some(&Reverse((at, _))) = self.timed.peek() {
            self.wake_later(node, at, wires.events);
        }
    }

    fn wake_later(&mut self, node: NodeId, at: Ps, events: &mut EventQueue) {
        if self.wake_at == 0 || at < self.wake_at {
            self.wake_at = at;
            events.at(at, Event::Wake(node, 0));
        }
    }

    /// QP `i`'s next packet, sent at `now`; puts the QP back in line (ready or paced).
    fn packet(&mut self, i: u32, now: Ps, events: &mut EventQueue, node: NodeId) -> Frame {
        let rto = self.config.rto;
        let qp = &mut self.qps[i as usize];
        // The requester asks for an acknowledge on a message's last packet and every
        // `roce_rc::ACK_EVERY` packets, so that a long message is acknowledged as it goes and
        // its timer restarts.
        let p = qp
            .requester
            .next_packet()
            .expect("a ready QP has a packet to send");
        let frame = qp
            .template
            .packet(p.opcode, p.psn, p.ack_req, p.payload_len as u32);
        self.stats.data_packets += 1;
        self.stats.retransmitted += u64::from(p.resent);
        if !qp.rto_armed {
            qp.rto_armed = true;
            qp.rto_generation = qp.rto_generation.wrapping_add(1);
            events.at(now + rto, Event::Retransmit(node, i, qp.rto_generation));
        }
        // Pacing: the next packet no sooner than this one takes at the QP's rate.
        let wire_bits = (frame.len() + WIRE_OVERHEAD_BYTES) * 8;
        let gap = match qp.dcqcn.as_mut() {
            Some(d) => {
                d.on_sent(duration(now), wire_bits);
                frame_ps(frame.len(), d.rate_bps().min(self.rate_bps))
            }
            None => 0,
        };
        qp.not_before = now + gap;
        if qp.requester.can_send() {
            if gap <= frame_ps(frame.len(), self.rate_bps) {
                self.ready.push_back(i);
            } else {
                self.timed.push(Reverse((qp.not_before, i)));
            }
        } else {
            qp.scheduled = false;
        }
        frame
    }
}
