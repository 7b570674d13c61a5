//! How an interface's pin directory comes and goes safely: attach builds it in a hidden
//! `IFACE:attaching` and detach takes it apart in `IFACE:detaching`, each holding an
//! exclusive flock(2) on that directory for as long as it runs. The kernel drops the lock when
//! its process dies, however it dies, so a hidden directory whose lock is free was left by a
//! killed command: the next attach or detach of the interface removes it, and with its link
//! pins the programs it had attached.
//!
//! A lock on the root directory, held only for the moments of creating, claiming, cleaning
//! and removing directories, keeps those steps from interleaving. Pins of the layout before
//! namespace keys are adopted by the namespace whose interface their programs are attached to.

use std::{
    fs::{self, File},
    io,
    os::{fd::AsRawFd as _, unix::fs::MetadataExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use aya::programs::{
    links::{FdLink, LinkInfo, PinnedLink},
    loaded_programs,
};

use crate::interface_programs;
use sysutil::{
    interface::ifindex,
    namespace::NetnsId,
    pins::{self, PinDir, ROOT},
};

/// Where attach builds an interface's pins.
pub const ATTACHING: &str = "attaching";
/// Where detach takes them apart.
pub const DETACHING: &str = "detaching";
/// Link pins start with this; they are removed first, so programs stop before their maps go.
pub const LINK_PREFIX: &str = "link_";
/// How long removing a link's last pin may take to release its program in the kernel.
const LINK_RELEASE: Duration = Duration::from_secs(5);
/// How often the loaded links are looked at meanwhile.
const LINK_POLL: Duration = Duration::from_millis(2);
/// How often taking the root lock is retried when the root is removed under us.
const ROOT_LOCK_ATTEMPTS: usize = 100;

/// An exclusive flock(2) on a directory, released when dropped or when the process dies.
#[derive(Debug)]
struct DirLock(File);

/// How a [`DirLock`] is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Alone (LOCK_EX), waiting for it.
    Exclusive,
    /// Alone (LOCK_EX), or not at all if someone holds it.
    ExclusiveNow,
    /// Beside other shared holders (LOCK_SH), waiting for it.
    Shared,
    /// Beside other shared holders (LOCK_SH), or not at all if someone holds it alone.
    SharedNow,
}

impl DirLock {
    /// Locks `path`; `None` if a lock that does not wait could not be taken.
    fn acquire(path: &Path, mode: Mode) -> io::Result<Option<DirLock>> {
        let file = File::open(path)?;
        let operation = match mode {
            Mode::Exclusive => libc::LOCK_EX,
            Mode::ExclusiveNow => libc::LOCK_EX | libc::LOCK_NB,
            Mode::Shared => libc::LOCK_SH,
            Mode::SharedNow => libc::LOCK_SH | libc::LOCK_NB,
        };
        // SAFETY: a valid open file descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } != 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Ok(None);
            }
            return Err(error);
        }
        Ok(Some(DirLock(file)))
    }
}

/// The lock of [`ROOT`]: held alone while directories are created, claimed, cleaned or
/// removed; shared while `status` looks at them (so its probes of hidden directories never
/// meet a claim or a recovery).
pub struct RootLock {
    _lock: DirLock,
}

impl RootLock {
    /// Takes the lock alone, making the root if needed.
    fn acquire() -> anyhow::Result<Self> {
        Self::take(Mode::Exclusive).map(|lock| lock.expect("made before locking"))
    }

    /// Takes the lock beside other readers; `None` if there is no root (nothing to read).
    pub fn shared() -> anyhow::Result<Option<Self>> {
        Self::take(Mode::Shared)
    }

    fn take(mode: Mode) -> anyhow::Result<Option<Self>> {
        for _ in 0..ROOT_LOCK_ATTEMPTS {
            if mode == Mode::Exclusive {
                fs::create_dir_all(ROOT).with_context(|| format!("creating {ROOT}"))?;
            }
            let lock = match DirLock::acquire(Path::new(ROOT), mode) {
                Ok(lock) => lock.expect("a waiting lock is always taken"),
                Err(e) if e.kind() == io::ErrorKind::NotFound && mode == Mode::Shared => {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).with_context(|| format!("locking {ROOT}")),
            };
            // The root may have been removed, and made anew, between open and flock.
            let locked = lock.0.metadata()?.ino();
            if fs::metadata(ROOT).is_ok_and(|m| m.ino() == locked) {
                return Ok(Some(RootLock { _lock: lock }));
            }
        }
        bail!("cannot lock {ROOT}: it keeps being removed")
    }
}

/// Whether the command that made a hidden directory still runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// It runs (process id, if /proc/locks names it).
    Running(Option<u32>),
    /// It was killed: the directory is a leftover.
    Gone,
}

