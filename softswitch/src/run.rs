//! `softswitch run`: a switch on real ports with its gRPC server, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::dump::PacketData;
use crate::pcap::Capture;
use crate::taps::{self, Tapped};
use softswitch_core::switch::Execution;
use softswitch_device::ports::{self, PortSpec};
use softswitch_server::gnmi::{self, PortCounters};
use softswitch_server::pipeline::Compiled;
use softswitch_server::tls::{Tls, TlsFiles};
use softswitch_server::Device;

/// What `softswitch run` was asked for.
#[derive(Debug)]
pub struct RunOptions {
    /// The program to load at start, if any (else none until SetForwardingPipelineConfig).
    pub program: Option<PathBuf>,
    /// The ports.
    pub ports: Vec<PortSpec>,
    /// Where to serve P4Runtime and Queues.
    pub grpc_addr: SocketAddr,
    /// The P4Runtime device id.
    pub device_id: u64,
    /// The port whose frames go to the controller (PacketIn) and where PacketOut enters.
    pub cpu_port: Option<u16>,
    /// Where to write each port's pcap files (`--pcap DIR`), if anywhere.
    pub pcap: Option<PathBuf>,
    /// How the ports exchange frames with the kernel.
    pub port_io: ports::PortIo,
    /// Where to serve BMv2's runtime Thrift services (`--thrift-port`), if anywhere.
    pub thrift_addr: Option<SocketAddr>,
    /// Where to serve gNMI (`--gnmi-addr`), if anywhere.
    pub gnmi_addr: Option<SocketAddr>,
    /// How many bytes of each frame received and sent to log at info level (BMv2's
    /// `--dump-packet-data`; 0 logs none).
    pub dump_packet_data: PacketData,
    /// The state budget of the switch, in bytes (`--state-budget`, `softswitch_core::budget`).
    pub state_budget: usize,
    /// TLS for the gRPC services, if asked for (else they serve in the clear).
    pub tls: Option<TlsFiles>,
    /// How the switch runs the program (`--execution`).
    pub execution: Execution,
}

/// Reads an `--execution` value: `interpreted` or `compiled`.
pub fn parse_execution(text: &str) -> Result<Execution, String> {
    match text {
        "interpreted" => Ok(Execution::Interpreted),
        "compiled" => Ok(Execution::Compiled),
        _ => Err("the execution is interpreted or compiled".into()),
    }
}

/// The least and the most `--state-budget` takes: 1 MiB to 1 TiB.
pub const STATE_BUDGET_RANGE: std::ops::RangeInclusive<usize> = (1 << 20)..=(1 << 40);

/// Reads a `--state-budget` value: a whole number of bytes, or one with a binary unit (`KiB`,
/// `MiB`, `GiB`, `TiB`, or their first letter), within [`STATE_BUDGET_RANGE`].
pub fn parse_state_budget(text: &str) -> Result<usize, String> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit {
        "" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => return Err("the unit is none (bytes), KiB, MiB, GiB or TiB".into()),
    };
    let bytes = number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|n| STATE_BUDGET_RANGE.contains(n));
    bytes.ok_or_else(|| {
        format!(
            "a state budget is a whole number of bytes from {} (1MiB) to {} (1TiB)",
            STATE_BUDGET_RANGE.start(),
            STATE_BUDGET_RANGE.end()
        )
    })
}

