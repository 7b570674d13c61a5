//! Which network namespace a command acts in: its identity (the inode of its nsfs file, as
//! `ls -l /proc/PID/ns/net`, `lsns -t net` and `ip netns identify` show it) and, when it has
//! one, its name under /run/netns.
//!
//! Pins are keyed by it, so a same-named interface in another namespace is another interface.

use std::{fmt, fs, os::unix::fs::MetadataExt as _};

use anyhow::Context as _;
use serde::Serialize;

/// The calling thread's own view of its network namespace (a thread that joined another
/// namespace with setns sees that one, unlike /proc/self, which is the main thread's).
const THREAD_NETNS: &str = "/proc/thread-self/ns/net";
/// Where `ip netns add` puts the names of namespaces.
const NAMED_NETNS: &str = "/run/netns";

/// A network namespace, by the inode of its nsfs file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NetnsId(pub u64);

impl NetnsId {
    /// The namespace of the calling thread.
    pub fn current() -> anyhow::Result<Self> {
        let metadata =
            fs::metadata(THREAD_NETNS).with_context(|| format!("stat {THREAD_NETNS}"))?;
        Ok(NetnsId(metadata.ino()))
    }

    /// Its name under /run/netns (`ip netns add NAME`), if it has one.
    pub fn name(self) -> Option<String> {
        let entries = fs::read_dir(NAMED_NETNS).ok()?;
        entries.filter_map(Result::ok).find_map(|entry| {
            let inode = fs::metadata(entry.path()).ok()?.ino();
            (inode == self.0).then(|| entry.file_name().to_string_lossy().into_owned())
        })
    }

    /// How status shows it: `net:[INODE]` and its name, and whether it is the caller's.
    pub fn view(self, current: Option<NetnsId>) -> NetnsView {
        NetnsView {
            inode: self.0,
            name: self.name(),
            current: current == Some(self),
        }
    }
}

impl fmt::Display for NetnsId {
    /// As the kernel names it in /proc/PID/ns/net: `net:[4026531840]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "net:[{}]", self.0)
    }
}

/// A namespace as `status` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct NetnsView {
    /// The inode of its nsfs file (`net:[INODE]`).
    pub inode: u64,
    /// Its name under /run/netns, if any.
    pub name: Option<String>,
    /// Whether it is the namespace `status` ran in.
    pub current: bool,
}

impl fmt::Display for NetnsView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name} net:[{}]", self.inode),
            None => write!(f, "net:[{}]", self.inode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_namespace_is_its_own_file() {
        let here = NetnsId::current().unwrap();
        let main_thread = fs::metadata("/proc/self/ns/net").unwrap().ino();
        assert_eq!(here.0, main_thread);
        assert_eq!(here.to_string(), format!("net:[{}]", here.0));
        assert!(here.view(Some(here)).current);
    }
}