/// Who owns the hidden directory `dir`. Probes with a shared lock, so probes never take the
/// lock from each other; call it under the root lock (shared or alone), so no claim meets it.
pub fn owner(dir: &PinDir, _root: &RootLock) -> io::Result<Owner> {
    match DirLock::acquire(dir.path(), Mode::SharedNow)? {
        Some(_free) => Ok(Owner::Gone),
        None => Ok(Owner::Running(lock_holder(dir.path()))),
    }
}

/// The process holding a flock on `path`, from /proc/locks (`N: FLOCK ADVISORY WRITE PID
/// MAJ:MIN:INODE 0 EOF`).
fn lock_holder(path: &Path) -> Option<u32> {
    let inode = fs::metadata(path).ok()?.ino();
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (kind, access) = (fields.get(1)?, fields.get(3)?);
        let (pid, file) = (fields.get(4)?, fields.get(5)?);
        let same =
            (*kind, *access) == ("FLOCK", "WRITE") && file.rsplit(':').next()?.parse() == Ok(inode);
        same.then(|| pid.parse().ok()).flatten()
    })
}

/// A hidden directory this process has claimed: others see it as in progress until it is
/// committed, removed, or the process dies.
#[derive(Debug)]
pub struct Claim {
    dir: PinDir,
    _lock: DirLock,
}

/// A leftover of a killed attach or detach that was removed, with the links it held.
#[derive(Debug)]
pub struct Recovered {
    /// The directory.
    pub path: PathBuf,
    /// Its link pins (each one detached a program).
    pub links: Vec<String>,
}

impl Recovered {
    /// One line for the user.
    pub fn describe(&self) -> String {
        let links = if self.links.is_empty() {
            "no link".to_owned()
        } else {
            self.links.join(", ")
        };
        format!(
            "removed {}, left by a killed attach or detach ({links})",
            self.path.display()
        )
    }
}

/// The pin directory of `interface` in the calling thread's namespace, adopting pins of the
/// layout before namespace keys if they are this namespace's interface's.
pub fn locate(interface: &str) -> anyhow::Result<PinDir> {
    let dir = PinDir::new(interface)?;
    if !dir.exists() && dir.legacy().exists() {
        let _root = RootLock::acquire()?;
        adopt_legacy(&dir)?;
    }
    Ok(dir)
}

/// Starts an attach of `dir`: removes leftovers of killed commands, refuses an attached
/// interface or one that another command is changing, and claims `IFACE:attaching`.
pub fn begin_attach(dir: &PinDir) -> anyhow::Result<(Claim, Vec<Recovered>)> {
    pins::ensure_bpffs()?;
    let root = RootLock::acquire()?;
    adopt_legacy(dir)?;
    let recovered = recover(dir, &root)?;
    if dir.exists() {
        bail!(
            "{} is already attached ({} exists); run `lossless host detach {}` first, \
             or change its configuration live with `lossless host set`",
            dir.interface(),
            dir.path().display(),
            dir.interface()
        );
    }
    let staging = dir.hidden(ATTACHING);
    let parent = staging.path().parent().expect("under the root");
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    fs::create_dir(staging.path())
        .with_context(|| format!("creating {}", staging.path().display()))?;
    let claim = claim(staging)?;
    Ok((claim, recovered))
}

/// Starts a detach of `dir`: removes leftovers of killed commands and claims the interface's
/// pins as `IFACE:detaching`. `None` if nothing is attached but leftovers were removed.
pub fn begin_detach(dir: &PinDir) -> anyhow::Result<(Option<Claim>, Vec<Recovered>)> {
    let root = RootLock::acquire()?;
    adopt_legacy(dir)?;
    let recovered = recover(dir, &root)?;
    if !dir.exists() {
        if recovered.is_empty() {
            dir.require_attached()?;
        }
        prune(dir);
        return Ok((None, recovered));
    }
    // Out of sight first, then taken apart: others never see half an interface.
    let doomed = dir.hidden(DETACHING);
    dir.rename_to(&doomed)?;
    Ok((Some(claim(doomed)?), recovered))
}

fn claim(dir: PinDir) -> anyhow::Result<Claim> {
    let lock = DirLock::acquire(dir.path(), Mode::ExclusiveNow)
        .with_context(|| format!("locking {}", dir.path().display()))?
        .with_context(|| format!("{} is locked by another process", dir.path().display()))?;
    Ok(Claim { dir, _lock: lock })
}

impl Claim {
    /// The claimed directory.
    pub fn dir(&self) -> &PinDir {
        &self.dir
    }

    /// Moves the claimed directory into place as `to` in one step (the end of an attach).
    pub fn commit(self, to: &PinDir) -> anyhow::Result<()> {
        self.dir.rename_to(to)
    }

