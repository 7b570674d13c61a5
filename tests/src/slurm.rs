//! A single-node Slurm of a test's own: Debian's `slurm-wlm` and `munge` (which `cargo xtask
//! setup` installs), with a munge key, socket, state, spool, logs and ports of its own under
//! the test's directory, so it shares nothing with any other Slurm on the machine. `munged`
//! runs as the munge user, `slurmctld` and `slurmd` as root, all in the foreground as this
//! process' children; dropping the cluster cancels its jobs and stops every daemon by pid.

use std::net::TcpListener;
use std::os::unix::fs::{chown, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// How long the cluster may take to come up, and to stop.
const START: Duration = Duration::from_secs(30);
/// How often a wait looks at its condition.
const POLL: Duration = Duration::from_millis(100);

/// The programs a single-node Slurm needs.
const PROGRAMS: [&str; 7] = [
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "scancel",
    "sinfo",
];

/// `program` on PATH or in the system's sbin folders (where Debian puts the daemons).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The first of Slurm's and munge's programs that is missing, if one is.
pub fn missing_program() -> Option<&'static str> {
    PROGRAMS.into_iter().find(|p| find_program(p).is_none())
}

/// Waits until `done` holds, looking every [`POLL`], for at most `limit`; the error names
/// `what`.
pub fn wait_until(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if done()? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what}: not after {limit:?}");
        }
        std::thread::sleep(POLL);
    }
}

