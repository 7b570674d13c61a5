//! Every map the eBPF programs and the control plane share, declared once: its name, kind, key
//! and value types and size, in [`map_table!`]. The table is expanded twice: here into typed
//! [`MapDef`] constants (and [`ALL`]) that user space opens the pinned maps through, and in the
//! eBPF crate into its `#[map]` statics (`dataplane_common::map_table!(its_macro)`). So a map's
//! name, its types and its size cannot drift apart between the two sides, and no call site picks
//! a map by a string or its value type by hand (the lesson of cilium/ebpf's generated objects).

use core::marker::PhantomData;

/// Calls `$expand!` with the table of every map, one row each:
/// `/// doc` `NAME: Kind<Key, Value>[max_entries];` where `Kind` is one of [`kind`]'s types
/// (named as aya-ebpf names the map types) and every path is absolute (`$crate::...`), so the
/// table reads the same wherever it is expanded. The rows are in a stable order: the order of
/// [`ALL`], in which `attach` pins them.
#[macro_export]
macro_rules! map_table {
    ($expand:ident) => {
        $expand! {
            /// ECN profile per priority.
            ECN_PROFILES: Array<u32, $crate::config::EcnProfile>[$crate::PRIORITIES as u32];
            /// DSCP → priority.
            DSCP_PRIO: Array<u32, u32>[$crate::DSCP_VALUES as u32];
            /// Interface-wide settings (one entry).
            SETTINGS: Array<u32, $crate::config::Settings>[1];
            /// Phantom queue per (hook, priority), index [`queue_index`]; shared by all CPUs.
            QUEUES: Array<u32, $crate::phantom_queue::PhantomQueue>[$crate::maps::QUEUE_ENTRIES];
            /// Counters per hook, per CPU.
            COUNTERS: PerCpuArray<u32, $crate::counters::HookCounters>[$crate::Hook::COUNT as u32];
            /// What attach did; written by the control plane, never read by the programs.
            ATTACH_INFO: Array<u32, $crate::config::AttachInfo>[1];
            /// Received pause state per priority; the traffic tool reads it to honour pauses.
            PFC_STATE: Array<u32, $crate::pfc::PfcState>[$crate::PRIORITIES as u32];
            /// CNP rate limiting and counts per receiver QP (DestQP), least recently used out.
            CNP_QPS: LruHashMap<u32, $crate::cnp::CnpQpState>[$crate::maps::QP_ENTRIES];
            /// Receiver QP → sender QP for CNPs; `lossless host qp-map` fills it.
            QP_MAP: HashMap<u32, u32>[$crate::maps::QP_ENTRIES];
            /// Notification-point counters, per CPU.
            CNP_COUNTERS: PerCpuArray<u32, $crate::cnp::CnpCounters>[1];
            /// NAKs by syndrome per hook (XDP: received, TC egress: sent), per CPU.
            NAK_COUNTERS: PerCpuArray<u32, $crate::nak::NakCounters>[$crate::Hook::COUNT as u32];
            /// NAKs by syndrome and hook per QP (the BTH DestQP), least recently used out.
            NAK_QPS: LruHashMap<u32, $crate::nak::NakQpCounters>[$crate::maps::QP_ENTRIES];
            /// PFC generation profile per priority.
            PFC_PROFILES: Array<u32, $crate::pfc::PfcProfile>[$crate::PRIORITIES as u32];
            /// This host's ingress buffer per priority; shared by all CPUs.
            PFC_BUFFERS: Array<u32, $crate::pfc::IngressBuffer>[$crate::PRIORITIES as u32];
            /// PFC frames sent, per CPU.
            PFC_TX_COUNTERS: PerCpuArray<u32, $crate::pfc::PfcTxCounters>[1];
            /// Where a received PAUSE is relayed (`pfc.relay`): slot → ifindex, 0 = empty.
            PFC_RELAY: DevMap<u32, u32>[$crate::pfc::MAX_RELAY_PORTS as u32];
            /// Load balancer settings.
            LB_SETTINGS: Array<u32, $crate::lb::LbSettings>[1];
            /// Uplink slots.
            LB_UPLINKS: Array<u32, $crate::lb::Uplink>[$crate::lb::MAX_UPLINKS as u32];
            /// The uplinks as redirect targets, slot → ifindex; an empty slot (ifindex 0) is down.
            LB_DEVMAP: DevMap<u32, u32>[$crate::lb::MAX_UPLINKS as u32];
            /// Load estimate per uplink slot; shared by all CPUs.
            LB_LOADS: Array<u32, $crate::phantom_queue::PhantomQueue>[$crate::lb::MAX_UPLINKS as u32];
            /// Counters per uplink slot, per CPU.
            LB_UPLINK_COUNTERS: PerCpuArray<u32, $crate::lb::UplinkCounters>[$crate::lb::MAX_UPLINKS as u32];
            /// Balancer counters, per CPU.
            LB_COUNTERS: PerCpuArray<u32, $crate::lb::LbCounters>[1];
            /// Live slots, failovers, the spray position; shared by all CPUs.
            LB_STATE: Array<u32, $crate::lb::LbState>[1];
            /// The ecmp and wcmp bucket tables.
            LB_BUCKETS: Array<u32, $crate::lb::BucketTables>[1];
            /// Flowlets, indexed by [`lb::flowlet_index`](crate::lb::flowlet_index) of the flow
            /// hash; flows that fall on one entry share it. Shared by all CPUs.
            LB_FLOWLETS: Array<u32, $crate::lb::Flowlet>[$crate::lb::FLOWLET_ENTRIES];
            /// Owned IPv4 destination prefixes (value 1).
            LB_PREFIXES_V4: LpmTrie<[u8; 4], u32>[$crate::maps::LB_PREFIX_ENTRIES];
            /// Owned IPv6 destination prefixes (value 1).
            LB_PREFIXES_V6: LpmTrie<[u8; 16], u32>[$crate::maps::LB_PREFIX_ENTRIES];
            /// The ERSPAN mirroring session (off until `lossless host mirror set`); the mirror
            /// programs count its sequence number up.
            MIRROR_SESSION: Array<u32, $crate::mirror::MirrorSession>[1];
            /// Frames mirrored, per CPU.
            MIRROR_COUNTERS: PerCpuArray<u32, $crate::mirror::MirrorCounters>[1];
        }
    };
}

