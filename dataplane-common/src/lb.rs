//! The load balancer's records and its pure arithmetic: the flow hash, the policies, the
//! resilient bucket table and the flowlet decision.
//!
//! The XDP program (`dataplane-ebpf/src/lb.rs`) keeps these records in maps; the control plane
//! writes the configuration and reads the counters through the same types.

/// Most uplinks one balancer spreads over (slots of the device map).
pub const MAX_UPLINKS: usize = 16;
/// Buckets of the resilient hash table: a flow hashes to a bucket, a bucket names an uplink.
pub const BUCKETS: usize = 256;
/// Entries of the flowlet table, a power of two: a flow's entry is its hash masked to the
/// table's size ([`flowlet_index`]), as switches index theirs.
pub const FLOWLET_ENTRIES: u32 = 16384;
/// Length of an interface name, with its NUL (the kernel's IFNAMSIZ).
pub const IFNAMSIZ: usize = 16;

wire::named_enum! {
    /// A load-balancing policy: how a balancer picks an uplink, on the hosts (the XDP
    /// balancer, `lossless host set lb.policy`) and in lossless.p4's ECMP groups (`lossless
    /// net`, `lossless sim`). One enum for both, with a code for each side:
    /// [`Policy::host_code`] (the variant's number, kept stable for pinned maps) and
    /// [`Policy::p4_code`] (lossless.p4's `set_group` code, none for wcmp, which the P4 program
    /// lacks). The names are the same on every command line and in every file
    /// ([`Policy::name`]; in files serde's kebab-case of the variant, which a test holds to
    /// it).
    #[repr(u32)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
    #[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
    pub enum Policy {
        /// Hash of the 5-tuple over the equal-share bucket table.
        Ecmp => "ecmp",
        /// A flow moves to a random uplink only after an idle gap longer than the flowlet timeout.
        Flowlet => "flowlet",
        /// Like flowlet, but a new flowlet takes the uplink with the smallest load estimate.
        Dlb => "dlb",
        /// Per-packet round robin.
        Spray => "spray",
        /// Hash of the 5-tuple over the weighted bucket table (hosts only).
        Wcmp => "wcmp",
        /// Enhanced ECMP (Meta's, for RoCE training fabrics): as ecmp, with the BTH destination QP
        /// of a RoCEv2 packet in the hash ([`hash_dest_qp`]), so the QPs of one connection (one
        /// 5-tuple) spread; other packets hash as ecmp.
        EEcmp => "e-ecmp",
    }
}

impl Policy {
    /// The policies lossless.p4 runs, in P4-code order.
    pub const P4: [Policy; 5] = [
        Policy::Ecmp,
        Policy::Flowlet,
        Policy::Dlb,
        Policy::Spray,
        Policy::EEcmp,
    ];

    /// The policy whose host code is `value`, if any.
    pub const fn from_u32(value: u32) -> Option<Policy> {
        Self::from_index(value as usize)
    }

    /// Its code in the host balancer's settings map ([`LbSettings::policy`]).
    pub const fn host_code(self) -> u32 {
        self as u32
    }

    /// Its code in lossless.p4's `set_group(policy, ...)`, or `None` for a policy the P4
    /// program does not run (wcmp).
    pub const fn p4_code(self) -> Option<u8> {
        match self {
            Policy::Ecmp => Some(0),
            Policy::Flowlet => Some(1),
            Policy::Dlb => Some(2),
            Policy::Spray => Some(3),
            Policy::EEcmp => Some(4),
            Policy::Wcmp => None,
        }
    }

    /// The policy named `name` (exactly, lower case), if any.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the policy keeps per-flow state in the flowlet table.
    pub const fn uses_flowlets(self) -> bool {
        matches!(self, Policy::Flowlet | Policy::Dlb)
    }
}

impl core::fmt::Display for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The balancer's settings (one entry).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbSettings {
    /// A [`Policy`] number.
    pub policy: u32,
    /// Seed mixed into the flow hash.
    pub seed: u32,
    /// Idle gap after which a flow may change uplink (flowlet, dlb), in ns.
    pub flowlet_timeout_ns: u64,
}

