//! Frames the data path sends of its own accord (CNPs, PFC frames), the way TOOLCHAIN.md
//! verified: the TC ingress program marks a packet and clones it to the same device's
//! egress (the original goes on unchanged); the TC egress program, first in line, turns a
//! marked clone into the frame the mark names. XDP cannot do this: it has no clone.

use aya_ebpf::{
    bindings::{TC_ACT_SHOT, TC_ACT_UNSPEC},
    helpers::generated::{bpf_skb_change_tail, bpf_skb_store_bytes},
    macros::classifier,
    programs::TcContext,
};
use dataplane_common::{cnp::CNP_MARK, pfc::parse_pfc_mark};

use crate::{cnp, parse::parse, pfc, tc::linear_frame};

/// TC ingress: the notification point (CNPs) and this host's ingress buffer (PFC frames).
#[classifier]
pub fn lossless_ingress(ctx: TcContext) -> i32 {
    let len = ctx.len() as u64;
    let frame = linear_frame(&ctx);
    if let Ok(parsed) = parse(&frame) {
        // Both may clone; each reads the frame before its clone invalidates packet pointers.
        cnp::notify(&ctx, &frame, &parsed);
        pfc::generate(&ctx, &parsed, len);
    }
    TC_ACT_UNSPEC
}
dataplane_common::entry_point_is!(lossless_ingress, dataplane_common::programs::INGRESS);

/// TC egress, first: a marked clone becomes a CNP or a PFC frame; any other frame passes.
#[classifier]
pub fn lossless_emit(ctx: TcContext) -> i32 {
    // SAFETY: the context pointer is valid for the whole program run.
    let mark = unsafe { (*ctx.skb.skb).mark };
    let rewritten = if mark == CNP_MARK {
        cnp::rewrite_as_cnp(&ctx)
    } else if let Some((priority, xon)) = parse_pfc_mark(mark) {
        pfc::rewrite_as_pfc(&ctx, priority, xon)
    } else {
        return TC_ACT_UNSPEC;
    };
    ctx.set_mark(0);
    match rewritten {
        Ok(()) => TC_ACT_UNSPEC,
        // Never let a clone leave as a second copy of the packet it was made from.
        Err(()) => TC_ACT_SHOT,
    }
}
dataplane_common::entry_point_is!(lossless_emit, dataplane_common::programs::EMIT);

/// Clones the packet to the egress of its own device carrying `mark`; the original keeps
/// its mark. Returns whether the clone was made.
#[inline(always)]
pub fn clone_to_egress(ctx: &TcContext, mark: u32) -> bool {
    // SAFETY: the context pointer is valid for the whole program run.
    let ifindex = unsafe { (*ctx.skb.skb).ifindex };
    clone_marked(ctx, ifindex, mark)
}

/// Clones the packet to the egress of the device `ifindex` carrying `mark`; the original
/// keeps its mark. Returns whether the clone was made.
#[inline(always)]
pub fn clone_marked(ctx: &TcContext, ifindex: u32, mark: u32) -> bool {
    // SAFETY: the context pointer is valid for the whole program run.
    let old_mark = unsafe { (*ctx.skb.skb).mark };
    ctx.set_mark(mark);
    let cloned = ctx.clone_redirect(ifindex, 0);
    ctx.set_mark(old_mark);
    cloned.is_ok()
}

/// Replaces the whole frame of the skb with `frame`.
#[inline(always)]
pub fn replace_frame<const N: usize>(ctx: &TcContext, frame: &[u8; N]) -> Result<(), ()> {
    let skb = ctx.skb.skb;
    // SAFETY: resizing, then writing the whole frame from a buffer of exactly that size.
    unsafe {
        if bpf_skb_change_tail(skb, N as u32, 0) != 0 {
            return Err(());
        }
        if bpf_skb_store_bytes(skb, 0, frame.as_ptr() as *const _, N as u32, 0) != 0 {
            return Err(());
        }
    }
    Ok(())
}
