//! An AF_PACKET socket bound to one interface, promiscuous, with a TPACKET_V2 receive ring and
//! transmit ring mapped into memory: frames are read and written in place, one system call
//! per burst of transmitted frames (the kick) and none per received frame while the ring has
//! frames. The ports' fallback where AF_XDP cannot be had.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// TPACKET_V2 (enum tpacket_versions in linux/if_packet.h).
const TPACKET_V2: libc::c_int = 1;
/// The longest frame a port receives or sends, in bytes: Ethernet header and VLAN tags
/// included, FCS not (a 1500-byte MTU frame is 1514, 1518 with a tag). Longer frames are
/// dropped (received) or lost (sent), and logged.
pub const MAX_FRAME: usize = 2016;
/// Room the kernel takes in a receive slot before the frame: the tpacket2 header, a
/// sockaddr_ll and alignment padding. For Ethernet it puts the MAC header at
/// TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14 = 66 bytes (af_packet.c, tpacket_rcv); the rest
/// is margin, so a frame of MAX_FRAME bytes is never cut.
const RX_HEADROOM: usize = 128;
/// Bytes per ring slot (both rings): a frame of MAX_FRAME bytes and the headroom, aligned as
/// the kernel requires.
const SLOT_SIZE: usize = align(MAX_FRAME + RX_HEADROOM);
/// Bytes per ring block: a power of two, as the kernel allocates blocks in powers of two pages.
const BLOCK_SIZE: usize = 1 << 16;
/// Slots in a block; the rest of a block is unused (the kernel never splits a slot across
/// blocks).
const SLOTS_PER_BLOCK: usize = BLOCK_SIZE / SLOT_SIZE;
const RX_BLOCKS: usize = 68;
const TX_BLOCKS: usize = 34;
/// Number of receive slots.
pub const RX_SLOTS: usize = RX_BLOCKS * SLOTS_PER_BLOCK;
/// Number of transmit slots.
pub const TX_SLOTS: usize = TX_BLOCKS * SLOTS_PER_BLOCK;
/// Where the frame starts in a transmit slot: after the aligned tpacket2_hdr (the kernel reads
/// it at tp_hdrlen - sizeof(sockaddr_ll)).
const TX_DATA: usize = align(std::mem::size_of::<libc::tpacket2_hdr>());

/// `n` rounded up to TPACKET_ALIGNMENT.
const fn align(n: usize) -> usize {
    (n + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}

const _: () = assert!(TX_DATA + MAX_FRAME <= SLOT_SIZE && SLOTS_PER_BLOCK > 0);

/// What reading the receive ring found.
pub enum Received {
    /// A frame, handed over (with its VLAN tag put back if the kernel had taken it off).
    Frame,
    /// A frame longer than [`MAX_FRAME`] bytes (its length); it is dropped.
    TooLong(usize),
    /// Nothing yet.
    Empty,
}

/// The mapped rings.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `Ring::open`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A packet socket with its rings.
pub struct Ring {
    fd: OwnedFd,
    map: Mapping,
    ifindex: u32,
}

// SAFETY: the mapping is shared memory owned by this socket; the receive half is used by one
// thread and the transmit half by one (other) thread, each touching only its own ring's slots,
// and slot ownership passes between user space and kernel through atomic status words.
unsafe impl Send for Ring {}
// SAFETY: shared by the receive and the transmit thread, which touch disjoint rings of the
// mapping (as above); the socket calls both make take `&self` and are thread-safe in the kernel.
unsafe impl Sync for Ring {}

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &str,
) -> io::Result<()> {
    // SAFETY: value points to a live T of the size given.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(ret, what)
}

/// getsockopt(2) of option `name` at `level`.
///
/// # Safety
/// `T` is plain integers (any bytes the kernel writes make a valid `T`), of the option's size.
unsafe fn getsockopt<T: Default>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes, and the kernel writes at most that many;
    // the caller vouches that they make a valid T.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    check(ret, what).map(|()| value)
}

