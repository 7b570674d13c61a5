//! Every map the programs use, with its size. Names match `dataplane_common::maps`.

use aya_ebpf::{
    bindings::BPF_F_NO_PREALLOC,
    macros::map,
    maps::{Array, DevMapHash, HashMap, LpmTrie, LruHashMap, PerCpuArray},
};
use dataplane_common::{
    cnp::{CnpCounters, CnpQpState},
    config::{AttachInfo, EcnProfile, Settings},
    counters::HookCounters,
    lb::{
        BucketTables, Flowlet, LbCounters, LbSettings, LbState, Uplink, UplinkCounters,
        FLOWLET_ENTRIES, MAX_UPLINKS,
    },
    maps::{LB_PREFIX_ENTRIES, QP_ENTRIES, QUEUE_ENTRIES},
    pfc::{IngressBuffer, PfcProfile, PfcState, PfcTxCounters},
    phantom_queue::PhantomQueue,
    Hook, DSCP_VALUES, PRIORITIES,
};

/// ECN profile per priority.
#[map]
pub static ECN_PROFILES: Array<EcnProfile> = Array::with_max_entries(PRIORITIES as u32, 0);

/// DSCP → priority.
#[map]
pub static DSCP_PRIO: Array<u32> = Array::with_max_entries(DSCP_VALUES as u32, 0);

/// Global settings (one entry).
#[map]
pub static SETTINGS: Array<Settings> = Array::with_max_entries(1, 0);

/// Phantom queue per (hook, priority); shared by all CPUs.
#[map]
pub static QUEUES: Array<PhantomQueue> = Array::with_max_entries(QUEUE_ENTRIES, 0);

/// Counters per hook, per CPU.
#[map]
pub static COUNTERS: PerCpuArray<HookCounters> =
    PerCpuArray::with_max_entries(Hook::COUNT as u32, 0);

/// What attach did; written by the control plane, never read here.
#[map]
pub static ATTACH_INFO: Array<AttachInfo> = Array::with_max_entries(1, 0);

/// Received pause state per priority; the traffic tool reads it to honour pauses.
#[map]
pub static PFC_STATE: Array<PfcState> = Array::with_max_entries(PRIORITIES as u32, 0);

/// CNP rate limiting and counts per receiver QP.
#[map]
pub static CNP_QPS: LruHashMap<u32, CnpQpState> = LruHashMap::with_max_entries(QP_ENTRIES, 0);

/// Receiver QP → sender QP for CNPs; the control plane fills it.
#[map]
pub static QP_MAP: HashMap<u32, u32> = HashMap::with_max_entries(QP_ENTRIES, 0);

/// Notification-point counters, per CPU.
#[map]
pub static CNP_COUNTERS: PerCpuArray<CnpCounters> = PerCpuArray::with_max_entries(1, 0);

/// PFC generation profile per priority.
#[map]
pub static PFC_PROFILES: Array<PfcProfile> = Array::with_max_entries(PRIORITIES as u32, 0);

/// This host's ingress buffer per priority; shared by all CPUs.
#[map]
pub static PFC_BUFFERS: Array<IngressBuffer> = Array::with_max_entries(PRIORITIES as u32, 0);

/// PFC frames sent, per CPU.
#[map]
pub static PFC_TX_COUNTERS: PerCpuArray<PfcTxCounters> = PerCpuArray::with_max_entries(1, 0);

/// Load balancer settings.
#[map]
pub static LB_SETTINGS: Array<LbSettings> = Array::with_max_entries(1, 0);

/// Uplink slots.
#[map]
pub static LB_UPLINKS: Array<Uplink> = Array::with_max_entries(MAX_UPLINKS as u32, 0);

/// The uplinks as redirect targets, by slot (a hash, so a slot can be emptied).
#[map]
pub static LB_DEVMAP: DevMapHash = DevMapHash::with_max_entries(MAX_UPLINKS as u32, 0);

/// Load estimate per uplink slot; shared by all CPUs.
#[map]
pub static LB_LOADS: Array<PhantomQueue> = Array::with_max_entries(MAX_UPLINKS as u32, 0);

/// Counters per uplink slot, per CPU.
#[map]
pub static LB_UPLINK_COUNTERS: PerCpuArray<UplinkCounters> =
    PerCpuArray::with_max_entries(MAX_UPLINKS as u32, 0);

/// Balancer counters, per CPU.
#[map]
pub static LB_COUNTERS: PerCpuArray<LbCounters> = PerCpuArray::with_max_entries(1, 0);

/// Live slots, failovers, the spray position; shared by all CPUs.
#[map]
pub static LB_STATE: Array<LbState> = Array::with_max_entries(1, 0);

/// The ecmp and wcmp bucket tables.
#[map]
pub static LB_BUCKETS: Array<BucketTables> = Array::with_max_entries(1, 0);

/// Flow hash → current flowlet.
#[map]
pub static LB_FLOWLETS: LruHashMap<u32, Flowlet> = LruHashMap::with_max_entries(FLOWLET_ENTRIES, 0);

/// Owned IPv4 destination prefixes.
#[map]
pub static LB_PREFIXES_V4: LpmTrie<[u8; 4], u32> =
    LpmTrie::with_max_entries(LB_PREFIX_ENTRIES, BPF_F_NO_PREALLOC);

/// Owned IPv6 destination prefixes.
#[map]
pub static LB_PREFIXES_V6: LpmTrie<[u8; 16], u32> =
    LpmTrie::with_max_entries(LB_PREFIX_ENTRIES, BPF_F_NO_PREALLOC);
