//! The load balancer: XDP on a downlink redirects packets for the owned prefixes to one of
//! several uplinks, chosen by the run-time policy (ecmp, flowlet, dlb, spray, wcmp, e-ecmp),
//! with the MACs rewritten and the TTL / hop limit decremented. Everything else goes to the
//! stack.
//!
//! The live set of uplinks is a bit mask in `LB_STATE`: `lossless host set` writes it,
//! `lossless host watch` follows carrier changes into it, and a slot whose device-map entry
//! vanished (the kernel empties it when the interface is deleted) is cleared here by the first
//! packet that picks it.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::xdp_action,
    helpers::{bpf_get_prandom_u32, bpf_ktime_get_ns, bpf_loop},
    macros::xdp,
    maps::lpm_trie::Key,
    programs::XdpContext,
};
use dataplane_common::{
    lb::{
        bucket_of, flowlet_index, hash_dest_qp, hash_word, mix32, pick_live, starts_flowlet,
        Flowlet, LbCounters, Policy, Uplink, UplinkCounters, BUCKETS, MAX_UPLINKS,
    },
    phantom_queue::drained_bytes,
};
use wire::{
    ethernet::{self, Address},
    ip::Protocol,
    ipv4::{self, TTL_OFFSET},
    ipv6,
};

use crate::{
    maps::{
        LB_BUCKETS, LB_COUNTERS, LB_DEVMAP, LB_FLOWLETS, LB_LOADS, LB_PREFIXES_V4, LB_PREFIXES_V6,
        LB_SETTINGS, LB_STATE, LB_UPLINKS, LB_UPLINK_COUNTERS,
    },
    parse::{parse, Frame, Network, Parsed},
    xdp::rewrite_ipv4_word,
};

const IPPROTO_TCP: u8 = Protocol::Tcp.value();
const IPPROTO_UDP: u8 = Protocol::Udp.value();

/// Why a frame goes to the stack instead of an uplink; each has its counter.
#[derive(Clone, Copy)]
enum Pass {
    NotIp,
    NotOwned,
    Malformed,
    TtlExpired,
    NoUplink,
}

/// Entry point of the `lb` hook.
#[xdp]
pub fn lossless_lb(ctx: XdpContext) -> u32 {
    let frame = Frame::new(ctx.data(), ctx.data_end());
    match balance(&frame, (ctx.data_end() - ctx.data()) as u64) {
        Ok(action) => action,
        Err(reason) => {
            count_pass(reason);
            xdp_action::XDP_PASS
        }
    }
}
dataplane_common::entry_point_is!(lossless_lb, dataplane_common::programs::LB);

/// The IP header fields the balancer reads and writes.
struct Route {
    /// The flow hash before the seed's final mix.
    hash: u32,
    /// Where the TTL / hop limit is.
    network: Network,
}

fn balance(frame: &Frame, len: u64) -> Result<u32, Pass> {
    let parsed = parse(frame).map_err(|_| Pass::Malformed)?;
    let settings = LB_SETTINGS.get(0).ok_or(Pass::NoUplink)?;
    let route = owned_route(frame, &parsed, settings.seed)?;
    let policy = Policy::from_u32(settings.policy).unwrap_or(Policy::Ecmp);
    let hash = mix32(match policy {
        Policy::EEcmp => with_dest_qp(frame, &parsed, route.hash),
        _ => route.hash,
    });
    // Only flowlets and loads age: the other policies skip the clock, whose read costs about
    // as much as the rest of their path (`cargo xtask bench host`).
    let now = match policy {
        // SAFETY: a helper that takes no arguments and touches no memory of the program's.
        Policy::Flowlet | Policy::Dlb => unsafe { bpf_ktime_get_ns() },
        Policy::Ecmp | Policy::EEcmp | Policy::Wcmp | Policy::Spray => 0,
    };
    let mut slot = choose(policy, hash, now, settings.flowlet_timeout_ns).ok_or(Pass::NoUplink)?;
    // Redirect first: it only records the target, and it fails when the interface was
    // deleted (the kernel empties its device-map entry), before anything is rewritten. Then
    // the slot goes down and the flow takes a live uplink by its hash, as ECMP's fallback.
    if LB_DEVMAP.redirect(slot, 0).is_err() {
        if let Some(counters) = uplink_counters(slot) {
            counters.redirect_errors += 1;
        }
        take_down(slot);
        slot = pick_live(live_slots(), hash >> 8).ok_or(Pass::NoUplink)?;
        if LB_DEVMAP.redirect(slot, 0).is_err() {
            take_down(slot);
            return Err(Pass::NoUplink);
        }
    }
    let uplink = LB_UPLINKS.get(slot).ok_or(Pass::NoUplink)?;
    decrement_hop_limit(frame, route.network)?;
    rewrite_macs(frame, uplink)?;
    account(slot, uplink, now, len, policy == Policy::Dlb);
    Ok(xdp_action::XDP_REDIRECT)
}