impl LbSettings {
    /// ECMP, seed 0, a 500 µs flowlet timeout.
    pub const DEFAULT: LbSettings = LbSettings {
        policy: Policy::Ecmp.host_code(),
        seed: 0,
        flowlet_timeout_ns: 500_000,
    };
}

/// One uplink slot, as the control plane configures it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uplink {
    /// 1 when the slot is a member, 0 when free.
    pub configured: u32,
    /// The interface's index when it was configured.
    pub ifindex: u32,
    /// WCMP weight.
    pub weight: u32,
    /// Padding, always 0.
    pub _pad: u32,
    /// The interface's name, NUL-padded (so a deleted uplink keeps its name in `stats`).
    pub name: [u8; IFNAMSIZ],
    /// Source MAC of redirected frames: the uplink's own.
    pub src_mac: [u8; 6],
    /// Destination MAC of redirected frames: the uplink's next hop.
    pub dst_mac: [u8; 6],
    /// Padding, always 0.
    pub _pad2: [u8; 4],
    /// Drain rate of the uplink's load estimate (dlb), bytes per second.
    pub rate_bytes_per_sec: u64,
}

impl Uplink {
    /// A free slot.
    pub const FREE: Uplink = Uplink {
        configured: 0,
        ifindex: 0,
        weight: 0,
        _pad: 0,
        name: [0; IFNAMSIZ],
        src_mac: [0; 6],
        dst_mac: [0; 6],
        _pad2: [0; 4],
        rate_bytes_per_sec: 0,
    };
}

counters! {
    /// Per-uplink counters, per CPU.
    pub struct UplinkCounters {
        /// Frames redirected to the uplink.
        pub tx_packets: u64,
        /// Bytes redirected to the uplink.
        pub tx_bytes: u64,
        /// Flowlets started on the uplink (flowlet, dlb).
        pub flowlets: u64,
        /// Flowlets that moved onto this uplink from another one (flows sharing a flowlet entry
        /// move together and count once).
        pub path_changes: u64,
        /// Redirects the kernel refused (the device map entry vanished under the packet).
        pub redirect_errors: u64,
    }
}

counters! {
    /// Balancer-wide counters, per CPU.
    pub struct LbCounters {
        /// IP packets whose destination is not in `lb.prefixes`: passed to the stack.
        pub not_owned: u64,
        /// Frames that are not IP (ARP, LLDP, ...): passed to the stack.
        pub not_ip: u64,
        /// Malformed frames: passed to the stack untouched.
        pub malformed: u64,
        /// Owned packets with TTL / hop limit ≤ 1: passed to the stack (it answers with ICMP).
        pub ttl_expired: u64,
        /// Owned packets with no live uplink: passed to the stack.
        pub no_uplink: u64,
        /// Packets whose flowlet table entry last saw another flow, or none: the flows seen
        /// (evictions = inserts − occupancy).
        pub flowlet_inserts: u64,
        /// Packets sent by `spray`; per CPU, it is that CPU's round-robin position.
        pub sprayed: u64,
        /// RoCEv2 packets `e-ecmp` hashed with their BTH destination QP (its other packets hash
        /// as ecmp's).
        pub qp_hashed: u64,
    }
}

/// Balancer-wide shared state (one entry).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbState {
    /// Uplinks that left the live set: carrier lost, deleted, or removed from `lb.uplinks`.
    pub failovers: u64,
    /// Bit `s` set while slot `s` may carry traffic: configured, carrier up, in the device map.
    pub live: u32,
    /// Padding, always 0.
    pub _pad: u32,
}

/// The two bucket tables (one entry): `ecmp` reads `equal`, `wcmp` reads `weighted`. Each
/// bucket holds an uplink slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketTables {
    /// Every member holds the same number of buckets (±1).
    pub equal: [u8; BUCKETS],
    /// Members hold buckets in proportion to their weights.
    pub weighted: [u8; BUCKETS],
}

impl BucketTables {
    /// Every bucket on slot 0.
    pub const EMPTY: BucketTables = BucketTables {
        equal: [0; BUCKETS],
        weighted: [0; BUCKETS],
    };
}

