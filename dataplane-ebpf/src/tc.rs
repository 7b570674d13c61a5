//! The TC egress program: ECN marking as frames leave (with `bpf_skb_ecn_set_ce`), the count
//! of NAKs sent, and the count of frames that leave while their priority is paused.

use aya_ebpf::{
    bindings::TC_ACT_UNSPEC,
    helpers::{
        bpf_ktime_get_ns,
        generated::{bpf_skb_ecn_set_ce, bpf_skb_load_bytes},
    },
    macros::classifier,
    programs::TcContext,
};
use dataplane_common::Hook;

use crate::{
    ecn, nak,
    parse::{parse, Frame},
    pfc,
};

/// Bytes made linear before parsing: enough for two VLAN tags, IPv6 with extension headers,
/// UDP and the BTH.
const PARSE_DEPTH: u32 = 256;

/// The frame of a TC program, its first [`PARSE_DEPTH`] bytes made linear first. Best effort:
/// if pulling fails the parser sees a shorter frame and counts it.
#[inline(always)]
pub fn linear_frame(ctx: &TcContext) -> Frame {
    let _ = ctx.pull_data(ctx.len().min(PARSE_DEPTH));
    Frame::new(ctx.data(), ctx.data_end())
}

/// Copies [`nak::WINDOW`] bytes at `offset` of the frame into `window` (`nak`'s `load`);
/// whether it could.
#[inline(always)]
pub fn load_nak_window(ctx: &TcContext, offset: usize, window: &mut [u8; nak::WINDOW]) -> bool {
    // SAFETY: a constant length into a buffer of that size (aya's load_bytes clamps the length
    // to skb->len, which the verifier rejects); the helper fails rather than read past the
    // frame.
    unsafe {
        bpf_skb_load_bytes(
            ctx.skb.skb as *const _,
            offset as u32,
            window.as_mut_ptr() as *mut _,
            nak::WINDOW as u32,
        ) == 0
    }
}

/// Entry point: every frame goes on to the next program (TCX_NEXT); some ECT packets as CE,
/// NAKs counted.
/// Runs after the CNP egress program, so a CNP is counted here as the frame it leaves as.
#[classifier]
pub fn lossless_tc(ctx: TcContext) -> i32 {
    let len = ctx.len();
    let frame = linear_frame(&ctx);
    // SAFETY: the context pointer is valid for the whole program run.
    let skb = unsafe { &*ctx.skb.skb };
    let tag_pcp = (skb.vlan_present != 0).then_some((skb.vlan_tci >> 13) as u8);
    // One clock read for both mechanisms (a helper call costs as much as the rest of them).
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let parsed = parse(&frame);
    if let Ok(parsed) = &parsed {
        nak::count(parsed, Hook::TcEgress, |offset, window| {
            load_nak_window(&ctx, offset, window)
        });
    }
    let priority = ecn::process(
        &ctx,
        parsed,
        len as u64,
        now,
        Hook::TcEgress,
        tag_pcp,
        |_| {
            // SAFETY: the helper checks the packet itself and only sets CE on ECT packets.
            unsafe { bpf_skb_ecn_set_ce(ctx.skb.skb) == 1 }
        },
    );
    pfc::count_violation(priority, now);
    TC_ACT_UNSPEC
}
dataplane_common::entry_point_is!(lossless_tc, dataplane_common::programs::TC);
