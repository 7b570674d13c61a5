//! The RoCEv2 sender: N QPs, each with its own UDP source port (ECMP entropy),
//! destination QP and PSN sequence, whose frame [`RoceFrame`] builds once and a
//! [`PsnPatch`] numbers for each departure; paced by departure timestamps
//! computed from each QP's rate, sent in batches on an AF_PACKET or AF_XDP socket
//! ([`Transmitter`]). Every [`CONTROL_EVERY`] the sender also reads the CNPs
//! that arrived for its QPs (handed to each QP's [`RateController::on_cnp`])
//! and, before any departure, checks through its [`PfcGate`] whether its
//! priority is paused.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Result, TrafficError};
use crate::pacing::{wire_bits, Schedule};
use crate::packet_socket::{PacketSocket, MAX_BATCH};
use crate::pfc_honour::PfcGate;
use crate::rate::RateController;
use crate::stop::StopFlag;
use crate::transmit::{Engine, Transmitter};
use sysutil::clock::{monotonic_ns, monotonic_ns_at};
use sysutil::interface::Interface;
use sysutil::neighbour;
use sysutil::route;
use wire::bth::{self, Opcode, MASK_24};
use wire::ethernet::{self, Address, Vlan};
use wire::ip::Ecn;
use wire::roce::{PsnPatch, RoceFrame};
use wire::vlan;

/// Most frames handed to the kernel in one `sendmmsg`.
const BATCH: usize = MAX_BATCH;

/// Farther than this from the next departure, the sender sleeps (until `SPIN_WINDOW` before it).
const SLEEP_ABOVE: Duration = Duration::from_micros(200);

/// Longest single sleep, so a stop request is seen soon.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// How long before a departure a sleeping sender wakes up to spin (covers sleep overshoot).
const SPIN_WINDOW: Duration = Duration::from_micros(100);

/// Receive buffer requested for the CNP socket.
const CNP_BUFFER: usize = 1 << 20;

/// Longest time between two reads of the CNP socket.
pub const CONTROL_EVERY: Duration = Duration::from_micros(5);

/// Room for one received frame on the CNP socket (longer frames are not CNPs).
const MAX_CONTROL_FRAME: usize = 2048;

/// What to send and how.
#[derive(Debug, Clone, PartialEq)]
pub struct SendConfig {
    /// Interface to send on.
    pub iface: String,
    /// Destination IP.
    pub dst_ip: IpAddr,
    /// Source IP; by default an address of the interface of the destination's family.
    pub src_ip: Option<IpAddr>,
    /// Destination MAC; by default from the neighbour table.
    pub dst_mac: Option<Address>,
    /// Frame size in bytes without FCS (headers, payload and ICRC).
    pub size: usize,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Number of QPs.
    pub qps: u32,
    /// Destination QP of the first QP; the others follow.
    pub qp_base: u32,
    /// UDP source port of the first QP; the others follow.
    pub sport_base: u16,
    /// How many consecutive QPs share one UDP source port (at least 1): the QPs of one
    /// connection, as a RoCE NIC gives them one 5-tuple, which only a hash that includes the
    /// destination QP (E-ECMP) tells apart.
    pub qps_per_port: u32,
    /// DSCP of every frame.
    pub dscp: u8,
    /// With a PCP, frames carry an 802.1Q priority tag (VLAN 0) with it.
    pub pcp: Option<u8>,
    /// ECN codepoint of every frame.
    pub ecn: Ecn,
    /// BTH opcode of every frame.
    pub opcode: Opcode,
    /// How long to wait for the destination's MAC to be resolved.
    pub resolve_timeout: Duration,
    /// How much lateness a QP makes up with a burst when the sender fell behind
    /// (its thread was descheduled); time lost beyond that is not made up, so
    /// the achieved rate drops instead.
    pub max_burst: Duration,
    /// Whether to honour the PFC pause state of the interface (if attached).
    pub honour_pfc: bool,
    /// The socket the frames leave by.
    pub engine: Engine,
}