/// The interface index of `name` (0 if there is none).
pub fn ifindex(name: &str) -> u32 {
    let Ok(c) = CString::new(name) else { return 0 };
    // SAFETY: c is a valid NUL-terminated string.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

impl Ring {
    /// Opens a promiscuous packet socket with rings on interface `name`.
    pub fn open(name: &str) -> io::Result<Ring> {
        let ifindex = ifindex(name);
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {name}"),
            ));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // Protocol 0: the socket takes no frame until it is bound to the interface with
        // ETH_P_ALL below (opened with ETH_P_ALL it would take every interface's frames until
        // then, and the engine would get them as the port's).
        // SAFETY: plain socket(2); the fd is owned below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        check(raw, "socket(AF_PACKET) (needs CAP_NET_RAW)")?;
        // SAFETY: raw is a fresh, valid fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &TPACKET_V2,
            "PACKET_VERSION",
        )?;
        let one: libc::c_int = 1;
        // A frame the kernel refuses to send (longer than the interface's MTU allows) is
        // dropped; without this, its slot stays WRONG_FORMAT and stops the ring behind it.
        // (Set before the rings: the kernel refuses it once they exist.)
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_LOSS,
            &one,
            "PACKET_LOSS",
        )?;
        let req = |blocks: usize| libc::tpacket_req {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: SLOT_SIZE as u32,
            tp_frame_nr: (blocks * SLOTS_PER_BLOCK) as u32,
        };
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req(RX_BLOCKS),
            "PACKET_RX_RING",
        )?;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &req(TX_BLOCKS),
            "PACKET_TX_RING",
        )?;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
            "PACKET_IGNORE_OUTGOING",
        )?;
        let len = (RX_BLOCKS + TX_BLOCKS) * BLOCK_SIZE;
        // SAFETY: mapping the rings the kernel just set up on this fd.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::other(format!(
                "mmap of the packet rings: {}",
                io::Error::last_os_error()
            )));
        }
        let map = Mapping {
            base: base.cast(),
            len,
        };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid start.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: addr is a valid sockaddr_ll of the size given.
        let ret = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        check(ret, &format!("bind to {name}"))?;
        // SAFETY: packet_mreq is plain data.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
            "promiscuous mode",
        )?;
        Ok(Ring { fd, map, ifindex })
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The socket, for poll(2).
    pub fn raw_fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// Slot `index` of the mapping: the receive ring's slots, then the transmit ring's.
    fn slot(&self, index: usize) -> *mut u8 {
        let (block, within) = if index < RX_SLOTS {
            (index / SLOTS_PER_BLOCK, index % SLOTS_PER_BLOCK)
        } else {
            let tx = index - RX_SLOTS;
            (RX_BLOCKS + tx / SLOTS_PER_BLOCK, tx % SLOTS_PER_BLOCK)
        };
        debug_assert!(block < RX_BLOCKS + TX_BLOCKS);
        // SAFETY: block and slot are within the mapping (the rings' blocks, back to back).
        unsafe { self.map.base.add(block * BLOCK_SIZE + within * SLOT_SIZE) }
    }

    fn status(&self, index: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned word of a slot header; the kernel and
        // we hand the slot back and forth through it.
        unsafe { &*(self.slot(index) as *const AtomicU32) }
    }

    /// Hands the frame in receive slot `index` (0..RX_SLOTS) to `each` if the kernel filled
    /// it, and gives the slot back; a frame whose VLAN tag the kernel took off is put together
    /// in `scratch` with its tag.
    pub fn receive(
        &self,
        index: usize,
        each: &mut dyn FnMut(&[u8]),
        scratch: &mut Vec<u8>,
    ) -> Received {
        let status = self.status(index).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return Received::Empty;
        }
        let slot = self.slot(index);
        // SAFETY: the slot is ours (TP_STATUS_USER) and starts with a tpacket2_hdr.
        let hdr = unsafe { &*(slot as *const libc::tpacket2_hdr) };
        // The frame as the pipeline sees it: with the tag the kernel took off put back.
        let tagged = status & libc::TP_STATUS_VLAN_VALID != 0;
        let len = hdr.tp_len as usize + if tagged { 4 } else { 0 };
        let result = if hdr.tp_len > hdr.tp_snaplen || len > MAX_FRAME {
            Received::TooLong(len)
        } else {
            // SAFETY: the kernel wrote tp_snaplen bytes at tp_mac within the slot.
            let data = unsafe {
                std::slice::from_raw_parts(
                    slot.add(usize::from(hdr.tp_mac)),
                    hdr.tp_snaplen as usize,
                )
            };
            if tagged && data.len() >= 12 {
                // Put the tag the kernel took off back after the MAC addresses.
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    hdr.tp_vlan_tpid
                } else {
                    0x8100
                };
                let (tpid, tci) = (tpid.to_be_bytes(), hdr.tp_vlan_tci.to_be_bytes());
                scratch.clear();
                for part in [&data[..12], &tpid, &tci, &data[12..]] {
                    scratch.extend_from_slice(part);
                }
                each(scratch);
            } else {
                each(data);
            }
            Received::Frame
        };
        self.status(index)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        result
    }

    /// Queues `frame` in transmit slot `index` (0..TX_SLOTS); [`Ring::kick`] sends what is
    /// queued. Fails if the frame is longer than [`MAX_FRAME`] or the slot is still in flight
    /// (the ring is full).
    pub fn transmit(&self, index: usize, frame: &[u8]) -> io::Result<()> {
        if frame.len() > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a frame of {} bytes is longer than {MAX_FRAME}",
                    frame.len()
                ),
            ));
        }
        let slot_index = RX_SLOTS + index;
        let status = self.status(slot_index).load(Ordering::Acquire);
        if status == libc::TP_STATUS_SEND_REQUEST || status == libc::TP_STATUS_SENDING {
            self.kick()?;
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "transmit ring full",
            ));
        }
        let slot = self.slot(slot_index);
        // SAFETY: the slot is ours (available) and large enough (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(TX_DATA), frame.len());
            let hdr = &mut *(slot as *mut libc::tpacket2_hdr);
            hdr.tp_len = frame.len() as u32;
            hdr.tp_snaplen = frame.len() as u32;
        }
        fence(Ordering::Release);
        self.status(slot_index)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        Ok(())
    }

    /// Whether the frame queued in transmit slot `index` still waits for the kernel: after a
    /// [`Ring::kick`], the kernel left it because the socket's send buffer is full (the
    /// interface's qdisc holds all it may), where a blocking send would wait.
    pub fn waiting(&self, index: usize) -> bool {
        self.status(RX_SLOTS + index).load(Ordering::Acquire) == libc::TP_STATUS_SEND_REQUEST
    }

    /// Asks the kernel to send every queued frame; fails if the interface is gone.
    pub fn kick(&self) -> io::Result<()> {
        // SAFETY: send(2) with no buffer flushes the transmit ring.
        let ret =
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EAGAIN) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The error the socket reports (as when its interface goes down or away), once poll(2)
    /// said it has one; EIO if it has none to say.
    pub fn error(&self) -> io::Error {
        // SAFETY: SO_ERROR is a C int.
        let error = unsafe {
            getsockopt::<libc::c_int>(&self.fd, libc::SOL_SOCKET, libc::SO_ERROR, "SO_ERROR")
        };
        match error {
            Ok(0) => io::Error::from_raw_os_error(libc::EIO),
            Ok(err) => io::Error::from_raw_os_error(err),
            Err(e) => e,
        }
    }

    /// Frames the kernel dropped with the receive ring full since the last call
    /// (PACKET_STATISTICS, which resets them).
    pub fn drops(&self) -> io::Result<u64> {
        // SAFETY: PACKET_STATISTICS of a TPACKET_V2 socket is struct tpacket_stats: `Stats`.
        let stats = unsafe {
            getsockopt::<Stats>(
                &self.fd,
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                "PACKET_STATISTICS",
            )
        }?;
        Ok(u64::from(stats.tp_drops))
    }
}

/// struct tpacket_stats (linux/if_packet.h), with a `Default`.
#[derive(Default)]
#[repr(C)]
struct Stats {
    tp_packets: u32,
    tp_drops: u32,
}
