//! `status`: which interfaces are attached, in which network namespace, how, with which
//! programs and configuration; and the leftovers of attaches and detaches (in progress, or
//! killed).

use aya::programs::links::{FdLink, PinnedLink};
use dataplane_common::config::AttachInfo;
use serde::Serialize;

use crate::{
    lifecycle::{self, Owner, RootLock},
    pinned_maps::PinnedMaps,
};
use hostconfig::{attachment::Attachment, config::ConfigView};
use sysutil::{
    namespace::{NetnsId, NetnsView},
    pins::{Kind, PinDir},
};

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
    /// Its network namespace; `null` for pins of a lossless before namespace keys, not yet
    /// adopted by a command in their namespace.
    pub netns: Option<NetnsView>,
    /// `attached`.
    pub state: &'static str,
    /// Its index when attached.
    pub ifindex: u32,
    /// `native`, `skb`, or `none` when XDP is not attached.
    pub xdp_mode: &'static str,
    /// The attached hooks.
    pub hooks: Vec<HookStatus>,
    /// The live configuration.
    pub config: ConfigView,
}

/// A hidden pin directory: an attach or detach in progress, or what a killed one left.
#[derive(Debug, Serialize)]
pub struct Leftover {
    /// The interface name.
    pub interface: String,
    /// Its network namespace (`null`: the layout before namespace keys).
    pub netns: Option<NetnsView>,
    /// `attaching` or `detaching` while its command runs; `stale` once that was killed.
    pub state: &'static str,
    /// What the command was doing: `attaching` or `detaching`.
    pub purpose: String,
    /// The process still running it, if any.
    pub owner_pid: Option<u32>,
    /// The directory.
    pub pin_dir: String,
    /// The link pins in it (each one holds a program on the interface).
    pub links: Vec<String>,
}

/// One line of `status`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Entry {
    /// An attached interface.
    Attached(InterfaceStatus),
    /// A hidden directory.
    Leftover(Leftover),
}

impl Entry {
    /// The namespace of the entry.
    pub fn netns(&self) -> Option<&NetnsView> {
        match self {
            Entry::Attached(s) => s.netns.as_ref(),
            Entry::Leftover(l) => l.netns.as_ref(),
        }
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        match self {
            Entry::Attached(s) => s.summary(),
            Entry::Leftover(l) => l.summary(),
        }
    }
}

/// Every attached interface and every leftover, of every namespace: the calling thread's
/// namespace first. One detached while this runs is left out; one whose pins cannot be read
/// (another version of lossless attached it) is left out with a warning.
pub fn all() -> anyhow::Result<Vec<Entry>> {
    let current = NetnsId::current().ok();
    let mut entries = Vec::new();
    let Some(root) = RootLock::shared()? else {
        return Ok(entries);
    };
    for (dir, kind) in PinDir::all()? {
        let netns = dir.netns().map(|n| n.view(current));
        match kind {
            Kind::Attached => match InterfaceStatus::read_dir(&dir, netns) {
                Ok(status) => entries.push(Entry::Attached(status)),
                Err(_) if !dir.exists() => {}
                Err(e) => tracing::warn!("{}: cannot read its pins: {e:#}", dir.path().display()),
            },
            Kind::Hidden(purpose) => {
                let Ok(owner) = lifecycle::owner(&dir, &root) else {
                    continue; // gone meanwhile
                };
                entries.push(Entry::Leftover(Leftover::new(&dir, netns, purpose, owner)));
            }
        }
    }
    entries.sort_by_key(|e| !e.netns().is_some_and(|n| n.current));
    Ok(entries)
}

/// The interfaces attached in the calling thread's network namespace, by name.
pub fn attached_here() -> anyhow::Result<Vec<String>> {
    Ok(all()?
        .into_iter()
        .filter_map(|entry| match entry {
            Entry::Attached(s) if s.netns.as_ref().is_some_and(|n| n.current) => Some(s.interface),
            _ => None,
        })
        .collect())
}

impl Leftover {
    fn new(dir: &PinDir, netns: Option<NetnsView>, purpose: String, owner: Owner) -> Self {
        let (state, owner_pid) = match owner {
            Owner::Running(pid) if purpose == lifecycle::DETACHING => ("detaching", pid),
            Owner::Running(pid) => ("attaching", pid),
            Owner::Gone => ("stale", None),
        };
        let mut links: Vec<String> = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(lifecycle::LINK_PREFIX))
            .collect();
        links.sort();
        Leftover {
            interface: dir.interface().to_owned(),
            netns,
            state,
            purpose,
            owner_pid,
            pin_dir: dir.path().display().to_string(),
            links,
        }
    }

    /// A short human summary.
    pub fn summary(&self) -> String {
        let links = if self.links.is_empty() {
            "no link".to_owned()
        } else {
            self.links.join(", ")
        };
        let what = match (self.state, self.owner_pid) {
            ("stale", _) => format!(
                "left by a killed {}: the next `lossless host attach {}` or `detach {}` in its \
                 namespace removes it",
                self.purpose.trim_end_matches("ing"),
                self.interface,
                self.interface
            ),
            (_, Some(pid)) => format!("in progress (process {pid})"),
            (_, None) => "in progress".to_owned(),
        };
        format!(
            "{} ({}) {}: {what}\n  {} holds {links}\n",
            self.interface,
            netns_text(self.netns.as_ref()),
            self.state,
            self.pin_dir
        )
    }
}

/// How a namespace reads in the text summary.
fn netns_text(netns: Option<&NetnsView>) -> String {
    match netns {
        Some(netns) => format!("netns {netns}"),
        None => "netns unknown: pinned by a lossless before namespace keys".to_owned(),
    }
}

impl InterfaceStatus {
    /// Reads the status of `interface`, attached in the calling thread's namespace.
    pub fn read(interface: &str) -> anyhow::Result<Self> {
        let maps = PinnedMaps::open(interface)?;
        let netns = maps.dir().netns().map(|n| n.view(Some(n)));
        Self::from_maps(&maps, netns)
    }

    /// Reads the status of the interface pinned in `dir`.
    fn read_dir(dir: &PinDir, netns: Option<NetnsView>) -> anyhow::Result<Self> {
        Self::from_maps(&PinnedMaps::at(dir.clone()), netns)
    }

    fn from_maps(maps: &PinnedMaps, netns: Option<NetnsView>) -> anyhow::Result<Self> {
        let info = maps.read_attach_info()?;
        let mut hooks = Vec::new();
        for pin in Attachment::pins_of(info.hooks) {
            let link = FdLink::from(PinnedLink::from_pin(maps.dir().link(pin))?);
            let link_info = link.info()?;
            hooks.push(HookStatus {
                hook: pin.trim_start_matches(lifecycle::LINK_PREFIX),
                program_id: link_info.program_id(),
                link_id: link_info.id(),
            });
        }
        Ok(InterfaceStatus {
            interface: maps.dir().interface().to_owned(),
            netns,
            state: "attached",
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

    /// A short human summary.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} (ifindex {}, {}) xdp mode {}\n",
            self.interface,
            self.ifindex,
            netns_text(self.netns.as_ref()),
            self.xdp_mode
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
