//! Experiments on a generated fabric (`lossless net experiment ...`) and what they share: the
//! running fabric as an experiment drives it ([`Fabric`]: commands in a host's namespaces as
//! `net exec` runs them, every switch queue paced at a link rate, lossless.p4's counters read
//! over P4Runtime from inside the network's namespace) and a sampler of those counters while
//! the experiment runs. `net up`'s driver brings the fabric up, runs the experiment once the
//! switches are programmed, and tears everything down however it ends.

pub mod collective;
pub mod controller;
pub mod incast;
pub mod lb;
pub mod microburst;
pub mod mixed;

use std::{
    collections::BTreeMap,
    io::Write as _,
    net::IpAddr,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use dcqcn::DcqcnParams;
use p4runtime::{lossless::softswitch::v1::SetQueueRequest, p4::config::v1::P4Info};
use serde::Serialize;

use super::{
    leaf_spine::{Shape, Tuning, PAUSE_RATE_BPS, PRIORITY_DATA},
    state::{NodeStatus, Running},
};
use p4client::{
    cells,
    cli::SwitchKind,
    client::{Client, ElectionId, Target},
    p4info,
};
use serde_json::Value;
use sysutil::netns::run_in;
use traffic::{Interval, Receiver, RecvConfig, RecvSummary, StopFlag};

/// The experiments.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Experiment {
    /// Incast across the fabric: every other host sends RoCEv2 with DCQCN to one receiver;
    /// the switches mark (ECN), send CNPs back and pause (PFC) hop by hop; zero drops in the
    /// lossless class, pauses and marks counted per switch.
    Incast(incast::IncastArgs),
    /// Load balancing compared: the same workload (long and short DCQCN flows from one leaf to
    /// another, across the spines) once per policy (ecmp, flowlet, dlb, spray), the policy
    /// switched live over P4Runtime between runs; per-spine bytes, reordering, short flows'
    /// completion times, pauses and marks per switch, drops in the lossless class.
    Lb(lb::LbArgs),
    /// The lb workload with one leaf-spine link taken down mid-run, once per policy: how the
    /// traffic recovers (the control plane drains the dead link's spine from every leaf's
    /// uplink group), frames lost, short flows' completion times.
    LinkFailure(lb::LinkFailureArgs),
    /// Collectives compared across policies: a ring AllReduce (or all-to-all) with every host
    /// a rank (`traffic collective`), once per policy and per QPs per connection, the policy
    /// switched live between runs; nccl-tests' time and bus bandwidth, the slowest and fastest
    /// rank, bytes per spine, pauses, marks and drops in the lossless class.
    Collective(collective::CollectiveArgs),
    /// Microbursts on softswitch: one host sends bursts of known size and spacing to another;
    /// the bursts the switches' queues detected (count, peak occupancy, duration) and the
    /// sojourn-time histogram beside what was sent.
    Microburst(microburst::MicroburstArgs),
    /// Mixed traffic on softswitch: RoCEv2 in the lossless priority beside lossy bulk traffic
    /// in two priorities shared by DWRR, through one congested port, with and without the bulk;
    /// each lossy class's share against its weight and the CNPs' wait at that port, with a
    /// verdict.
    Mixed(mixed::MixedArgs),
}

impl Experiment {
    /// The eBPF hooks its hosts need.
    pub fn host_hooks(&self) -> Vec<String> {
        match self {
            // XDP consumes the switches' PAUSE frames and keeps the pause state the traffic
            // tool honours.
            Experiment::Incast(_)
            | Experiment::Lb(_)
            | Experiment::LinkFailure(_)
            | Experiment::Collective(_)
            | Experiment::Microburst(_)
            | Experiment::Mixed(_) => vec!["xdp".into()],
        }
    }

    /// The tuning of the fabric's entries it runs on.
    pub fn tuning(&self) -> Tuning {
        match self {
            Experiment::Mixed(_) => mixed::tuning(),
            _ => Tuning::default(),
        }
    }

    /// Runs it on the fabric until it ends or `stop` is set.
    pub fn run(&self, fabric: &Fabric, stop: &StopFlag) -> anyhow::Result<()> {
        match self {
            Experiment::Incast(args) => incast::run(args, fabric, stop),
            Experiment::Lb(args) => lb::run(args, None, fabric, stop),
            Experiment::LinkFailure(args) => lb::run(&args.lb, Some(args), fabric, stop),
            Experiment::Collective(args) => collective::run(args, fabric, stop),
            Experiment::Microburst(args) => microburst::run(args, fabric, stop),
            Experiment::Mixed(args) => mixed::run(args, fabric, stop),
        }
    }
}