/// Passes a packet whose destination no prefix owns, or whose TTL (hop limit) would expire
/// here, before anything is hashed for it.
#[inline(always)]
fn owned_and_alive(owned: bool, ttl: u8) -> Result<(), Pass> {
    if !owned {
        return Err(Pass::NotOwned);
    }
    if ttl <= 1 {
        return Err(Pass::TtlExpired);
    }
    Ok(())
}

/// The flow hash and header place of an IP packet whose destination is owned.
#[inline(always)]
fn owned_route(frame: &Frame, parsed: &Parsed, seed: u32) -> Result<Route, Pass> {
    let mut hash = seed;
    match parsed.network {
        Network::Ipv4(offset) => {
            let ip = frame.ipv4_at(offset).ok_or(Pass::Malformed)?;
            let (src, dst) = (ip.src_addr().octets(), ip.dst_addr().octets());
            owned_and_alive(LB_PREFIXES_V4.get(Key::new(32, dst)).is_some(), ip.ttl())?;
            hash = hash_word(hash, u32::from_ne_bytes(src));
            hash = hash_word(hash, u32::from_ne_bytes(dst));
        }
        Network::Ipv6(offset) => {
            let ip = frame.ipv6_at(offset).ok_or(Pass::Malformed)?;
            let (src, dst) = (ip.src_addr().octets(), ip.dst_addr().octets());
            let owned = LB_PREFIXES_V6.get(Key::new(128, dst)).is_some();
            owned_and_alive(owned, ip.hop_limit())?;
            for words in [src, dst] {
                for i in 0..4 {
                    let word = [
                        words[4 * i],
                        words[4 * i + 1],
                        words[4 * i + 2],
                        words[4 * i + 3],
                    ];
                    hash = hash_word(hash, u32::from_ne_bytes(word));
                }
            }
        }
        Network::Other => return Err(Pass::NotIp),
    }
    hash = hash_word(hash, parsed.protocol as u32);
    if parsed.transport != 0 && (parsed.protocol == IPPROTO_UDP || parsed.protocol == IPPROTO_TCP) {
        // Source and destination ports: for RoCEv2 the source port carries the QP's entropy.
        let ports: &[u8; 4] = frame.bytes_at(parsed.transport).ok_or(Pass::Malformed)?;
        hash = hash_word(hash, u32::from_ne_bytes(*ports));
    }
    Ok(Route {
        hash,
        network: parsed.network,
    })
}

/// e-ecmp's flow hash: a RoCEv2 packet's BTH destination QP folded into its 5-tuple's `hash`;
/// other packets keep their 5-tuple's.
#[inline(always)]
fn with_dest_qp(frame: &Frame, parsed: &Parsed, hash: u32) -> u32 {
    let Some(header) = parsed.bth_header(frame) else {
        return hash;
    };
    if let Some(counters) = lb_counters() {
        counters.qp_hashed += 1;
    }
    hash_dest_qp(hash, header.dest_qp())
}

