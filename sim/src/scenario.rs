//! A scenario: what one run of `lossless sim` simulates, as its user writes it (a TOML file or
//! the command line's options): the fabric (topology's short form), the workload (workload's
//! short forms or files), the switches' tuning (topology's, policy included), the hosts' NIC
//! settings, failures, a seed and a time limit. [`build`] turns it, with the compiled program,
//! into a [`Simulation`] whose switches hold the entries the control plane computes for the
//! fabric (as `lossless net` writes them), checking every limit, and the size of the run
//! against the memory it may take, before it allocates the run.

use std::path::Path;
use std::time::Duration;

use dcqcn::DcqcnParams;
use p4values::runtime_json::RuntimeConfig;
use serde::{Deserialize, Serialize};
use softswitch_core::ir::Program;
use topology::fabric::{End as FabricEnd, Fabric, HostId};
use topology::{Failures, Spec, Tuning};
use units::{parse_duration, DurationLimits};
use workload::{Endpoints, Sources, Workload};

use crate::event::NodeId;
use crate::flows::{FlowSpec, On, Start};
use crate::host::HostConfig;
use crate::link::End;
use crate::simulation::{Execution, Failing, Failure, Reroute, SimError, Simulation};
use crate::time::{Ps, NS};

/// The longest scenario file read, bytes.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// The longest simulated time a run may ask for: 10 s of a data-centre fabric is billions of
/// events.
pub const MAX_TIME: Duration = Duration::from_secs(10);
/// The most failures a scenario may list.
pub const MAX_FAILURES: usize = 1024;
/// The default time limit.
pub const DEFAULT_TIME: &str = "1s";

/// Simulated times of a scenario: from a nanosecond to [`MAX_TIME`], a bare number in µs.
const TIMES: DurationLimits = DurationLimits::micros(Duration::from_nanos(1), MAX_TIME);
/// Delays of a scenario (failure times, reroute delays): zero to [`MAX_TIME`].
const DELAYS: DurationLimits = DurationLimits::micros(Duration::ZERO, MAX_TIME);

/// Congestion control at the hosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CongestionControl {
    /// DCQCN's reaction point on every QP (the `dcqcn` crate, its published defaults).
    #[default]
    Dcqcn,
    /// None: line rate, PFC alone holds the fabric lossless.
    None,
}

/// Who answers CE marks with CNPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CnpSource {
    /// The receiving NIC (DCQCN's notification point), as RoCE NICs do.
    #[default]
    Host,
    /// The marking switch, through lossless.p4's CNP fast path.
    Switch,
    /// Both.
    Both,
    /// Nobody.
    None,
}

/// How hosts choose a QP's UDP source port (the entropy an ECMP hash sees).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourcePorts {
    /// One per connection, shared by its QPs: one 5-tuple, many QPs (the case E-ECMP is for).
    #[default]
    PerConnection,
    /// One per QP.
    PerQp,
}

/// The hosts' NIC settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostSettings {
    /// Congestion control.
    pub cc: CongestionControl,
    /// Who sends CNPs.
    pub cnp: CnpSource,
    /// The NIC's CNP interval per QP (a duration).
    pub cnp_interval: String,
    /// The retransmission timeout (a duration).
    pub rto: String,
    /// UDP source ports.
    pub source_ports: SourcePorts,
}

impl Default for HostSettings {
    fn default() -> Self {
        HostSettings {
            cc: CongestionControl::default(),
            cnp: CnpSource::default(),
            cnp_interval: "50us".into(),
            rto: "4ms".into(),
            source_ports: SourcePorts::default(),
        }
    }
}

/// A failure as the scenario names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureSpec {
    /// When (a duration from the start).
    pub at: String,
    /// The cable at a switch port (`SWITCH:PORT`) or a host's (`HOST`), or none.
    #[serde(default)]
    pub link: Option<String>,
    /// A whole switch, or none.
    #[serde(default)]
    pub switch: Option<String>,
    /// When the control plane's new routes are in, after the failure (a duration); none:
    /// never (the fabric keeps the routes it had).
    #[serde(default)]
    pub reroute_after: Option<String>,
}

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The fabric, in topology's short form (`fat-tree:8,speed=100G`).
    pub topology: String,
    /// The workload: short forms or workload files, whose parts run together.
    pub workload: Vec<String>,
    /// The switches' tuning, the load-balancing policy among it.
    #[serde(default)]
    pub tuning: Tuning,
    /// The hosts' NICs.
    #[serde(default)]
    pub hosts: HostSettings,
    /// Failures.
    #[serde(default, rename = "failure")]
    pub failures: Vec<FailureSpec>,
    /// The seed of every random choice (the workload's and the hosts' UDP source ports; the
    /// switches' RED draws are seeded per switch).
    #[serde(default)]
    pub seed: u64,
    /// The simulated time limit (a duration).
    #[serde(default = "default_time")]
    pub time: String,
}

