//! One rank of a collective on real frames (`lossless traffic collective`): the process on
//! one host that sends and receives its share of a ring AllReduce or an all-to-all, as one
//! rank of nccl-tests does, over RoCEv2 RC SENDs on an AF_PACKET socket.
//!
//! Every rank is given the same workload and the same list of hosts (rank `i` is the `i`-th
//! address), expands it with the project's one expansion ([`workload::expand`]) and runs the
//! flows it sends and receives. A flow starts when the flows it waits for have reached their
//! point — here, on this host: a receive delivered whole, or a send acknowledged — so each
//! step waits for the data it depends on, and the ranks meet without a shared clock: a rank
//! that starts late only holds its neighbours' data in their retransmissions. The transport is
//! [`super::rc`]'s (go-back-N on a NAK, a retransmission timeout), so a frame the kernel or a
//! switch drops costs time, not the run.
//!
//! QPs: connection `c`'s QP `q` (of the expansion's numbering, the same on every rank) has
//! destination QP number [`QP_BASE`]` + c × `[`workload::limits::MAX_QPS`]` + q` and UDP
//! source port [`SPORT_BASE`]` + ` that number modulo [`SPORT_SPAN`], so the QPs of one
//! connection are different 5-tuples to an ECMP hash and different destination QPs to E-ECMP.
//!
//! Times (docs/traffic.md): a step of an iteration lasts, at this rank, from the moment its
//! send of the step is posted to the moment its receive of the step is delivered (its sends
//! acknowledged, for a step without a receive); an iteration from its first post to its last
//! delivery or acknowledge. The first `warmup` iterations (which include the ranks' meeting)
//! are not timed; nccl-tests' algorithm and bus bandwidths are of the mean timed iteration
//! ([`workload::Collective`]).

mod plan;
mod report;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use self::plan::{may_start, source_port, Plan, QpPlan, ONLY_COLLECTIVES};
use self::report::{Counts, QpCounts, QpRecord, Timeline};
use crate::error::{Result, TrafficError};
use crate::packet_socket::{PacketSocket, MAX_BATCH};
use crate::pfc_honour::PfcGate;
use crate::rc::{self, RecvQp, Reply, SendQp};
use crate::receiver::open_listening;
use crate::stop::StopFlag;
use sysutil::clock::monotonic_ns;
use sysutil::interface::Interface;
use sysutil::neighbour;
use sysutil::route;
use wire::aeth::{self, NakCode, Syndrome};
use wire::bth::{self, Opcode};
use wire::ethernet::{self, Vlan};
use wire::ip::Ecn;
use wire::roce::RoceFrame;
use wire::vlan;
use workload::{FlowId, Flows};

pub use self::plan::{QP_BASE, SPORT_BASE, SPORT_SPAN};
pub use self::report::{IterationTime, QpTime, RankSummary, StepTime};

/// Receive buffer of the socket: a window of every peer's QPs fits.
const RECV_BUFFER: usize = 16 << 20;
/// Largest frame read whole.
const MAX_FRAME: usize = 16384;
/// Longest wait for a frame when nothing is due.
const POLL_EVERY: Duration = Duration::from_millis(1);
/// Once done, a rank keeps answering its peers (a duplicate whose ACK was lost) until no
/// frame came for this many retransmission timeouts.
const LINGER_RTOS: u32 = 3;

/// One rank's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RankConfig {
    /// Interface to send and receive on.
    pub iface: String,
    /// This rank.
    pub rank: u32,
    /// Every rank's address, rank 0 first.
    pub hosts: Vec<IpAddr>,
    /// The workload, as `lossless sim --workload` takes it: short forms or TOML files, of
    /// collectives only.
    pub workload: Vec<String>,
    /// Payload bytes per packet (the RoCE path MTU).
    pub payload: u32,
    /// Packets a QP may have unacknowledged.
    pub window: u32,
    /// Retransmission timeout.
    pub rto: Duration,
    /// Iterations not timed, from the first.
    pub warmup: u32,
    /// The whole run's limit.
    pub timeout: Duration,
    /// DSCP of data, ACKs and NAKs.
    pub dscp: u8,
    /// 802.1p priority, as an 802.1Q tag (VLAN 0), if any.
    pub pcp: Option<u8>,
    /// ECN codepoint of data.
    pub ecn: Ecn,
    /// How long to wait for a peer's MAC to be resolved.
    pub resolve_timeout: Duration,
}

/// A QP this rank sends on, at run time.
struct SendSide {
    plan: QpPlan,
    qp: SendQp,
    /// Flows not posted yet, in order.
    waiting: VecDeque<FlowId>,
    template: RoceFrame,
}

