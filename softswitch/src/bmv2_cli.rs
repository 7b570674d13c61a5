//! softswitch invoked as `simple_switch` or `simple_switch_grpc` (a symlink, or a copy, with
//! that name): BMv2's command line, `[options] [JSON] [-- target options]`, mapped onto
//! `softswitch run`, so the tools that launch BMv2 (the P4 tutorials, p4-utils, Mininet
//! classes) launch softswitch unchanged. What softswitch does not do yet is said on stderr,
//! never silently (docs/softswitch.md, "Using softswitch in place of BMv2").

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use softswitch_server::tls::TlsFiles;

/// Which of BMv2's programs softswitch stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    /// `simple_switch`: no P4Runtime of BMv2's own; softswitch serves it on a port of the
    /// system's choosing on 127.0.0.1, so that several switches never collide.
    SimpleSwitch,
    /// `simple_switch_grpc`: P4Runtime on `--grpc-server-addr` (default 0.0.0.0:9559).
    SimpleSwitchGrpc,
}

impl Personality {
    /// The personality of a program invoked as `argv0`, if BMv2's.
    pub fn of(argv0: &std::ffi::OsStr) -> Option<Personality> {
        let name = std::path::Path::new(argv0).file_name()?.to_str()?;
        match name {
            "simple_switch" => Some(Personality::SimpleSwitch),
            "simple_switch_grpc" => Some(Personality::SimpleSwitchGrpc),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Personality::SimpleSwitch => "simple_switch",
            Personality::SimpleSwitchGrpc => "simple_switch_grpc",
        }
    }
}

/// BMv2's general options (before `--`).
#[derive(Parser, Debug)]
#[command(
    about = "softswitch standing in for BMv2's simple_switch / simple_switch_grpc",
    override_usage = "simple_switch[_grpc] [options] [<path to JSON config file>] [-- target options]"
)]
pub struct Bmv2Args {
    /// The BMv2 JSON (p4c-bm2-ss's output) or P4_16 source to run.
    pub program: Option<PathBuf>,
    /// <port-num>@<interface-name>: attach an interface as a port; repeat for each.
    #[arg(short = 'i', long = "interface", value_name = "PORT@IFACE")]
    pub interfaces: Vec<softswitch_device::ports::PortSpec>,
    /// Write pcap files of each interface's frames, `IFACE_in.pcap` and `IFACE_out.pcap`, in
    /// DIR (default: the current directory).
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
    pub pcap: Option<PathBuf>,
    /// TCP port of BMv2's runtime Thrift services (simple_switch_CLI's), on every interface as
    /// BMv2's (default 9090).
    #[arg(long, value_name = "PORT", default_value_t = 9090)]
    pub thrift_port: u16,
    /// The P4Runtime device id.
    #[arg(long, default_value_t = 0)]
    pub device_id: u64,
    /// nanomsg IPC socket for logs: accepted and ignored.
    #[arg(long, value_name = "ADDR")]
    pub nanolog: Option<String>,
    /// Log on the console (standard output, as BMv2).
    #[arg(long)]
    pub log_console: bool,
    /// Log to this file.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// trace, debug, info, warn, error or off (BMv2's default: trace).
    #[arg(short = 'L', long, default_value = "trace", value_parser = ["trace", "debug", "info", "warn", "error", "off"])]
    pub log_level: String,
    /// With --log-file, flush after every message (softswitch always does).
    #[arg(long)]
    pub log_flush: bool,
    /// Start without a program, until a controller sets one (SetForwardingPipelineConfig).
    #[arg(long)]
    pub no_p4: bool,
    /// Log the first N bytes of every frame received and sent, in hex, at info level (0:
    /// none).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub dump_packet_data: usize,
    /// Target options (after `--`): --grpc-server-addr, --cpu-port, --priority-queues,
    /// --drop-port, and softswitch's --state-budget, --thrift-addr and --gnmi-addr.
    #[arg(last = true, allow_hyphen_values = true)]
    pub target: Vec<OsString>,
}

