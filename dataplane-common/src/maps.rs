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
/// Load balancer settings ([`crate::lb::LbSettings`]), 1 entry.
pub const LB_SETTINGS: &str = "LB_SETTINGS";
/// Uplink slots ([`crate::lb::Uplink`]), [`crate::lb::MAX_UPLINKS`] entries.
pub const LB_UPLINKS: &str = "LB_UPLINKS";
/// Device map of the uplinks, by slot: the redirect targets.
pub const LB_DEVMAP: &str = "LB_DEVMAP";
/// Load estimate of each uplink ([`crate::phantom_queue::PhantomQueue`]), by slot.
pub const LB_LOADS: &str = "LB_LOADS";
/// Per-CPU counters of each uplink ([`crate::lb::UplinkCounters`]), by slot.
pub const LB_UPLINK_COUNTERS: &str = "LB_UPLINK_COUNTERS";
/// Per-CPU balancer counters ([`crate::lb::LbCounters`]), 1 entry.
pub const LB_COUNTERS: &str = "LB_COUNTERS";
/// Shared balancer state ([`crate::lb::LbState`]): live slots, failovers, spray position.
pub const LB_STATE: &str = "LB_STATE";
/// The bucket tables of ecmp and wcmp ([`crate::lb::BucketTables`]), 1 entry.
pub const LB_BUCKETS: &str = "LB_BUCKETS";
/// The flowlet table: flow hash → [`crate::lb::Flowlet`], LRU.
pub const LB_FLOWLETS: &str = "LB_FLOWLETS";
/// Owned IPv4 destination prefixes (LPM trie, `[u8; 4]` → `u32` 1).
pub const LB_PREFIXES_V4: &str = "LB_PREFIXES_V4";
/// Owned IPv6 destination prefixes (LPM trie, `[u8; 16]` → `u32` 1).
pub const LB_PREFIXES_V6: &str = "LB_PREFIXES_V6";
/// Entries of each prefix trie.
pub const LB_PREFIX_ENTRIES: u32 = 1024;
/// Entries of [`CNP_QPS`] and [`QP_MAP`].
pub const QP_ENTRIES: u32 = 4096;

/// Every map the control plane pins, in a stable order.
pub const PINNED: [&str; 24] = [
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
    LB_SETTINGS,
    LB_UPLINKS,
    LB_DEVMAP,
    LB_LOADS,
    LB_UPLINK_COUNTERS,
    LB_COUNTERS,
    LB_STATE,
    LB_BUCKETS,
    LB_FLOWLETS,
    LB_PREFIXES_V4,
    LB_PREFIXES_V6,
];

/// Index into [`QUEUES`] of the queue of `priority` at `hook`.
#[inline(always)]
pub const fn queue_index(hook: crate::Hook, priority: usize) -> u32 {
    (hook as u32) * crate::PRIORITIES as u32 + (priority as u32 & 7)
}

/// Number of entries of [`QUEUES`].
pub const QUEUE_ENTRIES: u32 = (crate::Hook::COUNT * crate::PRIORITIES) as u32;
