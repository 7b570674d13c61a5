//! The notification point: a CE-marked RoCEv2 data packet is answered with a CNP from the
//! kernel. At TC ingress the packet earns a CNP (at most one per QP per interval) and is
//! cloned to egress (see `emit`); at TC egress the marked clone becomes the CNP.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_skb_load_bytes},
    programs::TcContext,
};
use dataplane_common::{
    cnp::{build_ipv4_cnp, CnpCounters, CNP_MARK, IPV4_BTH_OFFSET, IPV4_DATA_PREFIX},
    config::Settings,
};
use wire::{bth, ethernet, ip::Ecn};

use crate::{
    emit::{clone_to_egress, replace_frame},
    maps::{get_or_insert, CNP_COUNTERS, CNP_QPS, QP_MAP, SETTINGS},
    parse::{Frame, Network, Parsed},
};

/// At TC ingress: counts an arriving CNP, or answers a CE-marked data packet that earns a
/// CNP by cloning it to egress with [`CNP_MARK`].
#[inline(always)]
pub fn notify(ctx: &TcContext, frame: &Frame, parsed: &Parsed) {
    let Some(counters) = CNP_COUNTERS.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    let counters: &mut CnpCounters = unsafe { &mut *counters };
    let Some(header) = parsed.bth_header(frame) else {
        return;
    };
    if header.opcode() == bth::Opcode::Cnp {
        counters.cnp_received += 1;
        return;
    }
    let settings = SETTINGS.get(0).copied().unwrap_or(Settings::DEFAULT);
    if parsed.ecn != Ecn::Ce.bits() || settings.flags & Settings::CNP_ENABLED == 0 {
        return;
    }
    if parsed.network != Network::Ipv4(ethernet::HEADER_LEN) || parsed.bth != IPV4_BTH_OFFSET {
        counters.cnp_unsupported += 1;
        return;
    }
    let qp = header.dest_qp();
    if !admit(qp, settings.cnp_interval_ns, counters) {
        return;
    }
    if clone_to_egress(ctx, CNP_MARK) {
        counters.cnp_sent += 1;
    } else {
        counters.cnp_unsupported += 1;
    }
}

/// Whether this QP may have a CNP now (at most one per interval), counting per QP.
#[inline(always)]
fn admit(qp: u32, interval_ns: u64, counters: &mut CnpCounters) -> bool {
    let Some(state) = get_or_insert(&CNP_QPS, qp) else {
        return false;
    };
    // SAFETY: a map value pointer from the kernel, valid for the program run (the map is an
    // array, whose values are never freed); the clock helper takes no arguments. Not atomic:
    // two CPUs admitting the same QP at once may both send, which DCQCN tolerates.
    let admitted = unsafe { (*state).admit(bpf_ktime_get_ns(), interval_ns) };
    if !admitted {
        counters.cnp_suppressed += 1;
    }
    admitted
}

/// At TC egress: turns the clone into the CNP answering it.
#[inline(always)]
pub fn rewrite_as_cnp(ctx: &TcContext) -> Result<(), ()> {
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
    let rx_qp = bth::Packet::new_unchecked(&data[IPV4_BTH_OFFSET..]).dest_qp();
    // SAFETY: the value is copied out at once; user space replaces an entry whole (a u32), so
    // a concurrent update or delete yields the old or the new QP, never a torn one.
    let dest_qp = unsafe { QP_MAP.get(rx_qp) }.copied().unwrap_or(rx_qp);
    let dscp = SETTINGS
        .get(0)
        .map_or(Settings::DEFAULT.cnp_dscp, |s| s.cnp_dscp) as u8
        & 0x3f;
    replace_frame(ctx, &build_ipv4_cnp(&data, dest_qp, dscp))
}
