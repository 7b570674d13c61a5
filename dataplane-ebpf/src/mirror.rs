//! ERSPAN mirroring at TC, both ways: a frame the interface's session selects (a CNP, a NAK, a
//! frame of a mirrored priority) is encapsulated in place — room for the outer headers made
//! after its Ethernet header, the outer Ethernet, IPv4, GRE and ERSPAN headers and its own
//! Ethernet header written there — cloned to the egress of the session's `via` interface
//! (carrying [`MIRROR_MARK`], so no mirror program mirrors the clone again), and put back as it
//! was before it goes on. XDP cannot do this: it has no clone.

use aya_ebpf::{
    bindings::{
        bpf_adj_room_mode::BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_NO_CSUM_RESET, BPF_F_RECOMPUTE_CSUM,
        TC_ACT_SHOT, TC_ACT_UNSPEC,
    },
    helpers::{bpf_ktime_get_ns, generated::bpf_skb_load_bytes},
    macros::classifier,
    programs::TcContext,
};
use dataplane_common::{
    mirror::{
        prefix, ErspanType, MirrorSession, Mirrored, III_PREFIX_LEN, II_PREFIX_LEN, MIRROR_MARK,
    },
    nak::is_nak,
};
use wire::{bth, erspan::Repr, ethernet};

use crate::{
    ecn::classify,
    emit::clone_marked,
    maps::{MIRROR_COUNTERS, MIRROR_SESSION},
    nak,
    parse::parse,
    tc::{linear_frame, load_nak_window},
};

/// `skb->protocol` of IPv4 and IPv6 (network byte order in a `u32`): the frames
/// `bpf_skb_adjust_room` takes.
const PROTOCOL_IPV4: u32 = ethernet::EtherType::Ipv4.value().to_be() as u32;
const PROTOCOL_IPV6: u32 = ethernet::EtherType::Ipv6.value().to_be() as u32;

/// Flags of every `bpf_skb_adjust_room` here: keep the frame's checksum state as it is (the
/// original goes on as it came).
const ROOM_FLAGS: u64 = BPF_F_ADJ_ROOM_NO_CSUM_RESET as u64;

/// TC ingress: mirrors the selected frames that arrive.
#[classifier]
pub fn lossless_mirror_in(ctx: TcContext) -> i32 {
    mirror(&ctx, false)
}
dataplane_common::entry_point_is!(lossless_mirror_in, dataplane_common::programs::MIRROR_IN);

/// TC egress, after the other programs: mirrors the selected frames that leave, as they leave.
#[classifier]
pub fn lossless_mirror_out(ctx: TcContext) -> i32 {
    mirror(&ctx, true)
}
dataplane_common::entry_point_is!(lossless_mirror_out, dataplane_common::programs::MIRROR_OUT);

/// How a mirror went.
enum Outcome {
    /// Sent toward the collector.
    Sent,
    /// Not sent; the frame is as it was.
    Failed,
    /// The frame could not be put back as it was: it must not go on.
    Broken,
}