fn default_time() -> String {
    DEFAULT_TIME.into()
}

impl From<topology::Error> for ScenarioError {
    fn from(error: topology::Error) -> ScenarioError {
        ScenarioError::Topology(error)
    }
}

impl From<workload::WorkloadError> for ScenarioError {
    fn from(error: workload::WorkloadError) -> ScenarioError {
        ScenarioError::Workload(error)
    }
}

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A value out of its limits, unreadable, or naming nothing.
    #[error("{0}")]
    Invalid(String),
    /// The topology or its entries (said in the message, not also given as the source: a chain
    /// printed whole says it once).
    #[error("topology: {0}")]
    Topology(topology::Error),
    /// The workload (said in the message, as the topology's).
    #[error("workload: {0}")]
    Workload(workload::WorkloadError),
    /// The simulation refused something.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The run would need more memory than it may take.
    #[error("this run would take about {need} MB ({what}); {limit} MB may be used: a smaller fabric, fewer flows or a shorter run")]
    Memory {
        /// Megabytes needed.
        need: u64,
        /// Megabytes allowed.
        limit: u64,
        /// What takes it.
        what: String,
    },
}

/// A built run: the simulation, the fabric and workload it came from, and how they map.
pub struct Built {
    /// The simulation, ready to run.
    pub sim: Simulation,
    /// The fabric.
    pub fabric: Fabric,
    /// The workload's flows (flow `i` of the simulation is flow `i` here).
    pub flows: workload::Flows,
    /// The node of each fabric switch, by its index.
    pub switch_nodes: Vec<NodeId>,
    /// The node of each fabric host (workload endpoint `i` is host `i`).
    pub host_nodes: Vec<NodeId>,
    /// The simulated time limit.
    pub time_limit: Ps,
    /// The estimated memory of the run, bytes.
    pub estimated_bytes: u64,
}

impl Scenario {
    /// Reads a scenario file of at most [`MAX_SCENARIO_BYTES`]; errors name the file and line,
    /// and quote nothing of a file that is not a scenario.
    pub fn read(path: &Path) -> Result<Scenario, ScenarioError> {
        use std::io::Read as _;
        let shown = path.display();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_SCENARIO_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| ScenarioError::Invalid(format!("{shown}: {e}")))?;
        if text.len() as u64 > MAX_SCENARIO_BYTES {
            return Err(ScenarioError::Invalid(format!(
                "{shown}: longer than {MAX_SCENARIO_BYTES} bytes"
            )));
        }
        toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].lines().count().max(1)
            });
            ScenarioError::Invalid(format!("{shown}:{line}: {}", e.message().trim_end()))
        })
    }

    /// The simulated time limit.
    pub fn time_limit(&self) -> Result<Ps, ScenarioError> {
        duration_ps(&self.time, &TIMES, "time")
    }
}

/// `text` as picoseconds within `limits`; the error names `key`.
fn duration_ps(text: &str, limits: &DurationLimits, key: &str) -> Result<Ps, ScenarioError> {
    let d =
        parse_duration(text, limits).map_err(|e| ScenarioError::Invalid(format!("{key}: {e}")))?;
    Ok(d.as_nanos() as Ps * NS)
}

/// Bytes one switch running `program` holds in its registers and counters.
pub fn switch_state_bytes(program: &Program) -> u64 {
    program
        .instances
        .iter()
        .map(|i| {
            let cells = u64::from(i.kind.cells().unwrap_or(0));
            cells * i.kind.object().map_or(0, |o| o.cell_bytes)
        })
        .sum()
}

/// Bytes a queued or in-flight frame takes (its stored headers and bookkeeping).
const BYTES_PER_FRAME: u64 = 512;
/// Bytes a flow takes (the workload's, the simulation's, its QP's and connection's share):
/// measured, a 1,024-host AllReduce of two million flows, each a connection of its own, peaked
/// 2.5 GB above the same fabric's permutation, about 1.3 kB a flow.
const BYTES_PER_FLOW: u64 = 1536;