/// A QP this rank receives on, at run time.
struct RecvSide {
    plan: QpPlan,
    qp: RecvQp,
    /// When its first data packet arrived, ns.
    first_ns: Option<u64>,
    /// Answers go back with this frame's addresses.
    template: RoceFrame,
}

/// A rank ready to run: addresses resolved, the plan made, the sockets open.
pub struct Rank {
    config: RankConfig,
    flows: Flows,
    plan: Plan,
    socket: PacketSocket,
    out: PacketSocket,
    /// The pause state of the frames' priority, on an attached interface.
    pfc: PfcGate,
    my_ip: IpAddr,
    stop: StopFlag,
}

impl Rank {
    /// Reads and expands the workload, checks the addresses and the payload against the
    /// interface, opens the sockets (in the calling thread's network namespace); the peers'
    /// MACs are resolved when it runs.
    pub fn open(config: RankConfig) -> Result<Rank> {
        let ranks = u32::try_from(config.hosts.len()).unwrap_or(u32::MAX);
        if ranks < 2 || config.rank >= ranks {
            return Err(TrafficError::Config(format!(
                "rank {} of {} hosts: give two hosts or more, and a rank below their count",
                config.rank, ranks
            )));
        }
        if let Some(twice) = config
            .hosts
            .iter()
            .enumerate()
            .find(|(i, ip)| config.hosts[..*i].contains(ip))
        {
            return Err(TrafficError::Config(format!(
                "{} is in the hosts list twice: every rank needs an address of its own",
                twice.1
            )));
        }
        if config.payload == 0 || config.window == 0 {
            return Err(TrafficError::Config(
                "the payload and the window are at least 1".into(),
            ));
        }
        let workload =
            workload::Workload::parse_args(&config.workload, &workload::Sources::default())?;
        let iface = Interface::lookup(&config.iface)?;
        let rate_bps = iface.speed_bps().unwrap_or(100_000_000_000);
        let flows = workload::expand(
            &workload,
            &workload::Endpoints {
                count: ranks,
                rate_bps,
            },
            0,
        )?;
        if flows.collectives.is_empty() {
            return Err(TrafficError::Config(ONLY_COLLECTIVES.into()));
        }
        if flows.collectives.len() != 1 {
            return Err(TrafficError::Config(format!(
                "{} collectives in the workload: traffic collective runs one",
                flows.collectives.len()
            )));
        }
        let c = flows.collectives[0];
        if config.warmup >= c.iterations {
            return Err(TrafficError::Config(format!(
                "--warmup {} leaves none of the {} iterations (reps) timed",
                config.warmup, c.iterations
            )));
        }
        let plan = Plan::new(&flows, config.rank)?;
        let my_ip = config.hosts[config.rank as usize];
        if !iface.holds(my_ip)? {
            return Err(TrafficError::Config(format!(
                "rank {} is {my_ip} in the hosts list, an address {} does not have",
                config.rank, iface.name
            )));
        }
        let ip_len =
            RoceFrame::untagged_overhead(my_ip) - ethernet::HEADER_LEN + config.payload as usize;
        if ip_len > iface.mtu {
            return Err(TrafficError::Config(format!(
                "--payload {} makes {ip_len}-byte packets, above {}'s MTU of {}",
                config.payload, iface.name, iface.mtu
            )));
        }
        let socket = open_listening(&iface, RECV_BUFFER)?;
        socket.ignore_outgoing().map_err(TrafficError::io(format!(
            "ignore outgoing frames on {}",
            iface.name
        )))?;
        let out = PacketSocket::open(iface.index, false).map_err(TrafficError::io(format!(
            "open a packet socket on {}",
            iface.name
        )))?;
        let pfc = PfcGate::open(&iface.name, config.pcp, config.dscp)?;
        Ok(Rank {
            config,
            flows,
            plan,
            socket,
            out,
            pfc,
            my_ip,
            stop: StopFlag::new(),
        })
    }

    /// A flag that makes [`Rank::run`] stop early, from another thread or a signal.
    pub fn stop_flag(&self) -> StopFlag {
        self.stop.clone()
    }