/// The uplink slot for a packet of flow `hash` under `policy` at `now` (0 unless flowlet or
/// dlb), or `None` if none is live.
#[inline(always)]
fn choose(policy: Policy, hash: u32, now: u64, timeout_ns: u64) -> Option<u32> {
    match policy {
        Policy::Ecmp | Policy::EEcmp | Policy::Wcmp => hashed(policy, hash),
        Policy::Spray => {
            // Round robin per CPU: this CPU's count of sprayed packets is its position.
            let counters = lb_counters()?;
            let turn = counters.sprayed;
            counters.sprayed += 1;
            let slot = pick_live(live_slots(), turn as u32)?;
            is_live(slot).then_some(slot)
        }
        Policy::Flowlet | Policy::Dlb => flowlet(policy, hash, now, timeout_ns),
    }
}

/// ECMP, E-ECMP and WCMP: the bucket's uplink if it is live, else a live uplink picked by the
/// hash (so only the flows of a downed uplink move, and they spread over the survivors).
#[inline(always)]
fn hashed(policy: Policy, hash: u32) -> Option<u32> {
    let tables = LB_BUCKETS.get(0)?;
    let bucket = bucket_of(hash) & (BUCKETS - 1);
    let slot = if policy == Policy::Wcmp {
        tables.weighted[bucket]
    } else {
        tables.equal[bucket]
    } as u32;
    if is_live(slot) {
        return Some(slot);
    }
    let fallback = pick_live(live_slots(), hash >> 8)?;
    is_live(fallback).then_some(fallback)
}

/// Flowlet and DLB: keep the flow's uplink inside a flowlet, pick again at a flowlet boundary
/// or when its uplink went down. The table is an array indexed by the hash (the verifier
/// inlines its lookup, where a hash map's is a call); flows on one entry share its flowlet.
#[inline(always)]
fn flowlet(policy: Policy, hash: u32, now: u64, timeout_ns: u64) -> Option<u32> {
    let entry = LB_FLOWLETS.get_ptr_mut(flowlet_index(hash))?;
    // SAFETY: a map value pointer from the kernel, valid for the program run (an array map's
    // values are never freed); so for the writes below. Not atomic: two CPUs writing one
    // entry at once may mix their fields, which leaves a valid slot (checked live); two flows on
    // one entry at one boundary may each pick an uplink, the last write wins (docs/host-lb.md).
    let Flowlet { last_ns, slot, .. } = unsafe { *entry };
    // SAFETY: as above, the entry's pointer is valid for the program run.
    let same_flow = unsafe { (*entry).is_flow(hash) };
    if !same_flow {
        // The entry's former flow, if any, is evicted: evictions = inserts − occupancy.
        if let Some(counters) = lb_counters() {
            counters.flowlet_inserts += 1;
        }
        // SAFETY: as above; a racing writer on another CPU loses or wins whole fields.
        unsafe { (*entry).hash = hash };
    }
    let ended = last_ns == 0 || starts_flowlet(last_ns, now, timeout_ns);
    if !ended && is_live(slot) {
        // SAFETY: as above.
        unsafe { (*entry).last_ns = now };
        return Some(slot);
    }
    let next = pick_new(policy, now)?;
    // SAFETY: as above.
    unsafe {
        (*entry).last_ns = now;
        (*entry).slot = next;
    }
    // A path change is a flowlet moving to another uplink: its uplink went down inside it
    // (every flow sharing the entry moves with it, counted once), or this flow's next flowlet
    // starts elsewhere.
    start_flowlet(next, last_ns != 0 && next != slot && (same_flow || !ended));
    Some(next)
}