impl SendConfig {
    /// A configuration with defaults: 1024-byte frames, one QP (256), source
    /// port 49152, DSCP 26, ECT(0), RC SEND Only, 10 s duration, 1 ms catch-up,
    /// PFC honoured.
    pub fn new(iface: impl Into<String>, dst_ip: IpAddr) -> SendConfig {
        SendConfig {
            iface: iface.into(),
            dst_ip,
            src_ip: None,
            dst_mac: None,
            size: 1024,
            count: None,
            duration: Some(Duration::from_secs(10)),
            qps: 1,
            qp_base: 256,
            sport_base: 49152,
            qps_per_port: 1,
            dscp: 26,
            pcp: None,
            ecn: Ecn::Ect0,
            opcode: Opcode::RcSendOnly,
            resolve_timeout: Duration::from_secs(3),
            max_burst: Duration::from_millis(1),
            honour_pfc: true,
            engine: Engine::AfPacket,
        }
    }

    /// The frame of each QP (PSN 0) from this configuration, the addresses and the MTU.
    fn frames(
        &self,
        src_mac: Address,
        dst_mac: Address,
        src_ip: IpAddr,
        mtu: usize,
    ) -> Result<Vec<RoceFrame>> {
        if self.qps == 0 {
            return Err(TrafficError::Config("at least one QP is needed".into()));
        }
        if self.dscp > 63 || self.pcp.is_some_and(|p| p > 7) {
            return Err(TrafficError::Config("DSCP is 0..=63 and PCP 0..=7".into()));
        }
        if src_ip.is_ipv4() != self.dst_ip.is_ipv4() {
            return Err(TrafficError::Config(format!(
                "source {src_ip} and destination {} differ in family",
                self.dst_ip
            )));
        }
        let vlan = match self.pcp {
            Some(pcp) => Vlan::Single(vlan::Repr {
                pcp,
                dei: false,
                vid: 0,
            }),
            None => Vlan::Untagged,
        };
        let mut frame = RoceFrame {
            src_mac,
            dst_mac,
            vlan,
            src_ip,
            dst_ip: self.dst_ip,
            dscp: self.dscp,
            ecn: self.ecn,
            ttl: 64,
            flow_label: 0,
            src_port: 0,
            bth: bth::Repr::new(self.opcode, 0, 0),
            payload_len: 0,
        };
        frame.payload_len = self.size.checked_sub(frame.overhead()).ok_or_else(|| {
            TrafficError::Config(format!(
                "frames of this shape need at least {} bytes, not {}",
                frame.overhead(),
                self.size
            ))
        })?;
        let link_header = ethernet::HEADER_LEN + frame.vlan.len();
        if self.size - link_header > mtu {
            let most = mtu + link_header;
            return Err(TrafficError::Config(format!(
                "frames of {} bytes exceed the MTU {mtu} ({most} at most)",
                self.size
            )));
        }
        (0..self.qps)
            .map(|i| {
                let src_port =
                    u16::try_from(u32::from(self.sport_base) + i / self.qps_per_port.max(1))
                        .map_err(|_| {
                            TrafficError::Config("UDP source ports run past 65535".into())
                        })?;
                let dest_qp = self.qp_base.checked_add(i).filter(|qp| *qp <= MASK_24);
                let dest_qp = dest_qp
                    .ok_or_else(|| TrafficError::Config("QP numbers run past 24 bits".into()))?;
                Ok(RoceFrame {
                    src_port,
                    bth: bth::Repr {
                        dest_qp,
                        ..frame.bth
                    },
                    ..frame
                })
            })
            .collect()
    }
}

/// What one QP sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SentQp {
    /// Destination QP.
    pub qp: u32,
    /// UDP source port.
    pub sport: u16,
    /// Frames sent.
    pub packets: u64,
    /// The PSN the next frame would carry.
    pub next_psn: u32,
    /// CNPs received for the QP.
    pub cnp_received: u64,
}

