//! `lossless net ...`: up, status, exec, down, policy; and `lossless p4 --switch NAME`, which
//! finds a switch of a running network by its topology name.

use std::{os::unix::process::CommandExt as _, path::PathBuf, process::ExitCode};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};

use super::{
    cleanup,
    experiment::Experiment,
    leaf_spine::{policy_parser, Policy, Shape, Tuning},
    program,
    state::{self, Running},
    up::{self, Plan, Then},
    uplinks::{self, Uplinks},
};
use p4client::cli::{P4Args, SwitchKind};
use sysutil::netns::run_in;

/// `lossless net`: the network's name, and the subcommand.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// The network's name (default: $LOSSLESS_NET, else `default`).
    #[arg(long, global = true)]
    pub name: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: NetCommand,
}

/// The `net` subcommands.
#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// Bring a network up: TOPO is leaf-spine:SPINES,LEAVES,HOSTS (lossless.p4 with computed
    /// entries), a P4 tutorials' topology.json, or a p4-utils p4app.json. Opens the Mininet CLI
    /// unless --test or --run says otherwise; everything is torn down when it ends.
    Up {
        /// The topology.
        topo: String,
        /// The P4 switch every switch node runs.
        #[arg(long = "switch", value_enum, default_value_t = SwitchKind::Softswitch)]
        switch: SwitchKind,
        /// The program (P4 source or p4c's BMv2 JSON) of switches whose topology names none;
        /// without it, a p4app.json's p4_src, else the program each switch's runtime JSON was
        /// written for.
        #[arg(long)]
        program: Option<PathBuf>,
        /// eBPF hooks to attach to every host's interface: those of `lossless host attach
        /// --hooks` (xdp, tc, cnp, pfc, lb), and ecn, which stands for tc (ECN marking on the
        /// host's egress).
        #[arg(long, value_delimiter = ',')]
        host_hooks: Vec<String>,
        /// A generated fabric's load-balancing policy to start with.
        #[arg(long, value_parser = policy_parser(), default_value_t = Policy::Ecmp)]
        policy: Policy,
        /// Run Mininet's pingAll and exit: 0 when every ping came back (as `mn --test pingall`).
        #[arg(long, value_enum, conflicts_with = "run")]
        test: Option<NetTest>,
        /// Run this shell script once the network is up (LOSSLESS_NET names it, so `lossless
        /// net exec` and `lossless p4 --switch NAME` find it) and exit with its status.
        #[arg(long)]
        run: Option<PathBuf>,
        /// Switch logs per packet (BMv2 --log-console; softswitch SOFTSWITCH_LOG=debug).
        #[arg(long)]
        log_console: bool,
        /// A capture of every switch port in the network's directory.
        #[arg(long)]
        pcap_dump: bool,
        /// How long each of the topology's host commands may run before it is interrupted
        /// (and, like a command that fails, logged while the network goes on); default 30 s.
        #[arg(long, value_parser = units::parse_run_time)]
        command_timeout: Option<std::time::Duration>,
    },
    /// The nodes, switches (gRPC address, device id) and links of a running network.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a command in a node: a host's namespace, or a switch's (the network's).
    Exec {
        /// The node.
        node: String,
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Stop a running network and wait until nothing of it is left.
    Down,
    /// Bring a generated fabric up, run an experiment on it, write its summary.json, table
    /// and plot to its --out directory, and take the fabric down.
    Experiment {
        /// The fabric: leaf-spine:SPINES,LEAVES,HOSTS.
        #[arg(long, global = true, default_value = "leaf-spine:2,2,2")]
        topo: String,
        /// The P4 switch every switch node runs.
        #[arg(long = "switch", global = true, value_enum, default_value_t = SwitchKind::Softswitch)]
        switch: SwitchKind,
        /// The experiment.
        #[command(subcommand)]
        experiment: Experiment,
    },
    /// Switch a generated fabric's load-balancing policy live, on every leaf, over P4Runtime.
    Policy {
        /// The policy.
        #[arg(value_parser = policy_parser())]
        policy: Policy,
    },
}

/// `net up --test`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum NetTest {
    /// Mininet's pingAll.
    Pingall,
}

fn name(args: &NetArgs) -> String {
    args.name
        .clone()
        .or_else(|| std::env::var("LOSSLESS_NET").ok())
        .unwrap_or_else(|| state::DEFAULT_NAME.to_string())
}

