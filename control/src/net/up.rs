//! `lossless net up`: plans the network, runs the Mininet glue (`python3 -m lossless_mininet`,
//! Debian's python3 where Debian's mininet lives) inside a network namespace of the network's
//! own, programs every switch over P4Runtime once the glue says it is up, then hands over to
//! the Mininet CLI, a `--test`, or a `--run` script, and tears everything down however it ends
//! (the end of the CLI or script, `lossless net down`, SIGINT, SIGTERM, an error).
//!
//! The glue and the control plane talk over two pipes (the child's fds 3 and 4): the glue says
//! `ready` (status.json written), the control plane answers `programmed` (or an error), the glue
//! may report `tested LOSS`; `stop`, or the pipe closing, ends the network. The glue dies with
//! the control plane (PR_SET_PDEATHSIG), and tears down on that signal too.

use std::{
    io::{BufRead as _, Write as _},
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde_json::json;
use tokio::{signal::unix::SignalKind, sync::mpsc};

use super::{
    experiment::{Experiment, Fabric},
    leaf_spine::{self, Shape, Tuning},
    model::{Entries, Network},
    p4app,
    state::{self, Running, UpRecord},
    tutorial,
};
use crate::{
    netns::{run_in, Namespace},
    p4::{
        cli::{Pipeline, SwitchKind},
        client::{Client, ElectionId, Target},
        entries,
    },
    traffic::StopFlag,
};
use p4values::runtime_json::RuntimeConfig;

/// The Python package, carried in the binary so `lossless` needs no source tree.
const GLUE: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../mininet/lossless_mininet/__init__.py"),
    ),
    (
        "__main__.py",
        include_str!("../../../mininet/lossless_mininet/__main__.py"),
    ),
    (
        "nodes.py",
        include_str!("../../../mininet/lossless_mininet/nodes.py"),
    ),
];
/// lossless.p4, the program of generated fabrics.
const LOSSLESS_P4: &str = include_str!("../../../dataplane-p4/lossless.p4");
/// Debian's Python, where the `mininet` package installs its module.
const PYTHON: &str = "/usr/bin/python3";
/// The first P4Runtime port (the P4 tutorials'); switch N listens on 50051 + N.
const FIRST_GRPC_PORT: u16 = 50051;
/// How long the glue may take to bring the network up (BMv2 starts in about a second each).
const UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the glue may take to tear the network down.
const DOWN_TIMEOUT: Duration = Duration::from_secs(60);

/// What the network is made of.
pub struct Plan {
    /// Its name.
    pub name: String,
    /// The network.
    pub network: Network,
    /// The program of switches that name none (none: lossless.p4, for generated fabrics).
    pub program: Option<PathBuf>,
    /// softswitch or BMv2.
    pub switch: SwitchKind,
    /// eBPF hooks to attach to every host's interface.
    pub host_hooks: Vec<String>,
    /// The generated fabric's shape, if it is one.
    pub shape: Option<Shape>,
    /// Switch logs per packet.
    pub log_console: bool,
    /// Captures of every switch port.
    pub pcap_dump: bool,
}

/// What to do once the network is up.
pub enum Then {
    /// The Mininet CLI.
    Cli,
    /// Mininet's pingAll; the exit status says whether every ping came back.
    PingAll,
    /// Run this script (`sh FILE`), with LOSSLESS_NET naming the network.
    Script(PathBuf),
    /// Run this experiment (a generated fabric's).
    Experiment(Experiment),
}

/// Reads TOPO: `leaf-spine:S,L,H`, a p4app.json (it has a `topology` key) or a tutorials'
/// topology.json. Returns the network, the program the file names, and the shape.
pub fn load(
    topo: &str,
    tuning: &Tuning,
) -> anyhow::Result<(Network, Option<PathBuf>, Option<Shape>)> {
    if let Some(shape) = leaf_spine::parse(topo) {
        let shape = shape?;
        return Ok((leaf_spine::network(shape, tuning)?, None, Some(shape)));
    }
    let path = Path::new(topo);
    let text = state::read_bounded(path, tutorial::MAX_TOPOLOGY_BYTES)?;
    let is_p4app = serde_json::from_str::<serde_json::Value>(&text)
        .with_context(|| format!("in {}", path.display()))?
        .get("topology")
        .is_some();
    if is_p4app {
        let app = p4app::read(path)?;
        return Ok((app.network, app.program, None));
    }
    Ok((tutorial::read(path)?, None, None))
}

