//! The `softswitch` command line: `run` a switch on real ports with its P4Runtime server,
//! `check` a program, run an `stf` test, print its `p4info`, or `bundle` it with its includes.
//! Invoked as `simple_switch` or `simple_switch_grpc`, it takes BMv2's command line instead
//! (`bmv2_cli`).

mod bmv2_cli;
mod bmv2_log;
mod dump;
mod pcap;
mod run;
mod taps;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::limits::MAX_SOURCE_BYTES;
use softswitch_frontend::preprocessor::Includes;
use softswitch_frontend::source::SourceMap;
use softswitch_server::tls::TlsFiles;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A P4_16 v1model software switch.
#[derive(Parser)]
#[command(name = "softswitch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Forward between Linux interfaces and serve P4Runtime, until SIGINT or SIGTERM.
    Run {
        /// The P4_16 program, or BMv2's JSON of one (p4c-bm2-ss's output); without one, no packet is forwarded until a controller sets a
        /// pipeline with SetForwardingPipelineConfig.
        program: Option<PathBuf>,
        /// A port: PORT@INTERFACE (e.g. 1@veth1); repeat for each port.
        #[arg(short = 'i', long = "interface", value_name = "PORT@IFACE")]
        interfaces: Vec<softswitch_device::ports::PortSpec>,
        /// Where P4Runtime (and the Queues service) listen.
        #[arg(long, default_value = softswitch_server::DEFAULT_ADDR)]
        grpc_server_addr: std::net::SocketAddr,
        /// The P4Runtime device id.
        #[arg(long, default_value_t = 0)]
        device_id: u64,
        /// The port whose frames go to the controller as PacketIn and where PacketOut enters
        /// (0 to 510, as every port: 511 is v1model's drop port).
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..511))]
        cpu_port: Option<u16>,
        /// How ports exchange frames with the kernel: af-packet (AF_PACKET rings) or afxdp
        /// (AF_XDP sockets, with an XDP program on each interface steering its frames to the
        /// switch; AF_PACKET where AF_XDP cannot be had, saying why).
        #[arg(long, value_name = "af-packet|afxdp", default_value = "af-packet")]
        port_io: softswitch_device::ports::PortIo,
        /// Also serve BMv2's runtime Thrift services (simple_switch_CLI) at this address (e.g.
        /// 127.0.0.1:9090); off by default.
        #[arg(long, value_name = "ADDR")]
        thrift_addr: Option<std::net::SocketAddr>,
        /// Also serve the switch's counters over gNMI (Capabilities, Get, Subscribe) at this
        /// address (e.g. 127.0.0.1:57400), over TLS when P4Runtime is; off by default
        /// (docs/telemetry.md).
        #[arg(long, value_name = "ADDR")]
        gnmi_addr: Option<std::net::SocketAddr>,
        /// The most memory what controllers write may take (entries and their metadata, groups,
        /// sessions; estimated): bytes, or with KiB, MiB, GiB or TiB. Writes past it are refused
        /// (RESOURCE_EXHAUSTED).
        #[arg(long, value_name = "BYTES", default_value_t = softswitch_core::budget::DEFAULT_STATE_BUDGET, value_parser = crate::run::parse_state_budget)]
        state_budget: usize,
        /// How the switch runs the P4 program: interpreted (the reference, the default) or
        /// compiled (each block lowered into closures at load; a block that does not compile
        /// runs interpreted, with a warning saying why).
        #[arg(long, value_name = "interpreted|compiled", default_value = "interpreted", value_parser = crate::run::parse_execution)]
        execution: softswitch_core::switch::Execution,
        /// Log the first N bytes of every frame received and sent, in hex, at info level
        /// (BMv2's --dump-packet-data; 0, the default, logs none).
        #[arg(long, value_name = "N", default_value_t = 0)]
        dump_packet_data: usize,
        /// Serve P4Runtime and Queues over TLS with this certificate chain (PEM; with
        /// --tls-key). Read at start and again on SIGHUP.
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of --tls-cert (PEM).
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Require client certificates signed by this CA (PEM): mutual TLS.
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_client_ca: Option<PathBuf>,
    },
    /// Check a P4 program: exits non-zero and prints file:line:col on the first error.
    Check {
        /// The P4_16 program.
        program: PathBuf,
    },
    /// Run an STF test against a program: exits non-zero on any mismatch.
    Stf {
        /// The P4_16 program.
        program: PathBuf,
        /// The STF test.
        test: PathBuf,
        /// Where to run it: softswitch (on its virtual clock), or BMv2's simple_switch (the
        /// program compiled by p4c-bm2-ss; both from LOSSLESS_P4REF, else PATH).
        #[arg(long, value_enum, default_value_t = StfTarget::Softswitch)]
        target: StfTarget,
        /// Also print the program's log_msg lines, its digests and the drop count (softswitch).
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print the program with the files it includes inlined (the built-in core.p4 and
    /// v1model.p4 stay included): the self-contained device config P4Runtime takes.
    Bundle {
        /// The P4_16 program.
        program: PathBuf,
    },
    /// Print the program's P4Info (p4c's names and ids) on standard output.
    P4info {
        /// The P4_16 program.
        program: PathBuf,
        /// text: protobuf text format as p4c's .p4info.txtpb; json: protobuf's JSON mapping;
        /// binary: the encoded message.
        #[arg(long, value_enum, default_value_t = P4InfoFormat::Text)]
        format: P4InfoFormat,
    },
}

/// Where `stf` runs a test.
#[derive(Clone, Copy, clap::ValueEnum)]
enum StfTarget {
    Softswitch,
    Bmv2,
}

/// How `p4info` writes the message.
#[derive(Clone, Copy, clap::ValueEnum)]
enum P4InfoFormat {
    Text,
    Json,
    Binary,
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if let Some(personality) = bmv2_cli::Personality::of(&argv0) {
        let args = <bmv2_cli::Bmv2Args as Parser>::parse();
        return match run_as_bmv2(personality, args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => match e.downcast_ref::<clap::Error>() {
                Some(usage) => usage.exit(),
                None => {
                    eprintln!("softswitch: {e:#}");
                    ExitCode::FAILURE
                }
            },
        };
    }
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("softswitch: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the switch as BMv2's `simple_switch[_grpc]` command line asks.
fn run_as_bmv2(personality: bmv2_cli::Personality, args: bmv2_cli::Bmv2Args) -> Result<()> {
    use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt as _};
    let (options, logging) = bmv2_cli::options(personality, args)?;
    let file = logging
        .file
        .as_ref()
        .map(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening the log file {}", path.display()))
        })
        .transpose()?;
    let writer = match (logging.console, file) {
        (true, Some(f)) => BoxMakeWriter::new(std::io::stdout.and(std::sync::Mutex::new(f))),
        (true, None) => BoxMakeWriter::new(std::io::stdout),
        (false, Some(f)) => BoxMakeWriter::new(std::sync::Mutex::new(f)),
        (false, None) => BoxMakeWriter::new(std::io::stderr),
    };
    tracing_subscriber::fmt()
        .with_ansi(false)
        .event_format(bmv2_log::Bmv2Format)
        .with_env_filter(log_filter(&logging.level))
        .with_writer(writer)
        .init();
    crate::run::run(options)
}

/// The log's filter: `SOFTSWITCH_LOG`'s if it is set (the audit trail still at `info`: an
/// operator's filter does not turn it off), else `default`.
fn log_filter(default: &str) -> tracing_subscriber::EnvFilter {
    match tracing_subscriber::EnvFilter::try_from_env("SOFTSWITCH_LOG") {
        Ok(filter) => filter.add_directive(
            "softswitch_server::audit=info"
                .parse()
                .expect("a valid directive"),
        ),
        Err(_) => default.into(),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let mut map = SourceMap::new();
    match cli.command {
        Command::Run {
            program,
            interfaces,
            grpc_server_addr,
            device_id,
            cpu_port,
            port_io,
            thrift_addr,
            gnmi_addr,
            state_budget,
            execution,
            dump_packet_data,
            tls_cert,
            tls_key,
            tls_client_ca,
        } => {
            // Colour only on a terminal, and never under NO_COLOR (logs go to files and pipes).
            let colour =
                anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never;
            tracing_subscriber::fmt()
                .with_ansi(colour)
                .with_env_filter(log_filter("info"))
                .with_writer(std::io::stderr)
                .init();
            crate::run::run(crate::run::RunOptions {
                program,
                ports: interfaces,
                grpc_addr: grpc_server_addr,
                device_id,
                cpu_port,
                pcap: None,
                port_io,
                thrift_addr,
                gnmi_addr,
                state_budget,
                execution,
                dump_packet_data: crate::dump::PacketData(dump_packet_data),
                tls: tls_cert.zip(tls_key).map(|(cert, key)| TlsFiles {
                    cert,
                    key,
                    client_ca: tls_client_ca,
                }),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::P4info { program, format } => {
            let Some(compiled) = compile(&mut map, &program)? else {
                return Ok(ExitCode::FAILURE);
            };
            let info = match softswitch_server::p4info::p4info(&compiled, &map) {
                Ok(info) => info,
                Err(d) => {
                    eprintln!("{}", d.render(&map));
                    return Ok(ExitCode::FAILURE);
                }
            };
            let bytes = match format {
                P4InfoFormat::Text => format!(
                    "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n{}",
                    p4runtime::format::to_text(&info)
                )
                .into_bytes(),
                P4InfoFormat::Json => p4runtime::format::to_json(&info).into_bytes(),
                P4InfoFormat::Binary => prost::Message::encode_to_vec(&info),
            };
            std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)
                .context("writing the P4Info")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bundle { program } => {
            let file = read_program(&mut map, &program)?;
            let text = match softswitch_frontend::preprocessor::inline_includes(&mut map, file) {
                Ok(text) => text,
                Err(d) => {
                    eprintln!("{}", d.render(&map));
                    return Ok(ExitCode::FAILURE);
                }
            };
            std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())
                .context("writing the program")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { program } => {
            let file = read_program(&mut map, &program)?;
            let user_externs =
                match softswitch_frontend::check_with(&mut map, file, Includes::Files) {
                    Ok((compiled, user_externs)) => {
                        for w in &compiled.warnings {
                            eprintln!("{}", w.render(&map));
                        }
                        user_externs
                    }
                    Err(d) => {
                        eprintln!("{}", d.render(&map));
                        return Ok(ExitCode::FAILURE);
                    }
                };
            // Checked, but not runnable: a warning, as p4c gives.
            for e in &user_externs {
                let at = softswitch_frontend::diagnostic::Diagnostic::new(e.span, "");
                eprintln!(
                    "{}: warning: extern function '{}' is the program's own: softswitch, as \
                     BMv2, refuses to run the program",
                    at.location(&map),
                    e.name
                );
            }
            println!("{}: ok", program.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Stf {
            program,
            test,
            target,
            verbose,
        } => {
            let Some(softswitch_frontend::Compiled {
                program: compiled, ..
            }) = compile(&mut map, &program)?
            else {
                return Ok(ExitCode::FAILURE);
            };
            let text = softswitch_stf::read(&test)
                .with_context(|| format!("reading {}", test.display()))?;
            let stf = map.add(test.display().to_string(), text);
            let mut switch = Switch::new(compiled.clone(), Clock::Virtual(0));
            let run = match target {
                StfTarget::Softswitch => softswitch_stf::run(&map, stf, &mut switch),
                StfTarget::Bmv2 => {
                    let mut bmv2 = start_bmv2(&program, compiled)?;
                    softswitch_stf::run_on(&map, stf, &mut bmv2)
                }
            };
            let report = match run {
                Ok(r) => r,
                Err(d) => {
                    eprintln!("{}", d.render(&map));
                    return Ok(ExitCode::FAILURE);
                }
            };
            for f in &report.failures {
                eprintln!("{f}");
            }
            if verbose && matches!(target, StfTarget::Softswitch) {
                let (log, log_dropped) = switch.log();
                for line in log {
                    println!("log: {line}");
                }
                if log_dropped > 0 {
                    println!(
                        "log: {log_dropped} more lines not kept (at most {} are)",
                        softswitch_core::switch::MAX_LOG_LINES
                    );
                }
                for d in switch.digests() {
                    let values: Vec<String> = d.values.iter().map(|v| format!("{v:#x}")).collect();
                    println!("digest {}: {}", d.receiver, values.join(" "));
                }
                println!("dropped: {}", switch.drops());
            }
            let verdict = if report.passed() { "PASS" } else { "FAIL" };
            println!(
                "{verdict} {}: {} packets in, {} out, {} failures",
                test.display(),
                report.packets_in,
                report.packets_out,
                report.failures.len()
            );
            Ok(if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// `program` compiled by p4c-bm2-ss and running in simple_switch (p4c's warnings printed);
/// `compiled` is softswitch's lowering of it, which resolves a test's names.
fn start_bmv2(
    program: &Path,
    compiled: softswitch_core::ir::Program,
) -> Result<softswitch_stf::bmv2::Bmv2Target> {
    let toolchain = p4toolchain::Toolchain::find()?;
    let tools = softswitch_stf::bmv2::Bmv2Tools::from(&toolchain);
    // BMv2 has read the JSON once it has started: the scratch directory may go.
    let started = toolchain.compile_scratch(program, |p4c| {
        for warning in &p4c.warnings {
            eprintln!("p4c-bm2-ss: {warning}");
        }
        softswitch_stf::bmv2::Bmv2Target::start(&tools, &p4c.json, compiled)
            .map_err(anyhow::Error::msg)
    });
    started.with_context(|| format!("running {} on BMv2", program.display()))
}

/// Compiles a program (reading the files it includes); on a diagnostic prints it and returns
/// `None`.
fn compile(map: &mut SourceMap, program: &Path) -> Result<Option<softswitch_frontend::Compiled>> {
    let file = read_program(map, program)?;
    match softswitch_frontend::compile_with(map, file, Includes::Files) {
        Ok(p) => {
            for w in &p.warnings {
                eprintln!("{}", w.render(map));
            }
            Ok(Some(p))
        }
        Err(d) => {
            eprintln!("{}", d.render(map));
            Ok(None)
        }
    }
}

/// Reads a P4 program, within the front end's limit on source bytes.
fn read_program(map: &mut SourceMap, path: &Path) -> Result<u32> {
    let text = softswitch_frontend::source::read_file(path, MAX_SOURCE_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(map.add(path.display().to_string(), text))
}
