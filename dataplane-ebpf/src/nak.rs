//! NAK counting: an RC Acknowledge whose AETH says NAK or RNR NAK is counted by syndrome, for
//! the interface and for its QP (the BTH DestQP), at the hook that saw it (XDP: received,
//! TC egress: sent). Only reads the frame.

use dataplane_common::Hook;
use wire::{aeth, bth, icrc};

use crate::{
    maps::{get_or_insert, NAK_COUNTERS, NAK_QPS},
    parse::Parsed,
};

/// Bytes copied from the BTH on: the BTH and the AETH.
pub const WINDOW: usize = bth::HEADER_LEN + aeth::HEADER_LEN;

/// The BTH and AETH of the frame parsed as `parsed` if it is an RC Acknowledge. `load` copies
/// [`WINDOW`] bytes from an offset of the frame (the program's load-bytes helper) and says
/// whether it could: a copy, not a packet pointer, because the verifier loses the parser's
/// bounds check on the way to a variable offset this deep.
#[inline(always)]
pub fn ack_window(
    parsed: &Parsed,
    load: impl FnOnce(usize, &mut [u8; WINDOW]) -> bool,
) -> Option<[u8; WINDOW]> {
    // An Acknowledge has an AETH and an ICRC inside its UDP datagram; a frame without them
    // would read padding or the ICRC as the syndrome.
    if !parsed.roce || parsed.bth + WINDOW + icrc::ICRC_LEN > parsed.udp_end {
        return None;
    }
    let mut window = [0u8; WINDOW];
    if !load(parsed.bth, &mut window) {
        return None;
    }
    let opcode = bth::Packet::new_unchecked(&window[..bth::HEADER_LEN]).opcode();
    (opcode == bth::Opcode::RcAck).then_some(window)
}

/// The AETH syndrome of an Acknowledge's [`ack_window`].
#[inline(always)]
pub fn syndrome(window: &[u8; WINDOW]) -> u8 {
    aeth::Packet::new_unchecked(&window[bth::HEADER_LEN..]).syndrome()
}

/// Counts the frame parsed as `parsed` if it is a NAK, at `hook`; `load` as for
/// [`ack_window`].
#[inline(always)]
pub fn count(parsed: &Parsed, hook: Hook, load: impl FnOnce(usize, &mut [u8; WINDOW]) -> bool) {
    let Some(window) = ack_window(parsed, load) else {
        return;
    };
    let syndrome = syndrome(&window);
    let dest_qp = bth::Packet::new_unchecked(&window[..bth::HEADER_LEN]).dest_qp();
    let Some(counters) = NAK_COUNTERS.get_ptr_mut(hook as u32) else {
        return;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    if !unsafe { (*counters).count(syndrome) } {
        return;
    }
    let Some(entry) = get_or_insert(&NAK_QPS, dest_qp) else {
        return;
    };
    // SAFETY: a map value pointer from the kernel, valid for the program run. Not atomic (the
    // BPF target has no atomic add in Rust's core): two CPUs counting the same QP at once may
    // lose one count (the interface's per-CPU counters above lose none).
    unsafe { (*entry).per_hook[hook as usize].count(syndrome) };
}
