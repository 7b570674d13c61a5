//! `lossless p4 ...`: the command line of the P4Runtime client.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use p4runtime::{
    lossless::softswitch::v1::{QueueState, SetQueueRequest},
    p4::{config::v1::P4Info, v1::update},
};
use prost::Message as _;
use serde_json::json;

use units::{parse_duration, WATCH_INTERVAL};

use crate::{
    cells,
    client::{parse_election_id, Client, ClientTls, ElectionId, Target},
    entries,
    mirror::{self, MirrorCommand},
    p4info::{self, by_name, AnyCounter},
    render::{self, CounterCell},
    script::Session,
};
use p4values::runtime_json::RuntimeConfig;
use sysutil::terminal;

/// `lossless p4`: options every subcommand shares, and the subcommand.
#[derive(Debug, Args)]
pub struct P4Args {
    /// The switch's P4Runtime server, HOST:PORT.
    #[arg(long, global = true, default_value = "127.0.0.1:9559")]
    pub switch: String,
    /// The P4Runtime device id.
    #[arg(long, global = true, default_value_t = 0)]
    pub device_id: u64,
    /// This client's election id: a number, HIGH,LOW (p4runtime-shell's default is 1,0, that
    /// is 2^64), or auto (one above the highest the switch reports). Writes need the highest.
    #[arg(long, global = true, default_value = "1", value_parser = parse_election_id)]
    pub election_id: ElectionId,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Reach the switch over TLS, its certificate checked against this CA (PEM).
    #[arg(long, global = true, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a switch that requires client certificates.
    #[arg(long, global = true, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, global = true, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The name the switch's certificate must carry (default: the host of --switch).
    #[arg(long, global = true, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: P4Command,
}

/// The `p4` subcommands.
#[derive(Debug, Subcommand)]
pub enum P4Command {
    /// The forwarding pipeline: push a program, or show the one on the device.
    #[command(subcommand)]
    Pipeline(PipelineCommand),
    /// Table entries, multicast groups and clone sessions.
    #[command(subcommand)]
    Entries(EntriesCommand),
    /// Counter cells.
    #[command(subcommand)]
    Counters(CountersCommand),
    /// Run a simple_switch_CLI commands file (table_add, table_set_default, mc_*, mirroring_add,
    /// register_write, ...) over P4Runtime, line by line; the first failure stops it.
    Cli {
        /// The commands file.
        file: PathBuf,
    },
    /// Register cells.
    #[command(subcommand)]
    Registers(RegistersCommand),
    /// softswitch's egress queues (its own service beside P4Runtime; not BMv2's).
    #[command(subcommand)]
    Queue(QueueCommand),
    /// lossless.p4's ERSPAN mirroring: a session to a collector and what it mirrors.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// A table of counters refreshed every interval, with rates, until interrupted.
    Watch {
        /// Counters to show (default: every counter of the program).
        counters: Vec<String>,
        /// Seconds between readings (0.1 s to 1 day; units ms, s, m, h accepted).
        #[arg(long, default_value = "1", value_parser = |s: &str| parse_duration(s, &WATCH_INTERVAL))]
        interval: Duration,
    },
}

/// `pipeline` subcommands.
#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Push a pipeline (VERIFY_AND_COMMIT). softswitch: --program P.p4 (the device config is
    /// the P4 source). BMv2's simple_switch_grpc: --program P.p4 --target bmv2 (compiled by
    /// p4c-bm2-ss), or p4c's outputs: --p4info FILE --device-config BMV2.json.
    Set {
        /// The P4 program.
        #[arg(long, required_unless_present = "device_config")]
        program: Option<PathBuf>,
        /// The switch the program is for, which says what the device config is.
        #[arg(long = "target", value_enum, default_value_t = SwitchKind::Softswitch)]
        kind: SwitchKind,
        /// P4Info (text, .json or .bin as p4c writes them). Default with --program: what
        /// `softswitch p4info` says of the program, or p4c's with --target bmv2.
        #[arg(long, required_unless_present = "program")]
        p4info: Option<PathBuf>,
        /// A device config to send as is (BMv2: p4c's JSON output), instead of the program.
        #[arg(long, conflicts_with = "program")]
        device_config: Option<PathBuf>,
    },
    /// Show the device's pipeline: its tables, actions, counters and registers (with --json,
    /// its P4Info in protobuf's JSON mapping, which --p4info takes back).
    Get,
}

