//! A small safe wrapper around an AF_PACKET raw socket bound to one interface:
//! whole Ethernet frames in and out, in the network namespace of the thread
//! that opens it.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};

use std::time::{Duration, SystemTime};
use sysutil::sys::{self, check};

/// Most frames one [`PacketSocket::send_batch`] call takes.
pub const MAX_BATCH: usize = 64;

/// A raw packet socket bound to an interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

/// A frame read from a packet socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Length of the frame (it was cut to the buffer if longer).
    pub len: usize,
    /// Whether the frame was sent by this host rather than received.
    pub outgoing: bool,
    /// When the kernel received the frame (the realtime clock), if the socket asked for
    /// arrival times ([`PacketSocket::stamp_arrivals`]).
    pub arrived: Option<SystemTime>,
}

impl PacketSocket {
    /// Opens a socket bound to interface `ifindex`. A receiving socket sees every
    /// frame of the interface (ETH_P_ALL), sent ones included; a sending one sees none.
    pub fn open(ifindex: u32, receive: bool) -> io::Result<PacketSocket> {
        let ethertype = if receive { libc::ETH_P_ALL as u16 } else { 0 };
        PacketSocket::open_ethertype(ifindex, ethertype)
    }

    /// Opens a socket bound to interface `ifindex` that receives the frames
    /// arriving with `ethertype` (0: none). Unlike ETH_P_ALL, a single
    /// EtherType sees only received frames, never the host's own sent ones.
    pub fn open_ethertype(ifindex: u32, ethertype: u16) -> io::Result<PacketSocket> {
        let protocol = ethertype.to_be();
        // Protocol 0 until bound: created with a protocol, it would see every
        // interface's frames until `bind` narrows it to one.
        let socket = PacketSocket {
            fd: sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?,
        };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid sockaddr_ll of the length given.
        check(unsafe {
            libc::bind(
                socket.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(socket)
    }

    fn set_int_option(&self, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
        sys::set_option(&self.fd, libc::SOL_SOCKET, option, &value)
    }

    /// Sets the send buffer size, beyond `wmem_max` when the caller may (CAP_NET_ADMIN).
    pub fn set_send_buffer(&self, bytes: usize) -> io::Result<()> {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        self.set_int_option(libc::SO_SNDBUFFORCE, value)
            .or_else(|_| self.set_int_option(libc::SO_SNDBUF, value))
    }

    /// Sets the receive buffer size, beyond `rmem_max` when the caller may (CAP_NET_ADMIN).
    pub fn set_recv_buffer(&self, bytes: usize) -> io::Result<()> {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        self.set_int_option(libc::SO_RCVBUFFORCE, value)
            .or_else(|_| self.set_int_option(libc::SO_RCVBUF, value))
    }

    /// Stops the socket from seeing the frames this host sends (PACKET_IGNORE_OUTGOING), so
    /// they do not take room in its receive buffer.
    pub fn ignore_outgoing(&self) -> io::Result<()> {
        sys::set_option(&self.fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1)
    }

    /// Frames the kernel dropped because the receive buffer was full, since the last call
    /// (PACKET_STATISTICS, which the kernel resets on each read).
    pub fn take_drops(&self) -> io::Result<u64> {
        // SAFETY: tpacket_stats is plain data; all-zero is valid.
        let mut stats: libc::tpacket_stats = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats` is writable for `len` bytes; the kernel writes at most that.
        sys::check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        })?;
        Ok(u64::from(stats.tp_drops))
    }

    /// Asks the kernel to stamp each received frame with its arrival time (SO_TIMESTAMPNS),
    /// so a reader that lags behind still sees when frames came, not when it read them.
    pub fn stamp_arrivals(&self) -> io::Result<()> {
        self.set_int_option(libc::SO_TIMESTAMPNS, 1)
    }

    /// Sends up to [`MAX_BATCH`] frames in one `sendmmsg` call on the bound
    /// interface; returns how many left (the first ones), which may be fewer than given.
    pub fn send_batch<F: AsRef<[u8]>>(&self, frames: &[F]) -> io::Result<usize> {
        let count = frames.len().min(MAX_BATCH);
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut iovecs = [empty; MAX_BATCH];
        // SAFETY: mmsghdr is plain data; all-zero is a valid value (no address, no control).
        let mut messages: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
        for ((iov, message), frame) in iovecs.iter_mut().zip(&mut messages).zip(frames) {
            let frame = frame.as_ref();
            *iov = libc::iovec {
                iov_base: frame.as_ptr() as *mut libc::c_void,
                iov_len: frame.len(),
            };
            message.msg_hdr.msg_iov = iov;
            message.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first `count` messages each point at one iovec that points
        // at a live frame; the kernel only reads them.
        let sent = check(unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                messages.as_mut_ptr(),
                count as libc::c_uint,
                0,
            )
        })?;
        Ok(sent as usize)
    }

    /// Waits until a frame can be read or `timeout` passes; returns whether one can.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut pollfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        match check(unsafe { libc::poll(&mut pollfd, 1, millis) }) {
            Ok(ready) => Ok(ready > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads one frame without waiting; `None` if there is none.
    pub fn try_recv(&self, buffer: &mut [u8]) -> io::Result<Option<Received>> {
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        // Room for one SCM_TIMESTAMPNS message, u64-aligned as cmsghdr wants.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut message: libc::msghdr = unsafe { mem::zeroed() };
        message.msg_name = (&mut addr as *mut libc::sockaddr_ll).cast();
        message.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = mem::size_of_val(&control);
        // SAFETY: the message points at the buffer, address and control area, each valid
        // for the length given.
        let len = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut message,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if len < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(error),
            };
        }
        let outgoing = addr.sll_pkttype == libc::PACKET_OUTGOING;
        Ok(Some(Received {
            len: (len as usize).min(buffer.len()),
            outgoing,
            arrived: arrival_time(&message),
        }))
    }
}

/// The SCM_TIMESTAMPNS arrival time among `message`'s control messages, if there is one.
fn arrival_time(message: &libc::msghdr) -> Option<SystemTime> {
    // SAFETY: `message` was filled by recvmsg; the CMSG_* macros walk its control area
    // within msg_controllen, and a SCM_TIMESTAMPNS message's data is one timespec.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET
                && (*header).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let stamp: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(header).cast());
                let since_epoch = Duration::new(
                    u64::try_from(stamp.tv_sec).ok()?,
                    u32::try_from(stamp.tv_nsec).ok()?,
                );
                return SystemTime::UNIX_EPOCH.checked_add(since_epoch);
            }
            header = libc::CMSG_NXTHDR(message, header);
        }
    }
    None
}