/// Runs one `net` subcommand.
pub async fn run(args: NetArgs) -> anyhow::Result<ExitCode> {
    let name = name(&args);
    state::check_name(&name)?;
    match args.command {
        NetCommand::Up {
            topo,
            switch,
            program,
            host_hooks,
            policy,
            test,
            run,
            log_console,
            pcap_dump,
            command_timeout,
        } => {
            let tuning = Tuning {
                policy,
                ..Tuning::default()
            };
            let (mut network, file_program, shape) = up::load(&topo, &tuning)?;
            if shape.is_none() {
                program::settle(&mut network, program.or(file_program).as_deref())?;
            }
            let then = match (test, run) {
                (Some(NetTest::Pingall), _) => Then::PingAll,
                (None, Some(script)) => Then::Script(script),
                (None, None) => Then::Cli,
            };
            let host_hooks = up::host_hooks(&host_hooks)?;
            let plan = Plan {
                name,
                network,
                switch,
                host_hooks,
                shape,
                log_console,
                pcap_dump,
                command_timeout: command_timeout.unwrap_or(up::DEFAULT_COMMAND_TIMEOUT),
            };
            up::run(plan, then).await
        }
        NetCommand::Experiment {
            topo,
            switch,
            experiment,
        } => {
            let (network, _, shape) = up::load(&topo, &experiment.tuning())?;
            if shape.is_none() {
                bail!(
                    "experiments run on generated fabrics (leaf-spine:S,L,H), and {topo} is none"
                );
            }
            let plan = Plan {
                name,
                network,
                switch,
                host_hooks: up::host_hooks(&experiment.host_hooks())?,
                shape,
                log_console: false,
                pcap_dump: false,
                command_timeout: up::DEFAULT_COMMAND_TIMEOUT,
            };
            up::run(plan, Then::Experiment(experiment)).await
        }
        NetCommand::Status { json } => {
            let running = Running::find(&name)?;
            let status = running
                .status
                .as_ref()
                .context("the network is still coming up")?;
            if json {
                println!("{}", serde_json::to_string_pretty(status)?);
            } else {
                print!("{}", describe(&running, status));
            }
            Ok(ExitCode::SUCCESS)
        }
        NetCommand::Exec { node, command } => {
            let running = Running::find(&name)?;
            let node = running.node(&node)?;
            let namespaces = running.nsenter_args(node);
            // Replaced by nsenter, as `ip netns exec` is by the command: signals and the exit
            // status are the command's own.
            let error = std::process::Command::new("nsenter")
                .args(namespaces)
                .arg("--")
                .args(&command)
                .exec();
            Err(error).context("running nsenter (util-linux)")
        }
        NetCommand::Down => {
            let running = Running::find(&name)?;
            down(&running)?;
            println!("{name}: down");
            Ok(ExitCode::SUCCESS)
        }
        NetCommand::Policy { policy } => {
            let running = Running::find(&name)?;
            let [spines, leaves, hosts] = running
                .up
                .shape
                .context("policy changes the uplink group of a generated leaf-spine fabric; this network is not one")?;
            let shape = Shape {
                spines,
                leaves,
                hosts,
            };
            let status = running
                .status
                .as_ref()
                .context("the network is still coming up")?;
            let leaves = uplinks::leaf_targets(status);
            let spines: Vec<u16> = (1..=shape.spines).collect();
            in_network(&running, async move {
                Uplinks::connect(shape, Tuning::default(), leaves)
                    .await?
                    .write(policy, &spines)
                    .await
            })
            .await?;
            println!("{name}: uplink policy {policy:?} on every leaf");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs `work` on a thread inside the network's namespace, where its switches listen.
async fn in_network<T: Send + 'static>(
    running: &Running,
    work: impl std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
) -> anyhow::Result<T> {
    let path = running.netns_path();
    tokio::task::spawn_blocking(move || {
        run_in(&path, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(work)
        })?
    })
    .await?
}

/// How long `net down` lets a live `net up` tear its network down before it does it itself.
const DOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(90);

/// Signals `net up` to stop and waits until its directory is gone; when that `net up` is gone
/// (killed outright) or does not finish in time, removes what the records name itself
/// ([`cleanup::force`]). Says on standard error what it had to kill.
fn down(running: &Running) -> anyhow::Result<()> {
    if running.up_process().signal(libc::SIGTERM) {
        let deadline = std::time::Instant::now() + DOWN_WAIT;
        while running.dir.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !running.dir.exists() {
            return Ok(());
        }
        eprintln!(
            "lossless net down: lossless net up (pid {}) did not take the network down in {} s",
            running.up.pid,
            DOWN_WAIT.as_secs()
        );
    } else {
        eprintln!(
            "lossless net down: lossless net up (pid {}) is gone; removing what it left",
            running.up.pid
        );
    }
    for problem in cleanup::force(running) {
        eprintln!("lossless net down: {problem}");
    }
    if running.dir.exists() {
        bail!("{} could not be removed", running.dir.display());
    }
    Ok(())
}

fn describe(running: &Running, status: &state::Status) -> String {
    let mut out = format!(
        "network {} (namespace {}, {})\n",
        status.name, running.up.netns, running.up.switch_kind
    );
    for node in &status.nodes {
        let intfs: Vec<_> = node
            .intfs
            .iter()
            .map(|i| match &i.ip {
                Some(ip) if node.kind == "host" => format!("{} {ip}", i.name),
                _ => format!("{}:{}", i.port, i.name),
            })
            .collect();
        match (&node.grpc, node.device_id) {
            (Some(grpc), Some(id)) => {
                out += &format!(
                    "  switch {:<8} grpc {grpc} device {id}  {}\n",
                    node.name,
                    intfs.join(" ")
                )
            }
            _ => {
                out += &format!(
                    "  host   {:<8} pid {}  {}\n",
                    node.name,
                    node.pid,
                    intfs.join(" ")
                )
            }
        }
    }
    for [a, b] in &status.links {
        out += &format!("  link   {a} <-> {b}\n");
    }
    out
}

/// `lossless p4 --switch NAME`: when NAME is no HOST:PORT but a switch of the running network
/// ($LOSSLESS_NET, else `default`), runs the command against it from inside the network.
pub async fn p4(mut args: P4Args) -> anyhow::Result<()> {
    if args.switch.contains(':') {
        return p4client::cli::run(args).await;
    }
    let name = std::env::var("LOSSLESS_NET").unwrap_or_else(|_| state::DEFAULT_NAME.to_string());
    let running = Running::find(&name).with_context(|| {
        format!(
            "--switch {}: no HOST:PORT, and no running network has it",
            args.switch
        )
    })?;
    let node = running.node(&args.switch)?;
    let (Some(grpc), Some(device_id)) = (node.grpc.clone(), node.device_id) else {
        bail!("{} is a host, not a switch", args.switch);
    };
    args.switch = grpc;
    args.device_id = device_id;
    in_network(&running, p4client::cli::run(args)).await
}