/// The uplink of a new flowlet starting at `now`: random (flowlet, as LetFlow) or least loaded
/// (dlb).
#[inline(always)]
fn pick_new(policy: Policy, now: u64) -> Option<u32> {
    let live = live_slots();
    // SAFETY: a helper that takes no arguments and touches no memory of the program's.
    let random = unsafe { bpf_get_prandom_u32() };
    let first = pick_live(live, random)?;
    if policy != Policy::Dlb {
        return is_live(first).then_some(first);
    }
    // Least loaded, scanning from a random live slot so that ties break at random. The scan
    // runs in `bpf_loop`, so the verifier checks one step instead of every path through 16.
    let mut scan = LeastLoaded {
        live,
        first,
        now,
        best: first,
        best_load: u64::MAX,
    };
    // SAFETY: `least_loaded_step` has the callback signature bpf_loop calls (index, context)
    // and reads the context as the `LeastLoaded` passed here, which outlives the call; flags 0.
    unsafe {
        bpf_loop(
            MAX_UPLINKS as u32,
            least_loaded_step as *mut c_void,
            &mut scan as *mut LeastLoaded as *mut c_void,
            0,
        )
    };
    let best = scan.best % MAX_UPLINKS as u32;
    is_live(best).then_some(best)
}

/// The state of dlb's scan for the least loaded live uplink.
#[repr(C)]
struct LeastLoaded {
    live: u32,
    first: u32,
    now: u64,
    best: u32,
    best_load: u64,
}

/// One step of the scan: slot `first + step`.
extern "C" fn least_loaded_step(step: u64, scan: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes the context it was given: a `LeastLoaded` on the caller's stack.
    let scan = unsafe { &mut *(scan as *mut LeastLoaded) };
    let slot = (scan.first + step as u32) % MAX_UPLINKS as u32;
    if scan.live & (1 << slot) != 0 {
        let load = load_now(slot, scan.now);
        if load < scan.best_load {
            scan.best = slot;
            scan.best_load = load;
        }
    }
    0
}

/// The backlog of `slot`'s load estimate at `now`, drained since its last packet.
#[inline(always)]
fn load_now(slot: u32, now: u64) -> u64 {
    let (Some(queue), Some(uplink)) = (LB_LOADS.get(slot), LB_UPLINKS.get(slot)) else {
        return u64::MAX;
    };
    let drained = drained_bytes(now.saturating_sub(queue.last_ns), uplink.rate_bytes_per_sec);
    queue.backlog_bytes.saturating_sub(drained)
}

/// Counts a new flowlet on `slot`, and a path change if the flow came from another uplink.
#[inline(always)]
fn start_flowlet(slot: u32, moved: bool) {
    if let Some(counters) = uplink_counters(slot) {
        counters.flowlets += 1;
        if moved {
            counters.path_changes += 1;
        }
    }
}

/// The live slots.
#[inline(always)]
fn live_slots() -> u32 {
    LB_STATE.get(0).map_or(0, |state| state.live)
}

/// Whether `slot` may take traffic (a deleted uplink is found, and taken down, when the
/// redirect to it fails).
#[inline(always)]
fn is_live(slot: u32) -> bool {
    slot < MAX_UPLINKS as u32 && live_slots() & (1 << slot) != 0
}

/// Clears `slot`'s live bit; counts a failover if this call cleared it.
#[inline(always)]
fn take_down(slot: u32) {
    let Some(state) = LB_STATE.get_ptr_mut(0) else {
        return;
    };
    let bit = 1u32 << (slot & (MAX_UPLINKS as u32 - 1));
    // SAFETY: a map value pointer from the kernel, valid for the program run (an array map's
    // values are never freed). Not atomic (the BPF target has no atomic
    // read-modify-write in Rust): two slots changing at the same instant on two CPUs may lose
    // one change, which the next `set` or carrier event repairs.
    unsafe {
        if (*state).live & bit != 0 {
            (*state).live &= !bit;
            (*state).failovers += 1;
        }
    }
}

