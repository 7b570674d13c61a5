//! softswitch's counters as a gNMI tree (`softswitch run --gnmi-addr`), served by the `gnmi`
//! crate's server: each port's frames and octets in and out and its queues' drops at
//! OpenConfig's paths (openconfig-interfaces, openconfig-qos), and under the `lossless` origin
//! what OpenConfig has no model for — each queue's occupancy, settings and measures (sojourn
//! times, occupancy percentiles, microbursts), the engine's totals, and the running program's
//! counters and registers (the cells that are not zero).
//! docs/telemetry.md lists the paths.
//!
//! The tree is read on the engine thread, as the Queues and P4Runtime services read it: one
//! closure for the ports, queues and totals, then one per counter or register, so packets go
//! on between them; paths are built from the copies off the engine thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ::gnmi::path::{DataPath, Elem};
use ::gnmi::proto::gnmi::ModelData;
use ::gnmi::server::Limits;
use ::gnmi::tree::{CounterTree, Leaf, Leaves};
use p4runtime::p4::config::v1 as p4i;
use softswitch_core::ir::CounterKind;
use softswitch_core::runtime::CellIndex;
use softswitch_core::table::CounterCell;
use softswitch_core::tm::PRIORITIES;
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;

use crate::engine::{Engine, EngineHandle};
use crate::tls::{self, Tls};

/// The origin of the paths OpenConfig has no model for (the agent's too).
pub const ORIGIN: &str = "lossless";

/// The most program cells (counter or register cells that are not zero) one read serves; the
/// cells past it are counted at `lossless:/p4/state/cells-not-served` instead.
pub const MAX_PROGRAM_CELLS: usize = 16_384;

/// What a port counts for gNMI, as the engine reads its ring and as its transmitter sends:
/// frames and octets received (before the pipeline, as a NIC counts them) and sent (handed to
/// the interface), and frames the interface refused.
#[derive(Debug, Default)]
pub struct PortCounters {
    in_frames: AtomicU64,
    in_octets: AtomicU64,
    out_frames: AtomicU64,
    out_octets: AtomicU64,
    out_errors: AtomicU64,
}

impl PortCounters {
    /// Counts a frame of `len` bytes received.
    pub fn received(&self, len: usize) {
        self.in_frames.fetch_add(1, Ordering::Relaxed);
        self.in_octets.fetch_add(len as u64, Ordering::Relaxed);
    }