/// How often the incast's sampler reads the switches' counters.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Bytes a frame takes on the wire beyond its own (FCS, preamble, inter-frame gap), as the
/// traffic tool counts its rate.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;

/// The most packets per second an experiment paces a link at: software switches on a shared
/// machine.
const MAX_LINK_PPS: u64 = 100_000;

/// Packets per second of `size`-byte frames at `rate_bps` on the wire, within what software
/// switches can pace.
pub fn link_pps(rate_bps: u64, size: usize) -> anyhow::Result<u64> {
    let pps = rate_bps / ((size as u64 + WIRE_OVERHEAD_BYTES) * 8);
    if pps == 0 || pps > MAX_LINK_PPS {
        bail!(
            "a link rate of {rate_bps} b/s is {pps} frames of {size} bytes a second; \
             experiments pace links at 1 to {MAX_LINK_PPS}"
        );
    }
    Ok(pps)
}

/// Before a run: the fabric counts as idle once no switch port received a frame for this
/// long, and the wait for it ends (with a warning) after the second.
const IDLE: Duration = Duration::from_millis(300);
const SETTLE: Duration = Duration::from_secs(10);

/// A host's interface to its leaf, as its own namespace names it.
pub const HOST_IFACE: &str = "eth0";

/// How often a receiver reports what each QP delivered.
pub const GOODPUT_EVERY: Duration = Duration::from_millis(100);

/// The smallest and largest frame an experiment sends.
pub const FRAME_BYTES: std::ops::RangeInclusive<usize> = 128..=1500;

/// How an experiment paces the fabric's links: options every experiment takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Pacing {
    /// Every link's rate: the switches' queues drain at it, and the experiments' DCQCN
    /// senders start at it and never exceed it.
    #[arg(long, default_value = "8mbit", value_parser = units::parse_rate_bps)]
    pub link_rate: u64,
    /// Every switch queue's depth in packets (1 to 4096): PFC pauses at 16, and the rest is
    /// headroom for what is already on its way, which for a software switch includes the
    /// burst its upstream sends to catch up after the machine descheduled it.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_depth: u32,
}

impl Pacing {
    /// Checks the frame size and paces every queue of `fabric` at the link rate for frames of
    /// `frame_bytes`: the link's frames per second.
    pub fn apply(&self, fabric: &Fabric, frame_bytes: usize) -> anyhow::Result<u64> {
        if !FRAME_BYTES.contains(&frame_bytes) {
            bail!("frames of {frame_bytes} bytes: experiments send {FRAME_BYTES:?}");
        }
        let pps = link_pps(self.link_rate, frame_bytes)?;
        fabric.set_queues(pps, self.queue_depth)?;
        Ok(pps)
    }

    /// As [`Pacing::apply`], but paces every port as a whole at the link rate instead of each
    /// queue (softswitch only): the port's queues compete for its departures, and its
    /// scheduler decides which sends.
    pub fn apply_to_ports(&self, fabric: &Fabric, frame_bytes: usize) -> anyhow::Result<u64> {
        if !FRAME_BYTES.contains(&frame_bytes) {
            bail!("frames of {frame_bytes} bytes: experiments send {FRAME_BYTES:?}");
        }
        let pps = link_pps(self.link_rate, frame_bytes)?;
        let request = SetQueueRequest {
            rate_pps: Some(0),
            port_rate_pps: Some(pps),
            depth_packets: Some(self.queue_depth),
            ..Default::default()
        };
        fabric.set_queue_everywhere(&[request], "pacing its ports")?;
        Ok(pps)
    }
}

/// The fabric's links and the frames the senders send on them: options of the experiments
/// whose hosts run `traffic send`.
#[derive(Debug, Clone, clap::Args)]
pub struct Links {
    /// The links' pace.
    #[command(flatten)]
    pub pacing: Pacing,
    /// Frame size in bytes (without FCS), 128 to 1500.
    #[arg(long, default_value_t = 1000)]
    pub size: usize,
}

impl Links {
    /// `lossless traffic send` on a host's `eth0` to `dst` at `rate_bps`, its summary as JSON;
    /// the run's length, class and QPs are the caller's to add.
    pub fn sender(&self, dst: IpAddr, rate_bps: u64) -> Vec<String> {
        [
            "traffic",
            "send",
            "--iface",
            HOST_IFACE,
            "--dst-ip",
            &dst.to_string(),
            "--rate",
            &rate_bps.to_string(),
            "--size",
            &self.size.to_string(),
            "--json",
        ]
        .map(String::from)
        .to_vec()
    }

