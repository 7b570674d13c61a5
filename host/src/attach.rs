//! `attach` and `detach`: load the programs, pin their maps and links, and take them away.

use anyhow::{bail, Context as _};
use aya::{
    programs::{
        links::FdLink,
        tc::{TcAttachOptions, TcAttachType},
        LinkOrder, SchedClassifier, Xdp, XdpMode,
    },
    Ebpf, EbpfLoader,
};
use dataplane_common::{config::AttachInfo, maps, programs};

use crate::{
    interface_programs,
    lifecycle::{self, Recovered},
    pinned_maps::PinnedMaps,
};
use hostconfig::{
    attachment::{Attachment, Mode, TcDirection, TcProgram},
    config::HostConfig,
};
use sysutil::{interface::ifindex, pins::PinDir};

/// The eBPF object built by `build.rs`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dataplane-ebpf"));

/// What to attach, where, with which configuration.
pub struct AttachRequest {
    /// The interface.
    pub interface: String,
    /// The XDP mode.
    pub mode: Mode,
    /// What to attach.
    pub attachments: Vec<Attachment>,
    /// The configuration to start with.
    pub config: HostConfig,
}

/// What `attach` did: what it found and removed first, and what it recorded.
pub struct Attached {
    /// The interface's pin directory (open its maps with `PinnedMaps::at` from any thread).
    pub dir: PinDir,
    /// Leftovers of killed attaches or detaches of the interface that were removed first.
    pub recovered: Vec<Recovered>,
    /// What was attached.
    pub info: AttachInfo,
}

/// Loads the programs, attaches the requested hooks to the interface, pins everything under
/// its pin directory, and returns. Refuses an interface that is already attached, and first
/// removes what a killed attach or detach of it left (`lifecycle.rs`).
pub fn attach(request: &AttachRequest) -> anyhow::Result<Attached> {
    request.config.validate()?;
    if request.attachments.contains(&Attachment::Xdp)
        && request.attachments.contains(&Attachment::Lb)
    {
        bail!(
            "--hooks xdp and lb both need the XDP hook of {}; choose one",
            request.interface
        );
    }
    let ifindex = ifindex(&request.interface)?;
    let dir = PinDir::new(&request.interface)?;
    // Build in a hidden directory and rename it into place at the end, so `status` and
    // `stats` see an interface either whole or not at all.
    let (staging, recovered) = lifecycle::begin_attach(&dir)?;
    test_pause(Stage::Staged);
    // From here on, a failure must leave nothing behind.
    match attach_into(request, staging.dir(), ifindex) {
        Ok(info) => {
            test_pause(Stage::Recorded);
            staging.commit(&dir)?;
            Ok(Attached {
                dir,
                recovered,
                info,
            })
        }
        Err(error) => {
            if let Err(cleanup) = staging.remove() {
                tracing::warn!("{}: cleaning up: {cleanup:#}", request.interface);
            }
            Err(error)
        }
    }
}

/// A point in `attach` where a test can stop it (to kill it there): with
/// `LOSSLESS_TEST_PAUSE_ATTACH=NAME` in the environment, attach prints
/// `attach paused at NAME` on stderr there and waits until it is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The staging directory is made and claimed; nothing pinned.
    Staged,
    /// The maps are pinned and configured.
    MapsPinned,
    /// An XDP or TC program is attached and its link not pinned yet.
    LinkAttached,
    /// A link is pinned.
    LinkPinned,
    /// Everything is attached and recorded; the staging directory is not in place yet.
    Recorded,
}

/// The environment variable of [`Stage`].
pub const PAUSE_ENV: &str = "LOSSLESS_TEST_PAUSE_ATTACH";

impl Stage {
    /// Every stage, in the order attach reaches them.
    pub const ALL: [Stage; 5] = [
        Stage::Staged,
        Stage::MapsPinned,
        Stage::LinkAttached,
        Stage::LinkPinned,
        Stage::Recorded,
    ];

    /// Its name in [`PAUSE_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            Stage::Staged => "staged",
            Stage::MapsPinned => "maps-pinned",
            Stage::LinkAttached => "link-attached",
            Stage::LinkPinned => "link-pinned",
            Stage::Recorded => "recorded",
        }
    }
}

/// Waits forever at `stage` if [`PAUSE_ENV`] names it (see [`Stage`]).
fn test_pause(stage: Stage) {
    if std::env::var(PAUSE_ENV).is_ok_and(|name| name == stage.name()) {
        eprintln!("attach paused at {}", stage.name());
        loop {
            std::thread::park();
        }
    }
}

