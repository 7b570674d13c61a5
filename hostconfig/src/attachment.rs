//! What `lossless host attach --hooks` can attach, the programs and link pins of each, and the
//! XDP mode (`--mode`).

use dataplane_common::programs;

/// One `--hooks` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Attachment {
    /// ECN marking (and PFC receive) at XDP, on ingress.
    Xdp,
    /// ECN marking at TC egress.
    Tc,
    /// The CNP fast path: TC ingress answers CE-marked RoCEv2 packets, TC egress builds CNPs.
    Cnp,
    /// PFC generation: TC ingress models this host's ingress buffer, TC egress builds PAUSE
    /// and resume frames. The same two programs as `cnp`.
    Pfc,
    /// The load balancer: XDP on this (down)link redirects owned traffic to the uplinks of
    /// `lb.uplinks`. Takes the XDP hook, so it excludes `xdp`.
    Lb,
    /// ERSPAN mirroring: TC ingress and egress mirror the frames `lossless host mirror` selects
    /// to a collector.
    Mirror,
}

/// How to run XDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// In the driver (fails if the driver has no XDP support).
    Native,
    /// Generic XDP in the kernel's receive path (works everywhere, slower).
    Skb,
    /// Native if the driver supports it, else skb.
    Auto,
}

/// The direction of a TC hook (the host crate gives it to aya as its `TcAttachType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcDirection {
    /// Ingress: frames the interface receives.
    Ingress,
    /// Egress: frames the interface sends.
    Egress,
}

/// A program to attach at TC, where, in which order, pinned under which name.
pub struct TcProgram {
    /// Program name in the eBPF object (`dataplane_common::programs`).
    pub program: &'static str,
    /// Ingress or egress.
    pub direction: TcDirection,
    /// Whether it must run before the other programs of its direction (the host crate gives
    /// it to aya as `LinkOrder::first()`), else after them.
    pub first: bool,
    /// Name of its link pin.
    pub pin: &'static str,
}

/// Pin name of the XDP link of `xdp`.
pub const XDP_PIN: &str = "link_xdp";
/// Pin name of the XDP link of `lb`.
pub const LB_PIN: &str = "link_lb";

const TC_PROGRAMS: [TcProgram; 1] = [TcProgram {
    program: programs::TC,
    direction: TcDirection::Egress,
    first: false,
    pin: "link_tc",
}];

const EMIT_PROGRAMS: [TcProgram; 2] = [
    TcProgram {
        program: programs::INGRESS,
        direction: TcDirection::Ingress,
        first: false,
        pin: "link_ingress",
    },
    // First on egress, so a clone is a CNP or PFC frame before any other program sees it.
    TcProgram {
        program: programs::EMIT,
        direction: TcDirection::Egress,
        first: true,
        pin: "link_emit",
    },
];

// Last on egress (attached after the others), so a frame is mirrored as it leaves: a CNP the
// kernel built, a CE mark set.
const MIRROR_PROGRAMS: [TcProgram; 2] = [
    TcProgram {
        program: programs::MIRROR_IN,
        direction: TcDirection::Ingress,
        first: false,
        pin: "link_mirror_in",
    },
    TcProgram {
        program: programs::MIRROR_OUT,
        direction: TcDirection::Egress,
        first: false,
        pin: "link_mirror_out",
    },
];

impl Attachment {
    /// Every attachment, in attach order.
    pub const ALL: [Attachment; 6] = [
        Attachment::Xdp,
        Attachment::Tc,
        Attachment::Cnp,
        Attachment::Pfc,
        Attachment::Lb,
        Attachment::Mirror,
    ];

    /// The name on the command line and in `status`.
    pub fn name(self) -> &'static str {
        match self {
            Attachment::Xdp => "xdp",
            Attachment::Tc => "tc",
            Attachment::Cnp => "cnp",
            Attachment::Pfc => "pfc",
            Attachment::Lb => "lb",
            Attachment::Mirror => "mirror",
        }
    }

    /// Its bit in `AttachInfo::hooks` (xdp and tc match `Hook::bit`).
    pub fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Its XDP program and link pin, if it has one.
    pub fn xdp_program(self) -> Option<(&'static str, &'static str)> {
        match self {
            Attachment::Xdp => Some((programs::XDP, XDP_PIN)),
            Attachment::Lb => Some((programs::LB, LB_PIN)),
            _ => None,
        }
    }

    /// Its TC programs.
    pub fn tc_programs(self) -> &'static [TcProgram] {
        match self {
            Attachment::Xdp | Attachment::Lb => &[],
            Attachment::Tc => &TC_PROGRAMS,
            Attachment::Cnp | Attachment::Pfc => &EMIT_PROGRAMS,
            Attachment::Mirror => &MIRROR_PROGRAMS,
        }
    }

    /// The link pins of every attachment whose bit is set in `hooks`, each once (`cnp` and
    /// `pfc` share their programs).
    pub fn pins_of(hooks: u32) -> Vec<&'static str> {
        let mut pins: Vec<&'static str> = Attachment::ALL
            .into_iter()
            .filter(|a| hooks & a.bit() != 0)
            .flat_map(Attachment::pins)
            .collect();
        pins.sort();
        pins.dedup();
        pins
    }

    /// The names of its link pins.
    pub fn pins(self) -> Vec<&'static str> {
        self.xdp_program()
            .map(|(_, pin)| pin)
            .into_iter()
            .chain(self.tc_programs().iter().map(|p| p.pin))
            .collect()
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
        assert_eq!(Attachment::Cnp.pins(), ["link_ingress", "link_emit"]);
        assert_eq!(Attachment::Lb.pins(), ["link_lb"]);
        assert_eq!(
            Attachment::Mirror.pins(),
            ["link_mirror_in", "link_mirror_out"]
        );
        assert_eq!(
            Attachment::pins_of(Attachment::Cnp.bit() | Attachment::Pfc.bit()),
            ["link_emit", "link_ingress"]
        );
    }
}
