//! `lossless check`'s options, its run (the rules on the fabric, and with `--failures 1` the
//! cycle rule after each single link failure), and its output: a table for people, JSON for
//! programs, and an exit status for CI (0: no error found; 1: errors found; 2: the fabric
//! could not be read).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{bail, Context as _};

use check::{
    fabric::{Fabric, LinkDefaults},
    tables::Tables,
    Assumptions, Finding, Severity,
};
use clap::Args;
use hostconfig::{
    config::read_config_file,
    edit::{set_keys, Target},
};
use p4values::runtime_json::RuntimeConfig;
use serde::Serialize;
use topology::{entries, Failures};

use super::{
    live,
    read::{self, Files, HostFile, Source},
};
use crate::net::state::read_bounded;

/// The depth of an egress queue when no config says it: softswitch's and BMv2's default.
pub const DEFAULT_QUEUE_PACKETS: u32 = 64;

/// `lossless check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The fabric: a generated one (leaf-spine:S,L,H, fat-tree:K, rail:G,S,R with options,
    /// its entries computed as lossless net and lossless sim compute them), a P4 tutorials'
    /// topology.json or a p4-utils p4app.json (with its switches' runtime JSON), or one
    /// switch's runtime JSON.
    #[arg(required_unless_present = "net")]
    pub fabric: Option<String>,
    /// Check the running `lossless net` network NAME instead of files: every switch's entries
    /// read live over P4Runtime, the topology and link rates from the network's record
    /// (root: the switches listen in the network's namespace). Its entries are live: no
    /// `--fix` (check the files it was brought up from) and no `--failures` (a file's reroutes
    /// are not computed).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["fabric", "tuning", "fix", "failures"])]
    pub net: Option<String>,
    /// Hosts' configurations, `[HOST=]FILE`: an agent's TOML (deploy/agent.toml's format;
    /// each interface a NIC) or a host config (`lossless host attach --config`), for HOST or
    /// every host. Repeat for several.
    #[arg(long, value_name = "[HOST=]FILE")]
    pub host_config: Vec<String>,
    /// A generated fabric's tuning (the TOML of lossless sim's `[tuning]`): thresholds,
    /// classes, lossless priorities.
    #[arg(long, value_name = "FILE")]
    pub tuning: Option<PathBuf>,
    /// Also check the buffer-dependency graph after every single link failure, with the routes
    /// the control plane computes for it (a generated fabric).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub failures: u8,
    /// A file topology's link rate where a link gives no `bw` (default: the 1 Gb/s lossless
    /// net's pause quanta stand for).
    #[arg(long, default_value = "1g", value_parser = units::parse_rate_bps)]
    pub speed: u64,
    /// A file topology's cable length where a link gives no delay.
    #[arg(long, default_value = "2m", value_parser = topology::quantity::parse_length_mm)]
    pub cable: u64,
    /// A file topology's MTU (a veth's by default).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(68..=65535))]
    pub mtu: u32,
    /// The depth of every egress queue, packets (softswitch's and BMv2's default).
    #[arg(long, default_value_t = DEFAULT_QUEUE_PACKETS, value_parser = clap::value_parser!(u32).range(1..=524_287))]
    pub queue_packets: u32,
    /// How long a sender takes to stop once a PAUSE arrives, ns (the headroom's last term).
    #[arg(long, default_value_t = check::headroom::DEFAULT_RESPONSE_NS, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub pause_response_ns: u64,
    /// The longest PFC watchdog detection time accepted, ms.
    #[arg(long, default_value_t = check::rules::MAX_WATCHDOG_MS)]
    pub max_watchdog_ms: u64,
    /// Also suggest thresholds (XOFF/XON, Kmin/Kmax/Pmax) from the links' speed, cable and
    /// MTU and the queue depth, as a tuning (`--tuning`'s TOML) and hosts' `lossless host set`
    /// keys, with the reasoning.
    #[arg(long)]
    pub suggest: bool,
    /// Write corrected copies of the runtime JSON files the fixable findings are about, beside
    /// them as NAME.fixed.json (never over them), and of a topology.json naming them; and of
    /// the hosts' configs (`--host-config`) whose findings a host key fixes, as
    /// NAME.fixed.toml, the rest of each file kept.
    #[arg(long)]
    pub fix: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The most rounds of `--fix` (a fix can bring another to light: a lower XOFF, then Kmax
/// below it).
const FIX_ROUNDS: usize = 4;

/// What `--suggest` adds to the report.
#[derive(Serialize)]
struct Suggested {
    /// The tuning's TOML, the reasoning as comments.
    tuning: String,
    /// Per host, the `KEY=VALUE` settings.
    hosts: BTreeMap<String, Vec<String>>,
}

/// What `--json` prints.
#[derive(Serialize)]
struct Report<'a> {
    fabric: &'a str,
    errors: usize,
    warnings: usize,
    notes: usize,
    /// Single link failures checked (`--failures 1`).
    failures_checked: usize,
    findings: &'a [Finding],
    #[serde(skip_serializing_if = "Option::is_none")]
    suggestion: Option<Suggested>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fixed: Option<Fixed>,
}

