//! Reconciling: what the agent's file asks for against what the kernel and bpffs hold, one
//! interface at a time. [`plan`] decides (pure, tested here); [`Reconciler::run`] looks and
//! acts through the same attach, detach and config writes as `lossless host`.
//!
//! Pinned programs are adopted, never reloaded, when they run on the interface of that name
//! with the hooks and mode asked for: a restarted agent keeps counters, queues and flowlets.
//! A changed profile is written live (as `host set`); changed hooks or mode, or an interface
//! deleted and made again (a new ifindex), are detached and attached anew.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use dataplane_common::config::AttachInfo;

use host::{
    attach::{self, AttachRequest},
    pinned_maps::PinnedMaps,
};
use hostconfig::agent::{AgentConfig, InterfaceSpec};
use hostconfig::{attachment::Mode, config::HostConfig};
use sysutil::{interface::ifindex, pins::PinDir};

/// What is pinned for one interface name in the agent's namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct Pinned {
    /// The index of the interface the programs were attached to.
    pub ifindex: u32,
    /// Attached hooks (`AttachInfo` bits).
    pub hooks: u32,
    /// XDP mode (`AttachInfo::MODE_*`).
    pub xdp_mode: u32,
    /// The configuration the programs run with.
    pub config: HostConfig,
}

/// What to do for one interface name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: attached as asked (or not ours).
    Keep,
    /// Asked for, not there yet: wait for it to appear.
    Wait,
    /// Load and attach.
    Attach,
    /// Write the profile into the pinned maps.
    Configure,
    /// Detach, then attach: the pins do not match (the reason).
    Reattach(String),
    /// Detach (the reason).
    Detach(String),
}

/// Decides for one name: `want` from the file, `present` its ifindex if the interface exists,
/// `pinned` what bpffs holds for it, `managed` whether the agent attached or adopted it before.
pub fn plan(
    want: Option<&InterfaceSpec>,
    present: Option<u32>,
    pinned: Option<&Pinned>,
    managed: bool,
) -> Action {
    match (want, present, pinned) {
        (None, _, Some(_)) if managed => Action::Detach("no longer in the config".into()),
        (None, _, _) => Action::Keep,
        (Some(_), None, None) => Action::Wait,
        (Some(_), None, Some(_)) => Action::Detach("the interface is gone".into()),
        (Some(_), Some(_), None) => Action::Attach,
        (Some(want), Some(ifindex), Some(pinned)) => {
            let hooks = want.hooks.iter().fold(0, |bits, h| bits | h.bit());
            let xdp = want.hooks.iter().any(|h| h.xdp_program().is_some());
            let mode_ok = match (want.mode, pinned.xdp_mode) {
                _ if !xdp => true,
                (Mode::Auto, mode) => {
                    mode == AttachInfo::MODE_NATIVE || mode == AttachInfo::MODE_SKB
                }
                (Mode::Native, mode) => mode == AttachInfo::MODE_NATIVE,
                (Mode::Skb, mode) => mode == AttachInfo::MODE_SKB,
            };
            if pinned.ifindex != ifindex {
                Action::Reattach(format!(
                    "pinned for ifindex {}, the interface is now {ifindex}",
                    pinned.ifindex
                ))
            } else if pinned.hooks != hooks || !mode_ok {
                Action::Reattach("other hooks or XDP mode asked for".into())
            } else if pinned.config != want.config {
                Action::Configure
            } else {
                Action::Keep
            }
        }
    }
}

/// One interface's state after a reconcile, for `/healthz` and the agent's metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Attached as asked.
    Attached,
    /// Named in the file, not present on the host.
    Absent,
    /// The last attempt failed (the error).
    Failed(String),
}

/// The agent's memory between reconciles: which names it manages.
#[derive(Default)]
pub struct Reconciler {
    managed: BTreeSet<String>,
}

impl Reconciler {
    /// Brings every interface of `config` (and every one it managed before and `config` no
    /// longer names) to what `config` asks. Returns each configured interface's state and the
    /// number of failed actions. Runs in the calling thread's namespace.
    pub fn run(&mut self, config: &AgentConfig) -> (BTreeMap<String, State>, u64) {
        let names: BTreeSet<String> = config
            .interfaces
            .keys()
            .chain(self.managed.iter())
            .cloned()
            .collect();
        let mut states = BTreeMap::new();
        let mut failures = 0;
        for name in names {
            let want = config.interfaces.get(&name);
            let result = self.reconcile(&name, want);
            if let Err(error) = &result {
                failures += 1;
                tracing::error!("{name}: {error:#}");
            }
            if want.is_some() {
                states.insert(
                    name,
                    match result {
                        Ok(state) => state,
                        Err(error) => State::Failed(format!("{error:#}")),
                    },
                );
            }
        }
        (states, failures)
    }

    /// Detaches every interface the agent manages (`detach_on_exit`).
    pub fn detach_all(&mut self) {
        for name in std::mem::take(&mut self.managed) {
            match attach::detach(&name) {
                Ok(_) => tracing::info!("{name}: detached"),
                Err(error) => tracing::error!("{name}: {error:#}"),
            }
        }
    }