/// What the sender did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SendSummary {
    /// Interface.
    pub iface: String,
    /// Source MAC.
    pub src_mac: String,
    /// Destination MAC.
    pub dst_mac: String,
    /// Source IP.
    pub src_ip: IpAddr,
    /// Destination IP.
    pub dst_ip: IpAddr,
    /// The gateway whose MAC the frames carry, when the route to the destination has one
    /// (not set with a destination MAC given).
    pub gateway: Option<IpAddr>,
    /// Frame size without FCS.
    pub frame_len: usize,
    /// Frames sent.
    pub packets: u64,
    /// Frame bytes sent (without FCS).
    pub bytes: u64,
    /// Seconds from the first frame to the end.
    pub duration_s: f64,
    /// Achieved rate on the wire (FCS, preamble and gap included), bits per second.
    pub wire_rate_bps: f64,
    /// Achieved frames per second.
    pub pps: f64,
    /// Times the kernel refused a batch for lack of buffer and it was sent again.
    pub retries: u64,
    /// Times a QP fell behind its schedule by more than the burst allowance
    /// (the sender lacked CPU): the achieved rate is below the configured one.
    pub stalls: u64,
    /// CNPs received for the sender's QPs (BTH opcode 0x81 to its IP, DestQP one of its QPs).
    pub cnp_received: u64,
    /// CNPs to the sender's IP whose DestQP is none of its QPs (ignored).
    pub cnp_unmatched: u64,
    /// The priority of the frames (PCP, or DSCP through the DSCP map).
    pub pfc_priority: u32,
    /// Whether the sender honoured PFC: the interface is attached and `--ignore-pfc` was not given.
    pub pfc_honoured: bool,
    /// Why PFC was or was not honoured.
    pub pfc: PfcHonour,
    /// Nanoseconds the sender held its frames because the priority was paused.
    pub pfc_paused_ns: u64,
    /// Frames whose departure fell in a pause and that left after it.
    pub pfc_holds: u64,
    /// The engine the frames left by: `af-packet`, `afxdp (copy mode)` or `afxdp (zero-copy
    /// mode)`.
    pub engine: String,
    /// Why AF_XDP was asked for (`--engine afxdp`) and AF_PACKET used instead, if so.
    pub engine_fallback: Option<String>,
    /// One entry per QP.
    pub qps: Vec<SentQp>,
    /// When the sender's clock started: every time of the run (a QP's start, `duration_s`)
    /// counts from here.
    #[serde(skip)]
    pub started: Instant,
    /// The same moment on CLOCK_MONOTONIC, ns: lines the run up with another process's times
    /// (a receiver's arrivals, for a flow's completion time).
    pub started_monotonic_ns: u64,
}

/// Whether a sender honoured PFC pauses, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PfcHonour {
    /// The interface is attached: the sender held its frames while their priority was paused.
    Honoured,
    /// The interface is attached, but `--ignore-pfc` was given.
    Ignored,
    /// The interface has no lossless XDP program, so no pause state to honour.
    NotAttached,
}

/// A sender ready to run: socket open, addresses resolved, frames built.
#[derive(Debug)]
pub struct Sender {
    config: SendConfig,
    transmitter: Transmitter,
    /// Receives the CNPs (frames of the destination's IP family arriving on the interface).
    cnp_socket: PacketSocket,
    /// The pause state of the frames' priority.
    pfc: PfcGate,
    frames: Vec<RoceFrame>,
    /// Each QP's frame, built once with PSN 0.
    built: Vec<Vec<u8>>,
    /// Gives a copy of a built frame its PSN (every QP's frame has the same shape).
    patch: PsnPatch,
    /// The gateway the frames go through (its MAC is their destination), if the route has one.
    gateway: Option<IpAddr>,
    stop: StopFlag,
}