/// Runs the switch until SIGINT or SIGTERM.
pub fn run(options: RunOptions) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let entered = runtime.enter();
    // Caught first thing: until then SIGUSR1 and SIGHUP would end the switch (their default),
    // and a user may send them as soon as the process exists.
    runtime.spawn(audit_report_on_usr1().context("catching SIGUSR1")?);
    let hangup = match &options.tls {
        Some(_) => Some(hangup_signal().context("catching SIGHUP")?),
        None => None,
    };
    let tls = options
        .tls
        .clone()
        .map(softswitch_server::tls::load)
        .transpose()
        .context("TLS for P4Runtime")?
        .map(Arc::new);
    if let (Some(tls), Some(hangup)) = (&tls, hangup) {
        runtime.spawn(reload_on_hangup(tls.clone(), hangup));
    }
    drop(entered);
    let program = options
        .program
        .as_ref()
        .map(|path| Compiled::from_file(path).map_err(|e| anyhow::anyhow!("{e}")))
        .transpose()?;
    if let Some(cpu) = options.cpu_port {
        if options.ports.iter().any(|p| p.port == cpu) {
            anyhow::bail!("--cpu-port {cpu} is also given as an interface port");
        }
    }
    let mut attached = ports::open_all(&options.ports, options.port_io)?;
    // Per port: the pcap files of what comes in and goes out, when asked for.
    let mut captures = Vec::new();
    for p in &attached {
        captures.push(match &options.pcap {
            Some(dir) => {
                let iface = &p.spec().iface;
                Some((
                    Capture::create(&dir.join(format!("{iface}_in.pcap")))?,
                    Capture::create(&dir.join(format!("{iface}_out.pcap")))?,
                ))
            }
            None => None,
        });
    }
    // Per port: what it counts for gNMI, when asked for.
    let counters: Vec<Option<Arc<PortCounters>>> = attached
        .iter()
        .map(|_| options.gnmi_addr.map(|_| Arc::default()))
        .collect();
    let port_ios: Vec<String> = attached
        .iter()
        .map(|p| format!("{}@{} {}", p.spec().port, p.spec().iface, p.io()))
        .collect();
    let transmitters = attached
        .iter_mut()
        .zip(captures.iter().zip(&counters))
        .map(|(p, (capture, counters))| {
            let tx = p.transmitter().expect("taken once");
            let port = p.spec().port;
            let output = capture.as_ref().map(|(_, out)| out.clone());
            let counted = counters.clone();
            (
                port,
                Tapped::wrap(tx, port, options.dump_packet_data, output, counted),
            )
        })
        .collect();
    let device = Device::start(options.device_id, transmitters, options.cpu_port, program);
    let (budget, execution) = (options.state_budget, options.execution);
    device
        .engine
        .call_blocking(move |e| {
            e.set_state_budget(budget);
            e.set_execution(execution);
        })
        .context("setting the state budget and the execution")?;
    if let Some(addr) = options.thrift_addr {
        // Bound before the switch says it is up, so that a client started on that line finds it.
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("binding {addr} (Thrift)"))?;
        let info = softswitch_server::thrift::SwitchInfo {
            device_id: options.device_id,
            thrift_port: listener.local_addr()?.port(),
            ports: options
                .ports
                .iter()
                .map(|p| (p.port, p.iface.clone()))
                .collect(),
        };
        eprintln!(
            "softswitch: Thrift (simple_switch_CLI) on {}",
            listener.local_addr()?
        );
        let services = softswitch_server::thrift::Services::new(device.engine.clone(), info);
        softswitch_server::thrift::serve(listener, services)
            .context("starting the Thrift server")?;
    }
    if let Some(addr) = options.gnmi_addr {
        let ports = attached
            .iter()
            .zip(&counters)
            .filter_map(|(p, counters)| {
                Some(gnmi::Port {
                    port: p.spec().port,
                    iface: p.spec().iface.clone(),
                    counters: counters.clone()?,
                })
            })
            .collect();
        serve_gnmi(&runtime, addr, &device, ports, tls.clone())?;
    }
    let receivers: Vec<_> = attached
        .into_iter()
        .zip(captures.into_iter().zip(counters))
        .map(|(p, (capture, counters))| {
            let input = capture.map(|(input, _)| input);
            let port = p.spec().port;
            let tap = taps::received(port, options.dump_packet_data, input, counters);
            (port, p.receiver(tap))
        })
        .collect();
    device
        .engine
        .call_blocking(move |e| {
            for (port, rx) in receivers {
                e.attach(port, rx);
            }
        })
        .context("attaching the ports' receive sides")?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(options.grpc_addr)
            .await
            .with_context(|| format!("binding {}", options.grpc_addr))?;
        // Caught from before the switch says it is up: a SIGTERM right after that line ends it
        // cleanly.
        let shutdown = shutdown_signal().context("catching SIGINT and SIGTERM")?;
        eprintln!(
            "softswitch: P4Runtime on {}{} (device {}), ports [{}], cpu port {}, program {}",
            listener.local_addr()?,
            match &tls {
                None => "",
                Some(tls) if tls.mutual() => " over TLS, client certificates required",
                Some(_) => " over TLS",
            },
            options.device_id,
            port_ios.join(", "),
            options.cpu_port.map_or("none".into(), |p| p.to_string()),
            options.program.as_ref().map_or(
                "none (waiting for SetForwardingPipelineConfig)".into(),
                |p| p.display().to_string()
            ),
        );
        serve_until_stopped(&device, listener, tls, shutdown).await
    });
    if let Ok(c) = device.engine.call_blocking(|e| e.counts) {
        eprintln!(
            "softswitch: {} frames received, {} sent, {} to the controller, {} lost (no such port), {} before any pipeline",
            c.received, c.sent, c.to_cpu, c.lost, c.no_pipeline
        );
    }
    softswitch_server::audit::report();
    drop(device);
    eprintln!("softswitch: stopped");
    served
}

