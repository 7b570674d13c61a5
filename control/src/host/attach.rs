//! `attach` and `detach`: load the programs, pin their maps and links, and take them away.

use std::{ffi::CString, fs, io};

use anyhow::{bail, Context as _};
use aya::{
    programs::{links::FdLink, tc::TcAttachOptions, SchedClassifier, Xdp, XdpMode},
    Ebpf,
};
use dataplane_common::{config::AttachInfo, maps};

use super::{
    attachment::{Attachment, TcProgram},
    config::HostConfig,
    pinned_maps::PinnedMaps,
    pins,
    pins::PinDir,
};

/// The eBPF object built by `build.rs`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/dataplane-ebpf"));

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

/// Loads the programs, attaches the requested hooks to the interface, pins everything under
/// its pin directory, and returns. Refuses an interface that is already attached.
pub fn attach(request: &AttachRequest) -> anyhow::Result<AttachInfo> {
    request.config.validate()?;
    if request.attachments.contains(&Attachment::Xdp)
        && request.attachments.contains(&Attachment::Lb)
    {
        bail!(
            "--hooks xdp and lb both need the XDP hook of {}; choose one",
            request.interface
        );
    }
    pins::ensure_bpffs()?;
    let dir = PinDir::new(&request.interface)?;
    if dir.exists() {
        bail!(
            "{} is already attached ({} exists); run `lossless host detach {}` first, \
             or change its configuration live with `lossless host set`",
            request.interface,
            dir.path().display(),
            request.interface
        );
    }
    let ifindex = ifindex(&request.interface)?;
    // Build in a hidden directory and rename it into place at the end, so `status` and
    // `stats` see an interface either whole or not at all.
    let staging = dir.hidden("attaching");
    fs::create_dir_all(pins::ROOT).with_context(|| format!("creating {}", pins::ROOT))?;
    fs::create_dir(staging.path()).with_context(|| {
        format!(
            "creating {} (another attach of {}?)",
            staging.path().display(),
            request.interface
        )
    })?;
    // From here on, a failure must leave nothing behind.
    attach_into(request, &staging, ifindex)
        .and_then(|info| staging.rename_to(&dir).map(|()| info))
        .inspect_err(|_| {
            let _ = remove_pins(&staging);
        })
}

fn attach_into(request: &AttachRequest, dir: &PinDir, ifindex: u32) -> anyhow::Result<AttachInfo> {
    let mut ebpf = Ebpf::load(OBJECT).context("loading the eBPF object")?;
    for name in maps::PINNED {
        let map = ebpf
            .map(name)
            .with_context(|| format!("the eBPF object has no map {name}"))?;
        map.pin(dir.map(name))
            .with_context(|| format!("pinning map {name}"))?;
    }
    let pinned = PinnedMaps::at(dir.clone());
    pinned.write_config(&request.config)?;

    let mut info = AttachInfo {
        ifindex,
        ..AttachInfo::default()
    };
    for attachment in &request.attachments {
        if let Some((program, pin)) = attachment.xdp_program() {
            let (link, mode) = attach_xdp(&mut ebpf, program, &request.interface, request.mode)?;
            info.xdp_mode = mode;
            link.pin(dir.link(pin))
                .with_context(|| format!("pinning {pin}"))?;
        }
        // `cnp` and `pfc` share their programs: attach each once.
        for tc in attachment
            .tc_programs()
            .iter()
            .filter(|tc| !dir.link(tc.pin).exists())
        {
            let link = attach_tc(&mut ebpf, &request.interface, tc)?;
            link.pin(dir.link(tc.pin))
                .with_context(|| format!("pinning {}", tc.pin))?;
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
            tc.attach_type,
            TcAttachOptions::TcxOrder(tc.order()),
        )
        .with_context(|| format!("attaching {} to {interface}", tc.program))?;
    FdLink::try_from(program.take_link(id)?)
        .context("TC attached without a TCX link (kernel < 6.6?); cannot pin it")
}

/// Removes everything `attach` made for `interface`: the links (which detaches the
/// programs), the maps and the directory. Fails if nothing is attached.
pub fn detach(interface: &str) -> anyhow::Result<()> {
    let dir = PinDir::new(interface)?;
    dir.require_attached()?;
    // Out of sight first, then taken apart: others never see half an interface.
    let doomed = dir.hidden("detaching");
    dir.rename_to(&doomed)?;
    remove_pins(&doomed)
}

fn remove_pins(dir: &PinDir) -> anyhow::Result<()> {
    // Links first, so the programs stop before their maps go.
    let mut paths: Vec<_> = Attachment::ALL
        .iter()
        .flat_map(|a| a.pins())
        .map(|pin| dir.link(pin))
        .collect();
    paths.extend(maps::PINNED.iter().map(|m| dir.map(m)));
    for path in paths {
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    fs::remove_dir(dir.path()).with_context(|| format!("removing {}", dir.path().display()))?;
    // Our root goes too once the last interface is gone; another attach may race us to it.
    let _ = fs::remove_dir(pins::ROOT);
    Ok(())
}

/// The index of `interface` in the current network namespace.
pub fn ifindex(interface: &str) -> anyhow::Result<u32> {
    let name = CString::new(interface)?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        bail!("no interface named {interface} in this network namespace");
    }
    Ok(index)
}
