//! Where an interface's pinned maps and links live in bpffs, and making sure bpffs is there.

use std::{
    ffi::CString,
    fs, io,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};
use dataplane_common::uapi;

/// Mount point of the BPF filesystem.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Our directory inside bpffs.
pub const ROOT: &str = "/sys/fs/bpf/lossless";
/// Separates an interface name from the purpose of a hidden pin directory.
const HIDDEN: char = ':';
/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// The pin directory of one interface: `/sys/fs/bpf/lossless/IFACE/`.
#[derive(Clone, Debug)]
pub struct PinDir {
    interface: String,
    path: PathBuf,
}

impl PinDir {
    /// The pin directory of `interface` (which need not be attached).
    pub fn new(interface: &str) -> anyhow::Result<Self> {
        let valid = !interface.is_empty()
            && interface.len() <= MAX_IFNAME
            && !interface.contains(['/', '\0', HIDDEN])
            && interface != "."
            && interface != "..";
        if !valid {
            bail!("'{interface}' is not a valid interface name");
        }
        Ok(PinDir {
            interface: interface.to_owned(),
            path: Path::new(ROOT).join(interface),
        })
    }

    /// A hidden sibling directory (`IFACE:PURPOSE`) where attach builds, or detach takes
    /// apart, an interface's pins, so others see either all of them or none: `all` skips it.
    /// (':' never appears in an interface name; bpffs refuses '.' in names.)
    pub fn hidden(&self, purpose: &str) -> PinDir {
        PinDir {
            interface: self.interface.clone(),
            path: Path::new(ROOT).join(format!("{}{HIDDEN}{purpose}", self.interface)),
        }
    }

    /// Moves this directory to `to` in one step (rename within bpffs).
    pub fn rename_to(&self, to: &PinDir) -> anyhow::Result<()> {
        fs::rename(&self.path, &to.path)
            .with_context(|| format!("renaming {} to {}", self.path.display(), to.path.display()))
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether something is attached (the directory exists).
    pub fn exists(&self) -> bool {
        self.path.is_dir()
    }

    /// The pin of the map called `name`.
    pub fn map(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The pin of the link called `name` (see `Attachment::pins`).
    pub fn link(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Fails with a message that names the interface unless it is attached.
    pub fn require_attached(&self) -> anyhow::Result<()> {
        if !self.exists() {
            bail!(
                "{} is not attached (no {}); run `lossless host attach {}` first",
                self.interface,
                self.path.display(),
                self.interface
            );
        }
        Ok(())
    }

    /// Every interface that has a pin directory, sorted.
    pub fn all() -> anyhow::Result<Vec<PinDir>> {
        let mut dirs = Vec::new();
        let entries = match fs::read_dir(ROOT) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(dirs),
            Err(e) => return Err(e).with_context(|| format!("reading {ROOT}")),
        };
        for entry in entries {
            let name = entry?.file_name();
            // Hidden directories are attaches or detaches in progress.
            if let Some(name) = name.to_str().filter(|n| !n.contains(HIDDEN)) {
                dirs.push(PinDir::new(name)?);
            }
        }
        dirs.sort_by(|a, b| a.interface.cmp(&b.interface));
        Ok(dirs)
    }
}

/// Mounts bpffs on [`BPFFS`] unless it is already mounted there.
pub fn ensure_bpffs() -> anyhow::Result<()> {
    if is_bpffs(Path::new(BPFFS))? {
        return Ok(());
    }
    let target = CString::new(BPFFS)?;
    let fstype = CString::new("bpf")?;
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("mounting bpffs on {BPFFS}"));
    }
    Ok(())
}

fn is_bpffs(path: &Path) -> anyhow::Result<bool> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())?;
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut buf) };
    if rc != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("statfs {}", path.display()));
    }
    Ok(buf.f_type as u64 == uapi::BPF_FS_MAGIC as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_names_that_escape_the_directory() {
        for bad in ["", "a/b", "..", ".", "sixteen-chars-xx"] {
            assert!(PinDir::new(bad).is_err(), "{bad:?}");
        }
        let dir = PinDir::new("veth0").unwrap();
        assert_eq!(
            dir.map("COUNTERS"),
            Path::new("/sys/fs/bpf/lossless/veth0/COUNTERS")
        );
        assert_eq!(
            dir.link("link_xdp"),
            Path::new("/sys/fs/bpf/lossless/veth0/link_xdp")
        );
    }
}