    /// [`Links::sender`] with DCQCN, from the link rate.
    pub fn dcqcn_sender(&self, dst: IpAddr) -> Vec<String> {
        let mut send = self.sender(dst, self.pacing.link_rate);
        send.push("--dcqcn".into());
        send.extend(dcqcn_flags(self.pacing.link_rate, self.size));
        send
    }

    /// Checks the frame size and paces every queue of `fabric` at the link rate: the link's
    /// frames per second.
    pub fn apply(&self, fabric: &Fabric) -> anyhow::Result<u64> {
        self.pacing
            .apply(fabric, self.size)
            .with_context(|| format!("--size {}", self.size))
    }
}

/// The traffic tool's DCQCN flags for a link of `link_rate` b/s carrying `size`-byte frames
/// ([`DcqcnParams::scaled_to`]).
fn dcqcn_flags(link_rate: u64, size: usize) -> Vec<String> {
    let p = DcqcnParams::scaled_to(link_rate, size);
    [
        ("--dcqcn-g", p.g.to_string()),
        ("--dcqcn-rai", p.rate_ai_bps.to_string()),
        ("--dcqcn-rhai", p.rate_hai_bps.to_string()),
        ("--dcqcn-min-rate", p.min_rate_bps.to_string()),
        ("--dcqcn-byte-counter", p.byte_counter_bytes.to_string()),
        (
            "--dcqcn-timer-us",
            p.increase_period.as_micros().to_string(),
        ),
        ("--dcqcn-alpha-us", p.alpha_period.as_micros().to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// A running generated fabric, as an experiment drives it.
pub struct Fabric {
    /// The network's record (namespace, nodes).
    pub running: Running,
    /// The switch every node runs.
    pub kind: SwitchKind,
    /// Its shape.
    pub shape: Shape,
    /// The `lossless` binary the hosts run.
    pub lossless: PathBuf,
}

/// A child process that is killed (and reaped) when dropped unless it was waited for, and
/// that dies with this process.
pub struct Spawned(Option<Child>);

impl Spawned {
    /// Starts `command` with its stdout and stderr piped.
    pub fn start(mut command: Command) -> anyhow::Result<Spawned> {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: prctl only, async-signal-safe, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(Spawned(Some(
            command.spawn().context("starting nsenter (util-linux)")?,
        )))
    }

    /// Whether it has ended.
    pub fn finished(&mut self) -> bool {
        self.0
            .as_mut()
            .is_none_or(|c| !matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for it; its stdout if it succeeded, else an error with its stderr.
    pub fn output(mut self, what: &str) -> anyhow::Result<String> {
        let child = self.0.take().expect("not waited for yet");
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "{what} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One switch: its name, where its P4Runtime server listens, its data ports.
#[derive(Clone, Debug)]
pub struct SwitchRef {
    /// Its topology name.
    pub name: String,
    /// Its P4Runtime server.
    pub target: Target,
    /// BMv2's Thrift port.
    pub thrift_port: Option<u16>,
    /// Its data ports.
    pub ports: Vec<u32>,
}

impl Fabric {
    /// A host's node.
    pub fn host(&self, name: &str) -> anyhow::Result<&NodeStatus> {
        let node = self.running.node(name)?;
        if node.kind != "host" {
            bail!("{name} is a switch, not a host");
        }
        Ok(node)
    }

    /// The leaf a host is wired to, and its port toward the host: leaf L's ports 1..=H go to
    /// its hosts, in order (the generated fabrics' wiring, [`super::leaf_spine`]).
    pub fn port_toward(&self, host: &str) -> anyhow::Result<(SwitchRef, u32)> {
        let (leaves, hosts) = (self.shape.leaves, self.shape.hosts);
        let (leaf, port) = (1..=leaves)
            .flat_map(|l| (1..=hosts).map(move |h| (l, h)))
            .find(|&(l, h)| super::leaf_spine::host_name(l, h) == host)
            .with_context(|| format!("{host} is no host of the fabric"))?;
        let name = format!("leaf{leaf}");
        let switch = self
            .switches()
            .into_iter()
            .find(|s| s.name == name)
            .with_context(|| format!("the fabric has no {name}"))?;
        Ok((switch, u32::from(port)))
    }

    /// Every host's name, in topology order.
    pub fn hosts(&self) -> Vec<String> {
        self.nodes()
            .filter(|n| n.kind == "host")
            .map(|n| n.name.clone())
            .collect()
    }

    fn nodes(&self) -> impl Iterator<Item = &NodeStatus> {
        self.running.status.iter().flat_map(|s| &s.nodes)
    }

    /// Every switch, spines first, as the fabric lists them.
    pub fn switches(&self) -> Vec<SwitchRef> {
        self.nodes()
            .filter_map(|n| {
                Some(SwitchRef {
                    name: n.name.clone(),
                    target: Target {
                        address: n.grpc.clone()?,
                        device_id: n.device_id?,
                        election_id: ElectionId::Fixed(1),
                        tls: None,
                    },
                    thrift_port: n.thrift_port,
                    ports: n.intfs.iter().map(|i| i.port).collect(),
                })
            })
            .collect()
    }

    /// `lossless ARGS` in host `host`'s network and mount namespaces, as `net exec` runs it.
    pub fn lossless_in(&self, host: &str, args: &[String]) -> anyhow::Result<Command> {
        let node = self.host(host)?;
        let mut command = Command::new("nsenter");
        command
            .args(self.running.nsenter_args(node))
            .arg("--")
            .arg(&self.lossless)
            .args(args);
        Ok(command)
    }

    /// Runs `lossless ARGS` in `host` to its end; its stdout.
    pub fn run_lossless_in(&self, host: &str, args: &[String]) -> anyhow::Result<String> {
        Spawned::start(self.lossless_in(host, args)?)?
            .output(&format!("{host}: lossless {}", args.join(" ")))
    }

    /// Runs `work` on a thread inside the network's namespace, where the switches listen.
    pub fn in_network<T: Send>(
        &self,
        work: impl std::future::Future<Output = anyhow::Result<T>> + Send,
    ) -> anyhow::Result<T> {
        run_in(&self.running.netns_path(), || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(work)
        })?
    }

    /// Sends `requests`, in order, to every switch's Queues service (softswitch's); `what` the
    /// requests do, for an error.
    pub fn set_queue_everywhere(
        &self,
        requests: &[SetQueueRequest],
        what: &str,
    ) -> anyhow::Result<()> {
        let switches = self.switches();
        self.in_network(async {
            for switch in &switches {
                let mut client = Client::connect(switch.target.clone()).await?;
                for request in requests {
                    client
                        .set_queue(*request)
                        .await
                        .with_context(|| format!("{}: {what}", switch.name))?;
                }
            }
            Ok(())
        })
    }

    /// Paces every queue of every switch at `pps` packets per second, as a link of that rate
    /// drains it, and makes it `depth` packets deep: softswitch through its Queues service,
    /// BMv2 through its runtime CLI (`set_queue_rate`, `set_queue_depth`: every port and
    /// priority).
    pub fn set_queues(&self, pps: u64, depth: u32) -> anyhow::Result<()> {
        let switches = self.switches();
        match self.kind {
            SwitchKind::Softswitch => self.set_queue_everywhere(
                &[SetQueueRequest {
                    rate_pps: Some(pps),
                    depth_packets: Some(depth),
                    ..Default::default()
                }],
                "setting its queues' rate",
            ),
            SwitchKind::Bmv2 => {
                let cli = p4toolchain::Toolchain::find()?.simple_switch_cli;
                for switch in &switches {
                    let port = switch
                        .thrift_port
                        .with_context(|| format!("{} reports no Thrift port", switch.name))?;
                    let mut command = Command::new("nsenter");
                    command
                        .arg(format!("--net={}", self.running.netns_path().display()))
                        .arg("--")
                        .arg(&cli.program)
                        .args(["--thrift-port", &port.to_string()]);
                    cli.set_env(&mut command);
                    let input = format!("set_queue_rate {pps}\nset_queue_depth {depth}\n");
                    let answer = runtime_cli(command, &input)
                        .with_context(|| format!("{}: {input}", switch.name))?;
                    if answer.contains("Error") || answer.contains("Invalid") {
                        bail!("{}: {input}: {answer}", switch.name);
                    }
                }
                Ok(())
            }
        }
    }
}

impl Fabric {
    /// Waits until no switch port receives anything (what an earlier run left in the queues
    /// has drained), at most [`SETTLE`].
    pub fn wait_idle(&self) -> anyhow::Result<()> {
        let switches = self.switches();
        let read = || {
            let switches = switches.clone();
            self.in_network(async move {
                let mut total = 0;
                for switch in &switches {
                    total += port_rx_bytes(switch).await?.iter().sum::<u64>();
                }
                Ok(total)
            })
        };
        let since = Instant::now();
        let (mut last, mut last_change) = (read()?, Instant::now());
        while last_change.elapsed() < IDLE {
            if since.elapsed() > SETTLE {
                eprintln!("the fabric still forwards after {SETTLE:?}: starting anyway");
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
            let now = read()?;
            if now != last {
                (last, last_change) = (now, Instant::now());
            }
        }
        Ok(())
    }

    /// The switch it runs, as summaries name it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            SwitchKind::Softswitch => "softswitch",
            SwitchKind::Bmv2 => "bmv2",
        }
    }

    /// Makes `hosts` read the switches' pause quanta at the fabric's link speed (`lossless host
    /// set eth0 pfc.link_speed_bps=...`).
    pub fn read_pauses_at_fabric_speed<'a>(
        &self,
        hosts: impl IntoIterator<Item = &'a String>,
    ) -> anyhow::Result<()> {
        let speed = PAUSE_RATE_BPS;
        for host in hosts {
            self.run_lossless_in(
                host,
                &[
                    "host".into(),
                    "set".into(),
                    HOST_IFACE.into(),
                    format!("pfc.link_speed_bps={speed}"),
                ],
            )?;
        }
        Ok(())
    }

    /// The kernel's drop counters (`ip -s link`: rx and tx dropped) of every interface of the
    /// network that dropped anything: the switches' ports, and every host's `eth0` (named
    /// `HOST-eth0`).
    pub fn interface_drops(&self) -> anyhow::Result<BTreeMap<String, [u64; 2]>> {
        let mut drops = BTreeMap::new();
        let mut read = |namespace: String, prefix: &str| -> anyhow::Result<()> {
            let out = Command::new("nsenter")
                .arg(namespace)
                .args(["--", "ip", "-j", "-s", "link", "show"])
                .output()
                .context("running ip -s link")?;
            let links: serde_json::Value =
                serde_json::from_slice(&out.stdout).with_context(|| {
                    format!("ip -j -s link: {}", String::from_utf8_lossy(&out.stderr))
                })?;
            for link in links.as_array().into_iter().flatten() {
                let name = link["ifname"].as_str().unwrap_or_default();
                let dropped = |way: &str| link["stats64"][way]["dropped"].as_u64().unwrap_or(0);
                let counts = [dropped("rx"), dropped("tx")];
                if name != "lo" && counts != [0, 0] {
                    drops.insert(format!("{prefix}{name}"), counts);
                }
            }
            Ok(())
        };
        read(format!("--net={}", self.running.netns_path().display()), "")?;
        for host in self.hosts() {
            let pid = self.host(&host)?.pid;
            read(format!("--net=/proc/{pid}/ns/net"), &format!("{host}-"))?;
        }
        Ok(drops)
    }
}

/// A host's address, as the glue reported it.
pub fn host_ip(node: &crate::net::state::NodeStatus) -> anyhow::Result<IpAddr> {
    node.intfs
        .first()
        .and_then(|i| i.ip.as_deref())
        .and_then(|ip| ip.parse().ok())
        .with_context(|| format!("{} has no IPv4 address", node.name))
}

/// A count in a sender's JSON summary (0 if missing).
pub fn count(summary: &Value, key: &str) -> u64 {
    summary[key].as_u64().unwrap_or(0)
}

/// The receiver, counting on a thread of its own inside the receiving host's namespace.
pub struct Receiving {
    stop: StopFlag,
    received: Arc<AtomicU64>,
    goodput: Arc<Mutex<Vec<Interval>>>,
    thread: std::thread::JoinHandle<anyhow::Result<RecvSummary>>,
}

impl Receiving {
    /// Opens the receiver's socket in the namespace at `netns`; it counts from here on.
    pub fn start(netns: &str) -> anyhow::Result<Receiving> {
        let config = RecvConfig {
            iface: HOST_IFACE.into(),
            duration: None,
            count: None,
            idle_timeout: None,
            cnp: None,
        };
        let mut receiver = run_in(Path::new(netns), || Receiver::open(config))??;
        let stop = receiver.stop_flag();
        let received = Arc::new(AtomicU64::new(0));
        let goodput = Arc::new(Mutex::new(Vec::new()));
        let (counted, intervals) = (received.clone(), goodput.clone());
        let thread = std::thread::spawn(move || {
            Ok(receiver.run_every(GOODPUT_EVERY, |interval| {
                let packets: u64 = interval.qps.iter().map(|q| q.packets).sum();
                counted.fetch_add(packets, Ordering::Relaxed);
                intervals
                    .lock()
                    .expect("not poisoned")
                    .push(interval.clone());
            })?)
        });
        Ok(Receiving {
            stop,
            received,
            goodput,
            thread,
        })
    }

    /// Frames counted up to the last report.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Stops it: its summary and its reports.
    pub fn finish(self) -> anyhow::Result<(RecvSummary, Vec<Interval>)> {
        self.stop.stop();
        let summary = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the receiver panicked"))??;
        let goodput = std::mem::take(&mut *self.goodput.lock().expect("not poisoned"));
        Ok((summary, goodput))
    }
}

/// Runs BMv2's runtime CLI with `input` on its stdin; its output.
fn runtime_cli(mut command: Command, input: &str) -> anyhow::Result<String> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().context("running simple_switch_CLI")?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("simple_switch_CLI failed ({}): {text}", out.status);
    }
    Ok(text)
}

/// What lossless.p4 counted on one switch for the lossless priority, summed over its ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SwitchCounts {
    /// PAUSE frames sent (`pfc_pause_tx`).
    pub pause_tx: u64,
    /// Resumes sent (`pfc_resume_tx`).
    pub resume_tx: u64,
    /// PFC frames received (`pfc_rx`).
    pub pfc_rx: u64,
    /// Passes of held packets (`pfc_hold`).
    pub held: u64,
    /// Packets let go while still paused (`pfc_hold_expired`).
    pub hold_expired: u64,
    /// Packets marked CE (`ecn_marked`, every priority: only the lossless one is marked).
    pub ecn_marked: u64,
    /// CNPs sent (`cnp_sent`).
    pub cnp_sent: u64,
    /// Packets of the lossless priority the program dropped (`dropped`).
    pub dropped: u64,
}

impl SwitchCounts {
    /// What was counted between `before` and `self`.
    pub fn since(&self, before: &SwitchCounts) -> SwitchCounts {
        SwitchCounts {
            pause_tx: self.pause_tx - before.pause_tx,
            resume_tx: self.resume_tx - before.resume_tx,
            pfc_rx: self.pfc_rx - before.pfc_rx,
            held: self.held - before.held,
            hold_expired: self.hold_expired - before.hold_expired,
            ecn_marked: self.ecn_marked - before.ecn_marked,
            cnp_sent: self.cnp_sent - before.cnp_sent,
            dropped: self.dropped - before.dropped,
        }
    }
}

/// One switch's counts over a run.
#[derive(Debug, Serialize)]
pub struct SwitchOutcome {
    /// Its name.
    pub name: String,
    /// What it counted.
    #[serde(flatten)]
    pub counts: SwitchCounts,
}

impl SwitchOutcome {
    /// Every switch's counts between the first and the last of `samples` (taken of
    /// `switches`).
    pub fn over(
        switches: &[SwitchRef],
        samples: &[CountSample],
    ) -> anyhow::Result<Vec<SwitchOutcome>> {
        let (first, last) = first_and_last(samples)?;
        Ok(switches
            .iter()
            .zip(last.counts.iter().zip(&first.counts))
            .map(|(switch, (last, first))| SwitchOutcome {
                name: switch.name.clone(),
                counts: last.since(first),
            })
            .collect())
    }

    /// `what` of the counts, summed over `outcomes`.
    pub fn total(outcomes: &[SwitchOutcome], what: fn(&SwitchCounts) -> u64) -> u64 {
        outcomes.iter().map(|s| what(&s.counts)).sum()
    }
}

/// The counters [`SwitchCounts`] sums, and whether a cell is per (port, priority) or per port.
const COUNTED: [(&str, bool); 8] = [
    ("LosslessIngress.pfc_pause_tx", true),
    ("LosslessEgress.pfc_resume_tx", true),
    ("LosslessIngress.pfc_rx", true),
    ("LosslessEgress.pfc_hold", true),
    ("LosslessEgress.pfc_hold_expired", true),
    ("LosslessEgress.ecn_marked", false),
    ("LosslessEgress.cnp_sent", false),
    ("LosslessIngress.dropped", true),
];

/// Frames and bytes each port received from the wire.
const PORT_RX: &str = "LosslessIngress.port_rx";

/// A switch's P4Runtime client with its P4Info, reading [`SwitchCounts`].
struct CounterReader {
    client: Client,
    p4info: P4Info,
    ports: Vec<u32>,
}

impl CounterReader {
    async fn connect(switch: &SwitchRef) -> anyhow::Result<CounterReader> {
        let mut client = Client::connect(switch.target.clone()).await?;
        let p4info = client.p4info().await?;
        Ok(CounterReader {
            client,
            p4info,
            ports: switch.ports.clone(),
        })
    }

    /// One Read of the lossless priority's cells of every port, and of every port's
    /// `port_rx` (bytes received from the wire, in [`SwitchRef::ports`] order).
    async fn read(&mut self) -> anyhow::Result<(SwitchCounts, Vec<u64>)> {
        let mut entities = Vec::new();
        for (name, per_priority) in COUNTED {
            let counter = p4info::counter(&self.p4info, name)?;
            for port in &self.ports {
                let index = match per_priority {
                    true => i64::from(*port) * 8 + i64::from(PRIORITY_DATA),
                    false => i64::from(*port),
                };
                entities.push(cells::counter_entity(counter, Some(index))?);
            }
        }
        let port_rx = p4info::counter(&self.p4info, PORT_RX)?;
        for port in &self.ports {
            entities.push(cells::counter_entity(port_rx, Some(i64::from(*port)))?);
        }
        let read = self.client.read(entities).await?;
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        let mut rx_bytes: BTreeMap<i64, u64> = BTreeMap::new();
        for cell in cells::counter_cells(&read, &self.p4info) {
            if cell.counter == PORT_RX {
                let bytes = u64::try_from(cell.bytes).unwrap_or(0);
                *rx_bytes.entry(cell.index.unwrap_or(0)).or_default() += bytes;
            } else {
                *sums.entry(cell.counter).or_default() += u64::try_from(cell.packets).unwrap_or(0);
            }
        }
        let sum = |i: usize| sums.get(COUNTED[i].0).copied().unwrap_or(0);
        let counts = SwitchCounts {
            pause_tx: sum(0),
            resume_tx: sum(1),
            pfc_rx: sum(2),
            held: sum(3),
            hold_expired: sum(4),
            ecn_marked: sum(5),
            cnp_sent: sum(6),
            dropped: sum(7),
        };
        let ports = self
            .ports
            .iter()
            .map(|p| rx_bytes.get(&i64::from(*p)).copied().unwrap_or(0))
            .collect();
        Ok((counts, ports))
    }
}

/// The bytes each of `switch`'s ports received from the wire (`port_rx`), in
/// [`SwitchRef::ports`] order, read once (from inside the network).
pub async fn port_rx_bytes(switch: &SwitchRef) -> anyhow::Result<Vec<u64>> {
    let (_, bytes) = CounterReader::connect(switch).await?.read().await?;
    Ok(bytes)
}

/// Every switch's counts at one moment.
#[derive(Clone, Debug)]
pub struct CountSample {
    /// Seconds since the sampler started, when the sample's reads began.
    pub t_s: f64,
    /// One per switch, in [`Fabric::switches`] order.
    pub counts: Vec<SwitchCounts>,
    /// Per switch (same order), the bytes each of its ports received from the wire, in
    /// [`SwitchRef::ports`] order.
    pub rx_bytes: Vec<Vec<u64>>,
}

impl CountSample {
    /// The bytes the `i`th switch received from the wire, all its ports.
    pub fn switch_rx_bytes(&self, i: usize) -> u64 {
        self.rx_bytes[i].iter().sum()
    }
}

/// The first and the last of `samples`.
fn first_and_last(samples: &[CountSample]) -> anyhow::Result<(&CountSample, &CountSample)> {
    Ok((
        samples.first().context("no counter sample")?,
        samples.last().context("no counter sample")?,
    ))
}

/// The head of a Markdown table: its row of `names` and the separator row.
pub fn table_head(names: &[String]) -> String {
    table_row(names) + &table_row(&vec!["---".to_string(); names.len()])
}

/// One row of a Markdown table.
pub fn table_row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

/// Prints `table`, writes it (table.txt) and `summary` (summary.json) into `out`; then, when
/// the experiment's verdict found `failures`, fails with them (the experiment exits non-zero).
pub fn report(
    out: &Path,
    summary: &impl Serialize,
    table: &str,
    failures: &[String],
) -> anyhow::Result<()> {
    crate::output::print_and_write_table(out, summary, table, "table.txt")?;
    if !failures.is_empty() {
        bail!("the verdict: FAIL ({})", failures.join("; "));
    }
    Ok(())
}

/// The end of an experiment's table: the kernel's drops on every interface that dropped any,
/// then `verdict`, marked when the experiment was stopped early.
pub fn table_end(
    interface_drops: &BTreeMap<String, [u64; 2]>,
    verdict: &str,
    stopped_early: bool,
) -> String {
    let mut t = String::new();
    for (name, [rx, tx]) in interface_drops {
        t += &format!("\nkernel drops on {name}: {rx} received, {tx} sent");
    }
    let stopped = if stopped_early {
        " (stopped early)"
    } else {
        ""
    };
    t + &format!("\n{verdict}{stopped}\n")
}

/// The table's columns of [`spine_bytes`], one per spine (`NAME MB`), named after the first
/// row's (every row has the same spines; none without rows).
pub fn spine_columns(first: Option<&BTreeMap<String, u64>>) -> Vec<String> {
    first
        .into_iter()
        .flat_map(|bytes| bytes.keys().map(|s| format!("{s} MB")))
        .collect()
}

/// The cells of one row's [`spine_bytes`] under [`spine_columns`]: MB, two decimals.
pub fn spine_cells(bytes: &BTreeMap<String, u64>) -> impl Iterator<Item = String> + '_ {
    bytes.values().map(|b| format!("{:.2}", *b as f64 / 1e6))
}

