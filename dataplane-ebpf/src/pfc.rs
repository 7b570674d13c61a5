//! PFC. Receive (XDP): 802.1Qbb PAUSE frames are parsed, honoured in the shared pause state
//! (under a watchdog that sees pause storms), counted per priority, and consumed; malformed
//! MAC control frames are counted and not honoured. Violations (TC egress): frames that leave
//! while their priority is paused are counted. Generate (TC ingress, sent through `emit`):
//! this host's ingress buffer per priority asks the peer to pause at XOFF and to resume
//! below XON.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_skb_load_bytes},
    programs::TcContext,
    EbpfContext,
};
use aya_log_ebpf::warn;
use dataplane_common::{
    config::Settings,
    counters::{HookCounters, ParseError},
    pfc::{build_pfc_frame, pfc_mark, PauseOutcome, PfcSignal},
    Hook, PRIORITIES,
};
use wire::{
    ethernet::{self, EtherType},
    pfc::{self as wire_pfc, quanta_to_ns},
};

use crate::{
    ecn::classify,
    emit::{clone_to_egress, replace_frame},
    maps::{COUNTERS, PFC_BUFFERS, PFC_PROFILES, PFC_STATE, PFC_TX_COUNTERS, SETTINGS},
    parse::{Frame, Network, Parsed},
};

/// What [`receive`] found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Not a MAC control frame: the caller goes on with it.
    Other,
    /// A MAC control frame, handled: the caller consumes it (MAC control frames end at the
    /// MAC, never in the stack).
    Consumed,
    /// A well-formed PAUSE (every priority it names paused, none resumed) on an interface that
    /// relays them (`pfc.relay`): applied to this interface's pause state, and the caller
    /// passes it on and counts it ([`count_relayed`]) with its class-enable vector.
    Relay(u16),
}

