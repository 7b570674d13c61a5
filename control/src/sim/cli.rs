//! The `sim` subcommands and their options.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use sim::scenario::{CnpSource, CongestionControl, FailureSpec, Scenario, SourcePorts};

/// The `sim` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Runs a scenario (once per policy compared) and reports it.
    Run(RunArgs),
    /// Runs a grid of scenarios here, or writes it as a Slurm job array or a Kubernetes
    /// Indexed Job.
    Sweep(SweepArgs),
    /// Runs point INDEX of the sweep written in DIR (what the sweep's jobs run).
    Point(PointArgs),
    /// Merges the points of the sweep in DIR into one comparison: a table, report.csv,
    /// report.json and report.svg.
    Report(ReportArgs),
}

/// `lossless sim sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The scenario every point starts from.
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// A dimension of the grid, `KEY=V1,V2,...`: `policy`, `seed`, `load` (the load of
    /// every `cdf:` part given as a short form), `time`, or a tuning key
    /// (`ecn.kmin_packets`); the sweep runs every combination.
    #[arg(long = "grid", value_name = "KEY=VALUES", required = true)]
    pub grid: Vec<String>,
    /// The P4 program of every switch (default: lossless.p4, built in).
    #[arg(long, value_name = "FILE")]
    pub program: Option<PathBuf>,
    /// The sweep's directory; run again on the same directory, a sweep runs only the points
    /// that have no result yet.
    #[arg(long, default_value = "sim-sweep")]
    pub out: PathBuf,
    /// Points run at once: here (default: one per core, fewer if memory is short), as the
    /// Slurm array's `%` limit (default: none), as the Kubernetes Job's parallelism (default:
    /// every point).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write a Slurm job array (DIR/sweep.sbatch) for `sbatch` instead of running here.
    #[arg(long, conflicts_with = "k8s")]
    pub slurm: bool,
    /// Write a Kubernetes Indexed Job (DIR/sweep-job.yaml) instead of running here.
    #[arg(long)]
    pub k8s: bool,
    /// The name of the Slurm job or Kubernetes Job (a DNS label: lowercase letters, digits,
    /// `-`).
    #[arg(long, default_value = "lossless-sweep")]
    pub name: String,
    /// The container image of the Kubernetes Job (it must hold `lossless` on its PATH).
    #[arg(long, default_value = "lossless:latest")]
    pub image: String,
    /// The PersistentVolumeClaim holding the sweep's directory, mounted at /sweep in the
    /// Kubernetes Job's pods.
    #[arg(long, default_value = "lossless-sweep")]
    pub claim: String,
    /// The memory one point may take (`8GB`); default: each point's estimate with room for
    /// the process (Slurm, Kubernetes), or a share of what is available here.
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
}

/// `lossless sim point`.
#[derive(Debug, Args)]
pub struct PointArgs {
    /// The sweep's directory.
    pub dir: PathBuf,
    /// The point; default: `SLURM_ARRAY_TASK_ID` or `JOB_COMPLETION_INDEX` (Kubernetes).
    pub index: Option<usize>,
    /// The memory the point may take.
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
}

/// `lossless sim report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A sweep's directory.
    pub dir: PathBuf,
    /// Print the merged records as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What a scenario is made of, as options; each overrides the scenario file's value.
#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    /// A scenario file (TOML, docs/sim.md); the options override what it says.
    pub scenario: Option<PathBuf>,
    /// The fabric: `leaf-spine:S,L,H`, `fat-tree:K` or `rail:G,S,R`, with options
    /// (`fat-tree:8,speed=100G,buffer=32MB`; docs/topologies.md).
    #[arg(long = "topo", value_name = "SPEC")]
    pub topology: Option<String>,
    /// The workload: a short form (`allreduce:ranks=64,size=64MB,qps=4`) or a workload file
    /// (docs/workloads.md); repeat it to run parts together.
    #[arg(long, value_name = "WORKLOAD")]
    pub workload: Vec<String>,
    /// Tuning of the switches' entries, `KEY=VALUE` with the keys of the scenario's `[tuning]`
    /// table (`ecn.kmin_packets=10`, `pfc.xoff_packets=32`, `flowlet_timeout_us=50`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Congestion control at the hosts.
    #[arg(long, value_enum)]
    pub cc: Option<CcArg>,
    /// Who answers CE marks with CNPs.
    #[arg(long, value_enum)]
    pub cnp: Option<CnpArg>,
    /// UDP source ports: one per connection (its QPs share it) or one per QP.
    #[arg(long, value_enum)]
    pub source_ports: Option<SourcePortsArg>,
    /// The seed of every random choice.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The simulated time limit (`50ms`; default 1 s, at most 10 s).
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
    /// A failure: `link=SWITCH:PORT@TIME`, `link=HOST@TIME` or `switch=NAME@TIME`, and
    /// `,reroute=DELAY` for the control plane's new routes that long after.
    #[arg(long, value_name = "FAILURE")]
    pub fail: Vec<String>,
}