/// The program of a tutorials' topology without one: its runtime JSON's `p4info`
/// (`build/basic.p4.p4info.txtpb`, as `make` writes it) names the source, `basic.p4`, which
/// lives beside the topology file.
pub fn program_from_runtime(network: &Network) -> Option<PathBuf> {
    network.switches.iter().find_map(|s| {
        let Entries::File(file) = &s.entries else {
            return None;
        };
        let config = RuntimeConfig::from_file(file).ok()?;
        let p4info = Path::new(config.p4info.as_deref()?)
            .file_name()?
            .to_str()?
            .to_string();
        let source = p4info.split(".p4info").next()?;
        let source = if source.ends_with(".p4") {
            source.to_string()
        } else {
            format!("{source}.p4")
        };
        let path = file.parent()?.join(source);
        path.is_file().then_some(path)
    })
}

/// The hooks `lossless host attach --hooks` takes for the names `--host-hooks` was given:
/// theirs, and `ecn` for `tc` (ECN marking on the host's egress queue).
pub fn host_hooks(names: &[String]) -> anyhow::Result<Vec<String>> {
    let mut hooks: Vec<String> = Vec::new();
    for name in names {
        let hook = match name.as_str() {
            "ecn" => "tc",
            "xdp" | "tc" | "cnp" | "pfc" | "lb" => name.as_str(),
            other => bail!(
                "host hook '{}': ecn, xdp, tc, cnp, pfc or lb",
                other.escape_debug()
            ),
        };
        if !hooks.iter().any(|h| h == hook) {
            hooks.push(hook.to_string());
        }
    }
    Ok(hooks)
}

/// The switch executable of `kind`, and the environment it needs.
fn switch_binary(kind: SwitchKind) -> anyhow::Result<(PathBuf, Vec<(String, String)>)> {
    match kind {
        SwitchKind::Softswitch => {
            let beside = std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.join("softswitch")))
                .filter(|p| p.is_file());
            Ok((
                beside.unwrap_or_else(|| PathBuf::from("softswitch")),
                vec![],
            ))
        }
        SwitchKind::Bmv2 => {
            let toolchain = p4toolchain::Toolchain::find()?;
            let origin = toolchain.describe();
            let tool = toolchain.simple_switch_grpc.with_context(|| {
                format!(
                    "{} has no simple_switch_grpc (BMv2 built with P4Runtime)",
                    origin
                )
            })?;
            let env = tool
                .env
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            Ok((tool.program, env))
        }
    }
}

/// The plan the glue builds from.
fn plan_json(plan: &Plan, dir: &Path, then: &Then) -> anyhow::Result<serde_json::Value> {
    let (sw_path, env) = switch_binary(plan.switch)?;
    let kind = match plan.switch {
        SwitchKind::Softswitch => "softswitch",
        SwitchKind::Bmv2 => "bmv2",
    };
    let switches: Vec<_> = plan
        .network
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"name": s.name, "kind": kind, "sw_path": sw_path, "env": env.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                   "grpc_port": FIRST_GRPC_PORT + i as u16, "device_id": i,
                   "log_console": plan.log_console, "pcap_dump": plan.pcap_dump})
        })
        .collect();
    let links: Vec<_> = plan
        .network
        .links
        .iter()
        .map(|l| {
            let port = |e: &super::model::End| {
                if plan.network.is_host(&e.node) {
                    None
                } else {
                    Some(e.port)
                }
            };
            json!({"node1": l.a.node, "port1": port(&l.a), "addr1": l.a.mac,
                   "node2": l.b.node, "port2": port(&l.b), "addr2": l.b.mac, "bw": l.bw_mbps})
        })
        .collect();
    Ok(json!({
        "name": plan.name,
        "dir": dir,
        "lossless": std::env::current_exe().context("finding the lossless binary")?,
        "hosts": plan.network.hosts,
        "switches": switches,
        "links": links,
        "host_hooks": plan.host_hooks,
        "test": matches!(then, Then::PingAll).then_some("pingall"),
        "interactive": matches!(then, Then::Cli),
    }))
}

