//! The class of the frames a command sends (`--dscp`, `--pcp`, `--ecn`), shared by `traffic
//! send` and `traffic collective`.

use clap::{Args, ValueEnum};
use wire::ip::Ecn;

/// The ECN codepoint of sent frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EcnArg {
    /// ECT(0).
    Ect0,
    /// ECT(1).
    Ect1,
    /// Not ECN-capable.
    NotEct,
    /// Congestion experienced: as if marked on the way (drives a notification point without a
    /// congested queue).
    Ce,
}

impl From<EcnArg> for Ecn {
    fn from(arg: EcnArg) -> Ecn {
        match arg {
            EcnArg::Ect0 => Ecn::Ect0,
            EcnArg::Ect1 => Ecn::Ect1,
            EcnArg::NotEct => Ecn::NotEct,
            EcnArg::Ce => Ecn::Ce,
        }
    }
}

/// The class of the frames a command sends: DSCP, 802.1p priority, ECN.
#[derive(Debug, Args)]
pub struct FrameClassArgs {
    /// DSCP of the frames.
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// 802.1p priority: adds an 802.1Q tag (VLAN 0) with this PCP.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub pcp: Option<u8>,
    /// ECN codepoint of the (data) frames.
    #[arg(long, value_enum, default_value = "ect0")]
    pub ecn: EcnArg,
}