/// What `--fix` wrote.
#[derive(Serialize)]
struct Fixed {
    /// The files written.
    written: Vec<PathBuf>,
    /// Errors left in the fixed copies (the fixes cover some rules only).
    errors_left: usize,
    /// Warnings left in the fixed copies.
    warnings_left: usize,
}

/// Runs `lossless check`: 0 when no error was found, 1 when one was, 2 when the fabric could
/// not be read (the error on stderr).
pub fn run(args: &CheckArgs) -> ExitCode {
    let label = match (&args.net, &args.fabric) {
        (Some(name), _) => format!("network {name}"),
        (None, fabric) => fabric.clone().unwrap_or_default(),
    };
    match findings(args) {
        Ok(Checked {
            findings,
            failures_checked,
            suggestion,
            fixed,
        }) => {
            let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
            let report = Report {
                fabric: &label,
                errors: count(Severity::Error),
                warnings: count(Severity::Warning),
                notes: count(Severity::Note),
                failures_checked,
                findings: &findings,
                suggestion,
                fixed,
            };
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).expect("findings serialize")
                );
            } else {
                print!("{}", table(&report));
            }
            if report.errors > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// What a check found and did.
struct Checked {
    findings: Vec<Finding>,
    failures_checked: usize,
    suggestion: Option<Suggested>,
    fixed: Option<Fixed>,
}

/// Runs the check as `args` say.
fn findings(args: &CheckArgs) -> anyhow::Result<Checked> {
    let defaults = LinkDefaults {
        rate_bps: args.speed,
        cable_mm: args.cable,
        mtu: args.mtu,
        queue_packets: args.queue_packets,
    };
    let assumptions = Assumptions {
        pause_response_ns: args.pause_response_ns,
        max_watchdog_ms: args.max_watchdog_ms,
    };
    let source = match (&args.net, &args.fabric) {
        (Some(name), _) => Source::Live(live::fabric(name, defaults)?),
        (None, Some(fabric)) => read::fabric(fabric, args.tuning.as_deref(), defaults)?,
        (None, None) => anyhow::bail!("FABRIC or --net NAME: what to check"),
    };
    let (generated, mut fabric, files) = match source {
        Source::Generated(spec, tuning) => {
            let configs = entries::compute(&spec, &tuning)?;
            let fabric = Fabric::generated(&spec, &configs, args.queue_packets)?;
            (Some((spec, tuning, configs)), fabric, None)
        }
        Source::Files(fabric, files) => (None, fabric, Some(files)),
        Source::Live(fabric) => (None, fabric, None),
    };
    let hosts = read::host_configs(&mut fabric, &args.host_config)?;
    let mut found = check::check(&fabric, &assumptions);
    let suggestion = if args.suggest {
        let s = check::suggest::suggest(&fabric, &assumptions).map_err(anyhow::Error::msg)?;
        Some(Suggested {
            tuning: s.tuning,
            hosts: s.hosts.into_iter().collect(),
        })
    } else {
        None
    };
    let mut checked = 0;
    if args.failures == 1 {
        let Some((spec, tuning, intact)) = generated else {
            anyhow::bail!(
                "--failures 1 takes a generated fabric: the control plane computes its reroutes; \
                 a file's entries are fixed"
            );
        };
        for link in 0..spec.links.len() {
            let id = topology::fabric::LinkId(link);
            let configs =
                entries::compute_with_failures(&spec, &tuning, &Failures::of_links([id]))?;
            let failed = Fabric::generated(&spec, &configs, args.queue_packets)?;
            let rerouted: Vec<String> = intact
                .iter()
                .zip(&configs)
                .zip(&spec.switches)
                .filter_map(|((old, new), s)| {
                    let c = entries::changes(old, new);
                    (!c.is_empty()).then(|| {
                        format!(
                            "{}: {} added, {} changed, {} removed",
                            s.name,
                            c.add.len(),
                            c.modify.len(),
                            c.remove.len()
                        )
                    })
                })
                .collect();
            for mut f in check::deadlock::cycles(&failed) {
                f.after_failure = Some(format!(
                    "{} failed; the control plane's reroute: {}",
                    spec.describe_link(id),
                    rerouted.join("; ")
                ));
                found.push(f);
            }
            checked += 1;
        }
        found.sort_by_key(|f| f.severity);
    }
    let fixed = match (args.fix, files) {
        (false, _) => None,
        (true, Some(files)) => Some(fix(fabric, &files, (args, hosts), &assumptions)?),
        (true, None) => anyhow::bail!(
            "--fix writes corrected copies of files; a generated fabric's entries come from its \
             tuning: take --suggest's and give it with --tuning"
        ),
    };
    Ok(Checked {
        findings: found,
        failures_checked: checked,
        suggestion,
        fixed,
    })
}

