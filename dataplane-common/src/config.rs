//! Configuration records the control plane writes and the programs read on every packet.

use crate::red::PMAX_ONE;

/// The ECN marking profile of one priority: a RED curve over a phantom queue drained at a rate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnProfile {
    /// 1 when marking is on for this priority, 0 when off (the queue is still modelled).
    pub enabled: u32,
    /// Below this backlog nothing is marked.
    pub kmin_bytes: u32,
    /// At or above this backlog every ECT packet is marked.
    pub kmax_bytes: u32,
    /// Marking probability reached just below Kmax, in units of 1/[`PMAX_ONE`].
    pub pmax_fixed: u32,
    /// Drain rate of the phantom queue, in bytes per second.
    pub rate_bytes_per_sec: u64,
}

impl EcnProfile {
    /// The default: marking on, Kmin 20 KB, Kmax 200 KB, Pmax 0.2, drained at 10 Gb/s.
    pub const DEFAULT: EcnProfile = EcnProfile {
        enabled: 1,
        kmin_bytes: 20_000,
        kmax_bytes: 200_000,
        pmax_fixed: PMAX_ONE / 5,
        rate_bytes_per_sec: 10_000_000_000 / 8,
    };
}

/// Settings that apply to every priority of an interface.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Bit set of [`Settings::ROCE_ONLY`], [`Settings::LOG_MARKS`], [`Settings::LOG_ERRORS`],
    /// [`Settings::CNP_ENABLED`], [`Settings::PFC_WATCHDOG_IGNORE`], [`Settings::PFC_RELAY`].
    pub flags: u32,
    /// DSCP of the CNPs the kernel sends.
    pub cnp_dscp: u32,
    /// Link speed in bits per second: the length of a PFC pause quantum (512 bit times).
    pub link_speed_bps: u64,
    /// At most one CNP per QP per this many ns.
    pub cnp_interval_ns: u64,
    /// A priority paused by an unbroken run of PAUSE frames longer than this is in a storm.
    pub pfc_watchdog_ns: u64,
}

impl Settings {
    /// Mark only RoCEv2 packets (UDP destination port 4791); other ECT traffic is queued, not marked.
    pub const ROCE_ONLY: u32 = 1 << 0;
    /// Log every mark decision through aya-log (slow: for debugging only).
    pub const LOG_MARKS: u32 = 1 << 1;
    /// Log every malformed frame through aya-log.
    pub const LOG_ERRORS: u32 = 1 << 2;
    /// Answer CE-marked RoCEv2 packets with CNPs (when the `cnp` hook is attached).
    pub const CNP_ENABLED: u32 = 1 << 3;
    /// Stop honouring a priority's pauses while it storms (the PFC watchdog's action).
    pub const PFC_WATCHDOG_IGNORE: u32 = 1 << 4;
    /// Pass every PAUSE received (not resumes) on to the interfaces of `PFC_RELAY`: this host
    /// forwards without a buffer of its own, so its upstream must stop when its downstream does.
    pub const PFC_RELAY: u32 = 1 << 5;

    /// The default: RoCEv2 only, no logging, a 100 Gb/s link, CNPs on with DSCP 48 and
    /// at most one per QP per 50 µs (DCQCN's notification point), a PFC watchdog of 200 ms
    /// that counts storms and still honours them.
    pub const DEFAULT: Settings = Settings {
        flags: Settings::ROCE_ONLY | Settings::CNP_ENABLED,
        cnp_dscp: 48,
        link_speed_bps: 100_000_000_000,
        cnp_interval_ns: 50_000,
        pfc_watchdog_ns: 200_000_000,
    };

    /// The PFC watchdog these settings describe.
    pub const fn watchdog(&self) -> crate::pfc::Watchdog {
        crate::pfc::Watchdog {
            limit_ns: self.pfc_watchdog_ns,
            ignore_storms: self.flags & Settings::PFC_WATCHDOG_IGNORE != 0,
        }
    }
}

/// What `lossless host attach` did, kept in a pinned map so `status` can tell it later.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttachInfo {
    /// Interface index at attach time.
    pub ifindex: u32,
    /// XDP mode: 1 native (driver), 2 skb (generic).
    pub xdp_mode: u32,
    /// Bit set of [`crate::Hook::bit`].
    pub hooks: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl AttachInfo {
    /// [`AttachInfo::xdp_mode`] for native (driver) XDP.
    pub const MODE_NATIVE: u32 = 1;
    /// [`AttachInfo::xdp_mode`] for generic (skb) XDP.
    pub const MODE_SKB: u32 = 2;
}

/// The default DSCP → priority map: DSCP 26 → 3 (RoCE data), 48 → 6 (CNP), all else 0.
pub const fn default_dscp_priority(dscp: u8) -> u32 {
    match dscp {
        26 => 3,
        48 => 6,
        _ => 0,
    }
}

// SAFETY: plain `#[repr(C)]` records of integers without padding.
pod!(EcnProfile, Settings, AttachInfo);
