//! Where an interface's pinned maps and links live in bpffs, opening a pinned map through its
//! definition in `dataplane_common::maps`, and making sure bpffs is there.
//!
//! Pins are keyed by network namespace and interface name:
//! `/sys/fs/bpf/lossless/netns-INODE/IFACE/`, so same-named interfaces in two namespaces
//! never share (or act on) each other's pins. Beside an interface's directory, hidden
//! siblings `IFACE:attaching` and `IFACE:detaching` are where attach builds and detach takes
//! apart (`staging.rs`). Pins of lossless versions before namespace keys sit directly under
//! the root (`/sys/fs/bpf/lossless/IFACE/`): [`PinDir::legacy`].

use std::{
    ffi::CString,
    fs, io,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _};
use aya::maps::{
    lpm_trie::LpmTrie, Array, DevMap, HashMap as AyaHashMap, Map, MapData, MapError, PerCpuArray,
};
use dataplane_common::{
    maps::{kind, MapDef, MapSpec},
    uapi,
};

use crate::namespace::NetnsId;

/// Mount point of the BPF filesystem.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Our directory inside bpffs.
pub const ROOT: &str = "/sys/fs/bpf/lossless";
/// A namespace's directory under [`ROOT`] is this followed by its inode. (No interface name
/// is 16 bytes long, so this never names a pre-namespace interface directory.)
const NETNS_PREFIX: &str = "netns-";
/// Separates an interface name from the purpose of a hidden pin directory.
const HIDDEN: char = ':';
/// Longest interface name the kernel accepts (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// How user space opens a map of each kind: as the aya map of that kind, keyed and valued as
/// its definition says.
pub trait Open<Key, Value> {
    /// The aya map.
    type Map;
    /// The opened map as that aya map; fails if the kernel's map is of another type.
    fn wrap(map: Map) -> Result<Self::Map, MapError>;
}

/// Implements [`Open`] for each map kind `KIND: <PARAMS> KEY, VALUE => AYA_MAP<ARGS>`: the
/// kind opens as that aya map.
macro_rules! open_as {
    ($($kind:ident: <$($param:ident),*> $key:ty, $value:ty => $map:ident<$($arg:ty),*>;)*) => {$(
        impl<$($param: aya::Pod),*> Open<$key, $value> for kind::$kind {
            type Map = $map<$($arg),*>;
            fn wrap(map: Map) -> Result<Self::Map, MapError> {
                $map::try_from(map)
            }
        }
    )*};
}

open_as! {
    Array: <Value> u32, Value => Array<MapData, Value>;
    PerCpuArray: <Value> u32, Value => PerCpuArray<MapData, Value>;
    HashMap: <Key, Value> Key, Value => AyaHashMap<MapData, Key, Value>;
    LruHashMap: <Key, Value> Key, Value => AyaHashMap<MapData, Key, Value>;
    LpmTrie: <Key, Value> Key, Value => LpmTrie<MapData, Key, Value>;
    DevMap: <> u32, u32 => DevMap<MapData>;
}

/// The pin directory of one interface of one namespace, or a hidden sibling of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinDir {
    interface: String,
    /// `None` for a directory of the layout before namespace keys.
    netns: Option<NetnsId>,
    path: PathBuf,
}

/// What a directory under [`ROOT`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An attached interface.
    Attached,
    /// A hidden directory: an attach or detach in progress, or left by one that was killed.
    Hidden(String),
}

impl PinDir {
    /// The pin directory of `interface` in the calling thread's network namespace (which need
    /// not be attached).
    pub fn new(interface: &str) -> anyhow::Result<Self> {
        Self::in_netns(interface, NetnsId::current()?)
    }

    /// The pin directory of `interface` in the namespace `netns`.
    pub fn in_netns(interface: &str, netns: NetnsId) -> anyhow::Result<Self> {
        check_interface_name(interface)?;
        Ok(PinDir {
            interface: interface.to_owned(),
            netns: Some(netns),
            path: netns_dir(netns).join(interface),
        })
    }

    /// Where lossless before namespace keys pinned `interface`: `/sys/fs/bpf/lossless/IFACE/`.
    pub fn legacy(&self) -> PinDir {
        PinDir {
            interface: self.interface.clone(),
            netns: None,
            path: Path::new(ROOT).join(&self.interface),
        }
    }