/// An entry of the flowlet table. Flows whose hashes fall on the same entry share its flowlet
/// (its uplink and its idle gap), as in a switch's flowlet table: a shared entry only starts a
/// new flowlet after a gap in all of its flows (the host-lb page says where two CPUs at one
/// boundary may still reorder a flow once).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flowlet {
    /// When the entry's latest packet was seen (ns, monotonic); 0 while the entry is unused.
    pub last_ns: u64,
    /// The uplink slot of the current flowlet.
    pub slot: u32,
    /// The full hash of the flow that used the entry last: the table counts a packet of
    /// another flow as an insert (and the entry's former flow as evicted), for `stats`.
    pub hash: u32,
}

impl Flowlet {
    /// Whether the entry holds a flowlet.
    pub const fn is_used(&self) -> bool {
        self.last_ns != 0
    }

    /// Whether the entry's latest packet was of the flow hashed `hash`.
    pub const fn is_flow(&self, hash: u32) -> bool {
        self.is_used() && self.hash == hash
    }
}

/// The flowlet table entry of the flow hashed `hash`.
#[inline(always)]
pub const fn flowlet_index(hash: u32) -> u32 {
    hash & (FLOWLET_ENTRIES - 1)
}

/// Murmur3's 32-bit finalizer: every input bit affects every output bit.
#[inline(always)]
pub const fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// Folds one 32-bit word into a running flow hash (murmur3's block step).
#[inline(always)]
pub const fn hash_word(h: u32, word: u32) -> u32 {
    let k = word
        .wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593);
    (h ^ k)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

/// A RoCEv2 flow hash with the packet's BTH destination QP folded in (e-ecmp): the QPs of
/// one 5-tuple hash apart.
#[inline(always)]
pub const fn hash_dest_qp(h: u32, dest_qp: u32) -> u32 {
    hash_word(h, dest_qp)
}

/// The bucket a flow hash falls in.
#[inline(always)]
pub const fn bucket_of(hash: u32) -> usize {
    (hash as usize) & (BUCKETS - 1)
}

/// Whether a packet seen at `now_ns` starts a new flowlet of a flow last seen at `last_ns`.
/// A packet exactly `timeout_ns` after the previous one still belongs to its flowlet.
#[inline(always)]
pub const fn starts_flowlet(last_ns: u64, now_ns: u64, timeout_ns: u64) -> bool {
    now_ns.saturating_sub(last_ns) > timeout_ns
}

/// The `n`-th (counting from 0) set bit of `mask`, if it has that many.
#[inline(always)]
pub fn nth_set_bit(mask: u32, n: u32) -> Option<u32> {
    let mut seen = 0;
    for bit in 0..MAX_UPLINKS as u32 {
        if mask & (1 << bit) != 0 {
            if seen == n {
                return Some(bit);
            }
            seen += 1;
        }
    }
    None
}

/// The live slot `value` picks, spreading values evenly over the set bits of `live`: spray's
/// round robin, flowlet's random choice, and ECMP's fallback when a bucket's uplink is down.
#[inline(always)]
pub fn pick_live(live: u32, value: u32) -> Option<u32> {
    let live = live & ((1u32 << MAX_UPLINKS) - 1);
    match live.count_ones() {
        0 => None,
        n => nth_set_bit(live, value % n),
    }
}

