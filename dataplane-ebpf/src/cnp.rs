//! The notification point: a CE-marked RoCEv2 data packet is answered with a CNP from the
//! kernel. TC ingress clones the packet to the same device's egress with a mark and lets the
//! original go up the stack unchanged; TC egress turns the marked clone into the CNP.

use aya_ebpf::{
    bindings::{TC_ACT_SHOT, TC_ACT_UNSPEC},
    helpers::{
        bpf_ktime_get_ns,
        generated::{bpf_skb_change_tail, bpf_skb_load_bytes, bpf_skb_store_bytes},
    },
    macros::classifier,
    programs::TcContext,
};
use dataplane_common::{
    cnp::{
        build_ipv4_cnp, CnpCounters, CnpQpState, CNP_MARK, IPV4_CNP_LEN, IPV4_DATA_PREFIX,
        OPCODE_CNP,
    },
    config::Settings,
};
use network_types::{eth::EthHdr, ip::Ipv4Hdr, udp::UdpHdr};

use crate::{
    maps::{CNP_COUNTERS, CNP_QPS, QP_MAP, SETTINGS},
    parse::{parse, Frame, Network, Parsed},
    tc::linear_frame,
};

const ECN_CE: u8 = 0b11;
/// Where the BTH of an untagged IPv4 packet without options starts: the only layout the
/// CNP builder answers.
const PLAIN_IPV4_BTH: usize = EthHdr::LEN + Ipv4Hdr::LEN + UdpHdr::LEN;
/// Offset of the DestQP (24 bits) in the BTH.
const BTH_DEST_QP: usize = 5;

/// TC ingress: count arriving CNPs; clone CE-marked data packets that earn a CNP.
#[classifier]
pub fn lossless_cnp_in(ctx: TcContext) -> i32 {
    let frame = linear_frame(&ctx);
    if let (Ok(parsed), Some(counters)) = (parse(&frame), CNP_COUNTERS.get_ptr_mut(0)) {
        // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
        notify(&ctx, &frame, &parsed, unsafe { &mut *counters });
    }
    TC_ACT_UNSPEC
}

#[inline(always)]
fn notify(ctx: &TcContext, frame: &Frame, parsed: &Parsed, counters: &mut CnpCounters) {
    if !parsed.roce {
        return;
    }
    let Some(bth) = frame.ptr_at::<[u8; 12]>(parsed.bth) else {
        return;
    };
    // SAFETY: bounds checked by ptr_at; read before any helper invalidates packet pointers.
    let bth = unsafe { *bth };
    if bth[0] == OPCODE_CNP {
        counters.cnp_received += 1;
        return;
    }
    let settings = SETTINGS.get(0).copied().unwrap_or(Settings::DEFAULT);
    if parsed.ecn != ECN_CE || settings.flags & Settings::CNP_ENABLED == 0 {
        return;
    }
    if parsed.network != Network::Ipv4(EthHdr::LEN) || parsed.bth != PLAIN_IPV4_BTH {
        counters.cnp_unsupported += 1;
        return;
    }
    let qp = u32::from_be_bytes([
        0,
        bth[BTH_DEST_QP],
        bth[BTH_DEST_QP + 1],
        bth[BTH_DEST_QP + 2],
    ]);
    if !admit(qp, settings.cnp_interval_ns, counters) {
        return;
    }
    // SAFETY: the context pointer is valid for the whole program run.
    let (old_mark, ifindex) = unsafe { ((*ctx.skb.skb).mark, (*ctx.skb.skb).ifindex) };
    ctx.set_mark(CNP_MARK);
    let cloned = ctx.clone_redirect(ifindex, 0);
    ctx.set_mark(old_mark);
    match cloned {
        Ok(()) => counters.cnp_sent += 1,
        Err(_) => counters.cnp_unsupported += 1,
    }
}

/// Whether this QP may have a CNP now (at most one per interval), counting per QP.
#[inline(always)]
fn admit(qp: u32, interval_ns: u64, counters: &mut CnpCounters) -> bool {
    if CNP_QPS.get_ptr_mut(qp).is_none() {
        let _ = CNP_QPS.insert(qp, CnpQpState::default(), 0);
    }
    let Some(state) = CNP_QPS.get_ptr_mut(qp) else {
        return false;
    };
    // SAFETY: a shared map value; two CPUs admitting the same QP at once may both send.
    let admitted = unsafe { (*state).admit(bpf_ktime_get_ns(), interval_ns) };
    if !admitted {
        counters.cnp_suppressed += 1;
    }
    admitted
}

/// TC egress: a clone marked by [`lossless_cnp_in`] becomes the CNP; every other frame
/// passes untouched. Runs first among the egress programs.
#[classifier]
pub fn lossless_cnp_out(ctx: TcContext) -> i32 {
    // SAFETY: the context pointer is valid for the whole program run.
    if unsafe { (*ctx.skb.skb).mark } != CNP_MARK {
        return TC_ACT_UNSPEC;
    }
    ctx.set_mark(0);
    match rewrite_as_cnp(&ctx) {
        Ok(()) => TC_ACT_UNSPEC,
        // Never let the clone leave as a second copy of the data packet.
        Err(()) => TC_ACT_SHOT,
    }
}

#[inline(always)]
fn rewrite_as_cnp(ctx: &TcContext) -> Result<(), ()> {
    let skb = ctx.skb.skb;
    let mut data = [0u8; IPV4_DATA_PREFIX];
    // SAFETY: a constant length into a buffer of that size (aya's load_bytes clamps the
    // length to skb->len, which the verifier rejects).
    let loaded = unsafe {
        bpf_skb_load_bytes(
            skb as *const _,
            0,
            data.as_mut_ptr() as *mut _,
            IPV4_DATA_PREFIX as u32,
        )
    };
    if loaded != 0 {
        return Err(());
    }
    let bth = EthHdr::LEN + Ipv4Hdr::LEN + UdpHdr::LEN;
    let rx_qp = u32::from_be_bytes([
        0,
        data[bth + BTH_DEST_QP],
        data[bth + BTH_DEST_QP + 1],
        data[bth + BTH_DEST_QP + 2],
    ]);
    let dest_qp = unsafe { QP_MAP.get(&rx_qp) }.copied().unwrap_or(rx_qp);
    let dscp = SETTINGS
        .get(0)
        .map_or(Settings::DEFAULT.cnp_dscp, |s| s.cnp_dscp) as u8
        & 0x3f;
    let cnp = build_ipv4_cnp(&data, dest_qp, dscp);
    // SAFETY: resizing then writing the whole frame from a buffer of exactly that size.
    unsafe {
        if bpf_skb_change_tail(skb, IPV4_CNP_LEN as u32, 0) != 0 {
            return Err(());
        }
        if bpf_skb_store_bytes(skb, 0, cnp.as_ptr() as *const _, IPV4_CNP_LEN as u32, 0) != 0 {
            return Err(());
        }
    }
    Ok(())
}
