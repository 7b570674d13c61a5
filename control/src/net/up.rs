//! `lossless net up`: plans the network, reads its switches' pipelines (compiling for BMv2
//! once per program), runs the Mininet glue (`python3 -m lossless_mininet`, Debian's python3
//! where Debian's mininet lives) inside a network namespace of the network's own, programs
//! every switch over P4Runtime (and with its simple_switch_CLI commands over Thrift) once the
//! glue says it is up, then hands over to the Mininet CLI, a `--test`, or a `--run` script,
//! and tears everything down however it ends (the end of the CLI or script, `lossless net
//! down`, SIGINT, SIGTERM, an error), through [`cleanup`].
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
    time::Duration,
};

use anyhow::{bail, Context as _};
use serde_json::json;
use tokio::{signal::unix::SignalKind, sync::mpsc};

use super::{
    cleanup,
    experiment::{Experiment, Fabric},
    leaf_spine::{self, Shape, Tuning},
    model::{Entries, Network, Program},
    p4app,
    program::{self, Pipelines},
    state::{self, ProcessId, Running, UpRecord},
    tutorial,
};
use p4client::{
    cli::{Pipeline, SwitchKind},
    client::{Client, ElectionId, Target},
    entries,
};
use p4values::runtime_json::RuntimeConfig;
use sysutil::netns::{run_in, Namespace};
use traffic::StopFlag;

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
/// The first Thrift port (the tutorials' and p4-utils'); switch N listens on 9090 + N.
const FIRST_THRIFT_PORT: u16 = 9090;
/// How long the glue may take to bring the network up (BMv2 starts in about a second each),
/// besides the hosts' commands, each of which has its own timeout.
const UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long each host command may run by default (`net up --command-timeout`).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the glue has to take the hint of `stop` before it is told with SIGTERM (it reads
/// the pipe only once the network is up).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// What the network is made of.
pub struct Plan {
    /// Its name.
    pub name: String,
    /// The network, every switch with its program settled ([`program::settle`]; a generated
    /// fabric's get lossless.p4).
    pub network: Network,
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
    /// How long each of the hosts' commands may run.
    pub command_timeout: Duration,
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
    let text = state::read_bounded(path, netfiles::MAX_BYTES as u64)?;
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
                   "grpc_port": FIRST_GRPC_PORT + i as u16, "thrift_port": FIRST_THRIFT_PORT + i as u16,
                   "device_id": i, "cpu_port": plan.network.cpu_ports.get(&s.name),
                   "log_console": plan.log_console, "pcap_dump": plan.pcap_dump})
        })
        .collect();
    let hosts: std::collections::HashSet<&str> =
        plan.network.hosts.iter().map(|h| h.name.as_str()).collect();
    let links: Vec<_> = plan
        .network
        .links
        .iter()
        .map(|l| {
            let port = |e: &super::model::End| (!hosts.contains(e.node.as_str())).then_some(e.port);
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
        "command_timeout": plan.command_timeout.as_secs_f64(),
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

/// What programs one switch once the network is up.
struct Programming {
    name: String,
    target: Target,
    pipeline: Option<Arc<Pipeline>>,
    entries: Option<RuntimeConfig>,
    /// simple_switch_CLI commands, and the Thrift port to send them to.
    cli_input: Option<(PathBuf, u16)>,
}

/// Brings the network up, does `then`, and tears it down; the exit status is `then`'s.
pub async fn run(mut plan: Plan, then: Then) -> anyhow::Result<std::process::ExitCode> {
    // The glue's pipe may close under a write when the glue ends first: that is an error to
    // handle (EPIPE), not a reason to die of SIGPIPE before tearing down.
    // SAFETY: setting a signal's disposition to ignore has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let dir = state::dir(&plan.name)?;
    clear_leftovers(&plan.name, &dir)?;
    std::fs::create_dir_all(dir.join("py/lossless_mininet"))
        .with_context(|| format!("creating {}", dir.display()))?;
    if plan.shape.is_some() {
        let path = dir.join("lossless.p4");
        std::fs::write(&path, LOSSLESS_P4)?;
        for switch in &mut plan.network.switches {
            switch.program = Some(Program::Source(path.clone()));
        }
    }
    let work = match programming(&plan) {
        Ok(work) => work,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    let mut session = match start(&plan, &then, &dir) {
        Ok(session) => session,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    let mut signals = Signals::new()?;
    let result = tokio::select! {
        r = drive(&plan, &then, work, &mut session) => r,
        signal = signals.next(matches!(then, Then::Cli)) => Err(anyhow::anyhow!("stopped by {signal}")),
    };
    let down = session.teardown();
    let code = result?;
    down?;
    Ok(code)
}

/// Reads every switch's pipeline (each program once; compiled by p4c for BMv2, and for a
/// softswitch that gets simple_switch_CLI commands, which read the program's BMv2 JSON from
/// the switch) and entries, before anything is brought up.
fn programming(plan: &Plan) -> anyhow::Result<Vec<Programming>> {
    let mut pipelines = Pipelines::default();
    let mut work = Vec::new();
    for (i, switch) in plan.network.switches.iter().enumerate() {
        let cli_input = switch.entries.cli_input();
        let kind = match cli_input {
            Some(_) => SwitchKind::Bmv2,
            None => plan.switch,
        };
        let pipeline = switch
            .program
            .as_ref()
            .map(|p| {
                pipelines.get(p, kind).with_context(|| {
                    format!(
                        "{}: its program {}",
                        switch.name,
                        program::path(p).display()
                    )
                })
            })
            .transpose()?;
        let entries = match &switch.entries {
            Entries::Computed(config) => Some((**config).clone()),
            files => files
                .runtime_json()
                .map(RuntimeConfig::from_file)
                .transpose()?,
        };
        work.push(Programming {
            name: switch.name.clone(),
            target: Target {
                address: format!("127.0.0.1:{}", FIRST_GRPC_PORT + i as u16),
                device_id: i as u64,
                election_id: ElectionId::Fixed(1),
                tls: None,
            },
            pipeline,
            entries,
            cli_input: cli_input.map(|f| (f.to_path_buf(), FIRST_THRIFT_PORT + i as u16)),
        });
    }
    if work.iter().any(|w| w.cli_input.is_some()) {
        // Found now, so that a missing CLI fails before the network is up.
        simple_switch_cli()?;
    }
    Ok(work)
}

/// BMv2's `simple_switch_CLI`, which applies `cli_input` files (to softswitch as to BMv2).
fn simple_switch_cli() -> anyhow::Result<p4toolchain::Tool> {
    let toolchain = p4toolchain::Toolchain::find()
        .context("cli_input files are applied with BMv2's simple_switch_CLI")?;
    Ok(toolchain.simple_switch_cli)
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
    // Before Mininet makes the switch interfaces: with IPv6 off they get no link-local
    // address, and a host can reach nothing the switches serve on every interface of this
    // namespace (BMv2's Thrift port); IPv4 has only loopback here (docs/security.md).
    netns.disable_ipv6()?;
    // The switches' P4Runtime ports lie in the kernel's ephemeral range: without this, the
    // control plane's connection to one switch may take the port another is about to bind.
    let switches = u16::try_from(plan.network.switches.len()).context("too many switches")?;
    if switches > 0 {
        netns.reserve_local_ports(FIRST_GRPC_PORT..=FIRST_GRPC_PORT + (switches - 1))?;
    }
    let kind = match plan.switch {
        SwitchKind::Softswitch => "softswitch",
        SwitchKind::Bmv2 => "bmv2",
    };
    let own = ProcessId::own();
    let mut record = UpRecord {
        pid: own.pid,
        started: own.started,
        glue: None,
        netns: netns.name().into(),
        switch_kind: kind.into(),
        shape: plan.shape.map(|s| [s.spines, s.leaves, s.hosts]),
    };
    let up_path = dir.join("up.json");
    std::fs::write(&up_path, serde_json::to_vec_pretty(&record)?)?;
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
    // SAFETY: only async-signal-safe calls (setns, prctl, dup2, signal) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setns(ns, libc::CLONE_NEWNET) != 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
                || libc::dup2(r, 3) < 0
                || libc::dup2(w, 4) < 0
                || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let glue = command.spawn().with_context(|| {
        format!("running {PYTHON} -m lossless_mininet (is Debian's mininet installed? cargo xtask setup installs it)")
    })?;
    record.glue = ProcessId::of(glue.id());
    std::fs::write(&up_path, serde_json::to_vec_pretty(&record)?)?;
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
    work: Vec<Programming>,
    session: &mut Session,
) -> anyhow::Result<std::process::ExitCode> {
    let commands: usize = plan.network.hosts.iter().map(|h| h.commands.len()).sum();
    let up_timeout = UP_TIMEOUT + plan.command_timeout * commands as u32;
    let line = tokio::time::timeout(up_timeout, session.from_glue.recv())
        .await
        .context("the network did not come up in time")?;
    match line.as_deref() {
        Some("ready") => {}
        _ => bail!("the Mininet glue ended before the network was up (its messages are above)"),
    }
    let programmed = program(work, &session.dir, &session.netns).await;
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

/// Sets every switch's pipeline and writes its entries, from a thread inside the network's
/// namespace, where the switches listen; then applies the simple_switch_CLI command files.
async fn program(work: Vec<Programming>, dir: &Path, netns: &Arc<Namespace>) -> anyhow::Result<()> {
    let path = netns.path();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        run_in(&path, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            for switch in &work {
                runtime.block_on(program_switch(switch)).with_context(|| {
                    let log = dir.join(format!("{}.log", switch.name));
                    format!("programming {}{}", switch.name, log_tail(&log))
                })?;
            }
            for switch in &work {
                if let Some((file, port)) = &switch.cli_input {
                    let log = dir.join(format!("{}-cli.log", switch.name));
                    apply_cli_input(file, *port, &log).with_context(|| {
                        format!("{}: cli_input {}", switch.name, file.display())
                    })?;
                }
            }
            anyhow::Ok(())
        })?
    })
    .await?
}

async fn program_switch(switch: &Programming) -> anyhow::Result<()> {
    let Some(pipeline) = &switch.pipeline else {
        return Ok(());
    };
    let mut client = Client::connect(switch.target.clone()).await?;
    client
        .set_pipeline(pipeline.p4info.clone(), pipeline.config.clone())
        .await?;
    if let Some(config) = &switch.entries {
        let updates = entries::updates(config, &pipeline.p4info)?;
        client.write(&updates).await?;
    }
    Ok(())
}

/// Lines of a switch's log shown when programming it failed.
const LOG_TAIL_LINES: usize = 20;

/// The last [`LOG_TAIL_LINES`] lines of the switch log at `log` (the glue writes one per switch
/// into the state directory), as a paragraph to follow an error; nothing if it cannot be read.
fn log_tail(log: &Path) -> String {
    use std::io::{Read as _, Seek as _};
    /// The end of the log read (a `--log-console` log grows large).
    const READ: u64 = 64 * 1024;
    let mut text = Vec::new();
    let read = std::fs::File::open(log).and_then(|mut file| {
        let len = file.metadata()?.len();
        file.seek(std::io::SeekFrom::Start(len.saturating_sub(READ)))?;
        file.take(READ).read_to_end(&mut text)
    });
    if read.is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    format!(
        "; the end of its log, {}:\n{}",
        log.display(),
        tail.join("\n")
    )
}

/// Feeds `file` to `simple_switch_CLI --thrift-port PORT` (in this thread's namespace), its
/// output into `log`; a command the CLI refused (it says `Error: ...`, `Invalid ...` or `***
/// Unknown syntax`, and exits 0 all the same) is an error that quotes the refusals.
fn apply_cli_input(file: &Path, port: u16, log: &Path) -> anyhow::Result<()> {
    let cli = simple_switch_cli()?;
    let input = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let output = Command::new(&cli.program)
        .envs(cli.env.iter().map(|(k, v)| (k, v)))
        .args(["--thrift-port", &port.to_string()])
        .stdin(input)
        .output()
        .with_context(|| format!("running {}", cli.program.display()))?;
    let mut text = output.stdout;
    text.extend_from_slice(&output.stderr);
    std::fs::write(log, &text).with_context(|| format!("writing {}", log.display()))?;
    let text = String::from_utf8_lossy(&text);
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("Error:") || l.contains("Invalid ") || l.contains("*** Unknown syntax")
        })
        .take(5)
        .collect();
    if !output.status.success() || !refused.is_empty() {
        bail!(
            "simple_switch_CLI {}: {} (all it said is in {})",
            output.status,
            refused.join("; "),
            log.display()
        );
    }
    Ok(())
}