/// Which switch `pipeline set --program` makes the device config for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SwitchKind {
    /// softswitch: the device config is the P4 source, the P4Info `softswitch p4info`'s.
    Softswitch,
    /// BMv2's simple_switch_grpc: the program compiled by p4c-bm2-ss (found from
    /// LOSSLESS_P4REF, else PATH); the device config is its BMv2 JSON, the P4Info p4c's.
    Bmv2,
}

/// `entries` subcommands.
#[derive(Debug, Subcommand)]
pub enum EntriesCommand {
    /// Write the entries of a runtime-JSON file (the P4 tutorials' format, unchanged).
    Apply {
        /// The runtime-JSON file.
        file: PathBuf,
        /// Resolve names with this P4Info instead of the device's.
        #[arg(long)]
        p4info: Option<PathBuf>,
        /// Upsert: an entry, group or session that exists already is modified, not refused,
        /// so applying the same file twice succeeds.
        #[arg(long)]
        modify: bool,
    },
    /// Insert one entry, in simple_switch_CLI's table_add words: TABLE ACTION KEY... =>
    /// PARAM... [PRIORITY] (keys and parameters in the program's order; a leading `table_add`
    /// is accepted).
    Add {
        /// The words.
        #[arg(required = true, num_args = 2.., allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Change the action of one entry: TABLE ACTION KEY... => PARAM... [PRIORITY].
    Modify {
        /// The words.
        #[arg(required = true, num_args = 2.., allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Delete one entry, named by its key: TABLE KEY... [PRIORITY].
    Delete {
        /// The words.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Delete every entry of a table (its default action stays).
    Clear {
        /// The table (full name or unique suffix).
        table: String,
    },
    /// Print a table's entries, its default entry last (with --json, as runtime JSON).
    List {
        /// The table (full name or unique suffix).
        table: String,
    },
}

/// `counters` subcommands.
#[derive(Debug, Subcommand)]
pub enum CountersCommand {
    /// Print a counter's cells: every index, or one; every entry of a direct counter. Of
    /// several cells, those at zero are not shown (--all shows them; --json has them all).
    Read {
        /// The counter (full name or unique suffix).
        name: String,
        /// One index of a counter array.
        #[arg(long)]
        index: Option<i64>,
        /// Show the cells at zero too.
        #[arg(long)]
        all: bool,
    },
}

/// `registers` subcommands.
#[derive(Debug, Subcommand)]
pub enum RegistersCommand {
    /// Print a register's cells: every index, one, or a range. Of several cells, those at zero
    /// are not shown (--all shows them; --json has them all).
    Read {
        /// The register (full name or unique suffix).
        name: String,
        /// One index N, or the indices START..END (END excluded).
        #[arg(long, value_parser = parse_index_range)]
        index: Option<IndexRange>,
        /// Show the cells at zero too.
        #[arg(long)]
        all: bool,
    },
    /// Write one cell.
    Write {
        /// The register (full name or unique suffix).
        name: String,
        /// The index.
        #[arg(long)]
        index: i64,
        /// The value: a decimal or 0x integer, or an address (10.0.0.1, aa:bb:cc:dd:ee:ff).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

/// `queue` subcommands (softswitch only).
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Change the depth, rate and/or scheduling of egress queues: one port's priority, all of
    /// a port's, one priority on every port, or every queue.
    Set {
        /// The egress port (default: every port, and ports not seen yet).
        #[arg(long)]
        port: Option<u32>,
        /// The priority 0..7 (default: every priority).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..8))]
        priority: Option<u32>,
        /// Depth in packets.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        depth: Option<u32>,
        /// Rate in packets per second; 0 = unlimited.
        #[arg(long)]
        rate: Option<u64>,
        /// The rate of the port as a whole in packets per second, a link's: its queues share
        /// it as their scheduling says; 0 = unlimited (a port's, so not with --priority).
        #[arg(long, conflicts_with = "priority")]
        port_rate: Option<u64>,
        /// Make the queues strict: served before the port's other queues, highest priority
        /// first (every queue is, by default).
        #[arg(long, conflicts_with = "dwrr")]
        strict: bool,
        /// Make the queues share the port by deficit weighted round robin, below its strict
        /// ones.
        #[arg(long)]
        dwrr: bool,
        /// DWRR weight, 1..=100: a round gives the queue weight x the port's quantum bytes.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
        weight: Option<u32>,
        /// The port's DWRR base quantum in bytes, 64..=1048576 (a port's, so not with
        /// --priority).
        #[arg(long, conflicts_with = "priority", value_parser = clap::value_parser!(u32).range(64..=1_048_576))]
        quantum: Option<u32>,
        /// Microburst threshold in packets (the queue is in a burst from this occupancy until
        /// it holds half of it or fewer).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        burst_threshold: Option<u32>,
        /// Microburst window in µs (a burst back to half the threshold within it is a
        /// microburst).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        burst_window_us: Option<u64>,
        /// Forget what the queues measured (sojourn times, occupancies, bursts).
        #[arg(long)]
        reset_measures: bool,
    },
    /// Print every queue: depth, rate, packets in it now, scheduler (strict or dwrr:WEIGHT),
    /// the port's quantum, drops, and what it measured: sojourn p50/p99/max (µs), occupancy
    /// p50/p99/max (packets), microbursts (count, last peak and duration) by its rule
    /// (threshold/window); --json adds the sojourn histogram's buckets.
    Show,
}

/// Runs one `p4` subcommand.
pub async fn run(args: P4Args) -> anyhow::Result<()> {
    let target = Target {
        address: args.switch,
        device_id: args.device_id,
        election_id: args.election_id,
        tls: args.tls_ca.map(|ca| ClientTls {
            ca,
            identity: args.tls_cert.zip(args.tls_key),
            server_name: args.tls_server_name,
        }),
    };
    let json = args.json;
    match args.command {
        P4Command::Pipeline(PipelineCommand::Set {
            program,
            kind,
            p4info,
            device_config,
        }) => {
            let pipeline = Pipeline::read(program, kind, p4info, device_config)?;
            pipeline_set(target, pipeline, json).await
        }
        P4Command::Pipeline(PipelineCommand::Get) => {
            let mut client = Client::connect(target).await?;
            let p4info = client.p4info().await?;
            if json {
                print!("{}", p4runtime::format::to_json(&p4info));
            } else {
                print!("{}", p4info::describe(&p4info));
            }
            Ok(())
        }
        P4Command::Entries(EntriesCommand::Apply {
            file,
            p4info,
            modify,
        }) => entries_apply(target, &file, p4info.as_deref(), modify, json).await,
        P4Command::Entries(EntriesCommand::Add { words }) => {
            one_entry(target, update::Type::Insert, &words, json).await
        }
        P4Command::Entries(EntriesCommand::Modify { words }) => {
            one_entry(target, update::Type::Modify, &words, json).await
        }
        P4Command::Entries(EntriesCommand::Delete { words }) => {
            one_entry(target, update::Type::Delete, &words, json).await
        }
        P4Command::Entries(EntriesCommand::Clear { table }) => {
            let mut session = Session::connect(Client::connect(target).await?).await?;
            let deleted = session.clear(&table).await?;
            if json {
                println!("{}", json!({"table": table, "deleted": deleted}));
            } else {
                println!("{table}: {deleted} entries deleted");
            }
            Ok(())
        }
        P4Command::Cli { file } => {
            let mut session = Session::connect(Client::connect(target).await?).await?;
            session.run_file(&file).await
        }
        P4Command::Entries(EntriesCommand::List { table }) => {
            let mut client = Client::connect(target).await?;
            let p4info = client.p4info().await?;
            let table = by_name("table", &p4info.tables, &table)?;
            let read = client.read(entries::read_all(table)).await?;
            let entries: Vec<_> = read
                .iter()
                .filter_map(|e| match &e.entity {
                    Some(p4runtime::p4::v1::entity::Entity::TableEntry(t)) => Some(t),
                    _ => None,
                })
                .map(|t| entries::describe(t, &p4info))
                .collect();
            if json {
                let config = RuntimeConfig {
                    table_entries: entries,
                    ..Default::default()
                };
                println!("{}", serde_json::to_string_pretty(&config)?);
            } else {
                print!("{}", render::entry_lines(&entries));
            }
            Ok(())
        }
        P4Command::Counters(CountersCommand::Read { name, index, all }) => {
            let mut client = Client::connect(target).await?;
            let p4info = client.p4info().await?;
            let counter = p4info::counter(&p4info, &name)?;
            let cells = read_counters(&mut client, &p4info, &[counter], index).await?;
            if json {
                println!("{}", serde_json::to_string(&cells)?);
            } else {
                print!("{}", render::counter_table(&cells, all));
            }
            Ok(())
        }
        P4Command::Registers(command) => registers(target, command, json).await,
        P4Command::Queue(command) => queue(target, command, json).await,
        P4Command::Mirror(command) => {
            print!(
                "{}",
                mirror::run(Client::connect(target).await?, command).await?
            );
            Ok(())
        }
        P4Command::Watch { counters, interval } => watch(target, &counters, interval, json).await,
    }
}

/// A pipeline to push: its device config, read from `path`, and its P4Info.
pub struct Pipeline {
    /// The program or device config it was read from.
    pub path: PathBuf,
    /// The device config (softswitch: the bundled source; BMv2: p4c's JSON).
    pub config: Vec<u8>,
    /// Its P4Info.
    pub p4info: P4Info,
}

impl Pipeline {
    /// The pipeline the options of `pipeline set` name.
    pub fn read(
        program: Option<PathBuf>,
        kind: SwitchKind,
        p4info_file: Option<PathBuf>,
        device_config: Option<PathBuf>,
    ) -> anyhow::Result<Pipeline> {
        let given_p4info = p4info_file.as_deref().map(p4info::read_file).transpose()?;
        let (path, config, p4info) = match (program, kind) {
            (Some(program), SwitchKind::Softswitch) => {
                let p4info = match given_p4info {
                    Some(p4info) => p4info,
                    None => p4info_from_softswitch(&program)?,
                };
                // softswitch's device config is the source, which must be self-contained:
                // the program's own #include files go inlined.
                let config = bundle_with_softswitch(&program)?;
                (program, config, p4info)
            }
            (Some(program), SwitchKind::Bmv2) => {
                let (json, p4c_p4info) = compile_for_bmv2(&program)?;
                (program, json, given_p4info.unwrap_or(p4c_p4info))
            }
            (None, _) => {
                let path = device_config.expect("clap requires --program or --device-config");
                let config =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                let p4info = given_p4info.expect("clap requires --p4info without --program");
                (path, config, p4info)
            }
        };
        Ok(Pipeline {
            path,
            config,
            p4info,
        })
    }
}

async fn pipeline_set(target: Target, pipeline: Pipeline, json: bool) -> anyhow::Result<()> {
    let summary = p4info::describe(&pipeline.p4info);
    let mut client = Client::connect(target.clone()).await?;
    client
        .set_pipeline(pipeline.p4info, pipeline.config)
        .await?;
    let what = summary.lines().next().unwrap_or_default();
    if json {
        println!(
            "{}",
            json!({"switch": target.address, "device_id": target.device_id,
                   "device_config": pipeline.path, "pipeline": what})
        );
    } else {
        println!(
            "device {} on {}: pipeline set from {} ({what})",
            target.device_id,
            target.address,
            pipeline.path.display()
        );
    }
    Ok(())
}

/// `program` compiled by p4c-bm2-ss: its BMv2 JSON and p4c's P4Info (p4c's warnings are
/// printed).
fn compile_for_bmv2(program: &Path) -> anyhow::Result<(Vec<u8>, P4Info)> {
    let toolchain = p4toolchain::Toolchain::find()?;
    toolchain.compile_scratch(program, |compiled| {
        for warning in &compiled.warnings {
            eprintln!("p4c-bm2-ss: {warning}");
        }
        let json = std::fs::read(&compiled.json)
            .with_context(|| format!("reading {}", compiled.json.display()))?;
        Ok((json, p4info::read_file(&compiled.p4info_binary)?))
    })
}

/// The P4Info of `program` as `softswitch p4info` gives it.
fn p4info_from_softswitch(program: &Path) -> anyhow::Result<P4Info> {
    let output = run_softswitch(
        &["p4info", "--format", "binary"],
        program,
        "no --p4info given, and",
    )?;
    P4Info::decode(output.as_slice()).context("softswitch p4info printed no binary P4Info")
}

/// `program` with the files it includes inlined, as `softswitch bundle` gives it: the
/// self-contained source a device config must be.
fn bundle_with_softswitch(program: &Path) -> anyhow::Result<Vec<u8>> {
    run_softswitch(
        &["bundle"],
        program,
        "inlining the program's #include files:",
    )
}

/// The standard output of `softswitch ARGS PROGRAM`, which must succeed; `why` says what it was
/// run for. softswitch is found beside this binary, else on `PATH`; the control plane runs it,
/// it never links it.
fn run_softswitch(args: &[&str], program: &Path, why: &str) -> anyhow::Result<Vec<u8>> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("softswitch")))
        .filter(|path| path.is_file());
    let binary = beside.unwrap_or_else(|| PathBuf::from("softswitch"));
    let output = std::process::Command::new(&binary)
        .args(args)
        .arg(program)
        .output()
        .with_context(|| {
            format!(
                "{why} running `{} {}` failed (is softswitch beside lossless or on PATH?)",
                binary.display(),
                args[0]
            )
        })?;
    if !output.status.success() {
        bail!(
            "softswitch {} {} failed:\n{}",
            args[0],
            program.display(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    Ok(output.stdout)
}

/// Writes one entry given in simple_switch_CLI's words.
async fn one_entry(
    target: Target,
    kind: update::Type,
    words: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let mut session = Session::connect(Client::connect(target).await?).await?;
    let shown = session.entry(kind, words).await?;
    let done = match kind {
        update::Type::Insert => "added",
        update::Type::Modify => "modified",
        _ => "deleted",
    };
    if json {
        println!("{}", json!({ done: shown }));
    } else {
        println!("{done} {shown}");
    }
    Ok(())
}

async fn entries_apply(
    target: Target,
    file: &Path,
    p4info_file: Option<&Path>,
    upsert: bool,
    json: bool,
) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(file)?;
    let mut client = Client::connect(target.clone()).await?;
    let p4info = match p4info_file {
        Some(path) => p4info::read_file(path)?,
        None => client.p4info().await?,
    };
    let updates = entries::updates(&config, &p4info)
        .with_context(|| format!("in {}: nothing written", file.display()))?;
    match client.write(&updates).await {
        Err(error) if upsert && !error.updates.is_empty() => {
            // What exists already is modified instead; any other failure stands.
            if let Some((label, code, message)) = error
                .updates
                .iter()
                .find(|(_, code, _)| *code != tonic::Code::AlreadyExists)
            {
                bail!("{error}\n({label}: {message}: not an entry that exists already, {code:?})");
            }
            let again: Vec<_> = updates
                .into_iter()
                .filter(|u| error.updates.iter().any(|(label, ..)| *label == u.label))
                .map(|mut u| {
                    u.update.r#type = update::Type::Modify as i32;
                    u
                })
                .collect();
            client.write(&again).await?;
        }
        result => result?,
    }
    if json {
        println!(
            "{}",
            json!({"switch": target.address, "device_id": target.device_id,
                   "table_entries": config.table_entries.len(),
                   "multicast_group_entries": config.multicast_group_entries.len(),
                   "clone_session_entries": config.clone_session_entries.len()})
        );
    } else {
        println!(
            "device {} on {}: wrote {}",
            target.device_id,
            target.address,
            render::runtime_summary(&config)
        );
    }
    Ok(())
}

/// Reads the cells of `counters` (one `index` of a counter array, or all).
async fn read_counters(
    client: &mut Client,
    p4info: &P4Info,
    counters: &[AnyCounter<'_>],
    index: Option<i64>,
) -> anyhow::Result<Vec<CounterCell>> {
    let entities = counters
        .iter()
        .map(|c| cells::counter_entity(*c, index))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let read = client.read(entities).await?;
    Ok(cells::counter_cells(&read, p4info))
}

/// Indices of a register: one, or `start..end` (end excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRange {
    /// The first index.
    pub start: i64,
    /// One past the last index.
    pub end: i64,
}

/// Parses `N` or `START..END` (END excluded, above START).
fn parse_index_range(text: &str) -> Result<IndexRange, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{s:?} is not an index (0, 1, ...)"))
    };
    match text.split_once("..") {
        None => number(text).map(|start| IndexRange {
            start,
            end: start + 1,
        }),
        Some((start, end)) => {
            let (start, end) = (number(start)?, number(end)?);
            if end <= start {
                return Err(format!(
                    "{text}: the range START..END needs END above START (END is excluded)"
                ));
            }
            Ok(IndexRange { start, end })
        }
    }
}

async fn registers(target: Target, command: RegistersCommand, json: bool) -> anyhow::Result<()> {
    let mut client = Client::connect(target).await?;
    let p4info = client.p4info().await?;
    let (name, range, all) = match &command {
        RegistersCommand::Read { name, index, all } => (name, *index, *all),
        RegistersCommand::Write { name, index, .. } => (
            name,
            Some(IndexRange {
                start: *index,
                end: index.saturating_add(1),
            }),
            true,
        ),
    };
    let register = by_name("register", &p4info.registers, name)?;
    if let RegistersCommand::Write { index, value, .. } = &command {
        let update = cells::register_write(register, *index, value)?;
        client.write(std::slice::from_ref(&update)).await?;
    }
    if let Some(range) = range {
        cells::check_range(register, range.start, range.end)?;
    }
    // One index is read alone; a range is read whole (one request) and cut here.
    let single = range.filter(|r| r.end - r.start == 1).map(|r| r.start);
    let read = client
        .read(vec![cells::register_entity(register, single)?])
        .await?;
    let mut cells = cells::register_cells(&read, &p4info);
    if let Some(range) = range {
        cells.retain(|c| (range.start..range.end).contains(&c.index));
    }
    if json {
        println!("{}", serde_json::to_string(&cells)?);
    } else {
        print!("{}", render::register_lines(&cells, all));
    }
    Ok(())
}

async fn queue(target: Target, command: QueueCommand, json: bool) -> anyhow::Result<()> {
    let mut client = Client::connect(target).await?;
    let queues = match command {
        QueueCommand::Set {
            port,
            priority,
            depth,
            rate,
            port_rate,
            strict,
            dwrr,
            weight,
            quantum,
            burst_threshold,
            burst_window_us,
            reset_measures,
        } => {
            let strict = (strict || dwrr).then_some(strict);
            if depth.is_none()
                && rate.is_none()
                && port_rate.is_none()
                && strict.is_none()
                && weight.is_none()
                && quantum.is_none()
                && burst_threshold.is_none()
                && burst_window_us.is_none()
                && !reset_measures
            {
                bail!(
                    "nothing to change: give --depth, --rate, --port-rate, --strict or --dwrr, \
                     --weight, --quantum, --burst-threshold, --burst-window-us or \
                     --reset-measures"
                );
            }
            let request = SetQueueRequest {
                device_id: 0,
                port,
                priority,
                depth_packets: depth,
                rate_pps: rate,
                strict,
                weight,
                quantum_bytes: quantum,
                burst_threshold_packets: burst_threshold,
                burst_window_us,
                reset_measures,
                port_rate_pps: port_rate,
            };
            let queues = client.set_queue(request).await?;
            // An arriving packet finds at most depth − 1 ahead: a threshold past it never fires.
            let deaf = queues
                .iter()
                .filter(|q| q.burst_threshold_packets >= q.depth_packets)
                .count();
            if deaf > 0 {
                eprintln!(
                    "warning: {deaf} queues have a burst threshold at or over their depth: an \
                     arriving packet finds at most depth − 1 ahead, so they never see a burst"
                );
            }
            queues
        }
        QueueCommand::Show => client.queues().await?,
    };
    if json {
        let rows: Vec<_> = queues.iter().map(queue_json).collect();
        println!("{}", serde_json::Value::from(rows));
    } else {
        print!("{}", queue_table(&queues));
    }
    Ok(())
}

fn queue_json(q: &QueueState) -> serde_json::Value {
    json!({"port": q.port, "priority": q.priority, "depth_packets": q.depth_packets,
           "rate_pps": q.rate_pps, "port_rate_pps": q.port_rate_pps,
           "occupancy_packets": q.occupancy_packets,
           "strict": q.strict, "weight": q.weight, "quantum_bytes": q.quantum_bytes,
           "dropped_packets": q.dropped_packets,
           "sojourn_us_buckets": q.sojourn_us_buckets, "sojourn_p50_us": q.sojourn_p50_us,
           "sojourn_p99_us": q.sojourn_p99_us, "sojourn_max_us": q.sojourn_max_us,
           "occupancy_p50_packets": q.occupancy_p50_packets,
           "occupancy_p99_packets": q.occupancy_p99_packets,
           "occupancy_max_packets": q.occupancy_max_packets,
           "burst_threshold_packets": q.burst_threshold_packets,
           "burst_window_us": q.burst_window_us, "microbursts": q.microbursts,
           "bursts_over_window": q.bursts_over_window,
           "last_burst_peak_packets": q.last_burst_peak_packets,
           "last_burst_duration_us": q.last_burst_duration_us, "in_burst": q.in_burst,
           "open_burst_peak_packets": q.open_burst_peak_packets,
           "open_burst_us": q.open_burst_us})
}

fn queue_table(queues: &[QueueState]) -> String {
    let mut out = format!(
        "{:>6} {:>8} {:>14} {:>12} {:>10} {:>9} {:>14} {:>8} {:>16} {:>14} {:>11} {:>10} {:>12}\n",
        "port",
        "priority",
        "depth_packets",
        "rate_pps",
        "occupancy",
        "scheduler",
        "quantum_bytes",
        "dropped",
        "sojourn_us",
        "occupancy_pct",
        "burst_rule",
        "bursts",
        "last_burst"
    );
    for q in queues {
        let rate = if q.rate_pps == 0 {
            "unlimited".to_owned()
        } else {
            q.rate_pps.to_string()
        };
        // A strict queue's weight plays no part until it is made DWRR.
        let scheduler = if q.strict {
            "strict".to_owned()
        } else {
            format!("dwrr:{}", q.weight)
        };
        // p50/p99/max; the rule as threshold/window µs; bursts as microbursts+longer ones;
        // the last microburst as peak packets@duration µs.
        let sojourn = format!(
            "{}/{}/{}",
            q.sojourn_p50_us, q.sojourn_p99_us, q.sojourn_max_us
        );
        let occupancy = format!(
            "{}/{}/{}",
            q.occupancy_p50_packets, q.occupancy_p99_packets, q.occupancy_max_packets
        );
        let rule = format!("{}/{}", q.burst_threshold_packets, q.burst_window_us);
        let bursts = format!("{}+{}", q.microbursts, q.bursts_over_window);
        let last = format!("{}@{}", q.last_burst_peak_packets, q.last_burst_duration_us);
        out.push_str(&format!(
            "{:>6} {:>8} {:>14} {:>12} {:>10} {:>9} {:>14} {:>8} {:>16} {:>14} {:>11} {:>10} {:>12}\n",
            q.port,
            q.priority,
            q.depth_packets,
            rate,
            q.occupancy_packets,
            scheduler,
            q.quantum_bytes,
            q.dropped_packets,
            sojourn,
            occupancy,
            rule,
            bursts,
            last
        ));
    }
    out
}

/// Reads the counters every `interval` and prints them with their rates: a table that
/// redraws, or one JSON array a line. A failed reading is shown and the next one fetches the
/// device's P4Info again (the pipeline may have been replaced).
async fn watch(
    target: Target,
    names: &[String],
    interval: Duration,
    json: bool,
) -> anyhow::Result<()> {
    let title = format!(
        "device {} on {}, every {:.1} s (Ctrl-C to stop)",
        target.device_id,
        target.address,
        interval.as_secs_f64()
    );
    let mut client = Client::connect(target).await?;
    let mut ticker = tokio::time::interval(interval);
    let mut p4info: Option<P4Info> = None;
    let mut previous: Option<(Vec<CounterCell>, Instant)> = None;
    let stdout = std::io::stdout();
    let mut first = true;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let reading = async {
            if p4info.is_none() {
                p4info = Some(client.p4info().await?);
            }
            let program = p4info.as_ref().expect("fetched above");
            let counters = if names.is_empty() {
                p4info::all_counters(program)
            } else {
                names
                    .iter()
                    .map(|n| p4info::counter(program, n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            read_counters(&mut client, program, &counters, None).await
        };
        let now = Instant::now();
        match reading.await {
            Ok(cells) => {
                let before = previous
                    .as_ref()
                    .map(|(cells, at)| (cells.as_slice(), now - *at));
                let rows = render::rates(&cells, before);
                if json {
                    println!("{}", serde_json::to_string(&rows)?);
                } else {
                    let prefix = terminal::refresh_prefix(&stdout, first);
                    print!("{prefix}{}", render::watch_table(&title, &rows));
                }
                previous = Some((cells, now));
            }
            Err(error) => {
                p4info = None;
                if json {
                    eprintln!("error: {error:#}");
                } else {
                    let prefix = terminal::refresh_prefix(&stdout, first);
                    print!("{prefix}{title}\nerror: {error:#}\n");
                }
            }
        }
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        p4: P4Args,
    }

    /// The options every subcommand shares.
    fn globals(args: &P4Args) -> (&str, u64, ElectionId, bool) {
        (
            args.switch.as_str(),
            args.device_id,
            args.election_id,
            args.json,
        )
    }

    fn parse(args: &[&str]) -> Result<P4Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("p4").chain(args.iter().copied())).map(|c| c.p4)
    }

    #[test]
    fn global_options_go_anywhere_with_defaults() {
        let args = parse(&["entries", "list", "ipv4_lpm"]).unwrap();
        assert_eq!(
            globals(&args),
            ("127.0.0.1:9559", 0, ElectionId::Fixed(1), false)
        );
        let args = parse(&[
            "counters",
            "read",
            "c",
            "--index",
            "3",
            "--switch",
            "10.0.0.1:50051",
            "--device-id",
            "2",
            "--election-id",
            "0,7",
            "--json",
        ])
        .unwrap();
        assert_eq!(
            globals(&args),
            ("10.0.0.1:50051", 2, ElectionId::Fixed(7), true)
        );
        assert!(matches!(
            args.command,
            P4Command::Counters(CountersCommand::Read { index: Some(3), .. })
        ));
    }

    #[test]
    fn pipeline_set_needs_a_program_or_p4info_and_device_config() {
        for (options, accepted) in [
            (&["--program", "p.p4"][..], true),
            (&["--p4info", "p.txt", "--device-config", "p.json"], true),
            (&[], false),
            (&["--device-config", "p.json"], false),
            (&["--program", "p.p4", "--device-config", "p.json"], false),
        ] {
            let args = [&["pipeline", "set"][..], options].concat();
            assert_eq!(parse(&args).is_ok(), accepted, "{args:?}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_by_the_parser() {
        assert!(parse(&["entries", "list", "t", "--election-id", "0"]).is_err());
        assert!(parse(&["queue", "set", "--priority", "8", "--depth", "1"]).is_err());
        assert!(parse(&["queue", "set", "--depth", "0"]).is_err());
        assert!(parse(&["queue", "set", "--strict", "--dwrr"]).is_err());
        assert!(parse(&["queue", "set", "--priority", "1", "--quantum", "9000"]).is_err());
        let args = parse(&["registers", "write", "r", "--index", "1", "-5"]).unwrap();
        assert!(matches!(
            args.command,
            P4Command::Registers(RegistersCommand::Write { value, .. }) if value == "-5"
        ));
    }

    #[test]
    fn register_indices_one_or_a_range() {
        assert_eq!(parse_index_range("7"), Ok(IndexRange { start: 7, end: 8 }));
        assert_eq!(
            parse_index_range("0..16"),
            Ok(IndexRange { start: 0, end: 16 })
        );
        assert!(parse_index_range("5..5").is_err());
        assert!(parse_index_range("-1").is_err());
        assert!(parse_index_range("a..3").is_err());
        let args = parse(&["registers", "read", "r", "--index", "2..4", "--all"]).unwrap();
        assert!(matches!(
            args.command,
            P4Command::Registers(RegistersCommand::Read {
                index: Some(IndexRange { start: 2, end: 4 }),
                all: true,
                ..
            })
        ));
    }

    #[test]
    fn queues_as_a_table() {
        let queues = [QueueState {
            port: 1,
            priority: 3,
            depth_packets: 64,
            rate_pps: 0,
            occupancy_packets: 2,
            strict: false,
            weight: 3,
            quantum_bytes: 1500,
            dropped_packets: 7,
            sojourn_p50_us: 15,
            sojourn_p99_us: 31,
            sojourn_max_us: 40,
            occupancy_p50_packets: 1,
            occupancy_p99_packets: 9,
            occupancy_max_packets: 9,
            burst_threshold_packets: 8,
            burst_window_us: 500,
            microbursts: 4,
            bursts_over_window: 1,
            last_burst_peak_packets: 10,
            last_burst_duration_us: 120,
            ..Default::default()
        }];
        let table = queue_table(&queues);
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "1",
                "3",
                "64",
                "unlimited",
                "2",
                "dwrr:3",
                "1500",
                "7",
                "15/31/40",
                "1/9/9",
                "8/500",
                "4+1",
                "10@120"
            ]
        );
        assert_eq!(queue_json(&queues[0])["microbursts"], 4);
        assert_eq!(queue_json(&queues[0])["depth_packets"], 64);
        assert_eq!(queue_json(&queues[0])["weight"], 3);
    }
}
