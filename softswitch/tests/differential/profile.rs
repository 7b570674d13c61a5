//! What the differential test runs, and what it keeps out of a comparison and why: BMv2 runs
//! on the wall clock and softswitch on a virtual one that stands still between packets, so
//! whatever a program does with the time must not depend on how much of it passes.

use std::path::{Path, PathBuf};

/// Programs BMv2 runs that the differential test leaves out, each with the reason.
pub const LEFT_OUT: &[(&str, &str)] = &[
    (
        "softswitch/tests/corpus/clock.p4",
        "it writes timestamps and queueing delays into the packets it sends",
    ),
    (
        "softswitch/tests/corpus/queues.p4",
        "it writes deq_timedelta into the packets it sends",
    ),
    (
        "softswitch/tests/corpus/recirculated.p4",
        "it writes ingress_global_timestamp into the packets it sends",
    ),
];

/// Values an action parameter may take in a random entry.
#[derive(Clone, Copy, Debug)]
pub enum Values {
    /// At least this.
    AtLeast(u128),
    /// 0, or at least this.
    ZeroOrAtLeast(u128),
    /// At most this.
    AtMost(u128),
}

impl Values {
    /// `value` brought into the allowed values (keeping it when it is one).
    pub fn clamp(self, value: u128, max: u128) -> u128 {
        match self {
            Values::AtLeast(low) if value < low => low.min(max),
            Values::ZeroOrAtLeast(low) if value != 0 && value < low => low.min(max),
            Values::AtMost(high) if value > high => value % (high + 1),
            _ => value,
        }
    }
}

/// How the test treats one program.
#[derive(Debug, Default)]
pub struct Profile {
    /// The program.
    pub program: PathBuf,
    /// STF files whose packets are the program's seeds and, when they are the program's own
    /// tests, whose table entries, sessions and groups a case starts from.
    pub seeds: Vec<PathBuf>,
    /// Whether `seeds` are the program's own tests (else other programs' packets only).
    pub own_seeds: bool,
    /// Registers whose cells hold times of the switch's clock: not compared.
    pub time_registers: &'static [&'static str],
    /// Action parameters (by name) that hold durations, and the values that make them longer
    /// than any case lasts or switch the mechanism off, so the outcome does not depend on time.
    pub params: &'static [(&'static str, Values)],
    /// The shortest packet sent: a program that reads a header whether or not its parser
    /// extracted it reads an unspecified value from a shorter one (BMv2: what the previous
    /// packet left there; softswitch: 0).
    pub min_packet: usize,
    /// Which packets the program gives a defined outcome, when not all (see [`DEFINED`]).
    pub defined: Option<Defined>,
}

/// Whether a program gives a packet a defined outcome.
pub type Defined = fn(&[u8]) -> bool;

/// Programs whose outcome is defined for some packets only, with the test of a packet.
const DEFINED: &[(&str, Defined)] = &[
    ("softswitch/tests/corpus/ecn_ecmp.p4", ecn_ecmp_defined),
    ("softswitch/tests/corpus/arith.p4", arith_defined),
    (
        "softswitch/tests/corpus/stack_index.p4",
        stack_index_defined,
    ),
    (
        "softswitch/tests/corpus/stack_elements.p4",
        stack_elements_defined,
    ),
    ("softswitch/tests/corpus/lookahead.p4", lookahead_defined),
];

/// stack_elements.p4 picks an element of a 3-element stack by hdr.op's second byte (src, ops
/// 1 and 3), third (dst, op 2) or fourth (sdst, an int<8>, op 4): out of range or negative,
/// BMv2 aborts (softswitch reads an invalid element and ignores the write). Defined: every
/// header parsed (18 bytes) and the index the op uses in 0..3.
fn stack_elements_defined(p: &[u8]) -> bool {
    if p.len() < 18 {
        return false;
    }
    match p[0] {
        1 | 3 => p[1] < 3,
        2 => p[2] < 3,
        4 => p[3] < 3,
        _ => true,
    }
}

/// lookahead.p4 reports meta.wrapped.h's fields without checking its validity: unless the
/// parser reached its second state (first byte 1) and every lookahead there had its bytes
/// (three after the first), BMv2 reports what an earlier packet left in that header.
fn lookahead_defined(p: &[u8]) -> bool {
    p.len() >= 4 && p[0] == 1
}

/// stack_index.p4 reads the element its first byte picks and writes the one its second byte
/// picks: out of range, BMv2 aborts (softswitch reads 0 and ignores the write), and an element
/// the parser left invalid holds what an earlier packet left in BMv2. Defined: both indices
/// below 4 and the one read parsed (the elements are the bytes after the fourth, up to a 0).
fn stack_index_defined(p: &[u8]) -> bool {
    let parsed = p.get(4..).map_or(0, |elems| {
        elems.iter().take_while(|&&b| b != 0).count().min(4)
    });
    p.len() >= 4 && usize::from(p[0]) < parsed && p[1] < 4
}

/// arith.p4 asserts that hdr.op.kind (its fourth byte) is not 0xee: a failed assert stops
/// BMv2 (softswitch counts it and goes on, docs/softswitch.md).
fn arith_defined(p: &[u8]) -> bool {
    p.get(3) != Some(&0xee)
}

