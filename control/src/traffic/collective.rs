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
//! destination QP number [`QP_BASE`]` + c × `[`MAX_QPS`]` + q` and UDP source port
//! [`SPORT_BASE`]` + ` that number modulo [`SPORT_SPAN`], so the QPs of one connection are
//! different 5-tuples to an ECMP hash and different destination QPs to E-ECMP.
//!
//! Times (docs/traffic.md): a step of an iteration lasts, at this rank, from the moment its
//! send of the step is posted to the moment its receive of the step is delivered (its sends
//! acknowledged, for a step without a receive); an iteration from its first post to its last
//! delivery or acknowledge. The first `warmup` iterations (which include the ranks' meeting)
//! are not timed; nccl-tests' algorithm and bus bandwidths are of the mean timed iteration
//! ([`workload::Collective`]).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::{Result, TrafficError};
use super::interface::Interface;
use super::neighbour;
use super::packet_socket::{PacketSocket, MAX_BATCH};
use super::pfc_honour::{monotonic_ns, PfcGate};
use super::rc::{self, RecvCounts, RecvQp, Reply, SendCounts, SendQp};
use super::route;
use super::stop::StopFlag;
use wire::aeth::{self, Syndrome};
use wire::bth::{self, Opcode, MASK_24};
use wire::ethernet::Vlan;
use wire::ip::Ecn;
use wire::roce::RoceFrame;
use wire::vlan;
use workload::limits::MAX_QPS;
use workload::{Flow, FlowId, Flows, On, Start};

/// Destination QP number of connection 0's QP 0.
pub const QP_BASE: u32 = 0x100;
/// UDP source ports of the QPs count from here.
pub const SPORT_BASE: u16 = 49152;
/// ... and wrap after this many.
pub const SPORT_SPAN: u32 = 16384;

/// Why a workload with other parts than a collective is refused.
const ONLY_COLLECTIVES: &str = "traffic collective runs collectives (allreduce, alltoall); \
     other parts run in lossless sim and lossless net experiment";

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

/// When a flow of this rank may start.
#[derive(Clone, Debug, PartialEq)]
enum LocalStart {
    /// This long after the rank started, ns.
    At(u64),
    /// `needed` of these flows done here, then `delay_ns`.
    After {
        deps: Vec<FlowId>,
        needed: usize,
        delay_ns: u64,
    },
}

/// A QP of this rank and its flows in order.
#[derive(Clone, Debug, PartialEq)]
struct QpPlan {
    /// The other end's rank.
    peer: u32,
    /// Destination QP number.
    qpn: u32,
    /// Its flows, in the order both ends post them.
    flows: Vec<FlowId>,
}

/// What this rank runs of an expanded workload.
#[derive(Clone, Debug, PartialEq)]
struct Plan {
    /// QPs this rank sends on.
    sends: Vec<QpPlan>,
    /// QPs this rank receives on.
    receives: Vec<QpPlan>,
    /// Start of each flow this rank sends, by flow id.
    starts: HashMap<FlowId, LocalStart>,
}

/// Destination QP number of `flow`'s QP.
fn qpn(flow: &Flow) -> Result<u32> {
    let n =
        u64::from(QP_BASE) + u64::from(flow.connection) * u64::from(MAX_QPS) + u64::from(flow.qp);
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= MASK_24)
        .ok_or_else(|| {
            TrafficError::Config(format!(
                "connection {} has no 24-bit QP number: fewer ranks or collectives are needed",
                flow.connection
            ))
        })
}

/// UDP source port of QP number `qpn`.
fn source_port(qpn: u32) -> u16 {
    SPORT_BASE + (qpn % SPORT_SPAN) as u16
}

impl Plan {
    /// The flows of `flows` rank `rank` sends or receives: every one of a collective, and every
    /// start a condition this rank can see.
    fn new(flows: &Flows, rank: u32) -> Result<Plan> {
        let mut sends: Vec<QpPlan> = Vec::new();
        let mut receives: Vec<QpPlan> = Vec::new();
        let mut by_qpn: HashMap<(bool, u32), usize> = HashMap::new();
        let mut starts = HashMap::new();
        for f in &flows.flows {
            if f.step.is_none() {
                return Err(TrafficError::Config(ONLY_COLLECTIVES.into()));
            }
            let (list, peer, sending) = if f.src == rank {
                (&mut sends, f.dst, true)
            } else if f.dst == rank {
                (&mut receives, f.src, false)
            } else {
                continue;
            };
            let n = qpn(f)?;
            let index = *by_qpn.entry((sending, n)).or_insert_with(|| {
                list.push(QpPlan {
                    peer,
                    qpn: n,
                    flows: Vec::new(),
                });
                list.len() - 1
            });
            list[index].flows.push(f.id);
            if sending {
                starts.insert(f.id, local_start(flows, f, rank)?);
            }
        }
        Ok(Plan {
            sends,
            receives,
            starts,
        })
    }
}