/// Mirrors the frame if the session selects it; the verdict for the frame.
#[inline(always)]
fn mirror(ctx: &TcContext, egress: bool) -> i32 {
    // SAFETY: the context pointer is valid for the whole program run.
    let skb = unsafe { &*ctx.skb.skb };
    if skb.mark == MIRROR_MARK {
        return TC_ACT_UNSPEC;
    }
    let Some(session) = MIRROR_SESSION.get(0).copied() else {
        return TC_ACT_UNSPEC;
    };
    let (Some(kind), true) = (session.kind(), session.is_on()) else {
        return TC_ACT_UNSPEC;
    };
    let tag_pcp = (skb.vlan_present != 0).then_some((skb.vlan_tci >> 13) as u8);
    let Some((what, priority)) = select(ctx, &session, tag_pcp) else {
        return TC_ACT_UNSPEC;
    };
    let Some(counters) = MIRROR_COUNTERS.get_ptr_mut(0) else {
        return TC_ACT_UNSPEC;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    let counters = unsafe { &mut *counters };
    // A tag outside the frame would go out with the clone; a GSO packet is many frames; the
    // room helper takes IP only.
    if skb.vlan_present != 0
        || skb.gso_size != 0
        || (skb.protocol != PROTOCOL_IPV4 && skb.protocol != PROTOCOL_IPV6)
    {
        counters.skipped += 1;
        return TC_ACT_UNSPEC;
    }
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let header = session.header(kind, priority, egress, skb.ifindex, now);
    let outcome = match kind {
        ErspanType::II => encapsulate_and_clone::<II_PREFIX_LEN>(ctx, &session, &header),
        ErspanType::III => encapsulate_and_clone::<III_PREFIX_LEN>(ctx, &session, &header),
    };
    match outcome {
        Outcome::Sent => {
            *counters.slot(what, egress) += 1;
            if let Some(shared) = MIRROR_SESSION.get_ptr_mut(0) {
                // SAFETY: a map value pointer from the kernel, valid for the program run. Not
                // atomic: two CPUs mirroring at once may send one sequence number twice.
                unsafe { (*shared).sequence = (*shared).sequence.wrapping_add(1) };
            }
            TC_ACT_UNSPEC
        }
        Outcome::Failed => {
            counters.failed += 1;
            TC_ACT_UNSPEC
        }
        Outcome::Broken => {
            counters.failed += 1;
            TC_ACT_SHOT
        }
    }
}

/// Whether the session mirrors the frame, as what, and the frame's priority.
#[inline(always)]
fn select(ctx: &TcContext, session: &MirrorSession, tag_pcp: Option<u8>) -> Option<(Mirrored, u8)> {
    let frame = linear_frame(ctx);
    let parsed = parse(&frame).ok()?;
    let priority = (classify(&parsed, tag_pcp) & 7) as u8;
    let cnp = parsed
        .bth_header(&frame)
        .is_some_and(|bth| bth.opcode() == bth::Opcode::Cnp);
    let nak = !cnp
        && session.flags & MirrorSession::NAK != 0
        && nak::ack_window(&parsed, |offset, window| {
            load_nak_window(ctx, offset, window)
        })
        .is_some_and(|window| is_nak(nak::syndrome(&window)));
    session
        .selects(cnp, nak, priority as usize)
        .map(|what| (what, priority))
}

/// Puts the `N`-byte prefix of `header`'s mirror before the frame (room after its Ethernet
/// header, then the outer headers and its Ethernet header written from the start), clones it
/// toward the session's interface, and takes the room out and its Ethernet header back.
#[inline(always)]
fn encapsulate_and_clone<const N: usize>(
    ctx: &TcContext,
    session: &MirrorSession,
    header: &Repr,
) -> Outcome {
    let mut eth = [0u8; ethernet::HEADER_LEN];
    // SAFETY: a constant length into a buffer of that size.
    let loaded = unsafe {
        bpf_skb_load_bytes(
            ctx.skb.skb as *const _,
            0,
            eth.as_mut_ptr() as *mut _,
            ethernet::HEADER_LEN as u32,
        )
    };
    if loaded != 0 {
        return Outcome::Failed;
    }
    let Some(bytes) = prefix::<N>(&session.outer(), header, ctx.len() as usize, &eth) else {
        return Outcome::Failed;
    };
    let room = (N - ethernet::HEADER_LEN) as i32;
    if ctx.adjust_room(room, BPF_ADJ_ROOM_MAC, ROOM_FLAGS).is_err() {
        return Outcome::Failed;
    }
    let sent = ctx.store(0, &bytes, BPF_F_RECOMPUTE_CSUM as u64).is_ok()
        && clone_marked(ctx, session.via_ifindex, MIRROR_MARK);
    if ctx
        .adjust_room(-room, BPF_ADJ_ROOM_MAC, ROOM_FLAGS)
        .is_err()
        || ctx.store(0, &eth, BPF_F_RECOMPUTE_CSUM as u64).is_err()
    {
        return Outcome::Broken;
    }
    if sent {
        Outcome::Sent
    } else {
        Outcome::Failed
    }
}