    /// A frame to `peer` on QP number `qpn`, its MAC resolved.
    fn template(&self, iface: &Interface, peer: u32, qpn: u32) -> Result<RoceFrame> {
        let dst_ip = self.config.hosts[peer as usize];
        let hop = route::next_hop(dst_ip, iface)?;
        let dst_mac = neighbour::resolve(hop.neighbour(), iface, self.config.resolve_timeout)
            .map_err(|e| e.for_destination(dst_ip))?;
        Ok(RoceFrame {
            src_mac: iface.mac,
            dst_mac,
            vlan: match self.config.pcp {
                Some(pcp) => Vlan::Single(vlan::Repr {
                    pcp,
                    dei: false,
                    vid: 0,
                }),
                None => Vlan::Untagged,
            },
            src_ip: self.my_ip,
            dst_ip,
            dscp: self.config.dscp,
            ecn: self.config.ecn,
            ttl: 64,
            flow_label: 0,
            src_port: source_port(qpn),
            bth: bth::Repr::new(Opcode::RcSendOnly, qpn, 0),
            payload_len: 0,
        })
    }

    /// Runs this rank's part to the end (and lingers to answer late duplicates); returns what
    /// it did.
    pub fn run(&mut self) -> Result<RankSummary> {
        let iface = Interface::lookup(&self.config.iface)?;
        let rto_ns = u64::try_from(self.config.rto.as_nanos()).unwrap_or(u64::MAX);
        let mut sends = Vec::with_capacity(self.plan.sends.len());
        for p in &self.plan.sends {
            sends.push(SendSide {
                qp: SendQp::new(
                    u64::from(self.config.payload),
                    u64::from(self.config.window),
                    rto_ns,
                ),
                waiting: p.flows.iter().copied().collect(),
                template: self.template(&iface, p.peer, p.qpn)?,
                plan: p.clone(),
            });
        }
        let mut receives = Vec::with_capacity(self.plan.receives.len());
        for p in &self.plan.receives {
            let mut qp = RecvQp::default();
            for &f in &p.flows {
                qp.expect(f, self.flows.flows[f as usize].bytes);
            }
            let mut template = self.template(&iface, p.peer, p.qpn)?;
            template.ecn = Ecn::NotEct;
            receives.push(RecvSide {
                plan: p.clone(),
                qp,
                first_ns: None,
                template,
            });
        }
        let send_by_qpn: HashMap<u32, usize> = sends
            .iter()
            .enumerate()
            .map(|(i, s)| (s.plan.qpn, i))
            .collect();
        let recv_by_qpn: HashMap<u32, usize> = receives
            .iter()
            .enumerate()
            .map(|(i, r)| (r.plan.qpn, i))
            .collect();

        let count = self.flows.flows.len();
        let mut posted = vec![None::<u64>; count];
        let mut done = vec![None::<u64>; count];
        let mut cnps = 0u64;
        let mut ignored = 0u64;
        let mut pfc_holds = 0u64;
        let mut buffer = vec![0u8; MAX_FRAME];
        let mut frames: Vec<Vec<u8>> = Vec::with_capacity(MAX_BATCH);
        let start = Instant::now();
        let now_ns = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let limit_ns = u64::try_from(self.config.timeout.as_nanos()).unwrap_or(u64::MAX);
        let linger_ns = rto_ns.saturating_mul(u64::from(LINGER_RTOS));
        let mut finished_ns = None::<u64>;
        let mut last_frame_ns = 0u64;
        let mut next_qp = 0usize;
        loop {
            let now = now_ns();
            if self.stop.is_stopped() {
                return Err(TrafficError::Interrupted {
                    waiting: self.waiting(&sends, &receives, &posted, &done),
                });
            }
            let all_done = sends.iter().all(|s| s.waiting.is_empty() && s.qp.idle())
                && receives.iter().all(|r| r.qp.idle());
            if all_done {
                let finished = *finished_ns.get_or_insert(now);
                if now >= finished.max(last_frame_ns) + linger_ns {
                    break;
                }
            } else if now >= limit_ns {
                return Err(TrafficError::Stalled {
                    limit: self.config.timeout,
                    waiting: self.waiting(&sends, &receives, &posted, &done),
                });
            }
            // Post what may start, in each QP's order.
            for s in &mut sends {
                while let Some(&f) = s.waiting.front() {
                    if !may_start(&self.plan.starts[&f], &done, now) {
                        break;
                    }
                    s.waiting.pop_front();
                    s.qp.post(f, self.flows.flows[f as usize].bytes, now);
                    posted[f as usize] = Some(now);
                }
                s.qp.on_timer(now);
            }
            // Send a batch, round-robin over the QPs that have packets, unless paused.
            frames.clear();
            let paused = self.pfc.paused_until(monotonic_ns())?.is_some();
            pfc_holds += u64::from(paused);
            let mut idle_turns = if paused { sends.len() } else { 0 };
            while frames.len() < MAX_BATCH && idle_turns < sends.len() {
                let qps = sends.len();
                let s = &mut sends[next_qp % qps];
                next_qp = next_qp.wrapping_add(1);
                match s.qp.next_packet() {
                    Some(p) => {
                        idle_turns = 0;
                        frames.push(data_frame(&s.template, &p)?);
                    }
                    None => idle_turns += 1,
                }
            }
            if !frames.is_empty() {
                self.send_all(&frames)?;
            }
            // Read what came.
            let wait = if frames.is_empty() {
                POLL_EVERY
            } else {
                Duration::ZERO
            };
            if !self
                .socket
                .wait_readable(wait)
                .map_err(TrafficError::io(format!("wait on {}", iface.name)))?
            {
                continue;
            }
            frames.clear();
            for _ in 0..MAX_BATCH {
                let Some(got) = self
                    .socket
                    .try_recv(&mut buffer)
                    .map_err(TrafficError::io(format!("receive on {}", iface.name)))?
                else {
                    break;
                };
                if got.outgoing {
                    continue;
                }
                let Ok((frame, payload)) = RoceFrame::parse(&buffer[..got.len]) else {
                    ignored += 1;
                    continue;
                };
                if frame.dst_ip != self.my_ip {
                    ignored += 1;
                    continue;
                }
                let now = now_ns();
                last_frame_ns = now;
                let qpn = frame.bth.dest_qp;
                match frame.bth.opcode {
                    Opcode::Cnp => cnps += 1,
                    Opcode::RcAck => {
                        let (Some(&i), Ok(header)) =
                            (send_by_qpn.get(&qpn), aeth::Packet::new_checked(payload))
                        else {
                            ignored += 1;
                            continue;
                        };
                        // Only the QP's peer acknowledges it: a host that guesses a QP
                        // number cannot complete or rewind another's messages.
                        if frame.src_ip != self.config.hosts[sends[i].plan.peer as usize] {
                            ignored += 1;
                            continue;
                        }
                        let completed = match aeth::Repr::parse(&header).syndrome {
                            Syndrome::Ack(_) => sends[i].qp.on_ack(frame.bth.psn, now),
                            Syndrome::Nak(_) => sends[i].qp.on_nak(frame.bth.psn, now),
                            _ => Vec::new(),
                        };
                        for f in completed {
                            done[f as usize] = Some(now);
                        }
                    }
                    Opcode::RcSendFirst
                    | Opcode::RcSendMiddle
                    | Opcode::RcSendLast
                    | Opcode::RcSendOnly => {
                        let Some(&i) = recv_by_qpn.get(&qpn) else {
                            ignored += 1;
                            continue;
                        };
                        let r = &mut receives[i];
                        let peer = self.config.hosts[r.plan.peer as usize];
                        if frame.src_ip != peer {
                            ignored += 1;
                            continue;
                        }
                        let got =
                            r.qp.on_data(
                                frame.bth.psn,
                                frame.bth.opcode,
                                payload.len(),
                                frame.bth.ack_req,
                            )
                            .map_err(|e| TrafficError::Peer {
                                peer,
                                message: e.to_string(),
                            })?;
                        r.first_ns.get_or_insert(now);
                        if let Some(f) = got.delivered {
                            done[f as usize] = Some(now);
                        }
                        if let Some(reply) = got.reply {
                            frames.push(reply_frame(&r.template, reply)?);
                        }
                    }
                    _ => ignored += 1,
                }
            }
            if !frames.is_empty() {
                self.send_all(&frames)?;
            }
        }
        let timeline = Timeline {
            flows: &self.flows,
            rank: self.config.rank,
            warmup: self.config.warmup,
            posted: &posted,
            done: &done,
        };
        let mut records: Vec<QpRecord> = sends
            .iter()
            .map(|s| QpRecord {
                qpn: s.plan.qpn,
                peer: s.plan.peer,
                flows: &s.plan.flows,
                first_ns: s
                    .plan
                    .flows
                    .iter()
                    .filter_map(|&f| posted[f as usize])
                    .min(),
                counts: QpCounts::Sent(s.qp.counts()),
            })
            .collect();
        records.extend(receives.iter().map(|r| QpRecord {
            qpn: r.plan.qpn,
            peer: r.plan.peer,
            flows: &r.plan.flows,
            first_ns: r.first_ns,
            counts: QpCounts::Received(r.qp.counts()),
        }));
        let counts = Counts {
            cnps,
            ignored,
            pfc_holds,
            pfc_honoured: self.pfc.attached(),
        };
        Ok(report::summarise(&timeline, &records, counts))
    }

