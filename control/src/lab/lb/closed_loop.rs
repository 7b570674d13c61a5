//! The lab's closed loop, as a lossless fabric runs it. Each spine models its path's queue at
//! its end of the uplink: a phantom queue drained at the path's rate marks CE by RED between
//! Kmin and Kmax, and an ingress buffer drained at the same rate sends a PAUSE at XOFF. The
//! balancer forwards with XDP and so has no buffer of its own: it relays every PAUSE from an
//! uplink to every downlink (`pfc.relay`), as a switch whose ingress fills with frames for a
//! paused port pauses that ingress. The senders honour the pauses and run DCQCN per flow; the
//! receiver's kernel answers CE marks with CNPs. Also what the loop did during a run.

use anyhow::bail;
use serde::Serialize;

use super::topology::{Port, Topology};
use crate::lab::harness::{ecn_marking, LabPorts, PRIORITY};
use host::pinned_maps::PinnedMaps;
use hostconfig::{
    attachment::Attachment,
    config::{HostConfig, Setting},
};

/// Options of the loop (`lossless lab lb`).
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct LoopArgs {
    /// Run without flow control, as the lab first did: no ECN, no PFC, no DCQCN. A path given
    /// more than it carries drops, and a flow that lost a frame never completes: what each
    /// policy costs when nothing pushes back.
    #[arg(long)]
    pub open_loop: bool,
    /// RED Kmin of the spines' phantom queues, bytes.
    #[arg(long, default_value_t = 20_000)]
    pub kmin: u32,
    /// RED Kmax, bytes (at most --xoff: marks come before pauses).
    #[arg(long, default_value_t = 100_000)]
    pub kmax: u32,
    /// RED Pmax.
    #[arg(long, default_value_t = 0.2)]
    pub pmax: f64,
    /// The spines' PFC XOFF, bytes of their ingress buffer: a PAUSE goes to the balancer,
    /// which relays it to every sender. What arrives after it lands in the headroom,
    /// --buffer minus this.
    #[arg(long, default_value_t = 125_000)]
    pub xoff: u32,
    /// The spines' PFC XON, bytes: each PAUSE lasts about as long as the path takes to drain
    /// from XOFF to here.
    #[arg(long, default_value_t = 75_000)]
    pub xon: u32,
}

impl LoopArgs {
    /// Checks the thresholds against each other and against the spines' `buffer_bytes`.
    pub fn validate(&self, buffer_bytes: u64) -> anyhow::Result<()> {
        if self.open_loop {
            return Ok(());
        }
        if !(self.xon < self.xoff && u64::from(self.xoff) < buffer_bytes) {
            bail!(
                "--xon {} < --xoff {} < --buffer {buffer_bytes} must hold (the headroom above \
                 XOFF takes what is in flight when the pause goes out)",
                self.xon,
                self.xoff
            );
        }
        if self.kmin >= self.kmax {
            bail!("--kmin {} must be below --kmax {}", self.kmin, self.kmax);
        }
        if !(self.pmax > 0.0 && self.pmax <= 1.0) {
            bail!("--pmax {} is not in (0, 1]", self.pmax);
        }
        if self.kmax > self.xoff {
            bail!(
                "--kmax {} is above --xoff {}: ECN must mark before PFC pauses",
                self.kmax,
                self.xoff
            );
        }
        Ok(())
    }
}

/// The loop's data planes, to read what they did.
pub struct LoopMaps {
    spines: Vec<PinnedMaps>,
    uplinks: Vec<PinnedMaps>,
    senders: Vec<PinnedMaps>,
    receiver: PinnedMaps,
}

/// What the loop did, cumulative or over a run ([`LoopCounts::since`]).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LoopCounts {
    /// PAUSE frames the spines sent to the balancer (first ones and refreshes).
    pub pauses_sent: u64,
    /// PAUSE frames the balancer relayed to its downlinks.
    pub pauses_relayed: u64,
    /// Time the senders' priority was paused, summed over the senders, ms.
    pub paused_ms: f64,
    /// Frames the spines marked CE.
    pub ecn_marked: u64,
    /// CNPs the receiver's kernel sent.
    pub cnps_sent: u64,
}

impl LoopCounts {
    /// The counts since `before`.
    pub fn since(&self, before: &LoopCounts) -> LoopCounts {
        LoopCounts {
            pauses_sent: self.pauses_sent - before.pauses_sent,
            pauses_relayed: self.pauses_relayed - before.pauses_relayed,
            paused_ms: self.paused_ms - before.paused_ms,
            ecn_marked: self.ecn_marked - before.ecn_marked,
            cnps_sent: self.cnps_sent - before.cnps_sent,
        }
    }
}

/// One quantum of pause is 512 bit times at this speed on every host of the loop (the spines
/// that ask and the senders that honour): the fastest path's rate.
fn quantum_speed_bps(topology: &Topology) -> u64 {
    topology
        .uplinks
        .iter()
        .map(|u| u.rate_bps)
        .max()
        .unwrap_or(1)
}