impl Session {
    fn say(&mut self, line: String) {
        if let Some(pipe) = &mut self.to_glue {
            // The glue may be gone (its pipe closed): the teardown finds out.
            let _ = writeln!(pipe, "{line}");
        }
    }

    /// Ends whatever runs and removes the network ([`cleanup`]): the script's process group,
    /// then the glue (told `stop`, its pipe closed, SIGTERM after a grace if it was not
    /// reading it, SIGKILL past [`cleanup::GLUE_TEARDOWN`]), then what it recorded and left
    /// running, the namespace and the state directory.
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
            if let Some(id) = ProcessId::of(glue.id()) {
                if !cleanup::wait_gone(id, STOP_GRACE) {
                    problems.extend(cleanup::stop_glue(id));
                }
            }
            let _ = glue.wait();
        }
        problems.extend(cleanup::remove(&self.dir, self.netns.name()));
        if problems.is_empty() {
            Ok(())
        } else {
            bail!("tearing down: {}", problems.join("; "))
        }
    }
}

/// Removes what a `net up` of the same name left behind when it was killed outright; refuses
/// if that network is still up.
fn clear_leftovers(name: &str, dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    match Running::find(name) {
        Ok(running) if running.alive() => bail!(
            "a network called {name} is up already (pid {}); `lossless net down` it or use --name",
            running.up.pid
        ),
        Ok(running) => {
            let problems = cleanup::force(&running);
            if dir.exists() {
                bail!(
                    "the leftovers of a network called {name} could not be removed: {}",
                    problems.join("; ")
                );
            }
            Ok(())
        }
        Err(_) => std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the leftovers in {}", dir.display())),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_switch_shows_the_end_of_its_log() {
        let dir = testkit::TempDir::new("lossless", "log-tail");
        let text: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
        let log = dir.file("leaf2.log", &text.join("\n"));
        let tail = log_tail(&log);
        assert!(tail.contains("line 11\nline 12"), "{tail}");
        assert!(tail.ends_with("line 30"), "{tail}");
        assert!(!tail.contains("line 10\n"), "{tail}");
        assert_eq!(log_tail(&dir.0.join("absent.log")), "");
    }
}
