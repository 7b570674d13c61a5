//! softswitch's `lossless.softswitch.v1.Queues` service: egress queue depth and rate per port
//! and priority, as BMv2's Thrift `set_queue_depth` / `set_queue_rate`, and how a port's queues
//! share it (strict or DWRR, weights, base quantum, the port's own rate), which BMv2 has no call
//! for; and what each
//! queue measured: sojourn times, occupancies, microbursts (by a rule set here too).

use std::sync::Arc;

use p4runtime::lossless::softswitch::v1::{self as q, queues_server::Queues};
use tonic::{Request, Response, Status};

use super::arbitration::Arbitration;
use super::audit::{self, Surface};
use super::engine::{Call as _, EngineHandle};
use softswitch_core::runtime::RuntimeError;
use softswitch_core::switch::{Switch, DROP_PORT};
use softswitch_core::tm::{self, PRIORITIES};

/// The Queues service of one device.
#[derive(Clone)]
pub struct QueuesService {
    engine: EngineHandle,
    arbitration: Arc<Arbitration>,
}

impl QueuesService {
    /// The service for the device behind `engine`.
    pub fn new(engine: EngineHandle, arbitration: Arc<Arbitration>) -> Self {
        QueuesService {
            engine,
            arbitration,
        }
    }
}

/// The state of `port`'s queue `priority`.
fn state(switch: &Switch, port: u16, priority: u8) -> q::QueueState {
    let (depth, rate) = switch.queue_config(port, priority);
    let scheduling = switch.queue_scheduling(port);
    let rule = switch.queue_burst_rule(port, priority);
    let unmeasured = tm::QueueMeasures::new(rule);
    let m = switch.queue_measures(port, priority).unwrap_or(&unmeasured);
    let packets = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let open = m.bursts.open();
    q::QueueState {
        port: u32::from(port),
        priority: u32::from(priority),
        depth_packets: depth as u32,
        rate_pps: rate.unwrap_or(0),
        occupancy_packets: switch.queue_occupancy(port, priority) as u32,
        strict: scheduling.strict & (1 << priority) != 0,
        weight: scheduling.weights[usize::from(priority)],
        quantum_bytes: scheduling.quantum,
        dropped_packets: switch.queue_drops(port, priority),
        sojourn_us_buckets: m.sojourn_us.counts().to_vec(),
        sojourn_p50_us: m.sojourn_us.quantile(0.5),
        sojourn_p99_us: m.sojourn_us.quantile(0.99),
        sojourn_max_us: m.sojourn_us.max(),
        occupancy_p50_packets: packets(m.occupancy.quantile(0.5)),
        occupancy_p99_packets: packets(m.occupancy.quantile(0.99)),
        occupancy_max_packets: packets(m.occupancy.max()),
        burst_threshold_packets: rule.threshold_packets,
        burst_window_us: rule.window_us,
        microbursts: m.bursts.microbursts,
        bursts_over_window: m.bursts.longer,
        last_burst_peak_packets: m.bursts.last_peak_packets,
        last_burst_duration_us: m.bursts.last_duration_us,
        in_burst: m.bursts.in_burst(),
        port_rate_pps: switch.port_rate(port).unwrap_or(0),
        open_burst_peak_packets: open.map_or(0, |(_, peak)| peak),
        open_burst_us: open.map_or(0, |(since, _)| switch.now_us().saturating_sub(since)),
    }
}

/// Every queue of the ports `ports` at `priority` (all if `None`).
fn states(switch: &Switch, ports: Vec<u16>, priority: Option<u8>) -> Vec<q::QueueState> {
    ports
        .into_iter()
        .flat_map(|port| {
            (0..PRIORITIES as u8)
                .filter(move |p| priority.is_none_or(|x| x == *p))
                .map(move |p| state(switch, port, p))
        })
        .collect()
}

