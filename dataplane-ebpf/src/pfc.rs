//! PFC receive: 802.1Qbb PAUSE frames are parsed, honoured in the shared pause state (under a
//! watchdog that sees pause storms), counted per priority, and consumed. Malformed MAC
//! control frames are counted and not honoured. And at TC egress: frames that leave while
//! their priority is paused are counted as violations.

use aya_ebpf::{helpers::bpf_ktime_get_ns, EbpfContext};
use aya_log_ebpf::warn;
use dataplane_common::{
    config::Settings,
    counters::{HookCounters, ParseError},
    pfc::{quanta_to_ns, PauseOutcome, ETHERTYPE_MAC_CONTROL, OPCODE_PFC, PAYLOAD_LEN},
    Hook, PRIORITIES,
};
use network_types::eth::EthHdr;

use crate::{
    maps::{COUNTERS, PFC_STATE, SETTINGS},
    parse::Frame,
};

/// Handles `frame` if it is a MAC control frame, and returns whether it was one (the caller
/// then consumes it: MAC control frames end at the MAC, never in the stack).
#[inline(always)]
pub fn receive<C: EbpfContext>(ctx: &C, frame: &Frame) -> bool {
    let Some(eth) = frame.ptr_at::<EthHdr>(0) else {
        return false;
    };
    if unsafe { (*eth).ether_type } != ETHERTYPE_MAC_CONTROL.to_be() {
        return false;
    }
    let Some(counters) = COUNTERS.get_ptr_mut(Hook::Xdp as u32) else {
        return true;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    let counters: &mut HookCounters = unsafe { &mut *counters };
    if let Err(kind) = honour(ctx, frame, counters) {
        if let Some(slot) = counters.parse_errors.get_mut(kind as usize) {
            *slot += 1;
        }
    }
    true
}

/// Applies a PFC frame's pause times to the pause state of each enabled priority.
#[inline(always)]
fn honour<C: EbpfContext>(
    ctx: &C,
    frame: &Frame,
    counters: &mut HookCounters,
) -> Result<(), ParseError> {
    let payload = frame
        .ptr_at::<[u8; PAYLOAD_LEN]>(EthHdr::LEN)
        .ok_or(ParseError::TruncatedPfc)?;
    // SAFETY: bounds checked by ptr_at.
    let payload = unsafe { &*payload };
    if u16::from_be_bytes([payload[0], payload[1]]) != OPCODE_PFC {
        return Err(ParseError::BadPfcOpcode);
    }
    let class_enable = u16::from_be_bytes([payload[2], payload[3]]);
    if class_enable & 0xff00 != 0 {
        return Err(ParseError::BadPfcVector);
    }
    let settings = SETTINGS.get(0).copied().unwrap_or(Settings::DEFAULT);
    let watchdog = settings.watchdog();
    let now = unsafe { bpf_ktime_get_ns() };
    for priority in 0..PRIORITIES {
        if class_enable & (1 << priority) == 0 {
            continue;
        }
        let Some(state) = PFC_STATE.get_ptr_mut(priority as u32) else {
            continue;
        };
        let quanta = u16::from_be_bytes([payload[4 + 2 * priority], payload[5 + 2 * priority]]);
        let prio_counters = &mut counters.per_priority[priority];
        // SAFETY: a shared map value; a PFC frame updates it from one CPU at a time in practice
        // (frames of one link arrive in order), and a race costs one refresh at worst.
        unsafe {
            if quanta == 0 {
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
    Ok(())
}

/// Counts a frame of `priority` leaving at TC egress while that priority is paused: what a
/// sender that ignores PFC does.
#[inline(always)]
pub fn count_violation(priority: usize) {
    let (Some(state), Some(counters)) = (
        PFC_STATE.get(priority as u32),
        COUNTERS.get_ptr_mut(Hook::TcEgress as u32),
    ) else {
        return;
    };
    if state.is_paused(unsafe { bpf_ktime_get_ns() }) {
        // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
        unsafe { (*counters).per_priority[priority & 7].pfc_violations += 1 };
    }
}