/// Everything a running network holds, released by [`Session::teardown`].
struct Session {
    dir: PathBuf,
    netns: Arc<Namespace>,
    glue: Option<Child>,
    to_glue: Option<std::fs::File>,
    from_glue: mpsc::UnboundedReceiver<String>,
    /// A `--run` script's pid while it runs.
    script: Option<u32>,
}

/// Brings the network up, does `then`, and tears it down; the exit status is `then`'s.
pub async fn run(mut plan: Plan, then: Then) -> anyhow::Result<std::process::ExitCode> {
    let dir = state::dir(&plan.name)?;
    clear_leftovers(&plan.name, &dir)?;
    std::fs::create_dir_all(dir.join("py/lossless_mininet"))
        .with_context(|| format!("creating {}", dir.display()))?;
    if plan.program.is_none() {
        let path = dir.join("lossless.p4");
        std::fs::write(&path, LOSSLESS_P4)?;
        plan.program = Some(path);
    }
    let mut session = start(&plan, &then, &dir)?;
    let mut signals = Signals::new()?;
    let result = tokio::select! {
        r = drive(&plan, &then, &mut session) => r,
        signal = signals.next(matches!(then, Then::Cli)) => Err(anyhow::anyhow!("stopped by {signal}")),
    };
    let down = session.teardown();
    let code = result?;
    down?;
    Ok(code)
}

/// Creates the namespace, writes the plan and starts the glue in the namespace.
fn start(plan: &Plan, then: &Then, dir: &Path) -> anyhow::Result<Session> {
    for (file, text) in GLUE {
        std::fs::write(dir.join("py/lossless_mininet").join(file), text)?;
    }
    let plan_path = dir.join("plan.json");
    std::fs::write(
        &plan_path,
        serde_json::to_vec_pretty(&plan_json(plan, dir, then)?)?,
    )?;
    let netns = Arc::new(Namespace::create("llnet")?);
    let kind = match plan.switch {
        SwitchKind::Softswitch => "softswitch",
        SwitchKind::Bmv2 => "bmv2",
    };
    let record = UpRecord {
        pid: std::process::id(),
        netns: netns.name().into(),
        switch_kind: kind.into(),
        shape: plan.shape.map(|s| [s.spines, s.leaves, s.hosts]),
    };
    std::fs::write(dir.join("up.json"), serde_json::to_vec_pretty(&record)?)?;
    let (glue_reads, to_glue) = pipe()?;
    let (from_glue, glue_writes) = pipe()?;
    let ns_file = std::fs::File::open(netns.path())?;
    let mut command = Command::new(PYTHON);
    command
        .args(["-m", "lossless_mininet"])
        .arg(&plan_path)
        .env("PYTHONPATH", dir.join("py"))
        .env("LOSSLESS_NET_SYNC", "3,4")
        .env("LOSSLESS_NET", &plan.name);
    if !matches!(then, Then::Cli) {
        command.stdin(Stdio::null());
    }
    let (r, w, ns) = (
        glue_reads.as_raw_fd(),
        glue_writes.as_raw_fd(),
        ns_file.as_raw_fd(),
    );
    // SAFETY: only async-signal-safe calls (setns, prctl, dup2) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setns(ns, libc::CLONE_NEWNET) != 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
                || libc::dup2(r, 3) < 0
                || libc::dup2(w, 4) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let glue = command.spawn().with_context(|| {
        format!("running {PYTHON} -m lossless_mininet (is Debian's mininet installed? cargo xtask setup installs it)")
    })?;
    drop((glue_reads, glue_writes));
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(from_glue)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(Session {
        dir: dir.to_path_buf(),
        netns,
        glue: Some(glue),
        to_glue: Some(to_glue),
        from_glue: rx,
        script: None,
    })
}

/// A pipe: (read end, write end), both close-on-exec.
fn pipe() -> anyhow::Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    // SAFETY: pipe2 returned two fresh fds that nothing else owns.
    Ok(unsafe {
        (
            std::os::fd::FromRawFd::from_raw_fd(fds[0]),
            std::os::fd::FromRawFd::from_raw_fd(fds[1]),
        )
    })
}