/// ecn_ecmp.p4 hashes hdr.ports in an action, where p4c copies the hash's inputs into
/// temporaries first: when the parser left hdr.ports invalid (IPv4 that is not UDP, or whose
/// IHL is not 5), BMv2 copies what an earlier packet left in that header, and the next hop
/// depends on that packet. Defined: what is not IPv4, and IPv4 with IHL 5 carrying UDP.
fn ecn_ecmp_defined(p: &[u8]) -> bool {
    match p.get(12..14) {
        Some([0x08, 0x00]) => p.len() >= 14 + 20 + 4 && p[14] & 0x0f == 5 && p[14 + 9] == 17,
        _ => true,
    }
}

/// Programs that read headers a short packet leaves invalid: the length that makes them
/// valid.
const MIN_PACKET: &[(&str, usize)] = &[
    // hdr.op (4 bytes) is read in ingress without a validity check.
    ("softswitch/tests/corpus/arith.p4", 4),
    // hdr.k (4 bytes) gives both tables their keys.
    ("softswitch/tests/corpus/priorities.p4", 4),
    // hdr.info.op (the first of 4 bytes) picks what ingress does.
    ("softswitch/tests/corpus/header_unions.p4", 4),
    // hdr.i (2 bytes) is added up in ingress.
    ("softswitch/tests/corpus/int_constants.p4", 2),
    // hdr.t (6 bytes) is changed field by field in ingress.
    ("softswitch/tests/corpus/header_structs.p4", 6),
    // hdr.bytes and hdr.wide (4 bytes) are read in ingress.
    ("softswitch/tests/corpus/generic_structs.p4", 4),
    // hdr.i (4 bytes) is read in ingress.
    ("softswitch/tests/corpus/initializers.p4", 4),
    // hdr.h (3 bytes) is read in ingress.
    ("softswitch/tests/corpus/direct_apply.p4", 3),
    // hdr.h (3 bytes) is read in ingress.
    ("softswitch/tests/corpus/enums.p4", 3),
    // hdr.op and hdr.w (115 bytes) are read in ingress.
    ("softswitch/tests/corpus/wide_fields.p4", 115),
];

/// lossless.p4's durations and pause quanta, and its registers whose cells depend on the
/// switch's clock: times (µs + 1), and time paused (a PAUSE that extends or cuts short the
/// one in force counts the time between them).
const LOSSLESS_TIME_REGISTERS: &[&str] = &[
    "pfc_paused_until",
    "pfc_paused_us",
    "pfc_upstream_paused",
    "port_load_stamp",
    "LosslessIngress.flowlet_last_seen",
    "LosslessEgress.hold_moved",
    "LosslessEgress.cnp_last_sent",
];
const LOSSLESS_PARAMS: &[(&str, Values)] = &[
    ("flowlet_timeout_us", Values::AtLeast(1 << 40)),
    ("load_age_us", Values::AtLeast(1 << 40)),
    ("interval_us", Values::AtLeast(1 << 31)),
    ("refresh_us", Values::AtLeast(1 << 31)),
    ("stall_us", Values::AtLeast(1 << 31)),
    // 0: received pauses have no effect; else a pause quantum of at least a quarter second.
    ("quantum_q10", Values::ZeroOrAtLeast(1 << 28)),
    // Passes of a held packet: BMv2 has no limit of its own, softswitch stops at 1,000.
    ("limit", Values::AtMost(20)),
];

/// The profiles of every program BMv2 runs but those [`LEFT_OUT`].
pub fn profiles(root: &Path) -> Vec<Profile> {
    let stf_files = |dir: &Path| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "stf"))
            .collect();
        files.sort();
        files
    };
    testkit::bmv2::bmv2_programs()
        .into_iter()
        .filter(|p| !LEFT_OUT.iter().any(|(left, _)| p.ends_with(left)))
        .map(|program| {
            if program.ends_with("dataplane-p4/lossless.p4") {
                return Profile {
                    seeds: stf_files(&root.join("dataplane-p4/tests")),
                    own_seeds: true,
                    time_registers: LOSSLESS_TIME_REGISTERS,
                    params: LOSSLESS_PARAMS,
                    min_packet: 1,
                    defined: None,
                    program,
                };
            }
            let own = program.with_extension("stf");
            let min_packet = MIN_PACKET
                .iter()
                .find(|(p, _)| program.ends_with(p))
                .map_or(1, |&(_, n)| n);
            let defined = DEFINED
                .iter()
                .find(|(p, _)| program.ends_with(p))
                .map(|&(_, defined)| defined);
            // A program without tests of its own gets lossless.p4's packets (IPv4, RoCEv2,
            // PFC) as seeds.
            let (seeds, own_seeds) = if own.exists() {
                (vec![own], true)
            } else {
                (stf_files(&root.join("dataplane-p4/tests")), false)
            };
            Profile {
                seeds,
                own_seeds,
                min_packet,
                defined,
                program,
                ..Profile::default()
            }
        })
        .collect()
}