/// Applies the findings' edits to the switches' entries, rechecking after each round, and
/// writes each changed runtime JSON beside its original as NAME.fixed.json, and a
/// topology.json's copy naming them; then sets the host keys that fix the hosts' findings in
/// copies of their configs (NAME.fixed.toml) and reads the hosts from those for the last check.
fn fix(
    mut fabric: Fabric,
    files: &Files,
    (args, (host_files, host_from)): (&CheckArgs, (Vec<HostFile>, Vec<Option<usize>>)),
    assumptions: &Assumptions,
) -> anyhow::Result<Fixed> {
    let mut configs: Vec<Option<RuntimeConfig>> = files
        .runtime
        .iter()
        .map(|r| r.as_ref().map(|(_, c)| c.clone()))
        .collect();
    let mut changed = BTreeSet::new();
    for _ in 0..FIX_ROUNDS {
        let (now, _) = check::fix(&check::check(&fabric, assumptions), &mut configs);
        if now.is_empty() {
            break;
        }
        for &s in &now {
            if let Some(config) = &configs[s] {
                fabric.switches[s].tables = Tables::read(config)?;
            }
        }
        changed.extend(now);
    }
    // The hosts' copies, made (and refused) before anything is written.
    let host_copies = host_copies(&fabric, &host_files, &host_from, assumptions)?;
    let fixed_name = |path: &Path| fixed_beside(path, "json");
    let mut written = Vec::new();
    let mut renamed = BTreeMap::new();
    for &s in &changed {
        let (Some((path, _)), Some(config)) = (&files.runtime[s], &configs[s]) else {
            continue;
        };
        let to = fixed_name(path);
        let text = serde_json::to_string_pretty(config).expect("entries serialize");
        std::fs::write(&to, text + "\n").with_context(|| format!("writing {}", to.display()))?;
        renamed.insert(fabric.switches[s].name.clone(), to.clone());
        written.push(to);
    }
    if files.tutorial && !renamed.is_empty() {
        let text = read_bounded(&files.path, netfiles::MAX_BYTES as u64)?;
        let mut topology: serde_json::Value = serde_json::from_str(&text)?;
        for (name, to) in &renamed {
            let file = &mut topology["switches"][name]["runtime_json"];
            // The file beside the one it named (relative as that one was).
            let named = Path::new(file.as_str().unwrap_or_default());
            let beside = named.with_file_name(to.file_name().unwrap_or_default());
            *file = beside.to_string_lossy().into_owned().into();
        }
        let to = fixed_name(&files.path);
        let text = serde_json::to_string_pretty(&topology).expect("JSON serializes");
        std::fs::write(&to, text + "\n").with_context(|| format!("writing {}", to.display()))?;
        written.push(to);
    }
    let mut given = args.host_config.clone();
    for (file, to, text) in host_copies {
        std::fs::write(&to, text).with_context(|| format!("writing {}", to.display()))?;
        given[file] = match given[file].split_once('=') {
            Some((host, _)) => format!("{host}={}", to.display()),
            None => to.display().to_string(),
        };
        written.push(to);
    }
    read::host_configs(&mut fabric, &given)?;
    let left = check::check(&fabric, assumptions);
    let count = |s: Severity| left.iter().filter(|f| f.severity == s).count();
    Ok(Fixed {
        written,
        errors_left: count(Severity::Error),
        warnings_left: count(Severity::Warning),
    })
}