/// `--cc`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CcArg {
    /// DCQCN's reaction point on every QP.
    Dcqcn,
    /// None: line rate, PFC alone.
    None,
}

/// `--cnp`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CnpArg {
    /// The receiving NIC.
    Host,
    /// The marking switch (lossless.p4's fast path).
    Switch,
    /// Both.
    Both,
    /// Nobody.
    None,
}

/// `--source-ports`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SourcePortsArg {
    /// One per connection, shared by its QPs.
    PerConnection,
    /// One per QP.
    PerQp,
}

/// `--execution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecutionArg {
    /// The program compiled once at load into closures, shared by every switch.
    Compiled,
    /// The program's IR walked by the interpreter (the reference).
    Interpreted,
}

impl ExecutionArg {
    /// The switches' execution it names.
    pub fn execution(self) -> sim::simulation::Execution {
        match self {
            ExecutionArg::Compiled => sim::simulation::Execution::Compiled,
            ExecutionArg::Interpreted => sim::simulation::Execution::Interpreted,
        }
    }
}

/// `lossless sim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario.
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Load-balancing policies to compare, comma-separated (ecmp, e-ecmp, flowlet, dlb,
    /// spray): one run each, on the same flows.
    #[arg(long, value_delimiter = ',')]
    pub policy: Vec<String>,
    /// The P4 program of every switch (default: lossless.p4, built in); it must have
    /// lossless.p4's tables.
    #[arg(long, value_name = "FILE")]
    pub program: Option<PathBuf>,
    /// How the switches run the program: compiled, or by the interpreter (the reference;
    /// the same results, at a higher cost).
    #[arg(long, value_enum, default_value = "compiled")]
    pub execution: ExecutionArg,
    /// Where to write summary.json, the CSVs and the plots.
    #[arg(long, default_value = "sim-output")]
    pub out: PathBuf,
    /// Print the summary as JSON (one object per policy) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// The memory a run may take (`8GB`; default: 80% of what the kernel says is available).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
}

impl ScenarioArgs {
    /// The scenario: the file's, with the options over it.
    pub fn scenario(&self) -> anyhow::Result<Scenario> {
        let mut s = match &self.scenario {
            Some(path) => Scenario::read(path)?,
            None => Scenario {
                topology: String::new(),
                workload: Vec::new(),
                tuning: Default::default(),
                hosts: Default::default(),
                failures: Vec::new(),
                seed: 0,
                time: sim::scenario::DEFAULT_TIME.into(),
            },
        };
        if let Some(t) = &self.topology {
            s.topology = t.clone();
        }
        if !self.workload.is_empty() {
            s.workload = self.workload.clone();
        }
        for kv in &self.set {
            let (key, value) = kv
                .split_once('=')
                .with_context(|| format!("--set {}: expected KEY=VALUE", units::escaped(kv)))?;
            s.tuning = set_key(&s.tuning, key, value)?;
        }
        if let Some(cc) = self.cc {
            s.hosts.cc = match cc {
                CcArg::Dcqcn => CongestionControl::Dcqcn,
                CcArg::None => CongestionControl::None,
            };
        }
        if let Some(cnp) = self.cnp {
            s.hosts.cnp = match cnp {
                CnpArg::Host => CnpSource::Host,
                CnpArg::Switch => CnpSource::Switch,
                CnpArg::Both => CnpSource::Both,
                CnpArg::None => CnpSource::None,
            };
        }
        if let Some(p) = self.source_ports {
            s.hosts.source_ports = match p {
                SourcePortsArg::PerConnection => SourcePorts::PerConnection,
                SourcePortsArg::PerQp => SourcePorts::PerQp,
            };
        }
        if let Some(seed) = self.seed {
            s.seed = seed;
        }
        if let Some(t) = &self.time {
            s.time = t.clone();
        }
        for f in &self.fail {
            s.failures.push(parse_failure(f)?);
        }
        if s.topology.is_empty() {
            anyhow::bail!("no fabric: give --topo (e.g. fat-tree:8) or a scenario file");
        }
        if s.workload.is_empty() {
            anyhow::bail!("no workload: give --workload (e.g. allreduce:ranks=16,size=8MB) or a scenario file");
        }
        Ok(s)
    }
}

