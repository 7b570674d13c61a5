//! The lossless eBPF programs: ECN marking by a RED profile over a phantom queue, at XDP
//! (ingress) and at TC egress. One module per mechanism, one shared parser.
#![no_std]
#![no_main]

mod ecn;
mod maps;
mod parse;
mod tc;
mod xdp;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: the verifier rejects any program with a reachable panic path, so this is dead.
    unsafe { core::hint::unreachable_unchecked() }
}

/// The kernel only offers some helpers to GPL-compatible programs.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
