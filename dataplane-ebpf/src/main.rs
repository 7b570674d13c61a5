//! The lossless eBPF programs: ECN marking by a RED profile over a phantom queue, at XDP
//! (ingress) and at TC egress, NAK counting at both, PFC receive at XDP, the CNP fast path
//! at TC, and ERSPAN mirroring at TC both ways. One module per mechanism, one shared parser.
//!
//! Built for the `bpfel-unknown-none` target by `host/build.rs`; built for the host (as in
//! `cargo build --workspace`) it is an empty binary, so workspace-wide commands still work.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

mod cnp;
mod ecn;
mod emit;
mod lb;
mod maps;
mod mirror;
mod nak;
mod parse;
mod pfc;
mod tc;
mod xdp;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: the verifier rejects any program with a reachable panic path, so this is dead.
    unsafe { core::hint::unreachable_unchecked() }
}

#[cfg(not(target_arch = "bpf"))]
fn main() {}

/// The kernel only offers some helpers to GPL-compatible programs.
#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