fn attach_into(request: &AttachRequest, dir: &PinDir, ifindex: u32) -> anyhow::Result<AttachInfo> {
    let mut ebpf = Ebpf::load(OBJECT).context("loading the eBPF object")?;
    for spec in maps::ALL {
        let name = spec.name;
        let map = ebpf
            .map(name)
            .with_context(|| format!("the eBPF object has no map {name}"))?;
        map.pin(dir.map(spec))
            .with_context(|| format!("pinning map {name}"))?;
    }
    let pinned = PinnedMaps::at(dir.clone());
    pinned.write_config(&request.config)?;
    test_pause(Stage::MapsPinned);

    let mut info = AttachInfo {
        ifindex,
        ..AttachInfo::default()
    };
    for attachment in &request.attachments {
        if let Some((program, pin)) = attachment.xdp_program() {
            let (link, mode) = attach_xdp(&mut ebpf, program, &request.interface, request.mode)
                .map_err(|e| explain_xdp_conflict(e, &request.interface, ifindex))?;
            info.xdp_mode = mode;
            test_pause(Stage::LinkAttached);
            link.pin(dir.link(pin))
                .with_context(|| format!("pinning {pin}"))?;
            test_pause(Stage::LinkPinned);
        }
        // `cnp` and `pfc` share their programs: attach each once.
        for tc in attachment
            .tc_programs()
            .iter()
            .filter(|tc| !dir.link(tc.pin).exists())
        {
            let link = attach_tc(&mut ebpf, &request.interface, tc)?;
            test_pause(Stage::LinkAttached);
            link.pin(dir.link(tc.pin))
                .with_context(|| format!("pinning {}", tc.pin))?;
            test_pause(Stage::LinkPinned);
        }
        info.hooks |= attachment.bit();
    }
    pinned.write_attach_info(info)?;
    Ok(info)
}

fn attach_xdp(
    ebpf: &mut Ebpf,
    name: &str,
    interface: &str,
    mode: Mode,
) -> anyhow::Result<(FdLink, u32)> {
    let program: &mut Xdp = ebpf
        .program_mut(name)
        .with_context(|| format!("the eBPF object has no program {name}"))?
        .try_into()?;
    program
        .load()
        .with_context(|| format!("loading {name} (verifier)"))?;
    let attempts: &[(XdpMode, u32)] = match mode {
        Mode::Native => &[(XdpMode::Driver, AttachInfo::MODE_NATIVE)],
        Mode::Skb => &[(XdpMode::Skb, AttachInfo::MODE_SKB)],
        Mode::Auto => &[
            (XdpMode::Driver, AttachInfo::MODE_NATIVE),
            (XdpMode::Skb, AttachInfo::MODE_SKB),
        ],
    };
    let mut last_error = None;
    for (xdp_mode, recorded) in attempts {
        match program.attach(interface, *xdp_mode) {
            Ok(id) => {
                let link = FdLink::try_from(program.take_link(id)?)
                    .context("the kernel attached XDP without a bpf_link; cannot pin it")?;
                return Ok((link, *recorded));
            }
            Err(e) => last_error = Some(e),
        }
    }
    let error = last_error.expect("at least one attempt");
    Err(error).with_context(|| format!("attaching XDP to {interface} ({mode:?} mode)"))
}

/// Names the XDP program already on the interface, if there is one, when attaching XDP
/// failed (the kernel only says "File exists"), and says what to do.
fn explain_xdp_conflict(error: anyhow::Error, interface: &str, ifindex: u32) -> anyhow::Error {
    let Ok(Some((program, mode))) = interface_programs::xdp_program(ifindex) else {
        return error;
    };
    let name = if program.name.is_empty() {
        "(no name)".to_owned()
    } else {
        program.name.clone()
    };
    let holder = match program.link_id {
        Some(link) => format!(
            "held by bpf_link {link}, which goes when its last pin and file descriptor go \
             (`bpftool link show id {link}` shows it)"
        ),
        None => format!(
            "attached through netlink: `ip link set dev {interface} {} off` removes it",
            if mode == "skb" { "xdpgeneric" } else { "xdp" }
        ),
    };
    let hint = if [programs::XDP, programs::LB].contains(&program.name.as_str()) {
        "; it is lossless's own program: `lossless host status` shows which pins hold it"
    } else {
        "; or attach lossless without an XDP hook (--hooks tc, cnp, pfc)"
    };
    error.context(format!(
        "{interface} already has an XDP program: id {} {name} ({mode} mode), {holder}. \
         An interface runs one XDP program: remove it first{hint}",
        program.id
    ))
}