/// An estimate of the memory a run of `fabric` with `flows` flows takes: switch state, frames
/// in the switches' buffers at their fullest and in flight on every link, flows.
pub fn estimate_bytes(fabric: &Fabric, program: &Program, flows: u64) -> u64 {
    let mtu = fabric
        .links
        .iter()
        .map(|l| u64::from(l.mtu))
        .min()
        .unwrap_or(1500)
        .max(64);
    let switches = fabric.switches.len() as u64 * switch_state_bytes(program);
    let buffered: u64 = fabric
        .switches
        .iter()
        .map(|s| s.buffer_bytes / mtu * BYTES_PER_FRAME)
        .sum();
    let in_flight: u64 = fabric
        .links
        .iter()
        .map(|l| {
            let bits_in_flight =
                u128::from(l.rate_bps) * u128::from(l.delay_ps) / 1_000_000_000_000;
            2 * (bits_in_flight as u64 / 8 / mtu + 1) * BYTES_PER_FRAME
        })
        .sum();
    switches + buffered + in_flight + flows * BYTES_PER_FLOW
}

/// The hosts' NIC settings for host `h` of `fabric`.
fn host_config(
    fabric: &Fabric,
    h: HostId,
    s: &Scenario,
    tuning: &Tuning,
) -> Result<HostConfig, ScenarioError> {
    let host = fabric.host(h);
    let link = fabric.link(host.link);
    let class_of = |dscp: u8| {
        tuning
            .classes
            .iter()
            .find(|c| c.dscp == dscp)
            .map_or(0, |c| c.priority)
    };
    let data_dscp = topology::tuning::DSCP_DATA;
    let hs = &s.hosts;
    let nic_cnps = matches!(hs.cnp, CnpSource::Host | CnpSource::Both);
    Ok(HostConfig {
        name: host.name.clone(),
        ip: host.ip,
        mac: host.mac.0,
        gateway_mac: host.gateway_mac.0,
        mtu: link.mtu,
        data_class: (data_dscp, class_of(data_dscp)),
        cnp_class: (tuning.cnp.dscp, class_of(tuning.cnp.dscp)),
        dcqcn: (hs.cc == CongestionControl::Dcqcn).then(DcqcnParams::default),
        cnp_interval: if nic_cnps {
            Some(duration_ps(&hs.cnp_interval, &TIMES, "hosts.cnp_interval")?)
        } else {
            None
        },
        rto: duration_ps(&hs.rto, &TIMES, "hosts.rto")?,
    })
}

/// The simulation's end for a fabric end.
fn end_of(nodes: (&[NodeId], &[NodeId]), e: FabricEnd) -> End {
    match e {
        FabricEnd::Host(h) => End {
            node: nodes.1[h.0],
            port: 0,
        },
        FabricEnd::Switch(s, p) => End {
            node: nodes.0[s.0],
            port: p,
        },
    }
}

/// The tables a reroute rewrites: the routing ones.
const ROUTING_TABLES: [&str; 5] = [
    "LosslessIngress.ipv4_lpm",
    "LosslessIngress.nexthop",
    "LosslessIngress.ecmp_group",
    "LosslessIngress.ecmp_member",
    "LosslessIngress.dlb_members",
];

/// What failure `f` takes down, in the fabric's terms.
fn resolve_failure(
    fabric: &Fabric,
    f: &FailureSpec,
) -> Result<(Failures, FabricEnd), ScenarioError> {
    let mut failures = Failures::none();
    let bad = |m: String| ScenarioError::Invalid(format!("failure: {m}"));
    match (&f.link, &f.switch) {
        (Some(link), None) => {
            let end = match link.split_once(':') {
                Some((switch, port)) => {
                    let s = fabric
                        .switch_named(switch)
                        .ok_or_else(|| bad(format!("no switch {}", units::escaped(switch))))?;
                    let p: u16 = port.parse().map_err(|_| {
                        bad(format!("port {} is not a number", units::escaped(port)))
                    })?;
                    let port = fabric
                        .switch(s)
                        .port(p)
                        .ok_or_else(|| bad(format!("{switch} has no port {p}")))?;
                    failures.links.insert(port.link);
                    FabricEnd::Switch(s, p)
                }
                None => {
                    let h = fabric
                        .host_named(link)
                        .ok_or_else(|| bad(format!("no host {}", units::escaped(link))))?;
                    failures.links.insert(fabric.host(h).link);
                    FabricEnd::Host(h)
                }
            };
            Ok((failures, end))
        }
        (None, Some(switch)) => {
            let s = fabric
                .switch_named(switch)
                .ok_or_else(|| bad(format!("no switch {}", units::escaped(switch))))?;
            failures.switches.insert(s);
            Ok((failures, FabricEnd::Switch(s, 0)))
        }
        _ => Err(bad("name one `link` or one `switch`".into())),
    }
}