    fn reconcile(&mut self, name: &str, want: Option<&InterfaceSpec>) -> anyhow::Result<State> {
        let present = ifindex(name).ok();
        let pinned = read_pinned(name)?;
        let managed = self.managed.contains(name);
        let action = plan(want, present, pinned.as_ref(), managed);
        if !managed && want.is_some() && matches!(action, Action::Keep | Action::Configure) {
            if let Some(pinned) = &pinned {
                tracing::info!(
                    "{name}: adopted the pinned programs (ifindex {})",
                    pinned.ifindex
                );
            }
        }
        match &action {
            Action::Keep | Action::Wait => {}
            Action::Attach => self.attach(want.expect("planned for a wanted interface"))?,
            Action::Configure => {
                PinnedMaps::open(name)?.write_config(&want.expect("wanted").config)?;
                tracing::info!("{name}: configuration written (its profile changed)");
            }
            Action::Reattach(reason) => {
                tracing::info!("{name}: reattaching: {reason}");
                attach::detach(name)?;
                self.attach(want.expect("wanted"))?;
            }
            Action::Detach(reason) => {
                attach::detach(name)?;
                tracing::info!("{name}: detached ({reason})");
            }
        }
        if want.is_none() {
            self.managed.remove(name);
            return Ok(State::Absent);
        }
        self.managed.insert(name.to_owned());
        Ok(if present.is_some() {
            State::Attached
        } else {
            State::Absent
        })
    }

    fn attach(&mut self, spec: &InterfaceSpec) -> anyhow::Result<()> {
        let attached = attach::attach(&AttachRequest {
            interface: spec.name.clone(),
            mode: spec.mode,
            attachments: spec.hooks.clone(),
            config: spec.config.clone(),
        })?;
        for recovered in &attached.recovered {
            tracing::info!("{}: {}", spec.name, recovered.describe());
        }
        self.managed.insert(spec.name.clone());
        let hooks: Vec<String> = spec
            .hooks
            .iter()
            .map(|h| format!("{h:?}").to_lowercase())
            .collect();
        tracing::info!(
            "{}: attached ({}; profile {})",
            spec.name,
            hooks.join(", "),
            spec.profile.as_deref().unwrap_or("default")
        );
        Ok(())
    }
}

/// What bpffs holds for `name` in the calling thread's namespace, if it is attached.
fn read_pinned(name: &str) -> anyhow::Result<Option<Pinned>> {
    let dir = PinDir::new(name)?;
    if !dir.exists() {
        return Ok(None);
    }
    let maps = PinnedMaps::at(dir);
    let info = maps
        .read_attach_info()
        .with_context(|| format!("reading the pins of {name}"))?;
    Ok(Some(Pinned {
        ifindex: info.ifindex,
        hooks: info.hooks,
        xdp_mode: info.xdp_mode,
        config: maps.read_config()?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hostconfig::attachment::Attachment;

    fn spec(hooks: &[Attachment], mode: Mode) -> InterfaceSpec {
        InterfaceSpec {
            name: "eth0".into(),
            hooks: hooks.to_vec(),
            mode,
            profile: None,
            config: HostConfig::default(),
        }
    }

    fn pinned(ifindex: u32, hooks: &[Attachment], xdp_mode: u32) -> Pinned {
        Pinned {
            ifindex,
            hooks: hooks.iter().fold(0, |b, h| b | h.bit()),
            xdp_mode,
            config: HostConfig::default(),
        }
    }

    const NATIVE: u32 = AttachInfo::MODE_NATIVE;
    const SKB: u32 = AttachInfo::MODE_SKB;

    #[test]
    fn attaches_adopts_and_waits() {
        let want = spec(&[Attachment::Xdp, Attachment::Cnp], Mode::Auto);
        assert_eq!(plan(Some(&want), None, None, false), Action::Wait);
        assert_eq!(plan(Some(&want), Some(4), None, false), Action::Attach);
        let same = pinned(4, &[Attachment::Xdp, Attachment::Cnp], SKB);
        assert_eq!(plan(Some(&want), Some(4), Some(&same), false), Action::Keep);
        let mut profile = want.clone();
        profile.config.settings.link_speed_bps += 1;
        assert_eq!(
            plan(Some(&profile), Some(4), Some(&same), true),
            Action::Configure
        );
    }

    #[test]
    fn reattaches_what_does_not_match() {
        let want = spec(&[Attachment::Xdp], Mode::Native);
        for pinned in [
            pinned(5, &[Attachment::Xdp], NATIVE),
            pinned(4, &[Attachment::Xdp, Attachment::Tc], NATIVE),
            pinned(4, &[Attachment::Xdp], SKB),
        ] {
            assert!(matches!(
                plan(Some(&want), Some(4), Some(&pinned), true),
                Action::Reattach(_)
            ));
        }
        // Without an XDP hook the mode does not matter.
        let tc = spec(&[Attachment::Tc], Mode::Native);
        let pinned_tc = pinned(4, &[Attachment::Tc], 0);
        assert_eq!(
            plan(Some(&tc), Some(4), Some(&pinned_tc), true),
            Action::Keep
        );
    }

    #[test]
    fn detaches_only_its_own() {
        let other = pinned(4, &[Attachment::Xdp], NATIVE);
        assert_eq!(plan(None, Some(4), Some(&other), false), Action::Keep);
        assert!(matches!(
            plan(None, Some(4), Some(&other), true),
            Action::Detach(_)
        ));
        let want = spec(&[Attachment::Xdp], Mode::Auto);
        assert!(matches!(
            plan(Some(&want), None, Some(&other), true),
            Action::Detach(_)
        ));
        assert_eq!(plan(None, None, None, true), Action::Keep);
    }
}