    /// Sends every frame of `frames`, in as many calls as the kernel takes.
    fn send_all(&self, frames: &[Vec<u8>]) -> Result<()> {
        let mut left = frames;
        while !left.is_empty() {
            let sent = self
                .out
                .send_batch(left)
                .map_err(TrafficError::io(format!("send on {}", self.config.iface)))?;
            left = &left[sent.max(1).min(left.len())..];
        }
        Ok(())
    }

    /// What this rank still waits for, for a stalled run's error.
    fn waiting(
        &self,
        sends: &[SendSide],
        receives: &[RecvSide],
        posted: &[Option<u64>],
        done: &[Option<u64>],
    ) -> String {
        let describe = |f: FlowId| {
            let flow = &self.flows.flows[f as usize];
            let step = flow.step.map_or(String::new(), |s| {
                format!("iteration {} step {} ", s.iteration, s.step)
            });
            format!(
                "{step}({} bytes from rank {} to rank {})",
                flow.bytes, flow.src, flow.dst
            )
        };
        let mut parts = Vec::new();
        for r in receives {
            if let Some(&f) = r.plan.flows.iter().find(|&&f| done[f as usize].is_none()) {
                parts.push(format!("the receive of {}", describe(f)));
                break;
            }
        }
        for s in sends {
            if let Some(&f) = s.plan.flows.iter().find(|&&f| done[f as usize].is_none()) {
                let what = if posted[f as usize].is_some() {
                    "the acknowledge of"
                } else {
                    "the start of"
                };
                parts.push(format!("{what} {}", describe(f)));
                break;
            }
        }
        parts.join("; ")
    }
}