/// Waits for the glue, programs the switches, then does `then`.
async fn drive(
    plan: &Plan,
    then: &Then,
    session: &mut Session,
) -> anyhow::Result<std::process::ExitCode> {
    let line = tokio::time::timeout(UP_TIMEOUT, session.from_glue.recv())
        .await
        .context("the network did not come up in time")?;
    match line.as_deref() {
        Some("ready") => {}
        _ => bail!("the Mininet glue ended before the network was up (its messages are above)"),
    }
    let programmed = program(plan, &session.netns).await;
    session.say(match &programmed {
        Ok(()) => "programmed".to_string(),
        Err(e) => format!("error {e:#}"),
    });
    programmed?;
    eprintln!("lossless net: {} is up; switches programmed", plan.name);
    match then {
        Then::Cli => {
            let glue = session.glue.as_mut().expect("running");
            let pid = glue.id();
            let status = tokio::task::spawn_blocking(move || wait_pid(pid)).await??;
            session.glue = None;
            Ok(exit_code(status))
        }
        Then::PingAll => {
            let line = session.from_glue.recv().await.unwrap_or_default();
            let loss: f64 = line
                .strip_prefix("tested ")
                .and_then(|l| l.parse().ok())
                .with_context(|| format!("the glue reported no ping result ({line:?})"))?;
            println!("pingall: {loss}% dropped");
            Ok(std::process::ExitCode::from(u8::from(loss != 0.0)))
        }
        Then::Experiment(experiment) => {
            let fabric = Fabric {
                running: Running::find(&plan.name)?,
                kind: plan.switch,
                shape: plan.shape.context("experiments run on generated fabrics")?,
                lossless: std::env::current_exe().context("finding the lossless binary")?,
            };
            let stop = StopFlag::new();
            // Dropped when a signal ends the network: the experiment stops with it.
            let _stop = StopOnDrop(stop.clone());
            let experiment = experiment.clone();
            tokio::task::spawn_blocking(move || experiment.run(&fabric, &stop)).await??;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Then::Script(script) => {
            // A process group of its own, so teardown ends the script with all it started.
            let mut child = Command::new("sh")
                .arg(script)
                .env("LOSSLESS_NET", &plan.name)
                .process_group(0)
                .spawn()
                .with_context(|| format!("running sh {}", script.display()))?;
            let pid = child.id();
            session.script = Some(pid);
            let status = tokio::task::spawn_blocking(move || wait_pid(pid)).await;
            session.script = None;
            let _ = child.try_wait();
            Ok(exit_code(status??))
        }
    }
}

/// Sets its flag when dropped.
struct StopOnDrop(StopFlag);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

fn exit_code(status: i32) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(status).unwrap_or(1))
}

/// Waits for child `pid` (a child of this process) and returns its exit status (128 + signal).
fn wait_pid(pid: u32) -> anyhow::Result<i32> {
    let mut status = 0;
    // SAFETY: waits for our own child; status is a valid int.
    let r = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).context("waitpid");
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

/// Sets every switch's pipeline (each program compiled once) and writes its entries, from a
/// thread inside the network's namespace, where the switches listen.
async fn program(plan: &Plan, netns: &Arc<Namespace>) -> anyhow::Result<()> {
    let mut pipelines: Vec<(PathBuf, Arc<Pipeline>)> = Vec::new();
    let mut work = Vec::new();
    for (i, switch) in plan.network.switches.iter().enumerate() {
        let program = switch
            .program
            .clone()
            .or_else(|| plan.program.clone())
            .context("no program")?;
        let pipeline = match pipelines.iter().find(|(p, _)| *p == program) {
            Some((_, pipeline)) => pipeline.clone(),
            None => {
                let pipeline = Arc::new(
                    Pipeline::read(Some(program.clone()), plan.switch, None, None).with_context(
                        || format!("{}: its program {}", switch.name, program.display()),
                    )?,
                );
                pipelines.push((program, pipeline.clone()));
                pipeline
            }
        };
        let entries = match &switch.entries {
            Entries::None => None,
            Entries::File(file) => Some(RuntimeConfig::from_file(file)?),
            Entries::Computed(config) => Some((**config).clone()),
        };
        let target = Target {
            address: format!("127.0.0.1:{}", FIRST_GRPC_PORT + i as u16),
            device_id: i as u64,
            election_id: ElectionId::Fixed(1),
        };
        work.push((switch.name.clone(), target, pipeline, entries));
    }
    let path = netns.path();
    tokio::task::spawn_blocking(move || {
        run_in(&path, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                for (name, target, pipeline, entries) in work {
                    program_switch(target, &pipeline, entries.as_ref())
                        .await
                        .with_context(|| format!("programming {name}"))?;
                }
                anyhow::Ok(())
            })
        })?
    })
    .await?
}

