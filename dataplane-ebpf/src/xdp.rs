//! The XDP program: ECN marking on ingress (by rewriting the IP header in place), and the count
//! of NAKs received.

use aya_ebpf::{
    bindings::{xdp_action, BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS},
    helpers::{bpf_ktime_get_ns, generated::bpf_xdp_load_bytes},
    macros::xdp,
    programs::XdpContext,
};
use dataplane_common::Hook;
use wire::{
    ip::Ecn,
    ipv4::{self, TOS_OFFSET},
    ipv6,
};

use crate::{
    ecn,
    maps::PFC_RELAY,
    nak,
    parse::{parse, Frame, Network, Parsed},
    pfc,
};

/// Entry point: MAC control (PFC) frames are honoured and consumed, or honoured and relayed
/// (`pfc.relay`); every other frame passes, some ECT packets as CE, NAKs counted.
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
    let parsed = parse(&frame);
    if let Ok(parsed) = &parsed {
        nak::count(parsed, Hook::Xdp, |offset, window| {
            // SAFETY: the helper copies at most `nak::WINDOW` bytes into a buffer of that size,
            // and fails rather than read past the frame.
            unsafe {
                bpf_xdp_load_bytes(
                    ctx.ctx,
                    offset as u32,
                    window.as_mut_ptr() as *mut _,
                    nak::WINDOW as u32,
                ) == 0
            }
        });
    }
    ecn::process(&ctx, parsed, len, now, Hook::Xdp, None, |parsed| {
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
            let Some(header) = frame.ptr_at::<[u8; ipv4::HEADER_LEN]>(offset) else {
                return false;
            };
            // SAFETY: `ptr_at` gave the pointer only with the whole header before the frame's
            // end; an XDP frame is writable in place, no helper ran since that could move it,
            // and no other reference into the frame is alive.
            let header = unsafe { &mut *header };
            rewrite_ipv4_word(header, TOS_OFFSET, |ip| {
                ip.set_traffic_class(ip.traffic_class() | Ecn::Ce.bits())
            });
            true
        }
        Network::Ipv6(offset) => {
            let Some(header) = frame.ptr_at::<[u8; ipv6::HEADER_LEN]>(offset) else {
                return false;
            };
            // SAFETY: as for IPv4: the whole header lies in the writable frame, and this is the
            // only reference into it.
            let mut ip = ipv6::Packet::new_unchecked(unsafe { &mut *header });
            ip.set_version_tc_flow(ip.traffic_class() | Ecn::Ce.bits(), ip.flow_label());
            true
        }
        Network::Other => false,
    }
}

/// Applies `change` to the IPv4 header `header`, which alters at most the 16-bit word holding
/// byte `at`, and updates the header checksum for that word (RFC 1624) rather than summing the
/// header again.
#[inline(always)]
pub(crate) fn rewrite_ipv4_word(
    header: &mut [u8; ipv4::HEADER_LEN],
    at: usize,
    change: impl FnOnce(&mut ipv4::Packet<&mut [u8; ipv4::HEADER_LEN]>),
) {
    let word = |header: &[u8; ipv4::HEADER_LEN]| {
        let first = at & !1;
        u16::from_be_bytes([header[first], header[first + 1]])
    };
    let old = word(header);
    let mut ip = ipv4::Packet::new_unchecked(&mut *header);
    change(&mut ip);
    let check = ip.checksum();
    let new = word(header);
    ipv4::Packet::new_unchecked(header).set_checksum(checksum_update(check, old, new));
}

/// RFC 1624 eqn. 3: the ones'-complement checksum after a 16-bit word changes from `old` to
/// `new`: HC' = ~(~HC + ~m + m'). `wire::checksum::update` is the same equation over byte
/// slices, but folds its sum in a data-dependent loop; this one folds twice, which is all a
/// 16-bit change needs, and gives the verifier no loop to walk.
#[inline(always)]
fn checksum_update(check: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!check) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}