/// A running single-node Slurm.
pub struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// The daemons, in the order they stop: slurmd, slurmctld, munged.
    daemons: Vec<(&'static str, Child)>,
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd with everything of theirs under `dir` (created),
    /// and waits until the node takes jobs.
    pub fn start(dir: &Path) -> anyhow::Result<Cluster> {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
        };
        let socket = cluster.start_munged()?;
        let conf = slurm_conf(dir, &socket)?;
        std::fs::write(&cluster.conf, conf)?;
        for sub in ["state", "spool", "log", "run"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let controller = cluster.daemon("slurmctld", &["-D", "-c", "-f"])?;
        cluster.daemons.insert(0, ("slurmctld", controller));
        let node = cluster.daemon("slurmd", &["-D", "-f"])?;
        cluster.daemons.insert(0, ("slurmd", node));
        wait_until("the Slurm node is idle", START, || {
            cluster.check_daemons()?;
            let out = cluster.command("sinfo").args(["-h", "-o", "%T"]).output()?;
            Ok(String::from_utf8_lossy(&out.stdout).trim() == "idle")
        })
        .with_context(|| cluster.logs())?;
        Ok(cluster)
    }

    /// A Slurm client command (`sbatch`, `squeue`, ...) of this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(find_program(program).unwrap_or_else(|| program.into()));
        cmd.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        cmd
    }

    /// Runs a client command, failing with its standard error.
    pub fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<Output> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .with_context(|| format!("running {program}"))?;
        if !out.status.success() {
            bail!(
                "{program} {}: {}\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(out)
    }

    /// The jobs the cluster still has (pending or running), as `squeue` lists them.
    pub fn queue(&self) -> anyhow::Result<String> {
        let out = self.run("squeue", &["-h", "-o", "%i %T"])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The job completion log (one line per job or array task that ended).
    pub fn completions(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/jobcomp.txt")).unwrap_or_default()
    }

    /// The tail of every daemon's log, for a failure's message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for name in ["munged.log", "slurmctld.log", "slurmd.log"] {
            let text = std::fs::read_to_string(self.dir.join("log").join(name))
                .or_else(|_| std::fs::read_to_string(self.dir.join("munge").join(name)))
                .unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- {name}\n"));
            for line in &lines[lines.len().saturating_sub(20)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Fails if a daemon has ended.
    fn check_daemons(&mut self) -> anyhow::Result<()> {
        for (name, child) in &mut self.daemons {
            if let Some(status) = child.try_wait()? {
                bail!("{name} ended: {status}");
            }
        }
        Ok(())
    }

    /// Starts `munged` as the munge user with a key of its own; returns its socket.
    fn start_munged(&mut self) -> anyhow::Result<PathBuf> {
        let (uid, gid) = user_ids("munge")?;
        let dir = self.dir.join("munge");
        std::fs::create_dir_all(&dir)?;
        // munged wants its socket's folder searchable by all and its key its own, 0400.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        chown(&dir, Some(uid), Some(gid))?;
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
        std::fs::write(&key, &bytes)?;
        chown(&key, Some(uid), Some(gid))?;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400))?;
        let socket = dir.join("munge.socket");
        let log = std::fs::File::create(dir.join("munged.out"))?;
        let child = Command::new(find_program("munged").context("munged")?)
            .arg("-F")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
            .arg(format!("--log-file={}", dir.join("munged.log").display()))
            .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting munged")?;
        self.daemons.push(("munged", child));
        wait_until("munged's socket", START, || {
            self.check_daemons()?;
            Ok(socket.exists())
        })
        .with_context(|| std::fs::read_to_string(dir.join("munged.out")).unwrap_or_default())?;
        Ok(socket)
    }

    /// Starts the Slurm daemon `name` in the foreground with `args` and the configuration.
    fn daemon(&self, name: &str, args: &[&str]) -> anyhow::Result<Child> {
        let log = std::fs::File::create(self.dir.join("log").join(format!("{name}.out")))?;
        Command::new(find_program(name).with_context(|| name.to_string())?)
            .args(args)
            .arg(&self.conf)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {name}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs first: slurmd's job steps outlive slurmd.
        let _ = self.run("scancel", &["--quiet", "--full", "--user=root"]);
        let _ = wait_until("the cancelled jobs to end", START, || {
            Ok(self.queue().map_or(true, |q| q.is_empty()))
        });
        for (name, child) in &mut self.daemons {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let ended = wait_until(name, START, || Ok(child.try_wait()?.is_some()));
            if ended.is_err() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The uid and gid of `user`.
fn user_ids(user: &str) -> anyhow::Result<(u32, u32)> {
    let name = std::ffi::CString::new(user)?;
    // SAFETY: getpwnam with a NUL-terminated name; the record is read at once, before any
    // other call could reuse it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        bail!("no user {user} (the munge package makes it)");
    }
    // SAFETY: a non-null record getpwnam returned.
    Ok(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// Two distinct TCP ports free on the loopback address now.
fn free_ports() -> anyhow::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// `slurm.conf` for one node on the loopback address, named as the host is (`hostname -s`),
/// with this machine's CPUs and half its memory, and a default partition.
fn slurm_conf(dir: &Path, munge_socket: &Path) -> anyhow::Result<String> {
    let host = String::from_utf8(Command::new("hostname").arg("-s").output()?.stdout)?
        .trim()
        .to_string();
    let cpus = std::thread::available_parallelism()?.get();
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let total_kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("MemTotal in /proc/meminfo")?;
    let memory_mb = total_kb / 1024 / 2;
    let (ctld, slurmd) = free_ports()?;
    let d = dir.display();
    Ok(format!(
        "ClusterName=losslesstest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={ctld}\n\
         SlurmdPort={slurmd}\n\
         SlurmUser=root\n\
         AuthType=auth/munge\n\
         CredType=cred/munge\n\
         AuthInfo=socket={socket}\n\
         ProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\n\
         SelectType=select/cons_tres\n\
         MpiDefault=none\n\
         MailProg=/bin/true\n\
         ReturnToService=2\n\
         StateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/run/slurmctld.pid\n\
         SlurmdPidFile={d}/run/slurmd.pid\n\
         SlurmctldLogFile={d}/log/slurmctld.log\n\
         SlurmdLogFile={d}/log/slurmd.log\n\
         JobCompType=jobcomp/filetxt\n\
         JobCompLoc={d}/log/jobcomp.txt\n\
         NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN\n\
         PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
        socket = munge_socket.display(),
    ))
}