    /// Removes the claimed directory and everything pinned in it, links first (the end of a
    /// detach, or a failed attach).
    pub fn remove(self) -> anyhow::Result<()> {
        remove_pins(self.dir.path())?;
        let _root = RootLock::acquire()?;
        prune(&self.dir);
        Ok(())
    }
}

/// Removes the leftovers of killed commands of `dir`'s interface (under the root lock), in
/// its namespace and in the layout before namespace keys; fails if one still runs.
fn recover(dir: &PinDir, root: &RootLock) -> anyhow::Result<Vec<Recovered>> {
    let mut recovered = Vec::new();
    for hidden in [
        dir.hidden(ATTACHING),
        dir.hidden(DETACHING),
        dir.legacy().hidden(ATTACHING),
        dir.legacy().hidden(DETACHING),
    ] {
        if !hidden.exists() {
            continue;
        }
        let owner =
            owner(&hidden, root).with_context(|| format!("locking {}", hidden.path().display()))?;
        if let Owner::Running(pid) = owner {
            let pid = pid.map(|p| format!(" (process {p})")).unwrap_or_default();
            bail!(
                "{}: another attach or detach is in progress{pid}: {} exists",
                dir.interface(),
                hidden.path().display()
            );
        }
        let links = remove_pins(hidden.path())?;
        recovered.push(Recovered {
            path: hidden.path().to_owned(),
            links,
        });
    }
    Ok(recovered)
}

/// Removes everything pinned in `dir`, links first (so programs stop before their maps go),
/// then `dir`. Returns the names of the link pins. Returns once the kernel has let the links
/// go: it frees an unpinned link a moment later (after an RCU grace period), and the next
/// attach must find the interface free.
fn remove_pins(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    names.sort();
    let (links, maps): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|name| name.starts_with(LINK_PREFIX));
    let programs: Vec<u32> = links
        .iter()
        .filter_map(|name| link_info(&dir.join(name)))
        .map(|info| info.program_id())
        .collect();
    for name in &links {
        unpin(&dir.join(name))?;
    }
    wait_until_unloaded(&programs);
    for name in &maps {
        unpin(&dir.join(name))?;
    }
    fs::remove_dir(dir).with_context(|| format!("removing {}", dir.display()))?;
    Ok(links)
}

/// Removes one pin; one already gone is fine.
fn unpin(path: &Path) -> anyhow::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

/// The kernel's view of the link pinned at `path` (the pin's file descriptor is closed again).
fn link_info(path: &Path) -> Option<LinkInfo> {
    FdLink::from(PinnedLink::from_pin(path).ok()?).info().ok()
}

/// Waits (at most [`LINK_RELEASE`]) until no program of `ids` is loaded. (A program goes
/// after its link has detached it; the link's own id goes a moment before that.)
fn wait_until_unloaded(ids: &[u32]) {
    let deadline = Instant::now() + LINK_RELEASE;
    while loaded_programs()
        .filter_map(Result::ok)
        .any(|program| ids.contains(&program.id()))
    {
        if Instant::now() >= deadline {
            tracing::warn!(
                "programs {ids:?} are still loaded {LINK_RELEASE:?} after their links' pins went"
            );
            return;
        }
        std::thread::sleep(LINK_POLL);
    }
}

/// Removes `dir`'s namespace directory and the root once they are empty (under the root lock).
fn prune(dir: &PinDir) {
    if let Some(parent) = dir.path().parent().filter(|p| *p != Path::new(ROOT)) {
        let _ = fs::remove_dir(parent);
    }
    let _ = fs::remove_dir(ROOT);
}

/// Moves pins of the layout before namespace keys (`ROOT/IFACE`) to `dir` when one of their
/// links' programs is attached to `dir`'s interface, seen from the calling thread's namespace
/// if it is `dir`'s (under the root lock).
fn adopt_legacy(dir: &PinDir) -> anyhow::Result<()> {
    let legacy = dir.legacy();
    if dir.exists() || !legacy.exists() || dir.netns() != NetnsId::current().ok() {
        return Ok(());
    }
    let Ok(index) = ifindex(dir.interface()) else {
        return Ok(());
    };
    let mut here = interface_programs::tcx_program_ids(dir.interface());
    if let Ok(Some((xdp, _))) = interface_programs::xdp_program(index) {
        here.push(xdp.id);
    }
    let ours = link_program_ids(legacy.path())
        .iter()
        .any(|id| here.contains(id));
    if ours {
        let parent = dir.path().parent().expect("under the root");
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        legacy.rename_to(dir)?;
    }
    Ok(())
}

/// The program ids of the link pins in `dir`.
fn link_program_ids(dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(LINK_PREFIX))
        .filter_map(|e| link_info(&e.path()))
        .map(|info| info.program_id())
        .collect()
}
