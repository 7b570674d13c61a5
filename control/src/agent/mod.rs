//! `lossless agent`: the host daemon. It keeps the interfaces its TOML file names attached with
//! their hooks and profiles (adopting programs already pinned), reconciles on SIGHUP, when an
//! interface appears or goes (rtnetlink link events) and every [`RESYNC`], follows the load
//! balancer's uplink carrier as `host watch` does, and serves the counters of every interface
//! attached in its network namespace on `/metrics` (and its own state on `/healthz`), over TLS
//! and with basic auth when a web configuration file in exporter-toolkit's format says so. On
//! exit it detaches nothing unless told: the pins keep the programs running, as after `attach`.
//! docs/agent.md.

pub mod auth;
pub mod http;
pub mod reconcile;
pub mod telemetry;
pub mod web;

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, SocketAddr},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context as _;
use hyper::StatusCode;
use tokio::{
    signal::unix::{signal, SignalKind},
    sync::mpsc,
};

use self::{
    http::Pages,
    reconcile::{Reconciler, State},
    web::{CurrentWeb, Web, WebConfig},
};
use host::{metrics::Exposition, pinned_maps::PinnedMaps, stats::Stats, status};
use hostconfig::{agent::AgentConfig, attachment::Attachment};
use sysutil::netlink::LinkEvents;

/// Where `/metrics` is served unless told otherwise: loopback only.
pub const DEFAULT_METRICS_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9477);

/// How often the agent reconciles without being asked (link events can be lost).
pub const RESYNC: Duration = Duration::from_secs(30);

/// `lossless agent`'s options.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The agent's TOML file: interfaces, hooks, profiles (docs/agent.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Where to serve /metrics and /healthz (ADDRESS:PORT); default the file's
    /// metrics_addr, else 127.0.0.1:9477.
    #[arg(long, value_name = "ADDRESS:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    /// The web configuration (exporter-toolkit's YAML: TLS and basic auth for /metrics and
    /// /healthz), the flag every Prometheus exporter takes; default the file's
    /// web_config_file, else plain HTTP without authentication.
    #[arg(long = "web.config.file", value_name = "YAML")]
    pub web_config_file: Option<PathBuf>,
    /// Where to serve gNMI (ADDRESS:PORT, plain gRPC: docs/telemetry.md); default the
    /// file's gnmi_listen_address, else not served.
    #[arg(long = "gnmi.listen-address", value_name = "ADDRESS:PORT")]
    pub gnmi_listen_address: Option<SocketAddr>,
    /// Detach the interfaces it manages when it stops (by default the programs stay).
    #[arg(long)]
    pub detach_on_exit: bool,
}

/// What the reconciler tells the server.
#[derive(Default)]
struct Shared {
    states: BTreeMap<String, State>,
    reconciles: u64,
    reconcile_errors: u64,
    config_errors: u64,
}

/// The pages the server shows, from the pins and the shared state.
struct AgentPages(Arc<Mutex<Shared>>);

/// The counters of every interface attached in the agent's network namespace, read now (one
/// detached meanwhile is left out; one whose pins cannot be read is left out with a warning,
/// since its series vanish while it still counts as attached).
fn attached_stats() -> anyhow::Result<Vec<Stats>> {
    let mut all = Vec::new();
    for interface in status::attached_here()? {
        let maps = match PinnedMaps::open(&interface) {
            Ok(maps) => maps,
            Err(error) => {
                tracing::debug!("{interface}: detached meanwhile? {error:#}");
                continue;
            }
        };
        match Stats::read(&maps) {
            Ok(stats) => all.push(stats),
            Err(error) => tracing::warn!("{interface}: counters not read: {error:#}"),
        }
    }
    Ok(all)
}

impl AgentPages {
    fn exposition(&self) -> anyhow::Result<String> {
        let mut exposition = Exposition::new();
        for stats in attached_stats()? {
            exposition.add_stats(&stats)?;
        }
        let shared = self.0.lock().expect("agent state");
        for (name, state) in &shared.states {
            exposition.gauge(
                "lossless_agent_interface_attached",
                "1 when an interface of the agent's file is attached as it asks, else 0 (absent or failed).",
                &[("interface", name)],
                f64::from(u8::from(*state == State::Attached)),
            )?;
        }
        for (name, help, value) in [
            (
                "lossless_agent_reconciles_total",
                "Reconciles the agent ran.",
                shared.reconciles,
            ),
            (
                "lossless_agent_reconcile_errors_total",
                "Attaches, detaches and writes that failed.",
                shared.reconcile_errors,
            ),
            (
                "lossless_agent_config_errors_total",
                "Reloads (SIGHUP) refused because the agent's file or its web configuration was not valid.",
                shared.config_errors,
            ),
        ] {
            exposition.counter(name, help, &[], value as f64)?;
        }
        exposition.encode()
    }
}

impl Pages for AgentPages {
    fn metrics(&self) -> (StatusCode, String) {
        match self.exposition() {
            Ok(text) => (StatusCode::OK, text),
            Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}\n")),
        }
    }

    fn health(&self) -> (StatusCode, String) {
        let shared = self.0.lock().expect("agent state");
        let mut healthy = shared.reconciles > 0;
        let mut body = String::new();
        for (name, state) in &shared.states {
            let line = match state {
                State::Attached => "attached".to_owned(),
                State::Absent => "absent (waiting for it)".to_owned(),
                State::Failed(error) => {
                    healthy = false;
                    format!("failed: {error}")
                }
            };
            body += &format!("{name}: {line}\n");
        }
        if shared.reconciles == 0 {
            body += "starting\n";
        }
        let status = if healthy {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (
            status,
            format!("{}\n{body}", if healthy { "ok" } else { "unhealthy" }),
        )
    }
}