fn attach_tc(ebpf: &mut Ebpf, interface: &str, tc: &TcProgram) -> anyhow::Result<FdLink> {
    let program: &mut SchedClassifier = ebpf
        .program_mut(tc.program)
        .with_context(|| format!("the eBPF object has no program {}", tc.program))?
        .try_into()?;
    program
        .load()
        .with_context(|| format!("loading {} (verifier)", tc.program))?;
    let id = program
        .attach_with_options(
            interface,
            match tc.direction {
                TcDirection::Ingress => TcAttachType::Ingress,
                TcDirection::Egress => TcAttachType::Egress,
            },
            TcAttachOptions::TcxOrder(match tc.first {
                true => LinkOrder::first(),
                false => LinkOrder::default(),
            }),
        )
        .with_context(|| format!("attaching {} to {interface}", tc.program))?;
    FdLink::try_from(program.take_link(id)?)
        .context("TC attached without a TCX link (kernel < 6.6?); cannot pin it")
}

/// The eBPF object loaded a second time over the maps an attached interface pinned in `dir`
/// (its programs not loaded yet, none attached): run in place of the attached ones, as with
/// `BPF_PROG_TEST_RUN`, these programs see and change the interface's configuration and state.
pub fn load_over_pinned_maps(dir: &PinDir) -> anyhow::Result<Ebpf> {
    dir.require_attached()?;
    let paths: Vec<_> = maps::ALL
        .iter()
        .map(|spec| (spec.name, dir.map(spec)))
        .collect();
    let mut loader = EbpfLoader::new();
    for (name, path) in &paths {
        loader.map_pin_path(name, path.as_path());
    }
    loader
        .load(OBJECT)
        .with_context(|| format!("loading the eBPF object over {}", dir.path().display()))
}

/// Removes everything `attach` made for `interface` in the calling thread's namespace: the
/// links (which detaches the programs), the maps and the directory; also what a killed attach
/// or detach of it left, which it returns. Fails if there was nothing to remove.
pub fn detach(interface: &str) -> anyhow::Result<Vec<Recovered>> {
    detach_dir(&lifecycle::locate(interface)?)
}

/// Detaches the interface pinned in `dir` (whatever the calling thread's namespace) as
/// [`detach`] does.
pub fn detach_dir(dir: &PinDir) -> anyhow::Result<Vec<Recovered>> {
    let (claim, recovered) = lifecycle::begin_detach(dir)?;
    if let Some(claim) = claim {
        claim.remove()?;
    }
    Ok(recovered)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use aya::maps::MapType;
    use aya_obj::EbpfSectionKind;
    use dataplane_common::maps::MapKind;

    use super::*;

    /// The kernel's map type of each kind.
    fn map_type(kind: MapKind) -> MapType {
        match kind {
            MapKind::Array => MapType::Array,
            MapKind::PerCpuArray => MapType::PerCpuArray,
            MapKind::HashMap => MapType::Hash,
            MapKind::LruHashMap => MapType::LruHash,
            MapKind::LpmTrie => MapType::LpmTrie,
            MapKind::DevMap => MapType::DevMap,
        }
    }

    /// aya-log's ring, declared by aya-log-ebpf, not by us.
    const LOG_RING: &str = "AYA_LOGS";

    #[test]
    fn the_object_holds_the_declared_maps_and_programs() {
        let object = aya_obj::Object::parse(OBJECT).expect("parsing the embedded eBPF object");
        for spec in maps::ALL {
            let map = object
                .maps
                .get(spec.name)
                .unwrap_or_else(|| panic!("the object has no map {}", spec.name));
            assert_eq!(
                (
                    map.map_type(),
                    map.key_size(),
                    map.value_size(),
                    map.max_entries()
                ),
                (
                    map_type(spec.kind) as u32,
                    spec.key_size,
                    spec.value_size,
                    spec.max_entries
                ),
                "{}: type, key size, value size, entries",
                spec.name
            );
        }
        let declared: BTreeSet<&str> = maps::ALL.iter().map(|m| m.name).collect();
        let in_object: BTreeSet<&str> = object
            .maps
            .iter()
            .filter(|(name, map)| {
                map.section_kind() == EbpfSectionKind::Maps && name.as_str() != LOG_RING
            })
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(in_object, declared, "maps the object declares");
        let programs: BTreeSet<&str> = object.programs.keys().map(String::as_str).collect();
        assert_eq!(programs, programs::ALL.into_iter().collect(), "programs");
    }
}
