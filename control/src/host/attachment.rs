//! What `lossless host attach --hooks` can attach, and the programs and link pins of each.

use aya::programs::{tc::TcAttachType, LinkOrder};

/// One `--hooks` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Attachment {
    /// ECN marking (and PFC receive) at XDP, on ingress.
    Xdp,
    /// ECN marking at TC egress.
    Tc,
    /// The CNP fast path: TC ingress answers CE-marked RoCEv2 packets, TC egress builds CNPs.
    Cnp,
}

/// A program to attach at TC, where, in which order, pinned under which name.
pub struct TcProgram {
    /// Program name in the eBPF object.
    pub program: &'static str,
    /// Ingress or egress.
    pub attach_type: TcAttachType,
    /// Whether it must run before the other programs of its direction.
    pub first: bool,
    /// Name of its link pin.
    pub pin: &'static str,
}

impl TcProgram {
    /// Its place among the TCX programs of its direction.
    pub fn order(&self) -> LinkOrder {
        if self.first {
            LinkOrder::first()
        } else {
            LinkOrder::default()
        }
    }
}

/// The XDP program and its link pin.
pub const XDP_PROGRAM: &str = "lossless_xdp";
/// Pin name of the XDP link.
pub const XDP_PIN: &str = "link_xdp";

const TC_PROGRAMS: [TcProgram; 1] = [TcProgram {
    program: "lossless_tc",
    attach_type: TcAttachType::Egress,
    first: false,
    pin: "link_tc",
}];

const CNP_PROGRAMS: [TcProgram; 2] = [
    TcProgram {
        program: "lossless_cnp_in",
        attach_type: TcAttachType::Ingress,
        first: false,
        pin: "link_cnp_in",
    },
    // First on egress, so the clone is a CNP before any other program (ECN at TC) sees it.
    TcProgram {
        program: "lossless_cnp_out",
        attach_type: TcAttachType::Egress,
        first: true,
        pin: "link_cnp_out",
    },
];

impl Attachment {
    /// Every attachment, in attach order.
    pub const ALL: [Attachment; 3] = [Attachment::Xdp, Attachment::Tc, Attachment::Cnp];

    /// The name on the command line and in `status`.
    pub fn name(self) -> &'static str {
        match self {
            Attachment::Xdp => "xdp",
            Attachment::Tc => "tc",
            Attachment::Cnp => "cnp",
        }
    }

    /// Its bit in `AttachInfo::hooks` (xdp and tc match `Hook::bit`).
    pub fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Its TC programs (none for XDP).
    pub fn tc_programs(self) -> &'static [TcProgram] {
        match self {
            Attachment::Xdp => &[],
            Attachment::Tc => &TC_PROGRAMS,
            Attachment::Cnp => &CNP_PROGRAMS,
        }
    }

    /// The names of its link pins.
    pub fn pins(self) -> Vec<&'static str> {
        match self {
            Attachment::Xdp => vec![XDP_PIN],
            _ => self.tc_programs().iter().map(|p| p.pin).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane_common::Hook;

    #[test]
    fn bits_of_data_hooks_match_the_counters_hooks() {
        assert_eq!(Attachment::Xdp.bit(), Hook::Xdp.bit());
        assert_eq!(Attachment::Tc.bit(), Hook::TcEgress.bit());
        assert_eq!(Attachment::Cnp.pins(), ["link_cnp_in", "link_cnp_out"]);
    }
}
