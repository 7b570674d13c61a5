//! The RoCEv2 receiver: reads every frame of an interface on an AF_PACKET
//! socket (so it sees the IP ECN bits as they arrived), checks and counts the
//! RoCEv2 ones per QP (data frames, and CNPs apart), answers CE marks with
//! CNPs when asked ([`NotificationPoint`]), and stops after a duration, a
//! count or a quiet spell.

use std::time::{Duration, Instant, SystemTime};

use crate::counters::{FlowKey, Interval, RecvCounters, RecvSummary};
use crate::error::{Result, TrafficError};
use crate::notify::{CnpConfig, NotificationPoint};
use crate::packet_socket::PacketSocket;
use crate::stop::StopFlag;
use sysutil::interface::Interface;
use wire::bth::Opcode;
use wire::ip::Ecn;
use wire::pretty_print::PrettyPrinter;
use wire::roce::RoceFrame;
use wire::Error as WireError;

/// Longest wait for a frame before the stop conditions are checked again.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Most frames read between two checks of the stop conditions.
const DRAIN_AT_MOST: usize = 256;

/// Receive buffer requested for the socket.
const RECV_BUFFER: usize = 8 << 20;

/// Largest frame read whole.
const MAX_FRAME: usize = 65536;

/// Room for a CNP frame: Ethernet, two VLAN tags, IPv6, UDP, BTH, 16 reserved bytes, ICRC.
const MAX_CNP: usize = 14 + 8 + 40 + 8 + 12 + 16 + 4;

/// How often to report intervals, and to whom.
type Reports<'a> = (Duration, &'a mut dyn FnMut(&Interval));

/// When to stop receiving; with none set, only the stop flag stops the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvConfig {
    /// Interface to listen on.
    pub iface: String,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many RoCEv2 frames.
    pub count: Option<u64>,
    /// Stop when no RoCEv2 frame arrived for this long (counted from the start
    /// until the first one arrives).
    pub idle_timeout: Option<Duration>,
    /// With a configuration, CE-marked data frames are answered with CNPs.
    pub cnp: Option<CnpConfig>,
}

/// A socket that receives every frame arriving on `iface`, with a receive buffer of `bytes`.
pub(super) fn open_listening(iface: &Interface, bytes: usize) -> Result<PacketSocket> {
    let socket = PacketSocket::open(iface.index, true).map_err(TrafficError::io(format!(
        "open a packet socket on {}",
        iface.name
    )))?;
    socket
        .set_recv_buffer(bytes)
        .map_err(TrafficError::io(format!(
            "set the receive buffer on {}",
            iface.name
        )))?;
    Ok(socket)
}

/// A receiver listening on an interface.
#[derive(Debug)]
pub struct Receiver {
    config: RecvConfig,
    socket: PacketSocket,
    /// The notification point and the socket its CNPs leave on.
    notify: Option<(NotificationPoint, PacketSocket)>,
    stop: StopFlag,
}

impl Receiver {
    /// Opens the interface (in the calling thread's network namespace); frames
    /// arriving from now on are counted by [`Receiver::run`].
    pub fn open(config: RecvConfig) -> Result<Receiver> {
        let iface = Interface::lookup(&config.iface)?;
        let socket = open_listening(&iface, RECV_BUFFER)?;
        // The notification point's interval is between arrivals, not between reads.
        socket.stamp_arrivals().map_err(TrafficError::io(format!(
            "ask for arrival times on {}",
            iface.name
        )))?;
        let notify = match &config.cnp {
            Some(cnp) => {
                let out = PacketSocket::open(iface.index, false).map_err(TrafficError::io(
                    format!("open a packet socket for CNPs on {}", iface.name),
                ))?;
                Some((NotificationPoint::new(cnp.clone()), out))
            }
            None => None,
        };
        Ok(Receiver {
            config,
            socket,
            notify,
            stop: StopFlag::new(),
        })
    }

    /// A flag that makes [`Receiver::run`] finish early, from another thread.
    pub fn stop_flag(&self) -> StopFlag {
        self.stop.clone()
    }

    /// Counts frames until a stop condition holds or a stop is asked for; returns the summary.
    pub fn run(&mut self) -> Result<RecvSummary> {
        self.count(None)
    }