/// Binds `addr` and serves gNMI there over `device`'s counters and `ports`', on `runtime` until
/// it is dropped: bound before the switch says it is up, so that a client started on that line
/// finds it; over TLS when the P4Runtime server has it.
fn serve_gnmi(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
    device: &Device,
    ports: Vec<gnmi::Port>,
    tls: Option<Arc<Tls>>,
) -> anyhow::Result<()> {
    let listener =
        std::net::TcpListener::bind(addr).with_context(|| format!("binding {addr} (gNMI)"))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    eprintln!(
        "softswitch: gNMI on {bound}{}",
        if tls.is_some() { " over TLS" } else { "" }
    );
    let tree = gnmi::SwitchTree::new(device.engine.clone(), ports);
    runtime.spawn(async move {
        if let Err(e) = gnmi::serve(listener, tree, tls).await {
            eprintln!("softswitch: gNMI server: {e}");
        }
    });
    Ok(())
}

/// How long the switch, once told to stop, waits for its gRPC clients to end their calls: a
/// controller's StreamChannel lasts as long as the controller, which must not keep the switch
/// from stopping.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `device`'s gRPC services on `listener` until `stop` completes, then lets the calls in
/// progress end for at most [`STOP_GRACE`].
async fn serve_until_stopped(
    device: &Device,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<Tls>>,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let graceful = async move {
        let mut stopped = stopped;
        let _ = stopped.wait_for(|s| *s).await;
    };
    let serve = device.serve(listener, tls, graceful);
    tokio::pin!(serve);
    tokio::select! {
        served = &mut serve => return served.context("serving gRPC"),
        () = stop => {}
    }
    let _ = stopping.send(true);
    match tokio::time::timeout(STOP_GRACE, serve).await {
        Ok(served) => served.context("serving gRPC"),
        Err(_) => {
            eprintln!(
                "softswitch: clients still connected {}s after the signal: stopping without them",
                STOP_GRACE.as_secs()
            );
            Ok(())
        }
    }
}

/// SIGHUP, caught from the moment of the call (within the runtime).
fn hangup_signal() -> std::io::Result<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::hangup())
}

/// Reads the TLS files again at each `hangup`, as daemons reload their
/// certificates; a reload that fails keeps the configuration in use.
async fn reload_on_hangup(tls: Arc<Tls>, mut hangup: tokio::signal::unix::Signal) {
    while hangup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => eprintln!("softswitch: SIGHUP: TLS files read again"),
            Err(e) => {
                eprintln!("softswitch: SIGHUP: TLS files not reloaded, the previous stay: {e}")
            }
        }
    }
}

/// A future that writes the audit counts to the log at each SIGUSR1 (caught from the moment
/// of the call), as `dd` reports its progress.
fn audit_report_on_usr1() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut usr1 = signal(SignalKind::user_defined1())?;
    Ok(async move {
        while usr1.recv().await.is_some() {
            softswitch_server::audit::report();
        }
    })
}

/// A future that completes on SIGINT or SIGTERM, both caught from the moment of the call.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_budgets_take_bytes_and_binary_units_within_their_range() {
        assert_eq!(parse_state_budget("1048576"), Ok(1 << 20));
        assert_eq!(parse_state_budget("64MiB"), Ok(64 << 20));
        assert_eq!(parse_state_budget("2G"), Ok(2 << 30));
        assert_eq!(parse_state_budget("1TiB"), Ok(1 << 40));
        for refused in [
            "",
            "1KiB",
            "2TiB",
            "99999999999999999999G",
            "-5M",
            "1.5G",
            "5 M",
            "1MB",
        ] {
            assert!(parse_state_budget(refused).is_err(), "{refused}");
        }
    }
}