/// The host configs' fixed copies, `(file index, NAME.fixed.toml beside it, text)`: the host
/// keys that fix the fabric's findings, per file and interface (a file for every host takes
/// each key's last value; the check after says what one value did not fix). Refused, before
/// anything is written, where a file to fix is given for several hosts, a copy would land on
/// one of the given files, or two files would share a copy.
fn host_copies(
    fabric: &Fabric,
    host_files: &[HostFile],
    host_from: &[Option<usize>],
    assumptions: &Assumptions,
) -> anyhow::Result<Vec<(usize, PathBuf, String)>> {
    let mut keys: BTreeMap<usize, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for s in check::check(fabric, assumptions)
        .iter()
        .flat_map(|f| &f.settings)
    {
        if let Some(file) = host_from.get(s.host).copied().flatten() {
            keys.entry(file)
                .or_default()
                .entry(s.interface.clone())
                .or_default()
                .insert(s.key.clone(), s.value.clone());
        }
    }
    // Where a file is, whatever the path that named it.
    let real = |path: &Path| -> PathBuf {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new("."));
        std::fs::canonicalize(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .join(path.file_name().unwrap_or_default())
    };
    let inputs: Vec<PathBuf> = host_files.iter().map(|f| real(&f.path)).collect();
    let mut copies: Vec<(usize, PathBuf, String)> = Vec::new();
    for (&file, interfaces) in &keys {
        let HostFile { path, agent } = &host_files[file];
        let to = fixed_beside(path, "toml");
        if (0..inputs.len()).any(|other| other != file && inputs[other] == inputs[file]) {
            bail!(
                "--fix writes one copy per file, and {} is given for several hosts: give each \
                 host its own file",
                path.display()
            );
        }
        if let Some(input) = inputs.iter().position(|i| *i == real(&to)) {
            bail!(
                "--fix would write {}'s copy over {}, which is given too: rename one",
                path.display(),
                host_files[input].path.display()
            );
        }
        if let Some((other, _, _)) = copies.iter().find(|(_, t, _)| real(t) == real(&to)) {
            bail!(
                "--fix would write the copies of {} and {} to one file, {}: give each host its \
                 own file",
                host_files[*other].path.display(),
                path.display(),
                to.display()
            );
        }
        let mut text = read_config_file(path)?;
        for (interface, keys) in interfaces {
            let target = if *agent {
                Target::AgentInterface(interface)
            } else {
                Target::Host
            };
            let keys: Vec<(String, String)> = keys.clone().into_iter().collect();
            text = set_keys(&text, target, &keys)
                .with_context(|| format!("fixing {}", path.display()))?;
        }
        copies.push((file, to, text));
    }
    Ok(copies)
}

/// `NAME.fixed.EXT` beside `path` (`NAME.*`).
fn fixed_beside(path: &Path, ext: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("fabric");
    path.with_file_name(format!("{stem}.fixed.{ext}"))
}

/// The table people read: one block per finding, then the counts.
fn table(report: &Report) -> String {
    let mut out = String::new();
    for f in report.findings {
        out.push_str(&format!(
            "{:<7} {:<20} {}\n        {}\n        fix: {}\n",
            f.severity.name(),
            f.rule,
            f.place.describe(),
            f.why,
            f.fix
        ));
        if let Some(d) = &f.detail {
            out.push_str(&format!("        {d}\n"));
        }
        if let Some(a) = &f.after_failure {
            out.push_str(&format!("        after: {a}\n"));
        }
    }
    out.push_str(&format!(
        "{}: {} errors, {} warnings, {} notes",
        report.fabric, report.errors, report.warnings, report.notes
    ));
    if report.failures_checked > 0 {
        out.push_str(&format!(
            " ({} single link failures checked)",
            report.failures_checked
        ));
    }
    out.push('\n');
    if let Some(s) = &report.suggestion {
        out.push_str("\nSuggested tuning (--tuning FILE, lossless sim's [tuning]):\n");
        out.push_str(&s.tuning);
        out.push_str("\nSuggested host settings:\n");
        for (host, keys) in &s.hosts {
            out.push_str(&format!(
                "{host}: lossless host set IFACE {}\n",
                keys.join(" ")
            ));
        }
    }
    if let Some(f) = &report.fixed {
        for path in &f.written {
            out.push_str(&format!("wrote {}\n", path.display()));
        }
        out.push_str(&format!(
            "{} errors, {} warnings left in the fixed copies\n",
            f.errors_left, f.warnings_left
        ));
    }
    out
}