/// The web configuration `args` or `config` names (the flag wins), read and loaded; plain HTTP
/// without authentication when neither names one.
fn web(args: &AgentArgs, config: &AgentConfig) -> anyhow::Result<Web> {
    match args
        .web_config_file
        .as_deref()
        .or(config.web_config_file.as_deref())
    {
        None => Ok(Web::default()),
        Some(path) => WebConfig::from_file(path)?.load(),
    }
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let mut config = AgentConfig::from_file(&args.config)?;
    let addr = args
        .metrics_addr
        .or(config.metrics_addr)
        .unwrap_or(DEFAULT_METRICS_ADDR);
    let detach_on_exit = args.detach_on_exit || config.detach_on_exit;
    let shared = Arc::new(Mutex::new(Shared::default()));
    let current_web = Arc::new(CurrentWeb::default());
    let first_web = web(&args, &config)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr} for /metrics"))?;
    tracing::info!(
        "serving /metrics and /healthz on {}://{addr}{}",
        first_web.scheme(),
        if first_web.auth.required() {
            " with basic auth"
        } else {
            ""
        }
    );
    current_web.set(first_web);
    let server = tokio::spawn(http::serve(
        listener,
        Arc::new(AgentPages(shared.clone())),
        current_web.clone(),
    ));

    let gnmi = match args.gnmi_listen_address.or(config.gnmi_listen_address) {
        None => None,
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on {addr} for gNMI"))?;
            let bound = listener
                .local_addr()
                .context("the gNMI listener's address")?;
            tracing::info!("serving gNMI on {bound} (plain gRPC)");
            let tree = Arc::new(telemetry::AgentTree(shared.clone()));
            Some(tokio::spawn(async move {
                if let Err(error) = gnmi::server::serve(listener, tree, Default::default()).await {
                    tracing::error!("gNMI server: {error}");
                }
            }))
        }
    };

    let mut hangup = signal(SignalKind::hangup())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut links = link_events()?;
    let mut resync = tokio::time::interval(RESYNC);
    let mut reconciler = Reconciler::default();
    loop {
        tokio::select! {
            _ = resync.tick() => {}
            _ = hangup.recv() => {
                match AgentConfig::from_file(&args.config) {
                    Ok(new) => {
                        tracing::info!("{}: reloaded", args.config.display());
                        config = new;
                    }
                    Err(error) => {
                        tracing::error!("keeping the running configuration: {error:#}");
                        shared.lock().expect("agent state").config_errors += 1;
                    }
                }
                // The web configuration's TLS files and users, read again (certificate
                // rotation), even when the agent's file failed; a file that fails, or that
                // would turn TLS or basic auth on or off, keeps the one in force.
                match web(&args, &config).and_then(|new| current_web.replace(new)) {
                    Ok(()) => tracing::info!(
                        "web configuration reloaded: serving over {}",
                        current_web.get().mode()
                    ),
                    Err(error) => {
                        tracing::error!("keeping the running web configuration: {error:#}");
                        shared.lock().expect("agent state").config_errors += 1;
                    }
                }
            }
            Some(()) = links.recv() => {
                while links.try_recv().is_ok() {}
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
        let wanted = config.clone();
        let (returned, states, failures) = tokio::task::spawn_blocking(move || {
            let (states, failures) = reconciler.run(&wanted);
            sync_uplinks(&wanted);
            (reconciler, states, failures)
        })
        .await?;
        reconciler = returned;
        let mut shared = shared.lock().expect("agent state");
        shared.states = states;
        shared.reconciles += 1;
        shared.reconcile_errors += failures;
    }
    server.abort();
    if let Some(gnmi) = gnmi {
        gnmi.abort();
    }
    if detach_on_exit {
        tokio::task::spawn_blocking(move || reconciler.detach_all()).await?;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Keeps the balancer's live uplinks in step with their carrier on the interfaces with the
/// `lb` hook, as `lossless host watch` does.
fn sync_uplinks(config: &AgentConfig) {
    for spec in config
        .interfaces
        .values()
        .filter(|s| s.hooks.contains(&Attachment::Lb))
    {
        let Ok(maps) = PinnedMaps::open(&spec.name) else {
            continue;
        };
        match maps.sync_lb_live() {
            Ok(changes) => {
                for (uplink, live) in changes {
                    tracing::info!(
                        "{}: uplink {uplink} {}",
                        spec.name,
                        if live { "up" } else { "down, traffic moved" }
                    );
                }
            }
            Err(error) => tracing::error!("{}: uplinks: {error:#}", spec.name),
        }
    }
}

/// A channel that receives a message after each datagram of link events (or when events were
/// lost), from a thread that follows them in the process's network namespace.
fn link_events() -> anyhow::Result<mpsc::Receiver<()>> {
    let mut events = LinkEvents::subscribe().context("subscribing to link events")?;
    let (send, receive) = mpsc::channel(1);
    std::thread::Builder::new()
        .name("link-events".into())
        .spawn(move || loop {
            match events.wait() {
                // A full channel already asks for a reconcile.
                Ok(_) => {
                    if let Err(mpsc::error::TrySendError::Closed(())) = send.try_send(()) {
                        return;
                    }
                }
                Err(error) => {
                    tracing::error!("link events: {error}; reconciling every {RESYNC:?} only");
                    return;
                }
            }
        })?;
    Ok(receive)
}