/// `value` written at the dotted `key` of `tuning`, as the scenario file's `[tuning]` table
/// would hold it: a number, a boolean, or else a string.
pub fn set_key<T: serde::Serialize + serde::de::DeserializeOwned>(
    tuning: &T,
    key: &str,
    value: &str,
) -> anyhow::Result<T> {
    let shown = || units::escaped(key);
    let toml::Value::Table(mut table) =
        toml::Value::try_from(tuning).context("the tuning as a table")?
    else {
        anyhow::bail!("the tuning is not a table");
    };
    let parsed = value
        .parse::<i64>()
        .map(toml::Value::Integer)
        .or_else(|_| value.parse::<f64>().map(toml::Value::Float))
        .or_else(|_| value.parse::<bool>().map(toml::Value::Boolean))
        .unwrap_or_else(|_| toml::Value::String(value.to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    set_in(&mut table, &parts, parsed).with_context(|| format!("{}: no such setting", shown()))?;
    // An unknown last key is refused here, by the tuning's own reader.
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}: {}", shown(), e.message()))
}

/// Writes `value` at the path `parts` of `table`, whose tables up to the last part exist.
fn set_in(table: &mut toml::Table, parts: &[&str], value: toml::Value) -> anyhow::Result<()> {
    match parts {
        [] => anyhow::bail!("an empty key"),
        [last] => {
            table.insert(last.to_string(), value);
            Ok(())
        }
        [first, rest @ ..] => match table.get_mut(*first) {
            Some(toml::Value::Table(inner)) => set_in(inner, rest, value),
            _ => anyhow::bail!("{first} is not a table of settings"),
        },
    }
}

/// `link=SWITCH:PORT@TIME[,reroute=DELAY]` or `switch=NAME@TIME[,reroute=DELAY]`.
pub fn parse_failure(text: &str) -> anyhow::Result<FailureSpec> {
    let bad = || {
        anyhow::anyhow!(
            "--fail {}: expected link=SWITCH:PORT@TIME or switch=NAME@TIME, then ,reroute=DELAY",
            units::escaped(text)
        )
    };
    let (what, rest) = text.split_once('@').ok_or_else(bad)?;
    let (at, reroute) = match rest.split_once(",reroute=") {
        Some((at, after)) => (at, Some(after.to_string())),
        None => (rest, None),
    };
    let (kind, name) = what.split_once('=').ok_or_else(bad)?;
    let (link, switch) = match kind {
        "link" => (Some(name.to_string()), None),
        "switch" => (None, Some(name.to_string())),
        _ => return Err(bad()),
    };
    Ok(FailureSpec {
        at: at.to_string(),
        link,
        switch,
        reroute_after: reroute,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_keys_are_set_by_their_dotted_names() {
        let t = topology::Tuning::default();
        let t = set_key(&t, "ecn.kmin_packets", "11").unwrap();
        assert_eq!(t.ecn.kmin_packets, 11);
        let t = set_key(&t, "policy", "e-ecmp").unwrap();
        assert_eq!(t.policy, topology::Policy::EEcmp);
        assert!(set_key(&t, "ecn.nonsense", "1").is_err());
        assert!(set_key(&t, "nowhere.kmin", "1").is_err());
        assert!(set_key(&t, "ecn.kmin_packets", "many").is_err());
    }

    #[test]
    fn failures_in_their_short_form() {
        let f = parse_failure("link=e0_0:3@1ms,reroute=100us").unwrap();
        assert_eq!(
            (f.link.as_deref(), f.at.as_str(), f.reroute_after.as_deref()),
            (Some("e0_0:3"), "1ms", Some("100us"))
        );
        assert_eq!(
            parse_failure("switch=spine1@2ms")
                .unwrap()
                .switch
                .as_deref(),
            Some("spine1")
        );
        assert!(parse_failure("router=x@1ms").is_err());
        assert!(parse_failure("link=x").is_err());
    }
}
