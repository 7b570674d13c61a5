//! The XDP program: ECN marking on ingress. Marks by rewriting the IP header in place.

use aya_ebpf::{
    bindings::{xdp_action, BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS},
    helpers::bpf_ktime_get_ns,
    macros::xdp,
    programs::XdpContext,
};
use dataplane_common::Hook;
use network_types::ip::Ipv4Hdr;

use crate::{
    ecn,
    maps::PFC_RELAY,
    parse::{Frame, Network, Parsed},
    pfc,
};

/// Entry point: MAC control (PFC) frames are honoured and consumed, or honoured and relayed
/// (`pfc.relay`); every other frame passes, some ECT packets as CE.
#[xdp]
pub fn lossless_xdp(ctx: XdpContext) -> u32 {
    let frame = Frame::new(ctx.data(), ctx.data_end());
    match pfc::receive(&ctx, &frame) {
        pfc::Received::Other => {}
        pfc::Received::Consumed => return xdp_action::XDP_DROP,
        // One copy to every interface of the relay map but this one; none when it is empty.
        pfc::Received::Relay(paused) => {
            return match PFC_RELAY.redirect(0, u64::from(BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS)) {
                Ok(action) => {
                    pfc::count_relayed(paused);
                    action
                }
                Err(_) => xdp_action::XDP_DROP,
            };
        }
    }
    let len = (ctx.data_end() - ctx.data()) as u64;
    // SAFETY: a helper without arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    ecn::process(&ctx, &frame, len, now, Hook::Xdp, None, |parsed| {
        set_ce(&frame, parsed)
    });
    xdp_action::XDP_PASS
}
dataplane_common::entry_point_is!(lossless_xdp, dataplane_common::programs::XDP);

/// Sets CE in the IP header of `parsed`, fixing the IPv4 header checksum incrementally
/// (RFC 1624). XDP has no `bpf_skb_ecn_set_ce`.
#[inline(always)]
fn set_ce(frame: &Frame, parsed: &Parsed) -> bool {
    match parsed.network {
        Network::Ipv4(offset) => {
            let Some(ip) = frame.ptr_at::<Ipv4Hdr>(offset) else {
                return false;
            };
            // SAFETY: `ptr_at` gave the pointer only with the whole header before the frame's
            // end; an XDP frame is writable in place, and no helper ran since that could move it.
            unsafe {
                let old = u16::from_be_bytes([(*ip).vihl, (*ip).tos]);
                (*ip).tos |= 0b11;
                let new = u16::from_be_bytes([(*ip).vihl, (*ip).tos]);
                let check = u16::from_be_bytes((*ip).check);
                (*ip).check = checksum_update(check, old, new).to_be_bytes();
            }
            true
        }
        Network::Ipv6(offset) => {
            let Some(vcf) = frame.ptr_at::<[u8; 2]>(offset) else {
                return false;
            };
            // SAFETY: `ptr_at` gave the pointer only with both bytes before the frame's end, in
            // a frame XDP may write. ECN is bits 5..4 of the second byte of the IPv6 header.
            unsafe { (*vcf)[1] |= 0b0011_0000 };
            true
        }
        Network::Other => false,
    }
}

/// RFC 1624 eqn. 3: the ones'-complement checksum after a 16-bit word changes from `old` to
/// `new`: HC' = ~(~HC + ~m + m').
#[inline(always)]
pub(crate) fn checksum_update(check: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!check) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}