/// BMv2's target options (after `--`).
#[derive(Parser, Debug)]
#[command(no_binary_name = true)]
pub struct TargetArgs {
    /// Where P4Runtime listens (simple_switch_grpc's default 0.0.0.0:9559).
    #[arg(long)]
    pub grpc_server_addr: Option<SocketAddr>,
    /// The CPU port for PacketIn / PacketOut (1 to 510).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..511))]
    pub cpu_port: Option<u16>,
    /// Number of priority queues: accepted and ignored (softswitch's queues per port are
    /// its own, docs/softswitch.md).
    #[arg(long)]
    pub priority_queues: Option<u32>,
    /// The drop port: only 511, v1model's, is supported.
    #[arg(long)]
    pub drop_port: Option<u16>,
    /// softswitch's: the most memory what controllers write may take (`softswitch run
    /// --state-budget`).
    #[arg(long, value_name = "BYTES", default_value_t = softswitch_core::budget::DEFAULT_STATE_BUDGET, value_parser = crate::run::parse_state_budget)]
    pub state_budget: usize,
    /// Serve P4Runtime over TLS (with --grpc-server-cert and --grpc-server-key).
    #[arg(long)]
    pub grpc_server_ssl: bool,
    /// The CA client certificates must chain to (with --grpc-server-with-client-auth).
    #[arg(long, value_name = "PEM")]
    pub grpc_server_cacert: Option<PathBuf>,
    /// The server's certificate chain (PEM).
    #[arg(long, value_name = "PEM")]
    pub grpc_server_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long, value_name = "PEM")]
    pub grpc_server_key: Option<PathBuf>,
    /// Require and verify client certificates (mutual TLS).
    #[arg(long)]
    pub grpc_server_with_client_auth: bool,
    /// softswitch's: serve Thrift at this address (e.g. 127.0.0.1:9090) instead of every
    /// interface's port --thrift-port.
    #[arg(long, value_name = "ADDR")]
    pub thrift_addr: Option<SocketAddr>,
    /// softswitch's: also serve the switch's counters over gNMI at this address (`softswitch
    /// run --gnmi-addr`).
    #[arg(long, value_name = "ADDR")]
    pub gnmi_addr: Option<SocketAddr>,
}

impl TargetArgs {
    /// The TLS files BMv2's TLS options ask for, or why they do not make a configuration.
    /// As BMv2, the CA certificate is used only with client authentication.
    fn tls(&self, name: &str) -> anyhow::Result<Option<TlsFiles>> {
        if !self.grpc_server_ssl {
            if self.grpc_server_cert.is_some()
                || self.grpc_server_key.is_some()
                || self.grpc_server_cacert.is_some()
                || self.grpc_server_with_client_auth
            {
                anyhow::bail!("{name}: TLS options given without --grpc-server-ssl");
            }
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (&self.grpc_server_cert, &self.grpc_server_key) else {
            anyhow::bail!(
                "{name}: --grpc-server-ssl needs --grpc-server-cert and --grpc-server-key"
            );
        };
        let client_ca = match (self.grpc_server_with_client_auth, &self.grpc_server_cacert) {
            (false, Some(_)) => {
                eprintln!(
                    "softswitch ({name}): --grpc-server-cacert without \
                     --grpc-server-with-client-auth: clients are not asked for certificates"
                );
                None
            }
            (false, None) => None,
            (true, Some(ca)) => Some(ca.clone()),
            (true, None) => {
                anyhow::bail!("{name}: --grpc-server-with-client-auth needs --grpc-server-cacert")
            }
        };
        Ok(Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca,
        }))
    }
}

