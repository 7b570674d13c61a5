//! The TC egress program: ECN marking as frames leave (with `bpf_skb_ecn_set_ce`), and the
//! count of frames that leave while their priority is paused.

use aya_ebpf::{
    bindings::TC_ACT_UNSPEC,
    helpers::{bpf_ktime_get_ns, generated::bpf_skb_ecn_set_ce},
    macros::classifier,
    programs::TcContext,
};
use dataplane_common::Hook;

use crate::{ecn, parse::Frame, pfc};

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

/// Entry point: every frame goes on to the next program (TCX_NEXT); some ECT packets as CE.
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
    let priority = ecn::process(
        &ctx,
        &frame,
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
