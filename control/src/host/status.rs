//! `status`: which interfaces are attached, how, with which programs and configuration.

use aya::programs::links::{FdLink, PinnedLink};
use dataplane_common::config::AttachInfo;
use serde::Serialize;

use super::{attachment::Attachment, config::ConfigView, pinned_maps::PinnedMaps, pins::PinDir};

/// One attached program, by its link.
#[derive(Debug, Serialize)]
pub struct HookStatus {
    /// `xdp`, `tc`, `ingress` or `emit` (the link pin's name without `link_`).
    pub hook: &'static str,
    /// Kernel id of the attached program.
    pub program_id: u32,
    /// Kernel id of the pinned link.
    pub link_id: u32,
}

/// One attached interface.
#[derive(Debug, Serialize)]
pub struct InterfaceStatus {
    /// The interface name.
    pub interface: String,
    /// Its index when attached.
    pub ifindex: u32,
    /// `native`, `skb`, or `none` when XDP is not attached.
    pub xdp_mode: &'static str,
    /// The attached hooks.
    pub hooks: Vec<HookStatus>,
    /// The live configuration.
    pub config: ConfigView,
}

impl InterfaceStatus {
    /// Reads the status of one attached interface from its pins.
    pub fn read(interface: &str) -> anyhow::Result<Self> {
        let maps = PinnedMaps::open(interface)?;
        let info = maps.read_attach_info()?;
        let mut hooks = Vec::new();
        for pin in Attachment::pins_of(info.hooks) {
            let link = FdLink::from(PinnedLink::from_pin(maps.dir().link(pin))?);
            let link_info = link.info()?;
            hooks.push(HookStatus {
                hook: pin.trim_start_matches("link_"),
                program_id: link_info.program_id(),
                link_id: link_info.id(),
            });
        }
        Ok(InterfaceStatus {
            interface: interface.to_owned(),
            ifindex: info.ifindex,
            xdp_mode: match info.xdp_mode {
                AttachInfo::MODE_NATIVE => "native",
                AttachInfo::MODE_SKB => "skb",
                _ => "none",
            },
            hooks,
            config: maps.read_config()?.view(),
        })
    }

    /// Every attached interface. One detached while this runs is left out; one whose pins
    /// cannot be read (another version of lossless attached it) is left out with a warning.
    pub fn all() -> anyhow::Result<Vec<Self>> {
        let mut all = Vec::new();
        for dir in PinDir::all()? {
            match Self::read(dir.interface()) {
                Ok(status) => all.push(status),
                Err(_) if !dir.exists() => {}
                Err(e) => tracing::warn!("{}: cannot read its pins: {e:#}", dir.interface()),
            }
        }
        Ok(all)
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} (ifindex {}) xdp mode {}\n",
            self.interface, self.ifindex, self.xdp_mode
        );
        for hook in &self.hooks {
            out += &format!(
                "  {:<4} program id {:<6} link id {}\n",
                hook.hook, hook.program_id, hook.link_id
            );
        }
        let lb = &self.config.lb;
        if self.hooks.iter().any(|h| h.hook == "lb") {
            out += &format!(
                "  lb policy {} uplinks [{}] prefixes [{}] flowlet timeout {} µs\n",
                lb.policy,
                lb.uplinks.join(","),
                lb.prefixes.join(","),
                lb.flowlet_timeout_us
            );
        }
        out += &format!("  roce_only {}\n", self.config.roce_only);
        for p in self.config.ecn.iter() {
            out += &format!(
                "  prio {} {:<8} kmin {:>9} B  kmax {:>9} B  pmax {:.4}  rate {} b/s\n",
                p.priority,
                if p.enabled { "marking" } else { "off" },
                p.kmin_bytes,
                p.kmax_bytes,
                p.pmax,
                p.rate_bps
            );
        }
        out
    }
}