/// The `softswitch run` options BMv2's command line `args` (without argv[0]) asks for, or a
/// usage error (clap's, printed by the caller).
pub fn options(
    personality: Personality,
    args: Bmv2Args,
) -> anyhow::Result<(crate::run::RunOptions, Logging)> {
    let target = TargetArgs::try_parse_from(&args.target)?;
    let name = personality.name();
    if args.program.is_none() && !args.no_p4 {
        anyhow::bail!("{name}: give a JSON config file, or --no-p4 to start without one");
    }
    if args.program.is_some() && args.no_p4 {
        eprintln!("softswitch ({name}): --no-p4 given with a program: loading the program");
    }
    if args.nanolog.is_some() {
        eprintln!("softswitch ({name}): --nanolog accepted and ignored");
    }
    if target.priority_queues.is_some() {
        eprintln!(
            "softswitch ({name}): --priority-queues accepted and ignored (softswitch's queues \
             are its own, docs/softswitch.md)"
        );
    }
    let logs_info = (args.log_console || args.log_file.is_some())
        && ["trace", "debug", "info"].contains(&args.log_level.as_str());
    if args.dump_packet_data > 0 && !logs_info {
        // BMv2 says the same when its log level excludes info messages.
        eprintln!(
            "softswitch ({name}): --dump-packet-data ignored: the log (--log-console, \
             --log-file) does not take info messages"
        );
    }
    if target.drop_port.is_some_and(|p| p != 511) {
        anyhow::bail!("{name}: --drop-port other than 511 is not supported");
    }
    let tls = target.tls(name)?;
    if tls.is_some() && personality == Personality::SimpleSwitch {
        anyhow::bail!("{name}: TLS options are simple_switch_grpc's");
    }
    let grpc_addr = match (personality, target.grpc_server_addr) {
        (_, Some(addr)) => addr,
        (Personality::SimpleSwitchGrpc, None) => "0.0.0.0:9559".parse()?,
        (Personality::SimpleSwitch, None) => "127.0.0.1:0".parse()?,
    };
    let thrift_addr = target.thrift_addr.unwrap_or_else(|| {
        // BMv2's Thrift has no authentication: whoever reaches the port programs the switch.
        eprintln!(
            "softswitch ({name}): the Thrift port {} is open on every interface without \
             authentication, as BMv2's; to keep it to this machine add `-- --thrift-addr \
             127.0.0.1:{}` (softswitch's), or filter the port (docs/security.md)",
            args.thrift_port, args.thrift_port
        );
        SocketAddr::from(([0, 0, 0, 0], args.thrift_port))
    });
    // The switch's own crates at the level asked, the libraries under them at warn at most;
    // the audit trail of control writes always (docs/security.md), unless the log is off.
    let level = match args.log_level.as_str() {
        _ if !args.log_console && args.log_file.is_none() => format!("warn,{AUDIT}=info"),
        "off" => "off".to_string(),
        l => format!(
            "warn,softswitch={l},softswitch_server={l},softswitch_device={l},softswitch_core={l},\
             {AUDIT}=info"
        ),
    };
    Ok((
        crate::run::RunOptions {
            program: if args.no_p4 && args.program.is_none() {
                None
            } else {
                args.program
            },
            ports: args.interfaces,
            grpc_addr,
            device_id: args.device_id,
            cpu_port: target.cpu_port,
            pcap: args.pcap,
            port_io: softswitch_device::ports::PortIo::default(),
            thrift_addr: Some(thrift_addr),
            gnmi_addr: target.gnmi_addr,
            state_budget: target.state_budget,
            // simple_switch's drop-in runs as simple_switch does: the interpreter.
            execution: softswitch_core::switch::Execution::Interpreted,
            tls,
            dump_packet_data: crate::dump::PacketData(if logs_info {
                args.dump_packet_data
            } else {
                0
            }),
        },
        Logging {
            level,
            console: args.log_console,
            file: args.log_file,
        },
    ))
}

/// The tracing target of the audit trail (`softswitch_server::audit`).
const AUDIT: &str = "softswitch_server::audit";

/// Where and how much to log.
#[derive(Debug)]
pub struct Logging {
    /// A tracing filter level.
    pub level: String,
    /// On standard output, as BMv2's --log-console.
    pub console: bool,
    /// Into this file.
    pub file: Option<PathBuf>,
}