/// `value`, when the request gives one, as `check` takes it; a value it refuses is
/// INVALID_ARGUMENT.
fn checked<V: Into<u128>, T>(
    value: Option<V>,
    check: fn(u128) -> Result<T, tm::QueueSettingError>,
) -> Result<Option<T>, Status> {
    value
        .map(|v| check(v.into()))
        .transpose()
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// A setter of the queues a port (all if `None`) and a priority (all if `None`) name.
type QueueSetter<T> = fn(&mut Switch, Option<u16>, Option<u8>, T) -> Result<(), RuntimeError>;

/// Sets `value` on the `(port, priority)` queues with `set`, if it was given.
fn set_given<T>(
    switch: &mut Switch,
    (port, priority): (Option<u16>, Option<u8>),
    value: Option<T>,
    set: QueueSetter<T>,
) -> Result<(), RuntimeError> {
    value.map_or(Ok(()), |value| set(switch, port, priority, value))
}

fn no_pipeline() -> Status {
    Status::failed_precondition("no forwarding pipeline: the queues belong to the running pipeline")
}

impl QueuesService {
    /// Applies a SetQueue request: the queues it set, as they are now.
    async fn apply(&self, req: q::SetQueueRequest) -> Result<Vec<q::QueueState>, Status> {
        tracing::debug!(request = ?req, "SetQueue");
        self.arbitration.check_device(req.device_id)?;
        let port = req
            .port
            .map(|p| {
                u16::try_from(p)
                    .ok()
                    .filter(|&p| u128::from(p) < DROP_PORT)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!("port {p} is not a port (0..510)"))
                    })
            })
            .transpose()?;
        let priority = checked(req.priority, tm::priority)?;
        let depth = checked(req.depth_packets, tm::depth)?;
        let rate = checked(req.rate_pps, tm::rate)?;
        let port_rate = checked(req.port_rate_pps, tm::rate)?;
        let weight = checked(req.weight, tm::weight)?;
        let quantum = checked(req.quantum_bytes, tm::quantum)?;
        let threshold = checked(req.burst_threshold_packets, tm::burst_threshold)?;
        let window = checked(req.burst_window_us, tm::burst_window)?;
        let reset = req.reset_measures;
        if quantum.is_some() && priority.is_some() {
            return Err(Status::invalid_argument(
                "quantum_bytes is the port's, not a priority's: leave priority unset",
            ));
        }
        if port_rate.is_some() && priority.is_some() {
            return Err(Status::invalid_argument(
                "port_rate_pps is the port's, not a priority's: leave priority unset",
            ));
        }
        let strict = req.strict;
        let queues = self
            .engine
            .call(move |e| {
                let switch = &mut e.pipeline.as_mut().ok_or_else(no_pipeline)?.switch;
                let refused = |e: RuntimeError| Status::invalid_argument(e.to_string());
                let named = (port, priority);
                set_given(switch, named, depth, Switch::set_queue_depth).map_err(refused)?;
                set_given(switch, named, rate, Switch::set_queue_rate).map_err(refused)?;
                if let Some(rate) = port_rate {
                    switch.set_port_rate(port, rate);
                }
                set_given(switch, named, strict, Switch::set_queue_strict).map_err(refused)?;
                set_given(switch, named, weight, Switch::set_queue_weight).map_err(refused)?;
                if let Some(bytes) = quantum {
                    switch.set_queue_quantum(port, bytes).map_err(refused)?;
                }
                if threshold.is_some() || window.is_some() {
                    switch
                        .set_queue_burst_rule(port, priority, threshold, window)
                        .map_err(refused)?;
                }
                if reset {
                    switch
                        .reset_queue_measures(port, priority)
                        .map_err(refused)?;
                }
                let ports = port.map_or_else(|| switch.queue_ports().collect(), |p| vec![p]);
                Ok::<_, Status>(states(switch, ports, priority))
            })
            .await??;
        Ok(queues)
    }
}

#[tonic::async_trait]
impl Queues for QueuesService {
    async fn set_queue(
        &self,
        request: Request<q::SetQueueRequest>,
    ) -> Result<Response<q::SetQueueResponse>, Status> {
        let (peer, req) = audit::grpc_peer_and_message(request);
        let all = || "all".to_string();
        let what = format!(
            "port {} priority {}",
            req.port.map_or_else(all, |p| p.to_string()),
            req.priority.map_or_else(all, |p| p.to_string())
        );
        let service = self.clone();
        let apply = async move { service.apply(req).await };
        let queues = audit::grpc_write(Surface::Queues, peer, "SetQueue", || what, apply).await?;
        Ok(Response::new(q::SetQueueResponse { queues }))
    }

    async fn get_queues(
        &self,
        request: Request<q::GetQueuesRequest>,
    ) -> Result<Response<q::GetQueuesResponse>, Status> {
        self.arbitration.message_of(request)?;
        let response = self
            .engine
            .call(move |e| {
                // The switch's ports, whether or not a packet has waited in their queues yet
                // (an idle, unlimited queue is passed straight through), and any port a
                // setting named.
                let mut ports = e.ports();
                let switch = &e.pipeline.as_ref().ok_or_else(no_pipeline)?.switch;
                ports.extend(switch.queue_ports());
                ports.sort_unstable();
                ports.dedup();
                // A port number no port has: the defaults.
                let (depth, rate) = switch.queue_config(u16::MAX, 0);
                Ok::<_, Status>(q::GetQueuesResponse {
                    queues: states(switch, ports, None),
                    default_depth_packets: depth as u32,
                    default_rate_pps: rate.unwrap_or(0),
                })
            })
            .await??;
        Ok(Response::new(response))
    }
}