/// Decrements the TTL (fixing the IPv4 checksum) or the hop limit; `owned_route` has sent
/// packets that would expire to the stack, which answers them with ICMP.
#[inline(always)]
fn decrement_hop_limit(frame: &Frame, network: Network) -> Result<(), Pass> {
    match network {
        Network::Ipv4(offset) => {
            let header: *mut [u8; ipv4::HEADER_LEN] =
                frame.ptr_at(offset).ok_or(Pass::Malformed)?;
            // SAFETY: `ptr_at` gave the pointer only with the whole header before the frame's
            // end; an XDP frame is writable in place (the redirect only recorded its target),
            // and no other reference into the frame is alive.
            let header = unsafe { &mut *header };
            // `owned_route` sent a TTL of 0 or 1 to the stack, so this cannot wrap.
            rewrite_ipv4_word(header, TTL_OFFSET, |ip| ip.set_ttl(ip.ttl() - 1));
        }
        Network::Ipv6(offset) => {
            let header: *mut [u8; ipv6::HEADER_LEN] =
                frame.ptr_at(offset).ok_or(Pass::Malformed)?;
            // SAFETY: as for IPv4: the whole header lies in the writable frame, and this is the
            // only reference into it.
            let mut ip = ipv6::Packet::new_unchecked(unsafe { &mut *header });
            // `owned_route` sent a hop limit of 0 or 1 to the stack, so this cannot wrap.
            ip.set_hop_limit(ip.hop_limit() - 1);
        }
        Network::Other => return Err(Pass::NotIp),
    }
    Ok(())
}

/// Source MAC = the uplink's, destination MAC = its next hop's.
#[inline(always)]
fn rewrite_macs(frame: &Frame, uplink: &Uplink) -> Result<(), Pass> {
    let header: *mut [u8; ethernet::HEADER_LEN] = frame.ptr_at(0).ok_or(Pass::Malformed)?;
    // SAFETY: `ptr_at` gave the pointer only with the whole Ethernet header before the frame's
    // end; an XDP frame is writable in place (the redirect before only recorded its target),
    // and this is the only reference into it.
    let mut eth = ethernet::Frame::new_unchecked(unsafe { &mut *header });
    eth.set_dst_addr(Address(uplink.dst_mac));
    eth.set_src_addr(Address(uplink.src_mac));
    Ok(())
}

/// Counts the frame on `slot`; with `dlb`, adds it to the uplink's load estimate (a shared
/// write the other policies do without).
#[inline(always)]
fn account(slot: u32, uplink: &Uplink, now: u64, len: u64, dlb: bool) {
    if let Some(counters) = uplink_counters(slot) {
        counters.tx_packets += 1;
        counters.tx_bytes += len;
    }
    if !dlb {
        return;
    }
    if let Some(queue) = LB_LOADS.get_ptr_mut(slot) {
        // SAFETY: a map value pointer from the kernel, valid for the program run (array map);
        // a lost update between CPUs is tolerated, as for the ECN phantom queues.
        unsafe { (*queue).enqueue(now, len, uplink.rate_bytes_per_sec) };
    }
}

fn count_pass(reason: Pass) {
    let Some(counters) = lb_counters() else {
        return;
    };
    match reason {
        Pass::NotIp => counters.not_ip += 1,
        Pass::NotOwned => counters.not_owned += 1,
        Pass::Malformed => counters.malformed += 1,
        Pass::TtlExpired => counters.ttl_expired += 1,
        Pass::NoUplink => counters.no_uplink += 1,
    }
}

#[inline(always)]
fn lb_counters() -> Option<&'static mut LbCounters> {
    // SAFETY: this CPU's copy of a per-CPU map value, valid for the program run; a program
    // runs to its end on one CPU without preemption, so no other reference to it is live.
    LB_COUNTERS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn uplink_counters(slot: u32) -> Option<&'static mut UplinkCounters> {
    // SAFETY: as in `lb_counters`: this CPU's copy, no other reference live while it runs.
    LB_UPLINK_COUNTERS
        .get_ptr_mut(slot)
        .map(|p| unsafe { &mut *p })
}
