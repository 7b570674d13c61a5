//! CE arrival → CNP on the wire, timed by the kernel on the sender's side: one CE frame at a
//! time, the outgoing frame and the CNP that answers it both stamped (`SO_TIMESTAMPNS`) by one
//! packet socket on the sending interface.

use std::{
    io, mem,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::Duration,
};

use anyhow::{bail, Context as _};
use lossless_tests::{
    bed::{Link, TIMEOUT},
    craft::{Ecn, FrameSpec},
};
use traffic::packet_socket::PacketSocket;
use wire::bth::{self, Opcode, ROCEV2_PORT};
use wire::ethernet::{self, EtherType};
use wire::ip::Protocol;
use wire::{ipv4, udp};

/// Samples taken before the measured ones, to warm caches and the LRU map.
const WARM_UP: usize = 100;

/// One frame read from a [`StampedSocket`], with its kernel timestamp.
struct Stamped {
    /// Bytes read.
    len: usize,
    /// Whether the interface sent it (PACKET_OUTGOING) rather than received it.
    outgoing: bool,
    /// The kernel's receive (or, for an outgoing frame, tap) time, CLOCK_REALTIME.
    stamp: Duration,
}

/// A packet socket that sees every frame of one interface, both ways, each with its kernel
/// timestamp.
struct StampedSocket {
    /// The socket.
    fd: OwnedFd,
}

impl StampedSocket {
    /// Opens it on `ifindex`, in the calling thread's namespace, with `SO_TIMESTAMPNS` and a
    /// receive timeout of [`TIMEOUT`].
    fn open(ifindex: u32) -> anyhow::Result<Self> {
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2) with constant arguments; the fd is owned right away.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(all)) };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("socket(AF_PACKET)");
        }
        let socket = StampedSocket {
            // SAFETY: a fresh fd nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        };
        let address = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: all,
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: a valid sockaddr_ll of the length given.
        let bound = unsafe {
            libc::bind(
                socket.fd.as_raw_fd(),
                (&address as *const libc::sockaddr_ll).cast(),
                mem::size_of_val(&address) as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io::Error::last_os_error()).context("bind the timestamping socket");
        }
        let on: libc::c_int = 1;
        socket.option(libc::SO_TIMESTAMPNS, &on)?;
        let timeout = libc::timeval {
            tv_sec: TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        socket.option(libc::SO_RCVTIMEO, &timeout)?;
        Ok(socket)
    }

    /// Sets a SOL_SOCKET option.
    fn option<T>(&self, name: libc::c_int, value: &T) -> anyhow::Result<()> {
        // SAFETY: `value` is valid for its size.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (value as *const T).cast(),
                mem::size_of::<T>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("setsockopt {name}"));
        }
        Ok(())
    }

    /// Reads the next frame into `buffer` (waiting at most [`TIMEOUT`]) with its timestamp.
    fn recv(&self, buffer: &mut [u8]) -> anyhow::Result<Stamped> {
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // Room for one cmsghdr and a timespec, aligned for cmsghdr.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut message: libc::msghdr = unsafe { mem::zeroed() };
        message.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        message.msg_namelen = mem::size_of_val(&from) as libc::socklen_t;
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = mem::size_of_val(&control);
        // SAFETY: every pointer in `message` is valid for the length given with it.
        let len = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut message, 0) };
        if len < 0 {
            return Err(io::Error::last_os_error())
                .context("no frame on the sender's interface before the timeout");
        }
        // SAFETY: the control buffer was filled by recvmsg; the CMSG macros stay inside it.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&message) };
        while !cmsg.is_null() {
            // SAFETY: a header recvmsg wrote, inside the control buffer.
            let header = unsafe { &*cmsg };
            if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
                // SAFETY: an SCM_TIMESTAMPNS message carries a timespec (maybe unaligned).
                let time: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                return Ok(Stamped {
                    len: len as usize,
                    outgoing: from.sll_pkttype == libc::PACKET_OUTGOING,
                    stamp: Duration::new(time.tv_sec as u64, time.tv_nsec as u32),
                });
            }
            // SAFETY: as above.
            cmsg = unsafe { libc::CMSG_NXTHDR(&message, cmsg) };
        }
        bail!("a frame without a kernel timestamp")
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
        let capture = StampedSocket::open(ifindex)?;
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
                let got = capture.recv(&mut buffer)?;
                let frame = &buffer[..got.len];
                match roce_bth(frame) {
                    Some(bth)
                        if got.outgoing
                            && bth.opcode == Opcode::RcSendOnly
                            && bth.psn == psn_sent =>
                    {
                        sent = Some(got.stamp)
                    }
                    Some(bth) if !got.outgoing && bth.opcode == Opcode::Cnp => {
                        answered = Some(got.stamp)
                    }
                    _ => {}
                }
                if let (Some(sent), Some(answered)) = (sent, answered) {
                    break answered.saturating_sub(sent);
                }
            };
            if i >= WARM_UP {
                latencies.push(latency);
            }
        }
        Ok(latencies)
    })?
}