/// `flow`'s start as rank `rank` sees it: each dependency is a flow this rank sends (done when
/// acknowledged: the receiver holds it) or receives (done when delivered).
fn local_start(flows: &Flows, flow: &Flow, rank: u32) -> Result<LocalStart> {
    match &flow.start {
        Start::At(ps) => Ok(LocalStart::At(ps / 1000)),
        Start::After(after) => {
            let mut deps = Vec::with_capacity(after.deps.len());
            for d in &after.deps {
                let dep = &flows.flows[d.flow as usize];
                let seen = match d.on {
                    On::Delivered => dep.dst == rank || dep.src == rank,
                    On::Sent => dep.src == rank,
                };
                if !seen {
                    return Err(TrafficError::Config(format!(
                        "flow {} waits for flow {} between ranks {} and {}, which rank {rank} \
                         cannot see",
                        flow.id, d.flow, dep.src, dep.dst
                    )));
                }
                deps.push(d.flow);
            }
            Ok(LocalStart::After {
                deps,
                needed: after.needed as usize,
                delay_ns: after.delay / 1000,
            })
        }
    }
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

/// One step of the collective at this rank, over the timed iterations.
#[derive(Clone, Debug, Serialize)]
pub struct StepTime {
    /// The step, from 0.
    pub step: u32,
    /// Mean time, µs.
    pub mean_us: f64,
    /// Longest, µs.
    pub max_us: f64,
}

/// One iteration at this rank.
#[derive(Clone, Debug, Serialize)]
pub struct IterationTime {
    /// The iteration, from 0.
    pub iteration: u32,
    /// Its time, µs.
    pub time_us: f64,
    /// Whether it is a warm-up iteration (not in the means).
    pub warmup: bool,
}

/// One QP's figures.
#[derive(Clone, Debug, Serialize)]
pub struct QpTime {
    /// Destination QP number.
    pub qpn: u32,
    /// UDP source port.
    pub sport: u16,
    /// The peer's rank.
    pub peer: u32,
    /// `send` or `recv`.
    pub direction: &'static str,
    /// Payload bytes acknowledged (send) or delivered (recv).
    pub bytes: u64,
    /// Payload rate from its first post (send) or its first packet (recv) to its last
    /// completion, Gb/s.
    pub gbps: f64,
    /// The requester's counts (send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<SendCounts>,
    /// The responder's counts (recv).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<RecvCounts>,
}

/// What one rank did.
#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    /// This rank.
    pub rank: u32,
    /// Ranks in all.
    pub ranks: u32,
    /// `allreduce` or `alltoall`.
    pub collective: &'static str,
    /// nccl-tests' size: bytes per rank.
    pub size_bytes: u64,
    /// QPs per connection.
    pub qps_per_conn: u16,
    /// Every iteration's time.
    pub iterations: Vec<IterationTime>,
    /// Each step's time over the timed iterations.
    pub steps: Vec<StepTime>,
    /// Mean timed iteration, µs.
    pub time_us: f64,
    /// nccl-tests' algorithm bandwidth of the mean timed iteration, GB/s (10^9 bytes/s).
    pub algbw_gbps: f64,
    /// nccl-tests' bus bandwidth, GB/s.
    pub busbw_gbps: f64,
    /// From the first post to the last completion, µs.
    pub total_us: f64,
    /// Per QP.
    pub qps: Vec<QpTime>,
    /// CNPs received.
    pub cnps: u64,
    /// Whether the interface is attached (`lossless host attach`), so data waited out the
    /// pauses of its priority.
    pub pfc_honoured: bool,
    /// Turns of the send loop that held data because the priority was paused.
    pub pfc_holds: u64,
    /// Frames this rank took no part in (other traffic), ignored.
    pub ignored_frames: u64,
}