impl Sender {
    /// Opens the interface (in the calling thread's network namespace),
    /// resolves the addresses and builds each QP's frame.
    pub fn open(config: SendConfig) -> Result<Sender> {
        let iface = Interface::lookup(&config.iface)?;
        let src_ip = match config.src_ip {
            Some(ip) => ip,
            None => iface.address_like(config.dst_ip)?,
        };
        let (dst_mac, gateway) = match config.dst_mac {
            Some(mac) => (mac, None),
            None => {
                let hop = route::next_hop(config.dst_ip, &iface)?;
                let mac = neighbour::resolve(hop.neighbour(), &iface, config.resolve_timeout)
                    .map_err(|e| e.for_destination(config.dst_ip))?;
                (mac, hop.gateway())
            }
        };
        let frames = config.frames(iface.mac, dst_mac, src_ip, iface.mtu)?;
        let built = frames
            .iter()
            .map(|frame| {
                let mut bytes = vec![0; frame.buffer_len()];
                frame.emit(&mut bytes, |_| {})?;
                Ok(bytes)
            })
            .collect::<Result<Vec<_>>>()?;
        let patch = frames[0].psn_patch();
        let transmitter = Transmitter::open(&iface, config.engine)?;
        let ethertype = if config.dst_ip.is_ipv4() {
            libc::ETH_P_IP
        } else {
            libc::ETH_P_IPV6
        };
        let cnp_socket = PacketSocket::open_ethertype(iface.index, ethertype as u16).map_err(
            TrafficError::io(format!("open a CNP socket on {}", iface.name)),
        )?;
        cnp_socket
            .set_recv_buffer(CNP_BUFFER)
            .map_err(TrafficError::io(format!(
                "set the CNP receive buffer on {}",
                iface.name
            )))?;
        let pfc = PfcGate::open(&iface.name, config.pcp, config.dscp)?;
        Ok(Sender {
            config,
            transmitter,
            cnp_socket,
            pfc,
            frames,
            built,
            patch,
            gateway,
            stop: StopFlag::new(),
        })
    }

    /// A flag that makes [`Sender::run`] finish early, from another thread.
    pub fn stop_flag(&self) -> StopFlag {
        self.stop.clone()
    }

    /// Why AF_XDP was asked for and AF_PACKET is used instead, if so.
    pub fn engine_fallback(&self) -> Option<&str> {
        self.transmitter.fallback()
    }

    /// The frame each QP sends (with PSN 0).
    pub fn frames(&self) -> &[RoceFrame] {
        &self.frames
    }