/// Declares each kind of map as a type in [`kind`] and as a value of [`MapKind`], from one list.
macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The kinds of map the programs use, as types, so a [`MapDef`] says its kind in its
        /// type and user space opens each kind as the matching aya map. Named as aya-ebpf
        /// names them.
        pub mod kind {
            use super::{Kind, MapKind};

            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Debug)]
                pub struct $name;

                impl Kind for $name {
                    const KIND: MapKind = MapKind::$name;
                }
            )*
        }

        /// A map's kind as a value (see [`kind`] for the kinds as types).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum MapKind {
            $($(#[$doc])* $name,)*
        }
    };
}

kinds! {
    /// BPF_MAP_TYPE_ARRAY: `u32` index → value.
    Array,
    /// BPF_MAP_TYPE_PERCPU_ARRAY: `u32` index → one value per CPU.
    PerCpuArray,
    /// BPF_MAP_TYPE_HASH.
    HashMap,
    /// BPF_MAP_TYPE_LRU_HASH: a hash that evicts the least recently used entry.
    LruHashMap,
    /// BPF_MAP_TYPE_LPM_TRIE: longest-prefix match; the kernel's key is the prefix length
    /// (`u32`) followed by the key.
    LpmTrie,
    /// BPF_MAP_TYPE_DEVMAP: `u32` index → network device (ifindex), the target of a
    /// redirect. Writing ifindex 0 empties a slot; the kernel empties it when the device goes.
    DevMap,
}

impl MapKind {
    /// The key size the kernel sees for a key type of `size` bytes: an LPM trie's key starts
    /// with the prefix length (`u32`).
    pub const fn kernel_key_size(self, size: usize) -> u32 {
        match self {
            MapKind::LpmTrie => (4 + size) as u32,
            _ => size as u32,
        }
    }

