//! The socket: a UMEM of page-sized frames (on huge pages where the kernel gives them), its
//! fill and completion rings, and the receive and transmit rings, bound to queue 0 of an
//! interface; split into a receive half and a transmit half that two threads may own, each
//! with its own share of the UMEM's frames.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

use libc::xdp_desc;

use crate::redirect::Steering;
use crate::ring::{Kind, Ring};
use crate::Error;

/// Bytes of each UMEM frame: a page, the largest aligned chunk the kernel takes.
const CHUNK: u32 = 4096;
/// Room the kernel leaves before a received frame in its chunk (XDP_PACKET_HEADROOM).
const XDP_HEADROOM: u32 = 256;
/// The longest frame a socket receives or sends, in bytes (a chunk less the XDP headroom).
pub const FRAME_ROOM: usize = (CHUNK - XDP_HEADROOM) as usize;
/// Entries of each ring, and frames of each half's share of the UMEM (so a ring never lacks
/// room for the frames its half holds): 8 MiB of frames per half.
const RING: u32 = 2048;
/// Most frames one [`RxHalf::receive`] call reads, and one [`TxHalf`] queues before it hands
/// them to the kernel.
pub const BATCH: usize = 64;
/// Most `sendto` calls one [`TxHalf::flush`] makes: in copy mode the kernel sends at most 32
/// frames per call (and says EAGAIN while more wait), so a full ring takes RING / 32 calls.
const MAX_KICKS: usize = (RING / 32) as usize + 1;

/// How the frames move between the driver and the UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The driver reads and writes the UMEM itself (XDP_ZEROCOPY).
    ZeroCopy,
    /// The kernel copies each frame between the UMEM and its own buffers (XDP_COPY; veth, or
    /// any driver without zero-copy support).
    Copy,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::ZeroCopy => "zero-copy",
            Mode::Copy => "copy",
        })
    }
}

/// Anonymous memory for the UMEM, on a 2 MiB boundary and offered transparent huge pages
/// (`MADV_HUGEPAGE`), unmapped when the last half is dropped. With 4 KiB pages every frame of
/// the UMEM sits on a page of its own, a TLB entry per frame; on huge pages a 2 MiB page holds
/// 512 frames. Where the kernel has no huge page to give (transparent huge pages `never`, or
/// memory too fragmented), the area is made of ordinary pages and works the same.
struct Area {
    base: NonNull<u8>,
    len: usize,
}

/// A transparent huge page on x86-64 and arm64 (with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: the area is plain memory, not tied to the thread that mapped it; each half reads and
// writes only the frames it owns at the time (handed back and forth with the kernel through the
// rings).
unsafe impl Send for Area {}
// SAFETY: shared between the two halves, which never touch the same frame at once: a frame is
// owned by one half, or by the kernel, at a time (`bytes`' contract).
unsafe impl Sync for Area {}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // Mapped a huge page longer than asked, then trimmed to start on a huge page boundary.
        let mapped = len + HUGE_PAGE;
        // SAFETY: a fresh anonymous mapping, trimmed below to the part the Area owns.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let head = (HUGE_PAGE - raw as usize % HUGE_PAGE) % HUGE_PAGE;
        let tail = mapped - head - len;
        // SAFETY: the head and the tail lie within the mapping just made, outside the area kept.
        unsafe {
            let start = raw.cast::<u8>().add(head);
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap(start.add(len).cast(), tail);
            }
            // Advice only: without huge pages the area is ordinary memory.
            libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE);
            // Every page faulted in now (the kernel pins them at registration anyway), not on
            // the first frames; where MADV_POPULATE_WRITE is unknown (EINVAL: before Linux
            // 5.14), a write to each page does it. Out of memory, the registration fails.
            if libc::madvise(start.cast(), len, libc::MADV_POPULATE_WRITE) != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                for page in (0..len).step_by(4096) {
                    start.add(page).write_volatile(0);
                }
            }
        }
        // SAFETY: `raw + head` is within a successful mapping, so not null.
        let base = unsafe { NonNull::new_unchecked(raw.cast::<u8>().add(head)) };
        Ok(Area { base, len })
    }

    /// The `len` bytes at UMEM offset `addr`, if they lie within the area.
    ///
    /// # Safety
    /// The caller owns that frame now (the kernel handed it over or has not yet been given it),
    /// and no other slice of it is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes(&self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `start + len` lies within the mapping checked above, which lives as long as
        // `self`; the caller owns these bytes and holds no other slice of them.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), len) })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Area::new`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The socket and its UMEM, shared by the two halves: the socket is closed (the kernel lets go