/// A scenario read and checked, before anything of its run is allocated: its fabric, tuning,
/// flows and time limit, and the memory its run would take.
struct Plan {
    fabric: Fabric,
    tuning: Tuning,
    time_limit: Ps,
    flows: workload::Flows,
    /// The failures, resolved, in the order they happen.
    failures: Vec<PlannedFailure>,
    estimated_bytes: u64,
}

/// A failure of the scenario, resolved against the fabric.
struct PlannedFailure {
    /// What fails.
    failures: Failures,
    /// The end it is named by.
    end: FabricEnd,
    /// Whether a whole switch fails.
    switch: bool,
    at: Ps,
    /// When the control plane's new routes arrive after it, if they do.
    reroute_after: Option<Ps>,
}

/// The failures of `s`, resolved and checked, sorted by time (the order given among equal
/// times): each reroute is computed with the failures that happened by then.
fn plan_failures(s: &Scenario, fabric: &Fabric) -> Result<Vec<PlannedFailure>, ScenarioError> {
    if s.failures.len() > MAX_FAILURES {
        return Err(ScenarioError::Invalid(format!(
            "more than {MAX_FAILURES} failures"
        )));
    }
    let mut planned = s
        .failures
        .iter()
        .map(|f| {
            let (failures, end) = resolve_failure(fabric, f)?;
            Ok(PlannedFailure {
                failures,
                end,
                switch: f.switch.is_some(),
                at: duration_ps(&f.at, &DELAYS, "failure.at")?,
                reroute_after: f
                    .reroute_after
                    .as_ref()
                    .map(|after| duration_ps(after, &DELAYS, "failure.reroute_after"))
                    .transpose()?,
            })
        })
        .collect::<Result<Vec<_>, ScenarioError>>()?;
    planned.sort_by_key(|f| f.at);
    Ok(planned)
}

/// The memory, bytes, that the run `s` describes would take with every switch running
/// `program` ([`estimate_bytes`]), after every limit of the scenario is checked; nothing of the
/// run is allocated (a sweep sizes its jobs with it).
pub fn estimate(s: &Scenario, program: &Program, sources: &Sources) -> Result<u64, ScenarioError> {
    Ok(plan(s, program, sources)?.estimated_bytes)
}

/// Reads and checks `s`: its fabric, tuning, time limit, failures and flows.
fn plan(s: &Scenario, program: &Program, sources: &Sources) -> Result<Plan, ScenarioError> {
    let spec = Spec::parse(&s.topology)?;
    let fabric = topology::build(&spec);
    let mut tuning = s.tuning.clone();
    if matches!(s.hosts.cnp, CnpSource::Host | CnpSource::None) {
        tuning.cnp.priorities.clear();
    }
    tuning.check()?;
    let time_limit = s.time_limit()?;
    let failures = plan_failures(s, &fabric)?;
    if fabric.hosts.is_empty() {
        return Err(ScenarioError::Invalid("the fabric has no hosts".into()));
    }
    let host_rate = fabric.link(fabric.hosts[0].link).rate_bps;
    let workload = Workload::parse_args(&s.workload, sources)?;
    let flows = workload::expand(
        &workload,
        &Endpoints {
            count: fabric.hosts.len() as u32,
            rate_bps: host_rate,
        },
        s.seed,
    )?;
    if !flows.link_failures.is_empty() {
        return Err(ScenarioError::Invalid(format!(
            "the workload's connection matrix has {} `failure` line(s): give failures as the \
             scenario's [[failure]] tables (or --fail), which say when and whether routes change",
            flows.link_failures.len()
        )));
    }
    let estimated_bytes = estimate_bytes(&fabric, program, flows.flows.len() as u64);
    Ok(Plan {
        fabric,
        tuning,
        time_limit,
        flows,
        failures,
        estimated_bytes,
    })
}