    /// The value size the kernel sees for a value type of `size` bytes: a device map holds a
    /// `struct bpf_devmap_val` (the ifindex and an optional program, 8 bytes).
    pub const fn kernel_value_size(self, size: usize) -> u32 {
        match self {
            MapKind::DevMap => 8,
            _ => size as u32,
        }
    }
}

/// A kind of map as a type: [`kind::Array`] and the others.
pub trait Kind {
    /// The kind as a value.
    const KIND: MapKind;
}

/// One map as both sides declare it, untyped: for pinning every map and checking the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSpec {
    /// Its name in the object and its pin's name.
    pub name: &'static str,
    /// Its kind.
    pub kind: MapKind,
    /// Its key size as the kernel sees it.
    pub key_size: u32,
    /// Its value size as the kernel sees it.
    pub value_size: u32,
    /// Its number of entries.
    pub max_entries: u32,
}

/// One map, typed: a map of kind `K` from `Key` to `Value`. User space opens the pinned map
/// through it and gets the aya map of that kind with those types.
pub struct MapDef<K, Key, Value> {
    /// What it is, untyped.
    pub spec: MapSpec,
    types: PhantomData<fn(K, Key) -> Value>,
}

impl<K: Kind, Key, Value> MapDef<K, Key, Value> {
    /// The map `name` with `max_entries` entries.
    pub const fn new(name: &'static str, max_entries: u32) -> Self {
        MapDef {
            spec: MapSpec {
                name,
                kind: K::KIND,
                key_size: K::KIND.kernel_key_size(core::mem::size_of::<Key>()),
                value_size: K::KIND.kernel_value_size(core::mem::size_of::<Value>()),
                max_entries,
            },
            types: PhantomData,
        }
    }
}

impl<K, Key, Value> MapDef<K, Key, Value> {
    /// Its name in the object and its pin's name.
    pub const fn name(&self) -> &'static str {
        self.spec.name
    }
}

/// Expands the table into a typed constant per map and [`ALL`].
macro_rules! definitions {
    ($($(#[$doc:meta])* $name:ident: $kind:ident<$key:ty, $value:ty>[$entries:expr];)*) => {
        $(
            $(#[$doc])*
            pub const $name: MapDef<kind::$kind, $key, $value> =
                MapDef::new(stringify!($name), $entries);
        )*

        /// Every map, in the table's order: `attach` pins them all, in this order.
        pub const ALL: &[MapSpec] = &[$($name.spec),*];
    };
}

map_table!(definitions);

/// Entries of each prefix trie.
pub const LB_PREFIX_ENTRIES: u32 = 1024;
/// Entries of [`CNP_QPS`], [`NAK_QPS`] and [`QP_MAP`].
pub const QP_ENTRIES: u32 = 4096;

/// Index into [`QUEUES`] of the queue of `priority` at `hook`.
#[inline(always)]
pub const fn queue_index(hook: crate::Hook, priority: usize) -> u32 {
    (hook as u32) * crate::PRIORITIES as u32 + (priority as u32 & 7)
}

/// Number of entries of [`QUEUES`].
pub const QUEUE_ENTRIES: u32 = (crate::Hook::COUNT * crate::PRIORITIES) as u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sizes_are_the_kernels() {
        for (i, map) in ALL.iter().enumerate() {
            assert!(
                ALL[..i].iter().all(|other| other.name != map.name),
                "{} twice",
                map.name
            );
            assert!(map.max_entries > 0, "{}", map.name);
        }
        assert_eq!(ALL.len(), 29);
        assert_eq!(ECN_PROFILES.name(), "ECN_PROFILES");
        assert_eq!(QUEUES.spec.max_entries, 16);
        assert_eq!(LB_PREFIXES_V4.spec.key_size, 8);
        assert_eq!(LB_DEVMAP.spec.value_size, 8);
        assert_eq!(QP_MAP.spec.kind, MapKind::HashMap);
    }
}