/// of the UMEM) before the UMEM is unmapped, fields dropping in order.
struct Shared {
    socket: OwnedFd,
    area: Area,
}

/// An AF_XDP socket on queue 0 of an interface: its transmit half, its receive half if it was
/// opened to receive, and the mode the kernel granted.
pub struct Xsk {
    /// Frames received (with the XDP program that steers them here), if opened to receive.
    pub rx: Option<RxHalf>,
    /// Frames sent.
    pub tx: TxHalf,
    /// Zero-copy or copy.
    pub mode: Mode,
    /// The index of the interface the socket is bound to.
    pub ifindex: u32,
}

impl Xsk {
    /// Opens an AF_XDP socket on queue 0 of `iface` (in the calling thread's network namespace),
    /// zero-copy if the driver offers it, else copy mode; with `receive`, also steers the
    /// interface's received frames to it with an XDP program (which fails if the interface has
    /// more than one receive queue, or another XDP program). Everything is undone when the
    /// halves are dropped.
    pub fn open(iface: &str, receive: bool) -> Result<Xsk, Error> {
        if receive {
            let queues = crate::redirect::receive_queues(iface)
                .map_err(|e| Error::new(iface, "count its receive queues", e))?;
            if queues > 1 {
                return Err(Error::new(
                    iface,
                    format!("{queues} receive queues, one socket takes one"),
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("set one with `ethtool -L {iface} combined 1` (or rx 1)"),
                    ),
                ));
            }
        }
        match Xsk::open_in(iface, receive, Mode::ZeroCopy) {
            Ok(xsk) => Ok(xsk),
            Err(_) => Xsk::open_in(iface, receive, Mode::Copy),
        }
    }

    fn open_in(iface: &str, receive: bool, mode: Mode) -> Result<Xsk, Error> {
        let fail = |what: &str| {
            let what = what.to_string();
            move |e| Error::new(iface, what, e)
        };
        let name = std::ffi::CString::new(iface).map_err(|_| {
            Error::new(
                iface,
                "name",
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"),
            )
        })?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(Error::new(
                iface,
                "find the interface",
                io::Error::last_os_error(),
            ));
        }
        let halves = if receive { 2 } else { 1 };
        let area = Area::new((RING * CHUNK) as usize * halves).map_err(fail("map the UMEM"))?;
        // SAFETY: socket(2); the fd is owned at once.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(Error::new(
                iface,
                "create the socket",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: a fresh fd, owned from here on.
        let socket = unsafe { OwnedFd::from_raw_fd(raw) };
        let fd = socket.as_raw_fd();
        let registration = libc::xdp_umem_reg {
            addr: area.base.as_ptr() as u64,
            len: area.len as u64,
            chunk_size: CHUNK,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        set_option(fd, libc::XDP_UMEM_REG, &registration).map_err(fail("register the UMEM"))?;
        let kinds: &[Kind] = if receive {
            &[Kind::Fill, Kind::Completion, Kind::Rx, Kind::Tx]
        } else {
            &[Kind::Fill, Kind::Completion, Kind::Tx]
        };
        for kind in kinds {
            set_option(fd, kind.option(), &RING)
                .map_err(fail(&format!("size the {kind:?} ring")))?;
        }
        let offsets = mmap_offsets(fd).map_err(fail("read the rings' offsets"))?;
        let map = |kind: Kind| fail(&format!("map the {kind:?} ring"));
        let mut fill = Ring::<u64>::map(fd, Kind::Fill, RING, &offsets).map_err(map(Kind::Fill))?;
        let completion = Ring::<u64>::map(fd, Kind::Completion, RING, &offsets)
            .map_err(map(Kind::Completion))?;
        let tx = Ring::<xdp_desc>::map(fd, Kind::Tx, RING, &offsets).map_err(map(Kind::Tx))?;
        let rx = if receive {
            Some(Ring::<xdp_desc>::map(fd, Kind::Rx, RING, &offsets).map_err(map(Kind::Rx))?)
        } else {
            None
        };
        // Frames for the receive half go on the fill ring before binding, so that the first
        // frames find room.
        if rx.is_some() {
            let addrs: Vec<u64> = (0..RING).map(|i| u64::from(i * CHUNK)).collect();
            fill.produce(&addrs);
        }
        let address = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_USE_NEED_WAKEUP
                | match mode {
                    Mode::ZeroCopy => libc::XDP_ZEROCOPY,
                    Mode::Copy => libc::XDP_COPY,
                },
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: bind(2) with a sockaddr_xdp of the length given.
        let ret = unsafe {
            libc::bind(
                fd,
                (&address as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(Error::new(
                iface,
                format!("bind to queue 0 in {mode} mode"),
                io::Error::last_os_error(),
            ));
        }
        let shared = Arc::new(Shared { socket, area });
        // The first RING frames receive, the next RING transmit.
        let tx_first = if receive { RING } else { 0 };
        let rx = match rx {
            Some(ring) => {
                let steering =
                    Steering::attach(iface, ifindex, fd).map_err(fail("attach the XDP program"))?;
                Some(RxHalf {
                    ring,
                    fill,
                    addrs: [0; BATCH],
                    _steering: steering,
                    shared: shared.clone(),
                })
            }
            None => None,
        };
        let free = (tx_first..tx_first + RING)
            .map(|i| u64::from(i * CHUNK))
            .collect();
        Ok(Xsk {
            rx,
            tx: TxHalf {
                ring: tx,
                completion,
                free,
                queued: Vec::with_capacity(BATCH),
                shared,
            },
            mode,
            ifindex,
        })
    }
}

/// setsockopt(2) at SOL_XDP with `value`.
fn set_option<T>(fd: RawFd, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T of the size given.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            option,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// getsockopt(2) at SOL_XDP: the value, all zero but for what the kernel wrote, and how many
/// bytes it wrote (fewer than `T` takes where an older kernel knows a shorter layout).
///
/// # Safety
/// `T` is plain integers: all zero, and whatever bytes the kernel writes, are values of it.
unsafe fn get_option<T>(fd: RawFd, option: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: the caller says all zero is a valid T.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: reading into a live T of the length given.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            option,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((value, len as usize))
}

/// Where each ring's indices, flags and entries lie in its mapping (XDP_MMAP_OFFSETS).
fn mmap_offsets(fd: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: xdp_mmap_offsets is plain integers.
    let (offsets, len) =
        unsafe { get_option::<libc::xdp_mmap_offsets>(fd, libc::XDP_MMAP_OFFSETS) }?;
    if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        // Kernels before 5.4 give the layout without the flags word (no need-wakeup).
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel's rings have no flags word (need-wakeup needs Linux 5.4 or later)",
        ));
    }
    Ok(offsets)
}

