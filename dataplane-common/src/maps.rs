//! Names of the maps the programs declare: the control plane opens and pins them by these names.

/// Per-priority ECN profile ([`crate::config::EcnProfile`]), 8 entries.
pub const ECN_PROFILES: &str = "ECN_PROFILES";
/// DSCP → priority map (`u32` priority), 64 entries.
pub const DSCP_PRIO: &str = "DSCP_PRIO";
/// Global settings ([`crate::config::Settings`]), 1 entry.
pub const SETTINGS: &str = "SETTINGS";
/// Phantom queue state ([`crate::phantom_queue::PhantomQueue`]), one per (hook, priority).
pub const QUEUES: &str = "QUEUES";
/// Per-CPU counters ([`crate::counters::HookCounters`]), one per hook.
pub const COUNTERS: &str = "COUNTERS";
/// What `attach` did ([`crate::config::AttachInfo`]), 1 entry.
pub const ATTACH_INFO: &str = "ATTACH_INFO";
/// Received pause state ([`crate::pfc::PfcState`]), one per priority.
pub const PFC_STATE: &str = "PFC_STATE";
/// Per-QP CNP rate limiting and counts ([`crate::cnp::CnpQpState`]), LRU hash by DestQP.
pub const CNP_QPS: &str = "CNP_QPS";
/// Receiver QP → sender QP for CNPs (`u32` → `u32`), filled by `lossless host qp-map`.
pub const QP_MAP: &str = "QP_MAP";
/// Per-CPU notification-point counters ([`crate::cnp::CnpCounters`]), 1 entry.
pub const CNP_COUNTERS: &str = "CNP_COUNTERS";
/// PFC generation profile per priority ([`crate::pfc::PfcProfile`]), 8 entries.
pub const PFC_PROFILES: &str = "PFC_PROFILES";
/// This host's ingress buffer per priority ([`crate::pfc::IngressBuffer`]), 8 entries.
pub const PFC_BUFFERS: &str = "PFC_BUFFERS";
/// Per-CPU counts of PFC frames sent ([`crate::pfc::PfcTxCounters`]), 1 entry.
pub const PFC_TX_COUNTERS: &str = "PFC_TX_COUNTERS";
/// Entries of [`CNP_QPS`] and [`QP_MAP`].
pub const QP_ENTRIES: u32 = 4096;

/// Every map the control plane pins, in a stable order.
pub const PINNED: [&str; 13] = [
    ECN_PROFILES,
    DSCP_PRIO,
    SETTINGS,
    QUEUES,
    COUNTERS,
    ATTACH_INFO,
    PFC_STATE,
    CNP_QPS,
    QP_MAP,
    CNP_COUNTERS,
    PFC_PROFILES,
    PFC_BUFFERS,
    PFC_TX_COUNTERS,
];

/// Index into [`QUEUES`] of the queue of `priority` at `hook`.
#[inline(always)]
pub const fn queue_index(hook: crate::Hook, priority: usize) -> u32 {
    (hook as u32) * crate::PRIORITIES as u32 + (priority as u32 & 7)
}

/// Number of entries of [`QUEUES`].
pub const QUEUE_ENTRIES: u32 = (crate::Hook::COUNT * crate::PRIORITIES) as u32;