    /// Like [`Receiver::run`], and every `every` also reports what each QP
    /// received in that interval to `on_interval` (live tables); the summary
    /// keeps every interval.
    pub fn run_every(
        &mut self,
        every: Duration,
        mut on_interval: impl FnMut(&Interval),
    ) -> Result<RecvSummary> {
        self.count(Some((every, &mut on_interval)))
    }

    /// The receive loop, with optional interval reports.
    fn count(&mut self, mut reports: Option<Reports<'_>>) -> Result<RecvSummary> {
        let mut counters = RecvCounters::default();
        let mut buffer = vec![0u8; MAX_FRAME];
        let mut cnp_buffer = [0u8; MAX_CNP];
        let start = Instant::now();
        // Arrival times are the kernel's, on the realtime clock.
        let started = SystemTime::now();
        let mut last_frame = start;
        let count = self.config.count.unwrap_or(u64::MAX);
        let recv_error = |e| TrafficError::io(format!("receive on {}", self.config.iface))(e);
        let mut next_report = reports.as_ref().map(|(every, _)| *every);
        loop {
            let now = Instant::now();
            let mut wait = POLL_EVERY;
            if let (Some(due), Some((every, on_interval))) = (next_report, reports.as_mut()) {
                let elapsed = now - start;
                if elapsed >= due {
                    on_interval(counters.close_interval(due.as_secs_f64(), every.as_secs_f64()));
                    next_report = Some(due + *every);
                    continue;
                }
                wait = wait.min(due - elapsed);
            }
            if let Some(limit) = self.config.duration {
                let left = limit.saturating_sub(now - start);
                if left.is_zero() {
                    break;
                }
                wait = wait.min(left);
            }
            if let Some(idle) = self.config.idle_timeout {
                let left = idle.saturating_sub(now - last_frame);
                if left.is_zero() {
                    break;
                }
                wait = wait.min(left);
            }
            if counters.packets() >= count || self.stop.is_stopped() {
                break;
            }
            if !self.socket.wait_readable(wait).map_err(recv_error)? {
                continue;
            }
            // A bounded drain, so the stop conditions are checked under a steady flood too.
            for _ in 0..DRAIN_AT_MOST {
                let Some(received) = self.socket.try_recv(&mut buffer).map_err(recv_error)? else {
                    break;
                };
                if received.outgoing {
                    continue;
                }
                match RoceFrame::parse(&buffer[..received.len]) {
                    Ok((frame, payload)) => {
                        last_frame = Instant::now();
                        let arrived = received.arrived.unwrap_or_else(SystemTime::now);
                        let now_ns = arrived
                            .duration_since(started)
                            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                        let key = FlowKey {
                            src: frame.src_ip,
                            qp: frame.bth.dest_qp,
                        };
                        if frame.bth.opcode == Opcode::Cnp {
                            counters.record_cnp(key);
                            continue;
                        }
                        counters.record(
                            key,
                            frame.bth.psn,
                            received.len,
                            payload.len(),
                            frame.ecn,
                            now_ns,
                        );
                        if let (Ecn::Ce, Some((point, out))) = (frame.ecn, self.notify.as_mut()) {
                            let sent = point.admit(key, now_ns);
                            if sent {
                                let len = point
                                    .cnp_for(&frame)
                                    .emit(&mut cnp_buffer, |reserved| reserved.fill(0))?;
                                out.send_batch(&[&cnp_buffer[..len]])
                                    .map_err(TrafficError::io(format!(
                                        "send a CNP on {}",
                                        self.config.iface
                                    )))?;
                            }
                            counters.record_cnp_answer(key, sent);
                        }
                        if counters.packets() >= count {
                            break;
                        }
                    }
                    Err(WireError::Checksum) => {
                        counters.bad_frames += 1;
                        tracing::debug!(
                            "a frame with a bad checksum on {}:\n{}",
                            self.config.iface,
                            PrettyPrinter::new(&buffer[..received.len])
                        );
                    }
                    Err(_) => counters.other_frames += 1,
                }
            }
        }
        counters.socket_drops = self.socket.take_drops().map_err(recv_error)?;
        Ok(counters.summary(start))
    }
}