/// The receive half: frames the XDP program steered to the socket.
pub struct RxHalf {
    ring: Ring<xdp_desc>,
    fill: Ring<u64>,
    /// The frames read by the current call, to give back to the fill ring.
    addrs: [u64; BATCH],
    _steering: Steering,
    shared: Arc<Shared>,
}

impl RxHalf {
    /// Hands each received frame (at most [`BATCH`]) to `each`, then gives their buffers back
    /// to the kernel; returns how many there were. Does not wait.
    pub fn receive(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        let n = self.ring.ready(BATCH as u32);
        for i in 0..n {
            let desc = self.ring.peek(i);
            // SAFETY: the kernel handed this frame over with the descriptor, and it goes back
            // to the fill ring only after this loop.
            if let Some(frame) = unsafe { self.shared.area.bytes(desc.addr, desc.len as usize) } {
                each(frame);
            }
            self.addrs[i as usize] = desc.addr & !u64::from(CHUNK - 1);
        }
        self.ring.release(n);
        // The fill ring has room for every frame of this half, so all go back.
        self.fill.produce(&self.addrs[..n as usize]);
        if self.fill.needs_wakeup() {
            // A driver that ran out of fill buffers waits to be told there are more (the
            // socket was bound with XDP_USE_NEED_WAKEUP): a receive call tells it, as a poll
            // would, without waiting.
            // SAFETY: recvfrom(2) with no buffer and no address, on the socket.
            unsafe {
                libc::recvfrom(
                    self.shared.socket.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
        n as usize
    }

    /// Frames the kernel dropped instead of handing them to this socket: longer than
    /// [`FRAME_ROOM`] or otherwise unfit (`rx_dropped`), or the receive ring full
    /// (`rx_ring_full`), so far (XDP_STATISTICS).
    pub fn kernel_drops(&self) -> io::Result<u64> {
        let stats = statistics(self.shared.socket.as_raw_fd())?;
        Ok(stats.rx_dropped + stats.rx_ring_full)
    }

    /// The socket, for poll(2): readable when a frame has arrived (a poll also wakes a driver
    /// that waits for one); an error it reports means its interface is down or gone.
    pub fn raw_fd(&self) -> RawFd {
        self.shared.socket.as_raw_fd()
    }
}

/// The socket's counters (XDP_STATISTICS).
fn statistics(fd: RawFd) -> io::Result<libc::xdp_statistics> {
    // SAFETY: xdp_statistics is plain integers.
    let (stats, _) = unsafe { get_option::<libc::xdp_statistics>(fd, libc::XDP_STATISTICS) }?;
    Ok(stats)
}

/// The transmit half: frames written into its share of the UMEM, handed to the kernel in
/// batches.
pub struct TxHalf {
    ring: Ring<xdp_desc>,
    completion: Ring<u64>,
    /// Frames of this half that are neither queued nor with the kernel.
    free: Vec<u64>,
    /// Frames written and not yet on the ring.
    queued: Vec<xdp_desc>,
    shared: Arc<Shared>,
}

impl TxHalf {
    /// Queues a frame of `len` bytes that `write` writes in place. Fails with `InvalidInput`
    /// if `len` is more than [`FRAME_ROOM`], and with `WouldBlock` while every frame of the
    /// half is with the kernel (the frame is not sent). [`TxHalf::flush`] lets queued frames
    /// leave; they also do every [`BATCH`] frames.
    pub fn send_with(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> io::Result<()> {
        if len > FRAME_ROOM {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a frame of {len} bytes is longer than {FRAME_ROOM}"),
            ));
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        if self.free.is_empty() {
            self.flush()?;
        }
        let Some(addr) = self.free.pop() else {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "every transmit frame is in flight",
            ));
        };
        // SAFETY: the frame was free: neither queued nor with the kernel.
        let bytes = unsafe { self.shared.area.bytes(addr, len) }.expect("a frame of the area");
        write(bytes);
        self.queued.push(xdp_desc {
            addr,
            len: len as u32,
            options: 0,
        });
        if self.queued.len() == BATCH {
            self.submit();
        }
        Ok(())
    }

    /// Queues a copy of `frame` (see [`TxHalf::send_with`]).
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.send_with(frame.len(), |bytes| bytes.copy_from_slice(frame))
    }

