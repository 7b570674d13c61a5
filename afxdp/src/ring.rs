//! The rings an AF_XDP socket shares with the kernel (fill, completion, receive, transmit): each
//! a power-of-two array of entries with a producer and a consumer index, mapped from the socket
//! at the offsets the kernel gives (XDP_MMAP_OFFSETS). One side produces, the other consumes:
//! we produce on the fill and transmit rings and consume on the receive and completion rings.
//! The protocol is the kernel's (Documentation/networking/af_xdp.rst) and libbpf's `xsk.h`:
//! entries are written before the producer index is released, read after it is acquired, and
//! a consumer index is released once its entries are read.

use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Which ring, for its size option, its mmap page offset and its offsets in XDP_MMAP_OFFSETS.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Fill,
    Completion,
    Rx,
    Tx,
}

impl Kind {
    /// The socket option that sizes the ring.
    pub(crate) fn option(self) -> libc::c_int {
        match self {
            Kind::Fill => libc::XDP_UMEM_FILL_RING,
            Kind::Completion => libc::XDP_UMEM_COMPLETION_RING,
            Kind::Rx => libc::XDP_RX_RING,
            Kind::Tx => libc::XDP_TX_RING,
        }
    }

    fn page_offset(self) -> libc::off_t {
        match self {
            Kind::Fill => libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            Kind::Completion => libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            Kind::Rx => libc::XDP_PGOFF_RX_RING,
            Kind::Tx => libc::XDP_PGOFF_TX_RING,
        }
    }

    fn offsets(self, all: &libc::xdp_mmap_offsets) -> &libc::xdp_ring_offset {
        match self {
            Kind::Fill => &all.fr,
            Kind::Completion => &all.cr,
            Kind::Rx => &all.rx,
            Kind::Tx => &all.tx,
        }
    }
}

/// A mapped ring of `size` entries of `T` (`u64` UMEM addresses for the fill and completion
/// rings, `xdp_desc` for the receive and transmit rings), with this side's cached view of both
/// indices. Unmapped on drop; the mapping keeps the kernel's ring alive past the socket's close.
pub(crate) struct Ring<T: Copy> {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    /// Our copy of the producer index: ahead of the shared one by what we have written and not
    /// yet released (producing), or the last value read (consuming).
    cached_producer: u32,
    /// Our copy of the consumer index; when producing, plus `size`, so that the difference is
    /// the free room.
    cached_consumer: u32,
    _entries: PhantomData<T>,
}

// SAFETY: the ring is owned by one thread at a time (each half owns its own rings); the shared
// indices are atomics.
unsafe impl<T: Copy> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps ring `kind` of socket `fd`, which was sized to `size` entries (a power of two).
    pub(crate) fn map(
        fd: RawFd,
        kind: Kind,
        size: u32,
        offsets: &libc::xdp_mmap_offsets,
    ) -> io::Result<Ring<T>> {
        debug_assert!(size.is_power_of_two());
        let off = kind.offsets(offsets);
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a shared mapping of the socket's ring at the kernel's page offset, of the
        // length the kernel's layout implies; owned by the Ring.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                kind.page_offset(),
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map =
            NonNull::new(base.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        // SAFETY: the kernel's offsets lie within the mapping, aligned for their types.
        let at = |offset: u64| unsafe { map.add(offset as usize) };
        let mut ring = Ring {
            map,
            map_len,
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc).cast(),
            mask: size - 1,
            cached_producer: 0,
            cached_consumer: 0,
            _entries: PhantomData,
        };
        ring.cached_producer = ring.producer().load(Ordering::Relaxed);
        ring.cached_consumer = ring.consumer().load(Ordering::Relaxed);
        if matches!(kind, Kind::Fill | Kind::Tx) {
            ring.cached_consumer = ring.cached_consumer.wrapping_add(size);
        }
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: within the mapping, which lives as long as self.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { self.consumer.as_ref() }
    }

    /// Whether the kernel asks to be woken (a system call) before it looks at the ring again
    /// (XDP_RING_NEED_WAKEUP; the socket was bound with XDP_USE_NEED_WAKEUP).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // Producing (fill and transmit rings).

    /// Room for entries we may write, looking at the kernel's consumer index only when the
    /// cached room is less than `wanted`.
    fn room(&mut self, wanted: u32) -> u32 {
        let room = self.cached_consumer.wrapping_sub(self.cached_producer);
        if room >= wanted {
            return room;
        }
        let size = self.mask + 1;
        self.cached_consumer = self.consumer().load(Ordering::Acquire).wrapping_add(size);
        self.cached_consumer.wrapping_sub(self.cached_producer)
    }

    /// Writes as many of `items` as there is room for and releases them to the kernel; returns
    /// how many were written.
    pub(crate) fn produce(&mut self, items: &[T]) -> usize {
        let n = (self.room(items.len() as u32) as usize).min(items.len());
        if n == 0 {
            return 0;
        }
        for item in &items[..n] {
            let slot = (self.cached_producer & self.mask) as usize;
            // SAFETY: slot <= mask, within the ring's entries; the kernel does not read it
            // before the producer index is released below.
            unsafe { self.entries.add(slot).write(*item) };
            self.cached_producer = self.cached_producer.wrapping_add(1);
        }
        self.producer()
            .store(self.cached_producer, Ordering::Release);
        n
    }

    /// Entries written and not yet taken by the kernel.
    pub(crate) fn outstanding(&self) -> u32 {
        self.cached_producer
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    // Consuming (receive and completion rings).

    /// Entries ready to read, at most `max`, looking at the kernel's producer index only when
    /// the cached ones are all read.
    pub(crate) fn ready(&mut self, max: u32) -> u32 {
        let mut ready = self.cached_producer.wrapping_sub(self.cached_consumer);
        if ready == 0 {
            self.cached_producer = self.producer().load(Ordering::Acquire);
            ready = self.cached_producer.wrapping_sub(self.cached_consumer);
        }
        ready.min(max)
    }

    /// The `i`th entry past the consumer index; `i` below what [`Ring::ready`] returned.
    pub(crate) fn peek(&self, i: u32) -> T {
        let slot = (self.cached_consumer.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask, within the ring's entries, released by the kernel's producer
        // index (acquired in `ready`) and not yet handed back.
        unsafe { self.entries.add(slot).read() }
    }

    /// Hands the first `n` ready entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_consumer = self.cached_consumer.wrapping_add(n);
        self.consumer()
            .store(self.cached_consumer, Ordering::Release);
    }
}

impl<T: Copy> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Ring::map`, unmapped once.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}