    /// A hidden sibling directory (`IFACE:PURPOSE`) where attach builds, or detach takes
    /// apart, an interface's pins, so others see either all of them or none.
    /// (':' never appears in an interface name; bpffs refuses '.' in names.)
    pub fn hidden(&self, purpose: &str) -> PinDir {
        let parent = self.path.parent().expect("a pin directory has a parent");
        PinDir {
            interface: self.interface.clone(),
            netns: self.netns,
            path: parent.join(format!("{}{HIDDEN}{purpose}", self.interface)),
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

    /// The network namespace of the interface; `None` for a pre-namespace directory.
    pub fn netns(&self) -> Option<NetnsId> {
        self.netns
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory exists (for an interface's own directory: it is attached).
    pub fn exists(&self) -> bool {
        self.path.is_dir()
    }

    /// The pin of the declared map `map` (pinned under its name).
    pub fn map(&self, map: &MapSpec) -> PathBuf {
        self.path.join(map.name)
    }

    /// Opens the pinned map of `def` in this directory as the aya map of its kind and types.
    pub fn open_map<K: Open<Key, Value>, Key, Value>(
        &self,
        def: &MapDef<K, Key, Value>,
    ) -> anyhow::Result<K::Map> {
        let path = self.map(&def.spec);
        let data = MapData::from_pin(&path)
            .with_context(|| format!("opening pinned map {}", path.display()))?;
        let map = Map::from_map_data(data).with_context(|| format!("map {}", path.display()))?;
        K::wrap(map).with_context(|| {
            format!(
                "map {} has an unexpected type (pinned by another version of lossless? \
                 `lossless host detach` and attach again)",
                def.name()
            )
        })
    }

    /// The pin of the link called `name` (see `Attachment::pins`).
    pub fn link(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Fails with a message that names the interface unless it is attached.
    pub fn require_attached(&self) -> anyhow::Result<()> {
        if !self.exists() {
            let netns = self.netns.map(|n| format!(" in network namespace {n}"));
            bail!(
                "{} is not attached{} (no {}); run `lossless host attach {}` first",
                self.interface,
                netns.unwrap_or_default(),
                self.path.display(),
                self.interface
            );
        }
        Ok(())
    }

    /// Every directory under [`ROOT`], of every namespace and of the pre-namespace layout,
    /// sorted by namespace and name.
    pub fn all() -> anyhow::Result<Vec<(PinDir, Kind)>> {
        let mut found = Vec::new();
        for (name, path) in entries(Path::new(ROOT))? {
            let netns = name
                .strip_prefix(NETNS_PREFIX)
                .filter(|_| name.len() > MAX_IFNAME)
                .and_then(|n| n.parse().ok());
            match netns {
                Some(inode) => {
                    for (name, path) in entries(&path)? {
                        found.extend(Self::listed(&name, path, Some(NetnsId(inode))));
                    }
                }
                None => found.extend(Self::listed(&name, path, None)),
            }
        }
        found.sort_by(|(a, _), (b, _)| (a.netns, &a.path).cmp(&(b.netns, &b.path)));
        Ok(found)
    }

    /// The directory `name` at `path`, if it is one of ours.
    fn listed(name: &str, path: PathBuf, netns: Option<NetnsId>) -> Option<(PinDir, Kind)> {
        let (interface, kind) = match name.split_once(HIDDEN) {
            Some((interface, purpose)) => (interface, Kind::Hidden(purpose.to_owned())),
            None => (name, Kind::Attached),
        };
        check_interface_name(interface).ok()?;
        let dir = PinDir {
            interface: interface.to_owned(),
            netns,
            path,
        };
        Some((dir, kind))
    }
}

/// The directory of the namespace `netns` under [`ROOT`].
pub fn netns_dir(netns: NetnsId) -> PathBuf {
    Path::new(ROOT).join(format!("{NETNS_PREFIX}{}", netns.0))
}

/// The names and paths of the directories in `dir`; none if it does not exist.
fn entries(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
    }
    Ok(found)
}

/// Refuses a name the kernel would not give an interface (1 to 15 bytes, no `/` or `:`, not
/// `.` or `..`): it becomes a directory name under bpffs.
pub fn check_interface_name(interface: &str) -> anyhow::Result<()> {
    let valid = !interface.is_empty()
        && interface.len() <= MAX_IFNAME
        && !interface.contains(['/', '\0', HIDDEN])
        && interface != "."
        && interface != "..";
    if !valid {
        bail!("'{interface}' is not a valid interface name");
    }
    Ok(())
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
    // SAFETY: `statfs` is a C struct of integers, for which all zeroes is a valid value.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and outlives the call; `buf` is a whole statfs.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut buf) };
    if rc != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("statfs {}", path.display()));
    }
    Ok(buf.f_type as u64 == uapi::BPF_FS_MAGIC as u64)
}

#[cfg(test)]
mod tests {
    use dataplane_common::maps;

    use super::*;

    #[test]
    fn rejects_names_that_escape_the_directory() {
        let netns = NetnsId(4026531840);
        for bad in ["", "a/b", "..", ".", "sixteen-chars-xx", "a:b"] {
            assert!(PinDir::in_netns(bad, netns).is_err(), "{bad:?}");
        }
        let dir = PinDir::in_netns("veth0", netns).unwrap();
        assert_eq!(
            dir.map(&maps::COUNTERS.spec),
            Path::new("/sys/fs/bpf/lossless/netns-4026531840/veth0/COUNTERS")
        );
        assert_eq!(
            dir.hidden("attaching").path(),
            Path::new("/sys/fs/bpf/lossless/netns-4026531840/veth0:attaching")
        );
        assert_eq!(dir.legacy().path(), Path::new("/sys/fs/bpf/lossless/veth0"));
        assert_eq!(
            dir.legacy().hidden("attaching").path(),
            Path::new("/sys/fs/bpf/lossless/veth0:attaching")
        );
    }

    #[test]
    fn a_namespace_directory_is_never_an_interface_name() {
        assert!(check_interface_name(&format!("{NETNS_PREFIX}{}", u32::MAX)).is_err());
        assert!(check_interface_name(&format!("{NETNS_PREFIX}4026531840")).is_err());
    }
}