// SAFETY: plain `#[repr(C)]` records of integers and byte arrays without implicit padding.
pod!(
    LbSettings,
    Uplink,
    UplinkCounters,
    LbCounters,
    LbState,
    BucketTables,
    Flowlet,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_their_numbers() {
        for policy in Policy::ALL {
            assert_eq!(Policy::from_u32(policy.host_code()), Some(policy));
            assert_eq!(Policy::from_name(policy.name()), Some(policy));
        }
        assert_eq!(Policy::from_u32(6), None);
        assert_eq!(Policy::from_name("ECMP"), None);
        // The numbers are pinned in maps: they never change.
        let numbers = Policy::ALL.map(|p| (p.name(), p.host_code()));
        assert_eq!(
            numbers,
            [
                ("ecmp", 0),
                ("flowlet", 1),
                ("dlb", 2),
                ("spray", 3),
                ("wcmp", 4),
                ("e-ecmp", 5)
            ]
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn files_name_the_policies_by_their_names() {
        use serde::de::{value, Deserialize, IntoDeserializer};
        for policy in Policy::ALL {
            let name: value::StrDeserializer<value::Error> = policy.name().into_deserializer();
            assert_eq!(Policy::deserialize(name).unwrap(), policy);
        }
    }

    #[test]
    fn p4_codes_are_lossless_p4s() {
        // lossless.p4's `set_group` codes (dataplane-p4), in `Policy::P4`'s order; no wcmp.
        let codes = Policy::ALL.map(|p| (p.name(), p.p4_code()));
        assert_eq!(
            codes,
            [
                ("ecmp", Some(0)),
                ("flowlet", Some(1)),
                ("dlb", Some(2)),
                ("spray", Some(3)),
                ("wcmp", None),
                ("e-ecmp", Some(4))
            ]
        );
        for (code, policy) in Policy::P4.into_iter().enumerate() {
            assert_eq!(policy.p4_code(), Some(code as u8));
        }
    }

    #[test]
    fn flowlets_start_only_after_a_gap_longer_than_the_timeout() {
        assert!(!starts_flowlet(1_000, 1_500, 500));
        assert!(starts_flowlet(1_000, 1_501, 500));
        // A clock that went backwards (another CPU's newer timestamp) is no gap.
        assert!(!starts_flowlet(2_000, 1_000, 500));
    }

    #[test]
    fn the_hash_spreads_source_ports_evenly_over_buckets() {
        let mut counts = [0u32; BUCKETS];
        for port in 0..(BUCKETS as u32 * 64) {
            let h = hash_word(hash_word(0, 0x0a00_0001), 49152 + port);
            counts[bucket_of(mix32(h))] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        // 64 per bucket on average; a good hash stays well inside ±50%.
        assert!(*min > 32 && *max < 96, "min {min} max {max}");
    }

    #[test]
    fn picks_spread_evenly_over_live_slots_only() {
        let live = 0b1011_0000;
        let mut counts = [0u32; MAX_UPLINKS];
        for value in 0..300 {
            counts[pick_live(live, value).unwrap() as usize] += 1;
        }
        assert_eq!((counts[4], counts[5], counts[7]), (100, 100, 100));
        assert_eq!(counts.iter().sum::<u32>(), 300);
        assert_eq!(pick_live(0, 7), None);
        assert_eq!(nth_set_bit(0b100, 0), Some(2));
        assert_eq!(nth_set_bit(0b100, 1), None);
    }

    #[test]
    fn flowlet_entries_are_the_hash_masked_to_a_power_of_two() {
        assert!(FLOWLET_ENTRIES.is_power_of_two());
        assert_eq!(flowlet_index(FLOWLET_ENTRIES + 5), 5);
        assert_eq!(flowlet_index(u32::MAX), FLOWLET_ENTRIES - 1);
        let entry = Flowlet {
            last_ns: 7,
            slot: 1,
            hash: 42,
        };
        assert!(entry.is_flow(42) && !entry.is_flow(43));
        assert!(!Flowlet::default().is_used() && !Flowlet::default().is_flow(0));
    }

    #[test]
    fn a_connections_consecutive_qps_reach_several_of_four_uplinks() {
        // One 5-tuple per source port, its QPs numbered in a row, as a NIC numbers a
        // connection's QPs; the uplink is the bucket modulo 4 (the equal bucket table).
        let five_tuple = |port: u32| {
            [0x0a00_0001, 0x0a63_0007, 17, (port << 16) | 4791]
                .into_iter()
                .fold(0, hash_word)
        };
        let uplinks = |port: u32, qps: core::ops::Range<u32>| {
            qps.fold(0u32, |seen, qp| {
                seen | 1 << (bucket_of(mix32(hash_dest_qp(five_tuple(port), qp))) % 4)
            })
        };
        let ports = 49152..49452;
        let spread = ports
            .clone()
            .filter(|&p| uplinks(p, 256..264).count_ones() > 1);
        // Eight QPs on one uplink of four has probability 4^-7 for a random hash.
        assert_eq!(spread.count(), 300);
        let all_four = ports.filter(|&p| uplinks(p, 256..264) == 0b1111).count();
        // Eight QPs reach all four with probability ~0.62 for a random hash.
        assert!(all_four > 150, "{all_four} of 300");
    }

    #[test]
    fn the_seed_changes_the_bucket() {
        let a = mix32(hash_word(1, 42));
        let b = mix32(hash_word(2, 42));
        assert_ne!(a, b);
    }
}