/// Handles `frame` if it is a MAC control frame.
#[inline(always)]
pub fn receive<C: EbpfContext>(ctx: &C, frame: &Frame) -> Received {
    let Some(eth) = frame.bytes_at::<{ ethernet::HEADER_LEN }>(0) else {
        return Received::Other;
    };
    if ethernet::Frame::new_unchecked(eth).ethertype() != EtherType::MacControl {
        return Received::Other;
    }
    let Some(counters) = COUNTERS.get_ptr_mut(Hook::Xdp as u32) else {
        return Received::Consumed;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    let counters: &mut HookCounters = unsafe { &mut *counters };
    let settings = SETTINGS.get(0).copied().unwrap_or(Settings::DEFAULT);
    match honour(ctx, frame, counters, &settings) {
        Ok(Some(paused)) if settings.flags & Settings::PFC_RELAY != 0 => Received::Relay(paused),
        Ok(_) => Received::Consumed,
        Err(kind) => {
            if let Some(slot) = counters.parse_errors.get_mut(kind as usize) {
                *slot += 1;
            }
            Received::Consumed
        }
    }
}

/// Counts a PAUSE handed to the relay's redirect, under each priority it pauses (`paused`, a
/// class-enable vector).
#[inline(always)]
pub fn count_relayed(paused: u16) {
    let Some(counters) = PFC_TX_COUNTERS.get_ptr_mut(0) else {
        return;
    };
    for priority in 0..PRIORITIES {
        if paused & (1 << priority) != 0 {
            // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
            unsafe { (*counters).relayed[priority] += 1 };
        }
    }
}

/// Applies a PFC frame's pause times to the pause state of each enabled priority. Returns its
/// class-enable vector when the frame only pauses (no priority resumed), `None` when it
/// resumes some priority.
#[inline(always)]
fn honour<C: EbpfContext>(
    ctx: &C,
    frame: &Frame,
    counters: &mut HookCounters,
    settings: &Settings,
) -> Result<Option<u16>, ParseError> {
    let body = frame
        .ptr_at::<[u8; wire_pfc::BODY_LEN]>(ethernet::HEADER_LEN)
        .ok_or(ParseError::TruncatedPfc)?;
    // SAFETY: `ptr_at` gave the pointer only with the whole PFC body before the frame's end;
    // the view only reads, and nothing writes the frame while it lives.
    let body = wire_pfc::Packet::new_unchecked(unsafe { &*body });
    if body.opcode() != wire_pfc::OPCODE {
        return Err(ParseError::BadPfcOpcode);
    }
    let class_enable = body.class_enable();
    if class_enable & 0xff00 != 0 {
        return Err(ParseError::BadPfcVector);
    }
    let watchdog = settings.watchdog();
    // SAFETY: a helper that takes no arguments and touches no memory of the program's.
    let now = unsafe { bpf_ktime_get_ns() };
    let mut only_pauses = class_enable != 0;
    for priority in 0..PRIORITIES {
        if class_enable & (1 << priority) == 0 {
            continue;
        }
        let Some(state) = PFC_STATE.get_ptr_mut(priority as u32) else {
            continue;
        };
        let quanta = body.pause_time(priority);
        let prio_counters = &mut counters.per_priority[priority];
        // SAFETY: a shared map value; a PFC frame updates it from one CPU at a time in practice
        // (frames of one link arrive in order), and a race costs one refresh at worst.
        unsafe {
            if quanta == 0 {
                only_pauses = false;
                (*state).xon(now);
                prio_counters.pfc_resume_rx += 1;
            } else {
                let pause_ns = quanta_to_ns(quanta, settings.link_speed_bps);
                if (*state).pause(now, pause_ns, watchdog) == PauseOutcome::StormStarted {
                    prio_counters.pfc_storms += 1;
                    warn!(
                        ctx,
                        "PFC storm on priority {}: paused longer than the watchdog limit", priority
                    );
                }
                prio_counters.pfc_pause_rx += 1;
            }
        }
    }
    Ok(only_pauses.then_some(class_enable))
}

/// Counts a frame of `priority` leaving at TC egress at `now_ns` while that priority is
/// paused: what a sender that ignores PFC does.
#[inline(always)]
pub fn count_violation(priority: usize, now_ns: u64) {
    let (Some(state), Some(counters)) = (
        PFC_STATE.get(priority as u32),
        COUNTERS.get_ptr_mut(Hook::TcEgress as u32),
    ) else {
        return;
    };
    if state.is_paused(now_ns) {
        // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
        unsafe { (*counters).per_priority[priority & 7].pfc_violations += 1 };
    }
}

/// At TC ingress: adds the packet to its priority's ingress buffer and, when the buffer
/// crosses XOFF (or needs a refresh) or falls below XON, clones the packet to egress to
/// become the PAUSE or resume frame. The packet itself goes on unchanged.
#[inline(always)]
pub fn generate(ctx: &TcContext, parsed: &Parsed, len: u64) {
    if parsed.network == Network::Other {
        return;
    }
    // SAFETY: the context pointer is valid for the whole program run.
    let skb = unsafe { &*ctx.skb.skb };
    let tag_pcp = (skb.vlan_present != 0).then_some((skb.vlan_tci >> 13) as u8);
    let priority = classify(parsed, tag_pcp) as usize & 7;
    let (Some(profile), Some(buffer)) = (
        PFC_PROFILES.get(priority as u32),
        PFC_BUFFERS.get_ptr_mut(priority as u32),
    ) else {
        return;
    };
    if profile.enabled == 0 {
        return;
    }
    let link_speed = SETTINGS
        .get(0)
        .map_or(Settings::DEFAULT.link_speed_bps, |s| s.link_speed_bps);
    let pause_ns = quanta_to_ns(profile.quanta as u16, link_speed);
    // SAFETY: a shared map value; concurrent updates may lose one packet's bytes.
    let Some(signal) = (unsafe { (*buffer).on_packet(bpf_ktime_get_ns(), len, profile, pause_ns) })
    else {
        return;
    };
    let xon = signal == PfcSignal::Resume;
    if !clone_to_egress(ctx, pfc_mark(priority, xon)) {
        return;
    }
    if let Some(counters) = PFC_TX_COUNTERS.get_ptr_mut(0) {
        // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
        let counters = unsafe { &mut *counters };
        if xon {
            counters.resume_tx[priority] += 1;
        } else {
            counters.pause_tx[priority] += 1;
        }
    }
}

/// At TC egress: turns the clone into the PFC frame for `priority` (a resume when `xon`),
/// from this interface's MAC (the clone's destination).
#[inline(always)]
pub fn rewrite_as_pfc(ctx: &TcContext, priority: usize, xon: bool) -> Result<(), ()> {
    let mut own_mac = [0u8; 6];
    // SAFETY: a constant length into a buffer of that size.
    let loaded = unsafe {
        bpf_skb_load_bytes(
            ctx.skb.skb as *const _,
            0,
            own_mac.as_mut_ptr() as *mut _,
            6,
        )
    };
    if loaded != 0 {
        return Err(());
    }
    let quanta = match (xon, PFC_PROFILES.get(priority as u32)) {
        (false, Some(profile)) => profile.quanta as u16,
        _ => 0,
    };
    replace_frame(ctx, &build_pfc_frame(&own_mac, priority, quanta))
}