    /// Sends until the count or the duration is reached or a stop is asked for, each QP at the rate
    /// its controller gives (`rates[i]` drives QP i, and gets the CNPs for QP i); holds every
    /// frame while the frames' priority is paused (PFC honoured); returns what was done.
    pub fn run<R: RateController>(&mut self, rates: &mut [R]) -> Result<SendSummary> {
        if rates.len() != self.frames.len() {
            return Err(TrafficError::Config(format!(
                "{} rate controllers for {} QPs",
                rates.len(),
                self.frames.len()
            )));
        }
        if self.config.count.is_none() && self.config.duration.is_none() {
            return Err(TrafficError::Config(
                "a count or a duration is needed".into(),
            ));
        }
        let frame_len = self.frames[0].buffer_len();
        let bits = wire_bits(frame_len);
        let count = self.config.count.unwrap_or(u64::MAX);
        let end_ps = self.config.duration.map_or(u64::MAX, duration_ps);
        let honour_pfc = self.config.honour_pfc && self.pfc.attached();
        // The QP and PSN of each frame of the batch being gathered.
        let mut picked = [(0usize, 0u32); BATCH];
        let starts = rates.iter().map(|r| duration_ps(r.start()));
        let mut schedule = Schedule::new(starts, duration_ps(self.config.max_burst));
        let mut psns = vec![0u32; self.frames.len()];
        let mut sent_per_qp = vec![0u64; self.frames.len()];
        let mut cnps = CnpCounts::new(self.frames.len());
        let mut pause = PauseAccount::default();
        let (mut sent, mut retries, mut stalls) = (0u64, 0u64, 0u64);
        let control_every = duration_ps(CONTROL_EVERY);
        let mut next_control = 0u64;
        let start = Instant::now();
        'run: while sent < count && !self.stop.is_stopped() {
            let now = duration_ps(start.elapsed());
            if now >= next_control {
                self.read_cnps(start, rates, &mut cnps)?;
                next_control = now + control_every;
            }
            if honour_pfc {
                let mono = monotonic_ns();
                if let Some(until_ns) = self.pfc.paused_until(mono)? {
                    if now >= end_ps {
                        break;
                    }
                    pause.hold(mono, now);
                    let wake = now + (until_ns - mono) * 1000;
                    wait_until(start, wake.min(now + control_every).min(next_control));
                    continue;
                }
                pause.release(mono, now);
            }
            let mut batch = 0;
            while batch < BATCH && sent + (batch as u64) < count {
                let (qp, due) = schedule.next().expect("at least one QP");
                if due >= end_ps {
                    if batch == 0 {
                        break 'run;
                    }
                    break;
                }
                if due > now {
                    break;
                }
                picked[batch] = (qp, psns[qp]);
                psns[qp] = (psns[qp] + 1) & MASK_24;
                sent_per_qp[qp] += 1;
                pause.count_if_held(due);
                rates[qp].on_sent(Duration::from_nanos(now / 1000), bits);
                stalls += u64::from(schedule.advance(bits, rates[qp].rate_bps(), now));
                batch += 1;
            }
            if batch == 0 {
                let (_, due) = schedule.next().expect("at least one QP");
                wait_until(start, due.min(next_control));
                continue;
            }
            retries += self.send(&picked[..batch], frame_len)?;
            sent += batch as u64;
        }
        self.transmitter
            .finish()
            .map_err(TrafficError::io(format!("send on {}", self.config.iface)))?;
        self.read_cnps(start, rates, &mut cnps)?;
        pause.release(monotonic_ns(), duration_ps(start.elapsed()));
        let elapsed = start.elapsed().as_secs_f64();
        let rate = |n: f64| if elapsed > 0.0 { n / elapsed } else { 0.0 };
        let first = &self.frames[0];
        Ok(SendSummary {
            iface: self.config.iface.clone(),
            src_mac: first.src_mac.to_string(),
            dst_mac: first.dst_mac.to_string(),
            src_ip: first.src_ip,
            dst_ip: first.dst_ip,
            gateway: self.gateway,
            frame_len,
            packets: sent,
            bytes: sent * frame_len as u64,
            duration_s: elapsed,
            wire_rate_bps: rate((sent * bits) as f64),
            pps: rate(sent as f64),
            retries,
            stalls,
            cnp_received: cnps.per_qp.iter().sum(),
            cnp_unmatched: cnps.unmatched,
            pfc_priority: self.pfc.priority(),
            pfc_honoured: honour_pfc,
            pfc: match (self.pfc.attached(), self.config.honour_pfc) {
                (false, _) => PfcHonour::NotAttached,
                (true, false) => PfcHonour::Ignored,
                (true, true) => PfcHonour::Honoured,
            },
            pfc_paused_ns: pause.paused_ns,
            pfc_holds: pause.holds,
            engine: self.transmitter.describe(),
            engine_fallback: self.transmitter.fallback().map(str::to_owned),
            qps: self
                .frames
                .iter()
                .zip(&sent_per_qp)
                .zip(&psns)
                .zip(&cnps.per_qp)
                .map(|(((f, &packets), &next_psn), &cnp_received)| SentQp {
                    qp: f.bth.dest_qp,
                    sport: f.src_port,
                    packets,
                    next_psn,
                    cnp_received,
                })
                .collect(),
            started: start,
            started_monotonic_ns: monotonic_ns_at(start),
        })
    }

    /// Reads every CNP waiting on the CNP socket: one to the sender's IP from
    /// its destination, for QP i, goes to `rates[i]` at the time it is read.
    fn read_cnps<R: RateController>(
        &self,
        start: Instant,
        rates: &mut [R],
        cnps: &mut CnpCounts,
    ) -> Result<()> {
        let mut buffer = [0u8; MAX_CONTROL_FRAME];
        let first = &self.frames[0];
        while let Some(received) =
            self.cnp_socket
                .try_recv(&mut buffer)
                .map_err(TrafficError::io(format!(
                    "receive CNPs on {}",
                    self.config.iface
                )))?
        {
            let Ok((frame, _)) = RoceFrame::parse(&buffer[..received.len]) else {
                continue;
            };
            if frame.bth.opcode != Opcode::Cnp
                || frame.dst_ip != first.src_ip
                || frame.src_ip != first.dst_ip
            {
                continue;
            }
            match self
                .frames
                .iter()
                .position(|f| f.bth.dest_qp == frame.bth.dest_qp)
            {
                Some(qp) => {
                    cnps.per_qp[qp] += 1;
                    rates[qp].on_cnp(start.elapsed());
                }
                None => cnps.unmatched += 1,
            }
        }
        Ok(())
    }

    /// Sends one frame per (QP, PSN) of `picked`, each a copy of the QP's built frame given its
    /// PSN, retrying while the kernel lacks room; returns the number of retries.
    fn send(&mut self, picked: &[(usize, u32)], frame_len: usize) -> Result<u64> {
        let (built, patch) = (&self.built, &self.patch);
        self.transmitter
            .send_with(picked.len(), frame_len, |i, frame| {
                let (qp, psn) = picked[i];
                frame.copy_from_slice(&built[qp]);
                patch
                    .set_psn(frame, psn)
                    .expect("a frame as long as the QP's built frame");
            })
            .map_err(TrafficError::io(format!("send on {}", self.config.iface)))
    }
}