/// The bytes each spine of `switches` (by name) received from the wire between the first and
/// the last of `samples`.
pub fn spine_bytes(
    switches: &[SwitchRef],
    samples: &[CountSample],
) -> anyhow::Result<BTreeMap<String, u64>> {
    let (first, last) = first_and_last(samples)?;
    Ok(switches
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name.starts_with("spine"))
        .map(|(i, s)| {
            (
                s.name.clone(),
                last.switch_rx_bytes(i) - first.switch_rx_bytes(i),
            )
        })
        .collect())
}

/// Reads every switch's counters at a steady pace on a thread of its own, until stopped; the
/// first sample is taken before [`Sampler::start`] returns.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<anyhow::Result<Vec<CountSample>>>,
}

impl Sampler {
    /// Connects to every switch and starts sampling, once `every`.
    pub fn start(fabric: &Fabric, every: Duration) -> anyhow::Result<Sampler> {
        let switches = fabric.switches();
        let netns = fabric.running.netns_path();
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            run_in(&netns, move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(sample(&switches, every, &stopped, ready_tx))
            })?
        });
        match ready_rx.recv() {
            Ok(()) => Ok(Sampler { stop, thread }),
            Err(_) => Err(thread
                .join()
                .map_err(|_| anyhow::anyhow!("the counter sampler panicked"))?
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("the counter sampler ended early"))),
        }
    }

    /// Takes a last sample and returns them all.
    pub fn finish(self) -> anyhow::Result<Vec<CountSample>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the counter sampler panicked"))?
    }
}

