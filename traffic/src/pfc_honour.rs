//! PFC honoured by the sender: the priority its frames travel in (PCP, or DSCP
//! through the interface's DSCP-to-priority map) and whether the link peer has
//! paused it, read from the pause state the XDP program of an attached
//! interface keeps in the pinned map `PFC_STATE` (see docs/host-pfc.md).
//!
//! The map is opened once and one entry (the sender's priority) is read per
//! refresh: one `bpf` system call at most every [`REFRESH_OPEN`] while the
//! priority runs, every [`REFRESH_PAUSED`] while it is paused (to see an XON
//! early); never one per frame.
//!
//! The pins are found and opened through `sysutil`'s pin layout and `dataplane_common`'s map
//! definitions, as `lossless host` pins them, so the traffic tool does not link the host data
//! plane (whose build embeds the eBPF programs).

use std::time::Duration;

use aya::maps::{Array, MapData};
use dataplane_common::{config::default_dscp_priority, maps, pfc::PfcState, DSCP_VALUES};
use sysutil::pins::PinDir;

use crate::error::{Result, TrafficError};

/// Longest time the sender goes on from a pause state it read while the priority ran.
pub const REFRESH_OPEN: Duration = Duration::from_micros(5);

/// Longest time a paused sender waits before it reads the state again (an XON ends a pause early).
pub const REFRESH_PAUSED: Duration = Duration::from_micros(20);

/// The priority a frame with `pcp` (if tagged) and `dscp` travels in, given a
/// DSCP-to-priority map.
pub fn frame_priority(pcp: Option<u8>, dscp: u8, dscp_priority: &[u32]) -> u32 {
    match pcp {
        Some(pcp) => u32::from(pcp),
        None => dscp_priority
            .get(usize::from(dscp))
            .copied()
            .unwrap_or_else(|| default_dscp_priority(dscp)),
    }
}

/// The pause state of the sender's priority on its interface.
pub struct PfcGate {
    iface: String,
    priority: u32,
    /// The pinned `PFC_STATE` map; `None` when the interface is not attached (nothing to honour).
    state: Option<Array<MapData, PfcState>>,
    /// The entry as last read.
    cached: PfcState,
    /// When (monotonic ns) to read the entry again.
    next_read_ns: u64,
}

impl std::fmt::Debug for PfcGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PfcGate")
            .field("priority", &self.priority)
            .field("attached", &self.state.is_some())
            .field("cached", &self.cached)
            .finish()
    }
}

/// Wraps an error of the pinned maps of `iface`.
fn pinned_error(iface: &str) -> impl FnOnce(anyhow::Error) -> TrafficError + '_ {
    move |e| TrafficError::PinnedMaps {
        iface: iface.to_owned(),
        message: format!("{e:#}"),
    }
}

/// The interface's DSCP-to-priority map, as its pinned `DSCP_PRIO` holds it.
fn read_dscp_priority(dir: &PinDir) -> anyhow::Result<Vec<u32>> {
    let map = dir.open_map(&maps::DSCP_PRIO)?;
    (0..DSCP_VALUES as u32)
        .map(|dscp| Ok(map.get(&dscp, 0)?))
        .collect()
}

impl PfcGate {
    /// The gate of frames with `pcp` and `dscp` on `iface` (in the calling
    /// thread's network namespace and mount of bpffs). An interface that is
    /// not attached with `lossless host attach` has no pause state: its gate never closes.
    pub fn open(iface: &str, pcp: Option<u8>, dscp: u8) -> Result<PfcGate> {
        let dir = PinDir::new(iface).map_err(pinned_error(iface))?;
        if !dir.exists() && dir.legacy().exists() {
            // Pins of a lossless from before namespace keys: they may be another namespace's
            // interface of the same name, and only `host` can tell and move them. Run as on an
            // interface that is not attached, saying so.
            tracing::warn!(
                iface,
                legacy = %dir.legacy().path().display(),
                "pins in the layout of a lossless before namespace keys are not read: pauses are \
                 not honoured; any `lossless host` command on the interface (`lossless host \
                 status IFACE`) moves its own pins to where they are read"
            );
        }
        let default_map: Vec<u32> = (0..64).map(default_dscp_priority).collect();
        if !dir.exists() {
            return Ok(PfcGate {
                iface: iface.to_owned(),
                priority: frame_priority(pcp, dscp, &default_map),
                state: None,
                cached: PfcState::default(),
                next_read_ns: 0,
            });
        }
        let dscp_priority = read_dscp_priority(&dir).map_err(pinned_error(iface))?;
        let map = dir
            .open_map(&maps::PFC_STATE)
            .map_err(pinned_error(iface))?;
        Ok(PfcGate {
            iface: iface.to_owned(),
            priority: frame_priority(pcp, dscp, &dscp_priority),
            state: Some(map),
            cached: PfcState::default(),
            next_read_ns: 0,
        })
    }

    /// The priority the sender's frames travel in.
    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// Whether the interface is attached, so there is a pause state to honour.
    pub fn attached(&self) -> bool {
        self.state.is_some()
    }

    /// Until when (monotonic ns) the priority is paused at `now_ns`, or `None`
    /// if it may send; the state is read again only when the last reading is
    /// older than [`REFRESH_OPEN`] (running) or [`REFRESH_PAUSED`] (paused).
    pub fn paused_until(&mut self, now_ns: u64) -> Result<Option<u64>> {
        let Some(map) = self.state.as_ref() else {
            return Ok(None);
        };
        if now_ns >= self.next_read_ns {
            self.cached = map
                .get(&self.priority, 0)
                .map_err(|e| TrafficError::PinnedMaps {
                    iface: self.iface.clone(),
                    message: format!("reading {}[{}]: {e}", maps::PFC_STATE.name(), self.priority),
                })?;
            let refresh = if self.cached.is_paused(now_ns) {
                REFRESH_PAUSED
            } else {
                REFRESH_OPEN
            };
            self.next_read_ns = now_ns + refresh.as_nanos() as u64;
        }
        Ok(self
            .cached
            .is_paused(now_ns)
            .then_some(self.cached.paused_until_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sysutil::clock::monotonic_ns;

    #[test]
    fn pcp_wins_over_dscp() {
        let map: Vec<u32> = (0..64).map(|d| d as u32 % 8).collect();
        assert_eq!(frame_priority(Some(5), 26, &map), 5);
        assert_eq!(frame_priority(None, 26, &map), 2);
        assert_eq!(frame_priority(None, 26, &[]), 3);
        assert_eq!(frame_priority(None, 48, &[]), 6);
    }

    #[test]
    fn an_interface_that_is_not_attached_never_pauses() {
        let mut gate = PfcGate::open("nonexistent0", None, 26).unwrap();
        assert!(!gate.attached());
        assert_eq!(gate.priority(), 3);
        assert_eq!(gate.paused_until(monotonic_ns()).unwrap(), None);
    }
}