/// CNPs received during a run.
#[derive(Debug, Clone)]
struct CnpCounts {
    /// For each QP.
    per_qp: Vec<u64>,
    /// For none of the QPs.
    unmatched: u64,
}

impl CnpCounts {
    fn new(qps: usize) -> CnpCounts {
        CnpCounts {
            per_qp: vec![0; qps],
            unmatched: 0,
        }
    }
}

/// The sender's record of PFC pauses: the one in force, the time held, the frames held.
#[derive(Debug, Clone, Copy, Default)]
struct PauseAccount {
    /// When the pause in force began: monotonic ns, and ps since the sender started.
    current: Option<(u64, u64)>,
    /// The last pause that ended, in ps since the sender started: frames due in it were held.
    last_ps: (u64, u64),
    paused_ns: u64,
    holds: u64,
}

impl PauseAccount {
    /// The priority is paused at `mono_ns` (`now_ps` since the start).
    fn hold(&mut self, mono_ns: u64, now_ps: u64) {
        self.current.get_or_insert((mono_ns, now_ps));
    }

    /// The priority may send at `mono_ns` (`now_ps` since the start): a pause in force ends.
    fn release(&mut self, mono_ns: u64, now_ps: u64) {
        if let Some((began_ns, began_ps)) = self.current.take() {
            self.paused_ns += mono_ns.saturating_sub(began_ns);
            self.last_ps = (began_ps, now_ps);
        }
    }

    /// Counts a frame due at `due_ps` as held if that fell in the last pause.
    fn count_if_held(&mut self, due_ps: u64) {
        let (began, ended) = self.last_ps;
        self.holds += u64::from(due_ps >= began && due_ps < ended);
    }
}

/// A duration in picoseconds (saturating).
fn duration_ps(d: Duration) -> u64 {
    u64::try_from(d.as_nanos() * 1000).unwrap_or(u64::MAX)
}