    /// Hands the queued frames to the kernel, wakes it if it waits to be told (in copy mode it
    /// always does: the frames leave during the call), and takes back the frames it is done
    /// with. Fails if the interface is gone.
    pub fn flush(&mut self) -> io::Result<()> {
        self.submit();
        for _ in 0..MAX_KICKS {
            // Nothing waits on the ring (a flush with nothing queued costs no system call), or
            // the kernel takes frames without being told.
            if self.ring.outstanding() == 0 || !self.ring.needs_wakeup() {
                break;
            }
            // SAFETY: sendto(2) with no buffer on the socket: "send what is on the ring".
            let ret = unsafe {
                libc::sendto(
                    self.raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if ret >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // More frames wait (EAGAIN), or the device or its queue is busy: call again
                // while frames remain.
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR)
                    if self.ring.outstanding() > 0 => {}
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => break,
                _ => return Err(e),
            }
        }
        self.reclaim();
        Ok(())
    }

    /// Frames queued or with the kernel and not yet sent.
    pub fn in_flight(&self) -> usize {
        RING as usize - self.free.len()
    }

    /// The socket, for poll(2).
    pub fn raw_fd(&self) -> RawFd {
        self.shared.socket.as_raw_fd()
    }

    fn submit(&mut self) {
        // The ring has room for every frame of this half, so all go on.
        let n = self.ring.produce(&self.queued);
        debug_assert_eq!(n, self.queued.len());
        self.queued.clear();
    }

    fn reclaim(&mut self) {
        let n = self.completion.ready(RING);
        for i in 0..n {
            self.free
                .push(self.completion.peek(i) & !u64::from(CHUNK - 1));
        }
        self.completion.release(n);
    }
}