/// Builds the run `s` describes, every switch running `program` as `execution` says (so that
/// an interpreted run never compiles it); refuses it before allocating it when its estimate
/// passes `memory_limit` bytes.
pub fn build(
    s: &Scenario,
    program: &Program,
    sources: &Sources,
    memory_limit: u64,
    execution: Execution,
) -> Result<Built, ScenarioError> {
    let plan = plan(s, program, sources)?;
    if plan.estimated_bytes > memory_limit {
        return Err(ScenarioError::Memory {
            need: plan.estimated_bytes >> 20,
            limit: memory_limit >> 20,
            what: format!(
                "{} switches of {} kB of state each, {} flows, the buffers' frames",
                plan.fabric.switches.len(),
                switch_state_bytes(program) >> 10,
                plan.flows.flows.len()
            ),
        });
    }
    let entries = topology::entries::compute(&plan.fabric, &plan.tuning)?;
    let mut sim = Simulation::new();
    sim.set_execution(execution);
    sim.set_source_port_per_qp(s.hosts.source_ports == SourcePorts::PerQp);
    sim.set_source_port_seed(s.seed);
    let mut switch_nodes = Vec::with_capacity(plan.fabric.switches.len());
    let program = std::sync::Arc::new(program.clone());
    for (i, sw) in plan.fabric.switches.iter().enumerate() {
        let node = sim.add_switch(sw.name.clone(), program.clone(), Some(sw.buffer_bytes));
        sim.apply_entries(node, &entries[i])?;
        switch_nodes.push(node);
    }
    let mut host_nodes = Vec::with_capacity(plan.fabric.hosts.len());
    for h in 0..plan.fabric.hosts.len() {
        host_nodes.push(sim.add_host(host_config(&plan.fabric, HostId(h), s, &plan.tuning)?));
    }
    let nodes = (&switch_nodes[..], &host_nodes[..]);
    for l in &plan.fabric.links {
        sim.connect(
            end_of(nodes, l.a),
            end_of(nodes, l.b),
            l.rate_bps,
            l.delay_ps,
        )?;
    }
    for f in &plan.flows.flows {
        let start = match &f.start {
            workload::Start::At(at) => Start::At(*at),
            workload::Start::After(a) => Start::After {
                deps: a
                    .deps
                    .iter()
                    .map(|d| {
                        let on = match d.on {
                            workload::On::Sent => On::Sent,
                            workload::On::Delivered => On::Delivered,
                        };
                        (d.flow, on)
                    })
                    .collect(),
                needed: a.needed,
                delay: a.delay,
            },
        };
        sim.add_flow(FlowSpec {
            src: host_nodes[f.src as usize],
            dst: host_nodes[f.dst as usize],
            bytes: f.bytes,
            start,
            connection: f.connection,
            qp: f.qp,
        })?;
    }
    let mut failed = Failures::none();
    for f in plan.failures {
        failed.links.extend(f.failures.links.iter().copied());
        failed.switches.extend(f.failures.switches.iter().copied());
        let reroute = match f.reroute_after {
            None => None,
            Some(after) => {
                let new =
                    topology::entries::compute_with_failures(&plan.fabric, &plan.tuning, &failed)?;
                Some(reroute(&switch_nodes, &entries, new, after))
            }
        };
        let what = match f.end {
            FabricEnd::Switch(sw, 0) if f.switch => Failing::Switch(switch_nodes[sw.0]),
            e => Failing::Link(end_of(nodes, e)),
        };
        sim.add_failure(Failure {
            at: f.at,
            what,
            reroute,
        });
    }
    Ok(Built {
        sim,
        fabric: plan.fabric,
        flows: plan.flows,
        switch_nodes,
        host_nodes,
        time_limit: plan.time_limit,
        estimated_bytes: plan.estimated_bytes,
    })
}

/// The control plane's reaction: the routing tables of every switch whose entries changed,
/// rewritten with the new ones.
fn reroute(
    switch_nodes: &[NodeId],
    old: &[RuntimeConfig],
    new: Vec<RuntimeConfig>,
    after: Ps,
) -> Reroute {
    let mut entries = Vec::new();
    for (i, (before, now)) in old.iter().zip(new).enumerate() {
        if topology::entries::changes(before, &now).is_empty() {
            continue;
        }
        let routing = RuntimeConfig {
            table_entries: now
                .table_entries
                .into_iter()
                .filter(|e| ROUTING_TABLES.contains(&e.table.as_str()))
                .collect(),
            ..RuntimeConfig::default()
        };
        entries.push((switch_nodes[i], routing));
    }
    Reroute {
        after,
        tables: ROUTING_TABLES.iter().map(|t| t.to_string()).collect(),
        entries,
    }
}