/// The frame of packet `p` on the QP of `template`.
fn data_frame(template: &RoceFrame, p: &rc::Packet) -> Result<Vec<u8>> {
    let mut frame = *template;
    frame.bth.opcode = p.opcode;
    frame.bth.psn = p.psn;
    frame.bth.ack_req = p.ack_req;
    frame.payload_len = p.payload_len;
    let mut bytes = vec![0u8; frame.buffer_len()];
    frame.emit(&mut bytes, |payload| payload.fill(0))?;
    Ok(bytes)
}

/// The RC Acknowledge carrying `reply`, back on the QP of `template`.
fn reply_frame(template: &RoceFrame, reply: Reply) -> Result<Vec<u8>> {
    let (psn, syndrome) = match reply {
        // Credits not given (0x1f): RoCE NICs' usual ACK.
        Reply::Ack(psn) => (psn, Syndrome::Ack(0x1f)),
        Reply::Nak(psn) => (psn, Syndrome::Nak(NakCode::PsnSequenceError as u8)),
    };
    let mut frame = *template;
    frame.bth = bth::Repr::new(Opcode::RcAck, template.bth.dest_qp, psn);
    frame.payload_len = aeth::HEADER_LEN;
    let header = aeth::Repr { syndrome, msn: 0 };
    let mut bytes = vec![0u8; frame.buffer_len()];
    let mut result = Ok(());
    frame.emit(&mut bytes, |payload| {
        result = header.emit(&mut aeth::Packet::new_unchecked(payload));
    })?;
    result?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::vectors;

    #[test]
    fn an_ack_and_a_nak_are_frames_a_decoder_reads_back() {
        let template = RoceFrame {
            src_ip: "10.0.0.2".parse().unwrap(),
            dst_ip: "10.0.0.1".parse().unwrap(),
            ecn: Ecn::NotEct,
            src_port: source_port(0x101),
            bth: bth::Repr::new(Opcode::RcSendOnly, 0x101, 0),
            payload_len: 0,
            ..vectors::ROCE_V4_FRAME
        };
        for (reply, syndrome) in [
            (Reply::Ack(77), Syndrome::Ack(0x1f)),
            (Reply::Nak(9), Syndrome::Nak(0)),
        ] {
            let bytes = reply_frame(&template, reply).unwrap();
            let (frame, payload) = RoceFrame::parse(&bytes).unwrap();
            assert_eq!(frame.bth.opcode, Opcode::RcAck);
            assert_eq!(frame.bth.dest_qp, 0x101);
            let aeth = aeth::Repr::parse(&aeth::Packet::new_checked(payload).unwrap());
            assert_eq!(aeth.syndrome, syndrome);
            let psn = match reply {
                Reply::Ack(p) | Reply::Nak(p) => p,
            };
            assert_eq!(frame.bth.psn, psn);
        }
    }
}