async fn sample(
    switches: &[SwitchRef],
    every: Duration,
    stop: &AtomicBool,
    ready: std::sync::mpsc::Sender<()>,
) -> anyhow::Result<Vec<CountSample>> {
    let mut readers = Vec::new();
    for switch in switches {
        readers.push(
            CounterReader::connect(switch)
                .await
                .with_context(|| format!("{}: reading its counters", switch.name))?,
        );
    }
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut next = tokio::time::Instant::now();
    loop {
        let last = stop.load(Ordering::Relaxed);
        // Stamped before the reads: every count in the sample was read after this time.
        let t_s = start.elapsed().as_secs_f64();
        let (mut counts, mut rx_bytes) = (Vec::new(), Vec::new());
        for reader in &mut readers {
            let (c, bytes) = reader.read().await?;
            counts.push(c);
            rx_bytes.push(bytes);
        }
        samples.push(CountSample {
            t_s,
            counts,
            rx_bytes,
        });
        if samples.len() == 1 {
            let _ = ready.send(());
        }
        if last {
            return Ok(samples);
        }
        next += every;
        tokio::time::sleep_until(next).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates_become_bounded_packet_rates() {
        // 1000-byte frames take 1024 bytes of wire each: 8.192 Mb/s is 1000 a second.
        assert_eq!(link_pps(8_192_000, 1000).unwrap(), 1000);
        assert!(link_pps(1000, 1000).is_err());
        assert!(link_pps(100_000_000_000, 64).is_err());
    }
}