/// Waits until `due_ps` after `start`: sleeps while far from it, then spins
/// (yielding would hand the core away for a whole time slice on a busy machine).
fn wait_until(start: Instant, due_ps: u64) {
    let due = Duration::from_nanos(due_ps / 1000);
    let remaining = due.saturating_sub(start.elapsed());
    if remaining > SLEEP_ABOVE {
        std::thread::sleep((remaining - SPIN_WINDOW).min(MAX_SLEEP));
    } else {
        while start.elapsed() < due {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC_MAC: Address = Address([2, 0, 0, 0, 0, 1]);
    const DST_MAC: Address = Address([2, 0, 0, 0, 0, 2]);

    fn config() -> SendConfig {
        SendConfig {
            qps: 3,
            qp_base: 0x10,
            sport_base: 50000,
            ..SendConfig::new("veth0", "10.0.0.2".parse().unwrap())
        }
    }

    #[test]
    fn one_frame_per_qp() {
        let frames = config()
            .frames(SRC_MAC, DST_MAC, "10.0.0.1".parse().unwrap(), 1500)
            .unwrap();
        assert_eq!(frames.len(), 3);
        for (i, frame) in frames.iter().enumerate() {
            assert_eq!(frame.bth.dest_qp, 0x10 + i as u32);
            assert_eq!(frame.src_port, 50000 + i as u16);
            assert_eq!(frame.buffer_len(), 1024);
            assert_eq!(
                (frame.dscp, frame.ecn, frame.bth.opcode),
                (26, Ecn::Ect0, Opcode::RcSendOnly)
            );
            assert_eq!(frame.vlan, Vlan::Untagged);
        }
    }

    #[test]
    fn qps_of_a_connection_share_a_source_port() {
        let config = SendConfig {
            qps: 5,
            qps_per_port: 2,
            ..config()
        };
        let frames = config
            .frames(SRC_MAC, DST_MAC, "10.0.0.1".parse().unwrap(), 1500)
            .unwrap();
        let ports: Vec<u16> = frames.iter().map(|f| f.src_port).collect();
        assert_eq!(ports, [50000, 50000, 50001, 50001, 50002]);
        let qps: Vec<u32> = frames.iter().map(|f| f.bth.dest_qp).collect();
        assert_eq!(qps, [0x10, 0x11, 0x12, 0x13, 0x14]);
    }

    #[test]
    fn pcp_adds_a_priority_tag() {
        let config = SendConfig {
            pcp: Some(3),
            size: 64,
            ..config()
        };
        let frames = config
            .frames(SRC_MAC, DST_MAC, "10.0.0.1".parse().unwrap(), 1500)
            .unwrap();
        assert_eq!(
            frames[0].vlan,
            Vlan::Single(vlan::Repr {
                pcp: 3,
                dei: false,
                vid: 0
            })
        );
        assert_eq!(frames[0].payload_len, 64 - 62);
        // With the tag, a 1500-byte MTU allows 1518-byte frames.
        let config = SendConfig {
            size: 1518,
            ..config
        };
        assert!(config
            .frames(SRC_MAC, DST_MAC, "10.0.0.1".parse().unwrap(), 1500)
            .is_ok());
    }

    #[test]
    fn impossible_configurations() {
        let src = "10.0.0.1".parse().unwrap();
        let bad = [
            SendConfig {
                size: 57,
                ..config()
            },
            SendConfig {
                size: 1515,
                ..config()
            },
            SendConfig { qps: 0, ..config() },
            SendConfig {
                sport_base: 65534,
                ..config()
            },
            SendConfig {
                qp_base: MASK_24 - 1,
                ..config()
            },
            SendConfig {
                dscp: 64,
                ..config()
            },
            SendConfig {
                dst_ip: "fd00::2".parse().unwrap(),
                ..config()
            },
        ];
        for config in bad {
            assert!(
                matches!(
                    config.frames(SRC_MAC, DST_MAC, src, 1500),
                    Err(TrafficError::Config(_))
                ),
                "{config:?}"
            );
        }
    }
}