    /// Counts a frame of `len` bytes the interface took (`sent`) or refused.
    pub fn sent(&self, len: usize, sent: bool) {
        if sent {
            self.out_frames.fetch_add(1, Ordering::Relaxed);
            self.out_octets.fetch_add(len as u64, Ordering::Relaxed);
        } else {
            self.out_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A port of the switch as the tree names it.
pub struct Port {
    /// The switch's port number.
    pub port: u16,
    /// Its interface: the `name` key of its paths.
    pub iface: String,
    /// What the engine counts as it reads its ring, and its transmitter counts.
    pub counters: Arc<PortCounters>,
}

/// softswitch's tree: the ports' counters and what the engine holds.
pub struct SwitchTree {
    engine: EngineHandle,
    ports: Vec<Port>,
}

impl SwitchTree {
    /// The tree of the switch behind `engine`, with its ports `ports`.
    pub fn new(engine: EngineHandle, ports: Vec<Port>) -> Self {
        SwitchTree { engine, ports }
    }
}

/// One queue, as the engine holds it.
struct QueueCopy {
    port: u16,
    priority: u8,
    occupancy_packets: u64,
    occupancy_bytes: u64,
    depth_packets: u64,
    rate_pps: u64,
    dropped: u64,
    /// What it measured, as leaves under its `lossless` state.
    measured: [(&'static str, u64); MEASURE_LEAVES],
}

/// The leaves of a queue's measures.
const MEASURE_LEAVES: usize = 16;

/// What `port`'s queue `priority` measured (the traffic manager's measures, docs/softswitch.md),
/// as leaves: sojourn times (µs), occupancies (packets an arriving packet found ahead of it),
/// the burst rule and the bursts, the episode under way, and the port's own rate.
fn measure_leaves(
    switch: &softswitch_core::switch::Switch,
    port: u16,
    priority: u8,
) -> [(&'static str, u64); MEASURE_LEAVES] {
    let rule = switch.queue_burst_rule(port, priority);
    let unmeasured = softswitch_core::tm::QueueMeasures::new(rule);
    let m = switch.queue_measures(port, priority).unwrap_or(&unmeasured);
    let b = &m.bursts;
    let (open_since, open_peak) = b.open().unzip();
    [
        ("sojourn-p50-us", m.sojourn_us.quantile(0.5)),
        ("sojourn-p99-us", m.sojourn_us.quantile(0.99)),
        ("sojourn-max-us", m.sojourn_us.max()),
        ("occupancy-p50-packets", m.occupancy.quantile(0.5)),
        ("occupancy-p99-packets", m.occupancy.quantile(0.99)),
        ("occupancy-max-packets", m.occupancy.max()),
        ("burst-threshold-packets", u64::from(rule.threshold_packets)),
        ("burst-window-us", rule.window_us),
        ("microbursts", b.microbursts),
        ("bursts-over-window", b.longer),
        ("last-burst-peak-packets", u64::from(b.last_peak_packets)),
        ("last-burst-duration-us", b.last_duration_us),
        ("in-burst", u64::from(b.in_burst())),
        ("open-burst-peak-packets", open_peak.map_or(0, u64::from)),
        (
            "open-burst-us",
            open_since.map_or(0, |t| switch.now_us().saturating_sub(t)),
        ),
        ("port-rate-pps", switch.port_rate(port).unwrap_or(0)),
    ]
}

/// What one closure on the engine thread copies besides the program's cells.
struct EngineCopy {
    counts: softswitch_device::engine::Counts,
    /// Packets the program or the traffic manager dropped, if a pipeline runs.
    dropped: Option<u64>,
    queues: Vec<QueueCopy>,
    /// The program's counters and registers: (`counter` or `register`, P4Info id).
    instances: Vec<(&'static str, u32)>,
}

/// The cells of one counter or register that are not zero.
struct CellsCopy {
    kind: &'static str,
    name: String,
    /// (index, leaf name, value).
    cells: Vec<(usize, &'static str, u64)>,
    /// Cells not zero left out: past [`MAX_PROGRAM_CELLS`], or a register wider than 64 bits.
    left_out: u64,
}

fn copy_engine(e: &mut Engine) -> EngineCopy {
    let mut ports = e.ports();
    let mut queues = Vec::new();
    let mut instances = Vec::new();
    let mut dropped = None;
    if let Some(p) = &e.pipeline {
        let switch = &p.switch;
        ports.extend(switch.queue_ports());
        ports.sort_unstable();
        ports.dedup();
        for &port in &ports {
            for priority in 0..PRIORITIES as u8 {
                let (depth, rate) = switch.queue_config(port, priority);
                queues.push(QueueCopy {
                    port,
                    priority,
                    occupancy_packets: switch.queue_occupancy(port, priority) as u64,
                    occupancy_bytes: switch.queue_bytes(port, priority),
                    depth_packets: depth as u64,
                    rate_pps: rate.unwrap_or(0),
                    dropped: switch.queue_drops(port, priority),
                    measured: measure_leaves(switch, port, priority),
                });
            }
        }
        dropped = Some(switch.drops());
        let id = |p: &Option<p4i::Preamble>| p.as_ref().map_or(0, |p| p.id);
        instances.extend(p.info.counters.iter().map(|c| ("counter", id(&c.preamble))));
        instances.extend(
            p.info
                .registers
                .iter()
                .map(|r| ("register", id(&r.preamble))),
        );
    }
    EngineCopy {
        counts: e.counts,
        dropped,
        queues,
        instances,
    }
}

/// The cells not zero of the counter or register of P4Info id `id` in the running program, at
/// most `budget` of them; `None` if the program has none (it was replaced meanwhile).
fn copy_cells(e: &mut Engine, kind: &'static str, id: u32, budget: usize) -> Option<CellsCopy> {
    let p = e.pipeline.as_ref()?;
    let preamble = match kind {
        "counter" => p
            .info
            .counters
            .iter()
            .filter_map(|c| c.preamble.as_ref())
            .find(|x| x.id == id),
        _ => p
            .info
            .registers
            .iter()
            .filter_map(|r| r.preamble.as_ref())
            .find(|x| x.id == id),
    }?;
    let instance = *p.index.instances.get(&id)?;
    let switch = &p.switch;
    let program = &switch.program().instances[instance];
    let size = program.kind.cells()? as usize;
    let mut copy = CellsCopy {
        kind,
        name: preamble.name.clone(),
        cells: Vec::new(),
        left_out: 0,
    };
    let keep = |copy: &mut CellsCopy, index, leaf, value| {
        if copy.cells.len() < budget {
            copy.cells.push((index, leaf, value));
        } else {
            copy.left_out += 1;
        }
    };
    if kind == "counter" {
        let counts = program.kind.counter_kind()?;
        for index in 0..size {
            let cell: CounterCell = switch.read_cell(instance, CellIndex::Index(index)).ok()?;
            let (packets, bytes) = match counts {
                CounterKind::Packets => (Some(cell.packets), None),
                CounterKind::Bytes => (None, Some(cell.bytes)),
                CounterKind::PacketsAndBytes => (Some(cell.packets), Some(cell.bytes)),
            };
            for (leaf, value) in [("packets", packets), ("bytes", bytes)] {
                if let Some(value) = value.filter(|v| *v != 0) {
                    keep(&mut copy, index, leaf, value);
                }
            }
        }
    } else {
        let wide = program.kind.cell_width().is_none_or(|w| w > 64);
        for index in 0..size {
            let value: u128 = switch.read_cell(instance, CellIndex::Index(index)).ok()?;
            match u64::try_from(value) {
                Ok(0) => {}
                Ok(value) if !wide => keep(&mut copy, index, "value", value),
                _ => copy.left_out += 1,
            }
        }
    }
    Some(copy)
}

impl SwitchTree {
    fn interface(&self, origin: &str, port: &Port) -> DataPath {
        DataPath::root(origin).join("interfaces").child(Elem::keyed(
            "interface",
            "name",
            &port.iface,
        ))
    }

    fn queue(&self, origin: &str, iface: &str, priority: u8) -> DataPath {
        DataPath::root(origin)
            .join("qos")
            .join("interfaces")
            .child(Elem::keyed("interface", "interface-id", iface))
            .join("output")
            .join("queues")
            .child(Elem::keyed("queue", "name", &priority.to_string()))
            .join("state")
    }
}

impl CounterTree for SwitchTree {
    fn read(&self) -> anyhow::Result<Vec<Leaf>> {
        let copy = self.engine.call_blocking(copy_engine)?;
        let mut leaves = Leaves::default();
        let mut dropped_at: BTreeMap<u16, u64> = BTreeMap::new();
        let names: BTreeMap<u16, &str> = self
            .ports
            .iter()
            .map(|p| (p.port, p.iface.as_str()))
            .collect();
        for q in &copy.queues {
            *dropped_at.entry(q.port).or_default() += q.dropped;
            let Some(iface) = names.get(&q.port) else {
                continue;
            };
            leaves.under(
                &self.queue("", iface, q.priority),
                [("dropped-pkts", q.dropped)],
            );
            leaves.under(
                &self.queue(ORIGIN, iface, q.priority),
                [
                    ("occupancy-packets", q.occupancy_packets),
                    ("occupancy-octets", q.occupancy_bytes),
                    ("depth-packets", q.depth_packets),
                    ("rate-pps", q.rate_pps),
                ]
                .into_iter()
                .chain(q.measured),
            );
        }
        for port in &self.ports {
            let c = &port.counters;
            let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
            leaves.under(
                &self.interface("", port).join("state").join("counters"),
                [
                    ("in-pkts", read(&c.in_frames)),
                    ("in-octets", read(&c.in_octets)),
                    ("out-pkts", read(&c.out_frames)),
                    ("out-octets", read(&c.out_octets)),
                    ("out-errors", read(&c.out_errors)),
                    (
                        "out-discards",
                        dropped_at.get(&port.port).copied().unwrap_or(0),
                    ),
                ],
            );
        }
        let counts = copy.counts;
        let switch = DataPath::root(ORIGIN).join("switch").join("state");
        leaves.under(
            &switch,
            [
                ("received", counts.received),
                ("sent", counts.sent),
                ("to-cpu", counts.to_cpu),
                ("lost", counts.lost),
                ("no-pipeline", counts.no_pipeline),
            ],
        );
        if let Some(dropped) = copy.dropped {
            leaves.under(&switch, [("dropped", dropped)]);
        }
        let mut budget = MAX_PROGRAM_CELLS;
        let mut left_out = 0;
        for (kind, id) in copy.instances {
            let cells = self
                .engine
                .call_blocking(move |e| copy_cells(e, kind, id, budget))?;
            let Some(cells) = cells else { continue };
            budget -= cells.cells.len();
            left_out += cells.left_out;
            let at = DataPath::root(ORIGIN)
                .join("p4")
                .join(&format!("{}s", cells.kind))
                .child(Elem::keyed(cells.kind, "name", &cells.name));
            for (index, leaf, value) in cells.cells {
                leaves.under(
                    &at.child(Elem::keyed("cell", "index", &index.to_string()))
                        .join("state"),
                    [(leaf, value)],
                );
            }
        }
        // While a pipeline runs: what the read of its cells left out.
        if copy.dropped.is_some() {
            leaves.under(
                &DataPath::root(ORIGIN).join("p4").join("state"),
                [("cells-not-served", left_out)],
            );
        }
        Ok(leaves.0)
    }

    fn origins(&self) -> &[&str] {
        &["", ORIGIN]
    }

    fn models(&self) -> Vec<ModelData> {
        let model = |name: &str, organization: &str, version: &str| ModelData {
            name: name.into(),
            organization: organization.into(),
            version: version.into(),
        };
        vec![
            model("openconfig-interfaces", "OpenConfig working group", "3.0.0"),
            model("openconfig-qos", "OpenConfig working group", "0.11.0"),
            model("lossless", "lossless", env!("CARGO_PKG_VERSION")),
        ]
    }
}

/// Serves gNMI over `tree` on `listener` within the agent's [`Limits`] until the task is
/// dropped: in the clear, or over TLS with `tls` (the P4Runtime server's files and checks).
pub async fn serve(
    listener: TcpListener,
    tree: SwitchTree,
    tls: Option<Arc<Tls>>,
) -> Result<(), tonic::transport::Error> {
    let tree = Arc::new(tree);
    let limits = Limits::default();
    let Some(tls) = tls else {
        return ::gnmi::server::serve(listener, tree, limits).await;
    };
    let (accepted, incoming) = tokio::sync::mpsc::channel(tls::MAX_HANDSHAKES);
    let acceptor = tokio::spawn(tls::accept(tls, listener, accepted));
    let served =
        ::gnmi::server::serve_with_incoming(ReceiverStream::new(incoming), tree, limits).await;
    acceptor.abort();
    served
}