/// Quanta at `quantum_bps` for as long as a path of `rate_bps` takes to drain `bytes`.
fn pause_quanta(bytes: u32, rate_bps: u64, quantum_bps: u64) -> u32 {
    let quanta = u128::from(bytes) * 8 * u128::from(quantum_bps) / (u128::from(rate_bps) * 512);
    quanta.clamp(1, u128::from(u16::MAX)) as u32
}

/// Attaches the loop's data planes to every spine, uplink, sender and the receiver.
pub fn attach(topology: &Topology, args: &LoopArgs) -> anyhow::Result<LoopMaps> {
    let quantum_bps = quantum_speed_bps(topology);
    let link_speed = Setting::LinkSpeedBps(quantum_bps);
    let mut spines = Vec::new();
    for (j, path) in topology.uplinks.iter().enumerate() {
        let mut config = HostConfig::default();
        config.set_all(ecn_marking(path.rate_bps, args.kmin, args.kmax, args.pmax))?;
        config.set_all([
            link_speed.clone(),
            Setting::PfcEnabled(PRIORITY, true),
            Setting::PfcXoffBytes(PRIORITY, args.xoff),
            Setting::PfcXonBytes(PRIORITY, args.xon),
            Setting::PfcQuanta(
                PRIORITY,
                pause_quanta(args.xoff - args.xon, path.rate_bps, quantum_bps),
            ),
            Setting::PfcDrainBps(PRIORITY, path.rate_bps),
        ])?;
        spines.push(topology.attach(
            Port::SpineIngress(j),
            vec![Attachment::Xdp, Attachment::Pfc],
            config,
        )?);
    }
    let downlinks: Vec<String> = topology
        .senders
        .iter()
        .map(|l| l.downlink.ifname.clone())
        .collect();
    let mut uplinks = Vec::new();
    for j in 0..topology.uplinks.len() {
        let mut config = HostConfig::default();
        config.set_all([link_speed.clone(), Setting::PfcRelay(downlinks.clone())])?;
        uplinks.push(topology.attach(Port::Uplink(j), vec![Attachment::Xdp], config)?);
    }
    let mut senders = Vec::new();
    for i in 0..topology.senders.len() {
        let mut config = HostConfig::default();
        config.set(link_speed.clone())?;
        senders.push(topology.attach(Port::Sender(i), vec![Attachment::Xdp], config)?);
    }
    let receiver = topology.attach(Port::Receiver, vec![Attachment::Cnp], HostConfig::default())?;
    Ok(LoopMaps {
        spines,
        uplinks,
        senders,
        receiver,
    })
}

impl LoopMaps {
    /// The loop's counters now.
    pub fn read(&self) -> anyhow::Result<LoopCounts> {
        let mut counts = LoopCounts::default();
        for spine in &self.spines {
            counts.pauses_sent += spine.read_pfc_tx_counters()?.pause_tx[PRIORITY];
            counts.ecn_marked += spine
                .read_counters(dataplane_common::Hook::Xdp)?
                .per_priority[PRIORITY]
                .ecn_marked;
        }
        for uplink in &self.uplinks {
            counts.pauses_relayed += uplink.read_pfc_tx_counters()?.relayed[PRIORITY];
        }
        let now = sysutil::clock::monotonic_ns();
        for sender in &self.senders {
            counts.paused_ms += sender.read_pfc_states()?[PRIORITY].paused_ns(now) as f64 / 1e6;
        }
        counts.cnps_sent = self.receiver.read_cnp_counters()?.cnp_sent;
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_lasts_as_long_as_the_path_drains_from_xoff_to_xon() {
        // 50 KB at 25 Mb/s is 16 ms; a quantum at 50 Mb/s is 10.24 µs: 1562 quanta.
        assert_eq!(pause_quanta(50_000, 25_000_000, 50_000_000), 1562);
        // Clamped into 1..=65535.
        assert_eq!(pause_quanta(1, 100_000_000_000, 1), 1);
        assert_eq!(pause_quanta(u32::MAX, 1, 100_000_000_000), 65535);
    }

    #[test]
    fn thresholds_are_checked() {
        let args = LoopArgs {
            open_loop: false,
            kmin: 20_000,
            kmax: 100_000,
            pmax: 0.2,
            xoff: 125_000,
            xon: 75_000,
        };
        assert!(args.validate(250_000).is_ok());
        assert!(args.validate(125_000).is_err(), "no headroom");
        let late_marks = LoopArgs {
            kmax: 130_000,
            ..args.clone()
        };
        assert!(late_marks.validate(250_000).is_err());
        let inverted = LoopArgs {
            kmin: 100_000,
            ..args.clone()
        };
        assert!(inverted.validate(250_000).is_err());
        let no_marks = LoopArgs {
            pmax: 0.0,
            ..args.clone()
        };
        assert!(no_marks.validate(250_000).is_err());
        let open = LoopArgs {
            open_loop: true,
            xon: 200_000,
            ..args
        };
        assert!(open.validate(1).is_ok());
    }
}