/// What the run loop counted besides the QPs.
struct Counts {
    cnps: u64,
    ignored: u64,
    pfc_holds: u64,
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
    /// Reads and expands the workload, resolves the peers' MACs, opens the sockets (in the
    /// calling thread's network namespace).
    pub fn open(config: RankConfig) -> Result<Rank> {
        let ranks = u32::try_from(config.hosts.len()).unwrap_or(u32::MAX);
        if ranks < 2 || config.rank >= ranks {
            return Err(TrafficError::Config(format!(
                "rank {} of {} hosts: give two hosts or more, and a rank below their count",
                config.rank, ranks
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
        let mine = iface.address_like(my_ip)?;
        if mine != my_ip {
            return Err(TrafficError::Config(format!(
                "rank {} is {my_ip} in the hosts list, but {} has {mine}",
                config.rank, iface.name
            )));
        }
        let socket = PacketSocket::open(iface.index, true).map_err(TrafficError::io(format!(
            "open a packet socket on {}",
            iface.name
        )))?;
        socket
            .set_recv_buffer(RECV_BUFFER)
            .map_err(TrafficError::io(format!(
                "set the receive buffer on {}",
                iface.name
            )))?;
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
        let counts = Counts {
            cnps,
            ignored,
            pfc_holds,
        };
        Ok(self.summary(&sends, &receives, &posted, &done, counts))
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

    /// The figures of a finished run.
    fn summary(
        &self,
        sends: &[SendSide],
        receives: &[RecvSide],
        posted: &[Option<u64>],
        done: &[Option<u64>],
        counts: Counts,
    ) -> RankSummary {
        let c = self.flows.collectives[0];
        let us = |ns: u64| ns as f64 / 1000.0;
        let rank = self.config.rank;
        let mine = |f: &&Flow| f.src == rank || f.dst == rank;
        let span = |flows: Vec<&Flow>| us(span_ns(&flows, rank, posted, done));
        let iterations: Vec<IterationTime> = (0..c.iterations)
            .map(|it| IterationTime {
                iteration: it,
                time_us: span(
                    self.flows
                        .flows
                        .iter()
                        .filter(mine)
                        .filter(|f| f.step.is_some_and(|s| s.iteration == it))
                        .collect(),
                ),
                warmup: it < self.config.warmup,
            })
            .collect();
        let timed: Vec<f64> = iterations
            .iter()
            .filter(|i| !i.warmup)
            .map(|i| i.time_us)
            .collect();
        let time_us = timed.iter().sum::<f64>() / timed.len() as f64;
        let steps = (0..c.steps)
            .map(|k| {
                let times: Vec<f64> = (self.config.warmup..c.iterations)
                    .map(|it| {
                        span(
                            self.flows
                                .flows
                                .iter()
                                .filter(mine)
                                .filter(|f| {
                                    f.step.is_some_and(|s| s.iteration == it && s.step == k)
                                })
                                .collect(),
                        )
                    })
                    .collect();
                StepTime {
                    step: k,
                    mean_us: times.iter().sum::<f64>() / times.len() as f64,
                    max_us: times.iter().copied().fold(0.0, f64::max),
                }
            })
            .collect();
        let seconds = time_us / 1e6;
        let total_us = span(self.flows.flows.iter().filter(mine).collect());
        // Payload Gb/s from `first` to the last completion of `flows`.
        let rate = |bytes: u64, first: Option<u64>, flows: &[FlowId]| {
            let last = flows.iter().filter_map(|&f| done[f as usize]).max();
            match (first, last) {
                (Some(first), Some(last)) if last > first => {
                    bytes as f64 * 8.0 / (last - first) as f64
                }
                _ => 0.0,
            }
        };
        let mut qps: Vec<QpTime> = sends
            .iter()
            .map(|s| QpTime {
                qpn: s.plan.qpn,
                sport: source_port(s.plan.qpn),
                peer: s.plan.peer,
                direction: "send",
                bytes: s.qp.counts().bytes,
                gbps: rate(
                    s.qp.counts().bytes,
                    s.plan
                        .flows
                        .iter()
                        .filter_map(|&f| posted[f as usize])
                        .min(),
                    &s.plan.flows,
                ),
                sent: Some(s.qp.counts()),
                received: None,
            })
            .collect();
        qps.extend(receives.iter().map(|r| QpTime {
            qpn: r.plan.qpn,
            sport: source_port(r.plan.qpn),
            peer: r.plan.peer,
            direction: "recv",
            bytes: r.qp.counts().bytes,
            gbps: rate(r.qp.counts().bytes, r.first_ns, &r.plan.flows),
            sent: None,
            received: Some(r.qp.counts()),
        }));
        RankSummary {
            rank: self.config.rank,
            ranks: c.ranks,
            collective: c.kind.name(),
            size_bytes: c.bytes,
            qps_per_conn: self.flows.connections.first().map_or(1, |k| k.qps),
            iterations,
            steps,
            time_us,
            algbw_gbps: c.algbw(seconds) / 1e9,
            busbw_gbps: c.busbw(seconds) / 1e9,
            total_us,
            qps,
            cnps: counts.cnps,
            pfc_honoured: self.pfc.attached(),
            pfc_holds: counts.pfc_holds,
            ignored_frames: counts.ignored,
        }
    }
}

/// From the first post of a flow `rank` sends among `flows` to the last completion among them
/// (sends acknowledged, receives delivered), ns.
fn span_ns(flows: &[&Flow], rank: u32, posted: &[Option<u64>], done: &[Option<u64>]) -> u64 {
    let first = flows
        .iter()
        .filter(|f| f.src == rank)
        .filter_map(|f| posted[f.id as usize])
        .min();
    let last = flows.iter().filter_map(|f| done[f.id as usize]).max();
    match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first),
        _ => 0,
    }
}

/// Whether a flow that starts at `start` may start at `now`, with `done` the times flows
/// finished here.
fn may_start(start: &LocalStart, done: &[Option<u64>], now: u64) -> bool {
    match start {
        LocalStart::At(at) => now >= *at,
        LocalStart::After {
            deps,
            needed,
            delay_ns,
        } => {
            let mut met: Vec<u64> = deps.iter().filter_map(|&d| done[d as usize]).collect();
            if met.len() < *needed {
                return false;
            }
            met.sort_unstable();
            now >= met[*needed - 1] + delay_ns
        }
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
        // PSN sequence error.
        Reply::Nak(psn) => (psn, Syndrome::Nak(0)),
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
    use wire::ethernet::Address;

    fn expanded(spec: &str, ranks: u32) -> Flows {
        let w = workload::Workload::parse_args(&[spec], &workload::Sources::default()).unwrap();
        workload::expand(
            &w,
            &workload::Endpoints {
                count: ranks,
                rate_bps: 100_000_000_000,
            },
            0,
        )
        .unwrap()
    }

    #[test]
    fn a_ring_rank_sends_to_its_successor_and_waits_on_its_predecessor() {
        let flows = expanded("allreduce:ranks=4,size=4000,qps=2,reps=2", 4);
        let plan = Plan::new(&flows, 1).unwrap();
        assert_eq!(plan.sends.len(), 2);
        assert!(plan.sends.iter().all(|q| q.peer == 2));
        assert!(plan.receives.iter().all(|q| q.peer == 0));
        // Round-robin of whole messages: 2 iterations × 6 steps over 2 QPs.
        assert!(plan.sends.iter().all(|q| q.flows.len() == 6));
        // The QP numbers are the same on both ends.
        let theirs = Plan::new(&flows, 2).unwrap();
        let mut a: Vec<u32> = plan.sends.iter().map(|q| q.qpn).collect();
        let mut b: Vec<u32> = theirs.receives.iter().map(|q| q.qpn).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        // Every step after the first waits for something this rank sees.
        for f in plan.sends.iter().flat_map(|q| &q.flows) {
            match &plan.starts[f] {
                LocalStart::At(_) => assert_eq!(flows.flows[*f as usize].step.unwrap().step, 0),
                LocalStart::After { deps, .. } => assert!(deps.iter().all(|&d| {
                    let dep = &flows.flows[d as usize];
                    dep.src == 1 || dep.dst == 1
                })),
            }
        }
    }

    #[test]
    fn only_collectives_run() {
        let flows = expanded("incast:senders=3,size=1MB", 4);
        let e = Plan::new(&flows, 0).unwrap_err().to_string();
        assert!(e.contains("runs collectives"), "{e}");
    }

    #[test]
    fn a_start_waits_for_the_needed_dependencies_and_the_delay() {
        let start = LocalStart::After {
            deps: vec![0, 1],
            needed: 2,
            delay_ns: 10,
        };
        assert!(!may_start(&start, &[Some(5), None], 100));
        assert!(!may_start(&start, &[Some(5), Some(95)], 100));
        assert!(may_start(&start, &[Some(5), Some(90)], 100));
    }

    #[test]
    fn an_ack_and_a_nak_are_frames_a_decoder_reads_back() {
        let template = RoceFrame {
            src_mac: Address([2, 0, 0, 0, 0, 1]),
            dst_mac: Address([2, 0, 0, 0, 0, 2]),
            vlan: Vlan::Untagged,
            src_ip: "10.0.0.2".parse().unwrap(),
            dst_ip: "10.0.0.1".parse().unwrap(),
            dscp: 26,
            ecn: Ecn::NotEct,
            ttl: 64,
            flow_label: 0,
            src_port: source_port(0x101),
            bth: bth::Repr::new(Opcode::RcSendOnly, 0x101, 0),
            payload_len: 0,
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
