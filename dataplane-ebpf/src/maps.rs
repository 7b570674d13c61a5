//! Every map the programs use, with its size. Names match `dataplane_common::maps`.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray},
};
use dataplane_common::{
    cnp::{CnpCounters, CnpQpState},
    config::{AttachInfo, EcnProfile, Settings},
    counters::HookCounters,
    maps::{QP_ENTRIES, QUEUE_ENTRIES},
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