async fn program_switch(
    target: Target,
    pipeline: &Pipeline,
    config: Option<&RuntimeConfig>,
) -> anyhow::Result<()> {
    let mut client = Client::connect(target).await?;
    client
        .set_pipeline(pipeline.p4info.clone(), pipeline.config.clone())
        .await?;
    if let Some(config) = config {
        let updates = entries::updates(config, &pipeline.p4info)?;
        client.write(&updates).await?;
    }
    Ok(())
}

impl Session {
    fn say(&mut self, line: String) {
        if let Some(pipe) = &mut self.to_glue {
            let _ = writeln!(pipe, "{line}");
        }
    }

    /// Tells the glue to stop and waits for it (SIGTERM, then SIGKILL, past DOWN_TIMEOUT);
    /// then kills what it recorded and left running, deletes the namespace (and with it every
    /// interface left in it) and the state directory.
    fn teardown(mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.script.take() {
            // SAFETY: a signal to the process group of the script this session started, which
            // has not been reaped.
            unsafe { libc::kill(-(pid as i32), libc::SIGTERM) };
        }
        self.say("stop".into());
        self.to_glue = None;
        let mut problems = Vec::new();
        if let Some(mut glue) = self.glue.take() {
            let deadline = Instant::now() + DOWN_TIMEOUT;
            loop {
                match glue.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() > deadline => {
                        problems.push("the Mininet glue did not stop in time; killed".to_string());
                        let _ = glue.kill();
                        let _ = glue.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                    Err(e) => {
                        problems.push(format!("waiting for the glue: {e}"));
                        break;
                    }
                }
            }
        }
        problems.extend(kill_recorded(&self.dir));
        drop(self.netns);
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            problems.push(format!("removing {}: {e}", self.dir.display()));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            bail!("tearing down: {}", problems.join("; "))
        }
    }
}

/// Kills the nodes' processes status.json records that still run; says which it had to kill.
fn kill_recorded(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join("status.json")) else {
        return vec![];
    };
    let Ok(status) = serde_json::from_str::<state::Status>(&text) else {
        return vec![];
    };
    let mut killed = Vec::new();
    for node in &status.nodes {
        for pid in [node.pid, node.shell_pid] {
            if pid > 1 && Path::new(&format!("/proc/{pid}")).exists() {
                // SAFETY: a signal to a process of the network, recorded by the glue.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                killed.push(format!(
                    "{} (pid {pid}) was still running; killed",
                    node.name
                ));
            }
        }
    }
    killed
}

/// Removes what a `net up` of the same name left behind when it was killed outright; refuses
/// if that network is still up.
fn clear_leftovers(name: &str, dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if let Ok(running) = Running::find(name) {
        if running.alive() {
            bail!("a network called {name} is up already (pid {}); `lossless net down` it or use --name", running.up.pid);
        }
        kill_recorded(dir);
        let _ = crate::netns::ip(&["netns", "del", &running.up.netns]);
    }
    std::fs::remove_dir_all(dir)
        .with_context(|| format!("removing the leftovers in {}", dir.display()))
}

/// SIGINT, SIGTERM and SIGHUP.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        use tokio::signal::unix::signal;
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal that ends the network; with the Mininet CLI, SIGINT is the CLI's (it
    /// interrupts the command running there, as in Mininet).
    async fn next(&mut self, cli: bool) -> &'static str {
        loop {
            tokio::select! {
                _ = self.int.recv() => if !cli { return "SIGINT" },
                _ = self.term.recv() => return "SIGTERM",
                _ = self.hup.recv() => return "SIGHUP",
            }
        }
    }
}
