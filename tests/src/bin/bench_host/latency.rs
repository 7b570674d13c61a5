//! CE arrival → CNP on the wire, timed by the kernel on the sender's side: one CE frame at a
//! time, the outgoing frame and the CNP that answers it both stamped (`SO_TIMESTAMPNS`) by one
//! packet socket on the sending interface.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lossless_tests::{
    bed::{Link, TIMEOUT},
    craft::{Ecn, FrameSpec},
};
use traffic::packet_socket::{PacketSocket, Received};
use wire::bth::{self, Opcode, ROCEV2_PORT};
use wire::ethernet::{self, EtherType};
use wire::ip::Protocol;
use wire::{ipv4, udp};

/// Samples taken before the measured ones, to warm caches and the LRU map.
const WARM_UP: usize = 100;

/// The next frame `capture` reads into `buffer`, waiting at most [`TIMEOUT`].
fn next_frame(capture: &PacketSocket, buffer: &mut [u8]) -> anyhow::Result<Received> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(got) = capture.try_recv(buffer)? {
            return Ok(got);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("no frame on the sender's interface before the timeout");
        }
        capture.wait_readable(left)?;
    }
}

/// The BTH of an IPv4 RoCEv2 frame, read by wire's views. Checksums and ICRC are not checked:
/// the frames sent leave the ICRC zero.
fn roce_bth(frame: &[u8]) -> Option<bth::Repr> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let ip = ipv4::Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != Protocol::Udp {
        return None;
    }
    let datagram = udp::Packet::new_checked(ip.payload()).ok()?;
    if datagram.dst_port() != ROCEV2_PORT {
        return None;
    }
    let transport = bth::Packet::new_checked(datagram.payload()).ok()?;
    Some(bth::Repr::parse(&transport))
}

/// Sends `samples` (after [`WARM_UP`]) CE-marked `size`-byte frames from the tx end, one at
/// a time, each after the CNP of the one before; returns, per frame, the time from its
/// outgoing timestamp to the incoming timestamp of its CNP, both on the tx interface.
/// The rx end must be answering every CE frame (`cnp.interval_us=0`).
pub fn measure(link: &Link, samples: usize, size: usize) -> anyhow::Result<Vec<Duration>> {
    let spec = FrameSpec {
        src_mac: link.tx.mac,
        ecn: Ecn::Ce,
        // The headers and the ICRC take 58 bytes.
        payload: size - 58,
        ..link.roce()
    };
    let ifname = link.tx.ifname.clone();
    link.tx_ns.run(move || {
        let ifindex = sysutil::interface::ifindex(&ifname)?;
        let capture = PacketSocket::open(ifindex, true).context("open the capturing socket")?;
        capture
            .stamp_arrivals()
            .context("ask for kernel timestamps")?;
        let sender = PacketSocket::open(ifindex, false).context("open the sending socket")?;
        let mut buffer = [0u8; 2048];
        let mut latencies = Vec::with_capacity(samples);
        for i in 0..WARM_UP + samples {
            let psn_sent = i as u32 & 0xff_ffff;
            let frame = FrameSpec {
                psn: psn_sent,
                ..spec.clone()
            }
            .build();
            if sender.send_batch(&[frame])? != 1 {
                bail!("the kernel took no frame");
            }
            let (mut sent, mut answered) = (None, None);
            let latency = loop {
                let got = next_frame(&capture, &mut buffer)?;
                let stamp = got.arrived.context("a frame without a kernel timestamp")?;
                let frame = &buffer[..got.len];
                match roce_bth(frame) {
                    Some(bth)
                        if got.outgoing
                            && bth.opcode == Opcode::RcSendOnly
                            && bth.psn == psn_sent =>
                    {
                        sent = Some(stamp)
                    }
                    Some(bth) if !got.outgoing && bth.opcode == Opcode::Cnp => {
                        answered = Some(stamp)
                    }
                    _ => {}
                }
                if let (Some(sent), Some(answered)) = (sent, answered) {
                    break answered.duration_since(sent).unwrap_or_default();
                }
            };
            if i >= WARM_UP {
                latencies.push(latency);
            }
        }
        Ok(latencies)
    })?
}
