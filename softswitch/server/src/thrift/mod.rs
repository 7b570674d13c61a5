//! BMv2's runtime Thrift services (`--thrift-port`), so that `simple_switch_CLI` and p4-utils'
//! Thrift API drive softswitch: `standard` (tables, counters, registers, meters, the JSON
//! config, ports, state), `simple_pre_lag` (multicast groups and nodes) and `simple_switch`
//! (mirroring sessions, queues), multiplexed on one TCP port over the binary protocol, as BMv2
//! serves them. Each service is a thin adapter over the switch's runtime interface
//! (`softswitch_core::runtime`), reached through the device's engine between two packets:
//! names to program indices, BMv2's byte strings to values, `RuntimeError`s to BMv2's
//! exceptions. The wire format is the generated [`bindings`] (vendored in the crate's
//! `vendor/bmv2_thrift/`); this module owns the listener
//! and the limits of a connection ([`LIMITS`]), `connections` the table of open connections,
//! `audited` the audit trail of the calls that change the switch.

mod audited;
#[path = "../../vendor/bmv2_thrift/mod.rs"]
pub mod bindings;
mod connections;
mod pre;
mod simple_switch;
mod standard;
mod values;

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thrift::protocol::{
    TBinaryInputProtocol, TBinaryOutputProtocol, TFieldIdentifier, TInputProtocol, TListIdentifier,
    TMapIdentifier, TMessageIdentifier, TSetIdentifier, TStructIdentifier, TType,
};
use thrift::server::{TMultiplexedProcessor, TProcessor};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport};
use thrift::{ApplicationError, ApplicationErrorKind, TConfiguration};

use crate::engine::{Engine, EngineHandle};
use crate::pipeline::{Compiled, Pipeline};
use audited::{Answer, Call};
use connections::{Connections, Pace};
use softswitch_core::switch::Switch;
use softswitch_device::throttle::{HeldBack, Throttle, PERIOD};

/// Notes about refused calls, said in the log: a client makes as many as it likes, so at most a
/// few a period are written (the others counted).
static NOTES: Throttle = Throttle::new(PERIOD, 10);

/// Writes a note about a call at `$level` (`info`, `warn`) through [`NOTES`].
macro_rules! note {
    ($level:ident, $($fmt:tt)+) => {
        if let Some(held) = crate::thrift::NOTES.admit(std::time::Instant::now()) {
            tracing::$level!(
                "{}{}",
                format_args!($($fmt)+),
                softswitch_device::throttle::HeldBack(held)
            );
        }
    };
}
use note;

/// What one Thrift client may send and hold, so that no client can exhaust the switch's memory
/// or threads.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once. A newcomer past them takes the slot of the connection idle
    /// the longest (which is closed); when every connection is in a call, it is closed at once.
    pub connections: usize,
    /// How long a call may take to arrive once its first byte has (and a write of its answer
    /// may block); past it the connection is closed. An idle connection waits for its next call
    /// for as long as it takes, as an interactive `simple_switch_CLI` does.
    pub call_deadline: Duration,
    /// Bytes of one call; past them the connection is closed.
    pub message_bytes: usize,
    /// Bytes of one string or binary (a BMv2 JSON config, for `bm_load_new_config`, is the
    /// longest a client has reason to send).
    pub string_bytes: usize,
    /// Elements of one list, set or map.
    pub container_items: usize,
    /// How deeply structures may nest.
    pub depth: usize,
}

/// The limits the server applies.
pub const LIMITS: Limits = Limits {
    connections: 16,
    call_deadline: Duration::from_secs(10),
    message_bytes: softswitch_bmv2json::limits::MAX_JSON_BYTES + (64 << 10),
    string_bytes: softswitch_bmv2json::limits::MAX_JSON_BYTES,
    container_items: 1 << 16,
    depth: 16,
};

/// The switch as the Thrift services describe it (`bm_mgmt_get_info`, `bm_dev_mgr_show_ports`).
#[derive(Clone, Debug)]
pub struct SwitchInfo {
    /// The device id (`--device-id`).
    pub device_id: u64,
    /// The port the services listen on.
    pub thrift_port: u16,
    /// The ports: number and interface.
    pub ports: Vec<(u16, String)>,
}

/// What the three services share: the engine, the switch's description, and a config loaded
/// by `bm_load_new_config` waiting for `bm_swap_configs`.
struct Runtime {
    engine: EngineHandle,
    info: SwitchInfo,
    staged: Mutex<Option<Compiled>>,
}

impl Runtime {
    /// Runs `f` on the engine thread, between two packets, and returns its answer.
    fn on_engine<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> thrift::Result<R> + Send + 'static,
    ) -> thrift::Result<R> {
        self.engine
            .call_blocking(f)
            .map_err(|e| internal(e.to_string()))?
    }

    /// Runs `f` on the running pipeline; with none loaded (`--no-p4`), an application error.
    fn on_pipeline<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Pipeline) -> thrift::Result<R> + Send + 'static,
    ) -> thrift::Result<R> {
        self.on_engine(|engine| match engine.pipeline.as_mut() {
            Some(p) => f(p),
            None => Err(internal(
                "no program is loaded (started with --no-p4 and none set since)".into(),
            )),
        })
    }

    /// Runs `f` on the running pipeline's switch, as [`Self::on_pipeline`].
    fn on_switch<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Switch) -> thrift::Result<R> + Send + 'static,
    ) -> thrift::Result<R> {
        self.on_pipeline(|p| f(&mut p.switch))
    }
}

/// An application error of kind InternalError: what a client is told when the switch cannot
/// answer at all (no program, the engine stopped).
fn internal(message: String) -> thrift::Error {
    thrift::Error::Application(ApplicationError::new(
        ApplicationErrorKind::InternalError,
        message,
    ))
}

/// BMv2's three Thrift services of one device, ready to serve connections.
pub struct Services {
    processor: TMultiplexedProcessor,
}

impl Services {
    /// The services of the device whose engine is `engine`.
    pub fn new(engine: EngineHandle, info: SwitchInfo) -> Services {
        let runtime = Arc::new(Runtime {
            engine,
            info,
            staged: Mutex::new(None),
        });
        let mut processor = TMultiplexedProcessor::new();
        let services: [(&str, Box<dyn TProcessor + Send + Sync>); 3] = [
            (
                "standard",
                Box::new(bindings::standard::StandardSyncProcessor::new(
                    standard::Standard(runtime.clone()),
                )),
            ),
            (
                "simple_pre_lag",
                Box::new(bindings::simple_pre_lag::SimplePreLAGSyncProcessor::new(
                    pre::SimplePreLag(runtime.clone()),
                )),
            ),
            (
                "simple_switch",
                Box::new(bindings::simple_switch::SimpleSwitchSyncProcessor::new(
                    simple_switch::SimpleSwitch(runtime),
                )),
            ),
        ];
        for (name, service) in services {
            // Three distinct names, none the default: registering cannot fail.
            let _ = processor.register(name, service, false);
        }
        Services { processor }
    }

    /// Serves the calls read from `read`, answering on `write`, until the stream ends (`Ok`)
    /// or a call breaks a limit or the protocol (the error, after which the stream cannot go
    /// on).
    /// The calls that change the switch are audited as from "a local stream".
    pub fn serve_connection(&self, read: impl Read, write: impl Write) -> thrift::Result<()> {
        self.serve_calls(read, write, "a local stream", None)
    }

    /// [`Services::serve_connection`], telling `pace` (if any) when each call begins and is
    /// answered.
    fn serve_calls(
        &self,
        read: impl Read,
        write: impl Write,
        peer: &str,
        pace: Option<&Pace>,
    ) -> thrift::Result<()> {
        let call = Call::default();
        let budget = Rc::new(Cell::new(Budget::Left(0)));
        let read = Budgeted {
            inner: TBufferedReadTransport::new(read),
            budget: budget.clone(),
            pace,
        };
        let mut input = Paced {
            inner: TBinaryInputProtocol::with_config(read, true, configuration()),
            pace,
            call: &call,
        };
        let mut output = Answer {
            inner: TBinaryOutputProtocol::new(TBufferedWriteTransport::new(write), true),
            call: &call,
            peer,
        };
        loop {
            budget.set(Budget::Left(LIMITS.message_bytes));
            match self.processor.process(&mut input, &mut output) {
                Err(thrift::Error::Transport(e))
                    if e.kind == thrift::TransportErrorKind::EndOfFile =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
                // A call that broke a limit was answered with an exception by the processor:
                // the rest of it is still on the wire, so the connection cannot go on.
                Ok(()) if budget.get() == Budget::Spent => {
                    return Err(format!(
                        "a call longer than {} bytes (thrift::LIMITS)",
                        LIMITS.message_bytes
                    )
                    .into())
                }
                Ok(()) => {
                    if let Some(pace) = pace {
                        pace.call_answered();
                    }
                }
            }
        }
    }
}

/// Serves `services` on `listener`, on a thread of its own (and one per connection, at most
/// [`Limits::connections`] at once) for the life of the process.
pub fn serve(
    listener: TcpListener,
    services: Services,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    serve_with(listener, services, LIMITS)
}

/// [`serve`] under `limits` (the tests' are shorter).
fn serve_with(
    listener: TcpListener,
    services: Services,
    limits: Limits,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let services = Arc::new(services);
    std::thread::Builder::new()
        .name("softswitch-thrift".into())
        .spawn(move || accept(listener, services, limits))
}

/// Accepts connections and serves each on a thread of its own.
fn accept(listener: TcpListener, services: Arc<Services>, limits: Limits) {
    let connections = Connections::new(&limits);
    // A warning a client can cause at will (a refused connection, a connection ended by an
    // error) is written once a period, with the count of those held back.
    let refusals = Throttle::new(PERIOD, 1);
    let failures = Arc::new(Throttle::new(PERIOD, 1));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!("thrift: accepting a connection: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map_or("an unknown peer".into(), |a| a.to_string());
        let Some(admitted) = connections.admit(&stream, &peer) else {
            if let Some(held) = refusals.admit(Instant::now()) {
                tracing::warn!(
                    "thrift: {peer} refused: all {} connections are answering a call \
                     (thrift::LIMITS){}",
                    limits.connections,
                    HeldBack(held)
                );
            }
            continue;
        };
        if let Some(evicted) = admitted.evicted {
            tracing::debug!("thrift: {evicted} closed to make room for {peer}");
        }
        let (services, failures, pace) = (services.clone(), failures.clone(), admitted.pace);
        let spawned = std::thread::Builder::new()
            .name("softswitch-thrift-client".into())
            .spawn(move || {
                tracing::debug!("thrift: {peer} connected");
                let served = stream
                    .set_nodelay(true)
                    .and_then(|()| stream.set_write_timeout(Some(limits.call_deadline)))
                    .and_then(|()| stream.try_clone())
                    .map_err(thrift::Error::from)
                    .and_then(|read| services.serve_calls(read, stream, &peer, Some(&pace)));
                match served {
                    Ok(()) => tracing::debug!("thrift: {peer} disconnected"),
                    Err(e) => {
                        if let Some(held) = failures.admit(Instant::now()) {
                            tracing::warn!(
                                "thrift: {peer}: {e}; connection closed{}",
                                HeldBack(held)
                            );
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("thrift: no thread for a connection: {e}");
        }
    }
}

/// The protocol's limits on strings, containers and nesting.
fn configuration() -> TConfiguration {
    TConfiguration::builder()
        .max_message_size(Some(LIMITS.message_bytes))
        .max_frame_size(Some(LIMITS.message_bytes))
        .max_string_size(Some(LIMITS.string_bytes))
        .max_container_size(Some(LIMITS.container_items))
        .max_recursion_depth(Some(LIMITS.depth))
        .build()
        .expect("the limits are consistent")
}

/// An input protocol that tells its [`Pace`] (if any) when a call has arrived whole (its
/// message's end is read), before the call is served, and its [`Call`] what the call is.
struct Paced<'p, P> {
    inner: P,
    pace: Option<&'p Pace>,
    call: &'p Call,
}

/// Methods of [`TInputProtocol`] that [`Paced`] hands to its inner protocol: `as_read` as they
/// are, `noted` through [`Call::value_read`] (the values an audit line may name).
macro_rules! delegated {
    (as_read: $($plain:ident -> $plain_type:ty),* ; noted: $($noted:ident -> $noted_type:ty),* $(;)?) => {
        $(fn $plain(&mut self) -> thrift::Result<$plain_type> {
            self.inner.$plain()
        })*
        $(fn $noted(&mut self) -> thrift::Result<$noted_type> {
            self.call.value_read(self.inner.$noted())
        })*
    };
}

impl<P: TInputProtocol> TInputProtocol for Paced<'_, P> {
    fn read_message_begin(&mut self) -> thrift::Result<TMessageIdentifier> {
        let message = self.inner.read_message_begin()?;
        self.call.message_begun(&message.name);
        Ok(message)
    }
    fn read_message_end(&mut self) -> thrift::Result<()> {
        self.inner.read_message_end()?;
        if let Some(pace) = self.pace {
            pace.call_read()?;
        }
        Ok(())
    }
    fn read_struct_begin(&mut self) -> thrift::Result<Option<TStructIdentifier>> {
        self.call.struct_begun();
        self.inner.read_struct_begin()
    }
    fn read_struct_end(&mut self) -> thrift::Result<()> {
        self.call.struct_ended();
        self.inner.read_struct_end()
    }
    fn read_field_begin(&mut self) -> thrift::Result<TFieldIdentifier> {
        let field = self.inner.read_field_begin()?;
        self.call.field_begun(&field);
        Ok(field)
    }
    delegated! {
        as_read: read_field_end -> (),
            read_bool -> bool, read_byte -> u8, read_i8 -> i8, read_double -> f64,
            read_bytes -> Vec<u8>, read_uuid -> uuid::Uuid,
            read_list_begin -> TListIdentifier, read_list_end -> (),
            read_set_begin -> TSetIdentifier, read_set_end -> (),
            read_map_begin -> TMapIdentifier, read_map_end -> ();
        noted: read_i16 -> i16, read_i32 -> i32, read_i64 -> i64, read_string -> String;
    }
    fn min_serialized_size(&self, field_type: TType) -> usize {
        self.inner.min_serialized_size(field_type)
    }
}

/// What is left of the bytes one call may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Budget {
    /// This many bytes.
    Left(usize),
    /// None: the call went past its limit.
    Spent,
}

/// A reader that fails once the call being read has taken its [`Budget`], and tells its
/// [`Pace`] (if any) when a call's first bytes arrive and how long the rest may take.
struct Budgeted<'p, R> {
    inner: R,
    budget: Rc<Cell<Budget>>,
    pace: Option<&'p Pace>,
}

impl<R: Read> Read for Budgeted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Budget::Left(left) = self.budget.get() else {
            return Err(std::io::Error::other("the call is over its size limit"));
        };
        if left == 0 && !buf.is_empty() {
            self.budget.set(Budget::Spent);
            return Err(std::io::Error::other(format!(
                "a call is longer than {} bytes (thrift::LIMITS)",
                LIMITS.message_bytes
            )));
        }
        // Nothing of this call read yet: the connection is idle until its first byte.
        let first = left == LIMITS.message_bytes;
        if let (Some(pace), false) = (self.pace, first) {
            pace.before_read()?;
        }
        let len = buf.len().min(left);
        let n = match (self.inner.read(&mut buf[..len]), self.pace) {
            (Err(e), Some(pace))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(pace.too_slow())
            }
            (read, _) => read?,
        };
        if let (Some(pace), true) = (self.pace, first && n > 0) {
            pace.call_begun()?;
        }
        self.budget.set(Budget::Left(left - n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;
    use bindings::standard::{
        BmAddEntryOptions, BmMatchParam, BmMatchParamLPM, BmMatchParamType, StandardSyncClient,
        TStandardSyncClient,
    };
    use std::net::TcpStream;
    use std::os::unix::net::UnixStream;
    use thrift::protocol::TMultiplexedOutputProtocol;

    const SWITCH_P4: &str = include_str!("../../../tests/server/switch.p4");

    /// A device running the server tests' `switch.p4`, and its Thrift services.
    fn services() -> (Device, Services) {
        let compiled = Compiled::new(SWITCH_P4.as_bytes().to_vec(), None, 0).unwrap();
        let device = Device::start(7, Default::default(), None, Some(compiled));
        let info = SwitchInfo {
            device_id: 7,
            thrift_port: 9090,
            ports: vec![(1, "veth1".into())],
        };
        let services = Services::new(device.engine.clone(), info);
        (device, services)
    }

    /// What the services answer to the bytes `call`.
    fn answer(services: &Services, call: &[u8]) -> (thrift::Result<()>, Vec<u8>) {
        let mut out = Vec::new();
        let served = services.serve_connection(call, &mut out);
        (served, out)
    }

    /// The start of a strict binary-protocol call of `name`.
    fn call_begin(name: &str) -> Vec<u8> {
        let mut b = 0x8001_0001u32.to_be_bytes().to_vec();
        b.extend((name.len() as i32).to_be_bytes());
        b.extend(name.as_bytes());
        b.extend(0i32.to_be_bytes());
        b
    }

    /// A string field `id` of length `len` (its bytes follow only if `body`).
    fn string_field(id: i16, len: usize, body: bool) -> Vec<u8> {
        let mut b = vec![11u8];
        b.extend(id.to_be_bytes());
        b.extend((len as i32).to_be_bytes());
        if body {
            b.resize(b.len() + len, b'x');
        }
        b
    }

    /// BMv2's generated client of the `standard` service, reading `read` and writing `write`.
    fn client(read: impl Read, write: impl Write) -> impl TStandardSyncClient {
        let input = TBinaryInputProtocol::new(TBufferedReadTransport::new(read), true);
        let output = TMultiplexedOutputProtocol::new(
            "standard",
            TBinaryOutputProtocol::new(TBufferedWriteTransport::new(write), true),
        );
        StandardSyncClient::new(input, output)
    }

    /// A client of the connection `stream`.
    fn tcp_client(stream: TcpStream) -> impl TStandardSyncClient {
        client(stream.try_clone().unwrap(), stream)
    }

    /// The test device's services served under [`LIMITS`], but for `call_deadline` (how long
    /// a call may take to arrive whole), on an ephemeral port of 127.0.0.1 (for the life of
    /// the test process), and its address; the device must outlive the test.
    fn served(call_deadline: Duration) -> (Device, std::net::SocketAddr) {
        let (device, services) = services();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits {
            call_deadline,
            ..LIMITS
        };
        serve_with(listener, services, limits).unwrap();
        (device, addr)
    }

    /// Whether the server closed `stream`: a read ends (the end of the stream, or a reset)
    /// within a generous bound rather than blocking.
    fn closed_by_the_server(mut stream: &TcpStream) -> bool {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        match stream.read(&mut [0]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    #[test]
    fn idle_connections_in_every_slot_do_not_lock_a_client_out() {
        let (_device, addr) = served(LIMITS.call_deadline);
        let idle: Vec<TcpStream> = (0..LIMITS.connections)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let mut newcomer = tcp_client(TcpStream::connect(addr).unwrap());
        assert_eq!(newcomer.bm_mgmt_get_info().unwrap().device_id, Some(7));
        // The slot was the longest idle's: it was closed, the others were not.
        assert!(closed_by_the_server(&idle[0]));
        let second = tcp_client(idle[1].try_clone().unwrap()).bm_mgmt_get_info();
        assert_eq!(second.unwrap().device_id, Some(7));
    }

    #[test]
    fn a_partial_call_is_cut_at_its_deadline_and_an_idle_connection_is_not() {
        let deadline = Duration::from_millis(300);
        let (_device, addr) = served(deadline);
        let mut idle = tcp_client(TcpStream::connect(addr).unwrap());
        assert_eq!(idle.bm_mgmt_get_info().unwrap().device_id, Some(7));
        let mut slow = TcpStream::connect(addr).unwrap();
        let mut call = call_begin("standard:bm_mgmt_get_info");
        call.push(0);
        let sent = Instant::now();
        slow.write_all(&call[..5]).unwrap();
        assert!(closed_by_the_server(&slow), "a partial call is cut");
        assert!(sent.elapsed() >= deadline, "not before its deadline");
        // The idle connection waited longer than the deadline and is still served.
        assert_eq!(idle.bm_mgmt_get_info().unwrap().device_id, Some(7));
    }

    /// The attack of issue 30: every slot held by a sender of a partial call that reconnects
    /// just before its deadline. Legitimate calls, each on a connection of its own, are all
    /// served: a newcomer takes a stalled partial call's slot.
    #[test]
    fn slow_lorises_reconnecting_before_their_deadline_do_not_lock_a_client_out() {
        let deadline = Duration::from_secs(2);
        let (_device, addr) = served(deadline);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let attackers: Vec<_> = (0..LIMITS.connections)
            .map(|i| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    // Spread over the deadline, as connections made over time are.
                    let start = Instant::now() + deadline * i as u32 / LIMITS.connections as u32;
                    std::thread::sleep(start.saturating_duration_since(Instant::now()));
                    let call = call_begin("standard:bm_mgmt_get_info");
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let Ok(mut slow) = TcpStream::connect(addr) else {
                            continue;
                        };
                        let _ = slow.write_all(&call[..5]);
                        // Reconnect just before the deadline cuts the call.
                        std::thread::sleep(deadline * 19 / 20);
                    }
                })
            })
            .collect();
        // The attack holds every slot.
        std::thread::sleep(deadline * 2);
        let mut failed = Vec::new();
        for i in 0..38 {
            let stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            if let Err(e) = tcp_client(stream).bm_mgmt_get_info() {
                failed.push(format!("call {i}: {e}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for a in attackers {
            a.join().unwrap();
        }
        assert!(
            failed.is_empty(),
            "{} of 38 failed: {failed:?}",
            failed.len()
        );
    }

    #[test]
    fn bmv2s_generated_client_adds_and_counts_an_entry_and_reads_the_md5() {
        let (_device, services) = services();
        let (client_end, server_end) = UnixStream::pair().unwrap();
        let reader = server_end.try_clone().unwrap();
        let server = std::thread::spawn(move || services.serve_connection(reader, server_end));
        let mut client = client(client_end.try_clone().unwrap(), client_end);
        let route = "MyIngress.route".to_string();
        let key = BmMatchParam::new(
            BmMatchParamType::LPM,
            None,
            BmMatchParamLPM::new(vec![10, 0, 0, 0], 8),
            None,
            None,
            None,
        );
        let handle = client
            .bm_mt_add_entry(
                0,
                route.clone(),
                vec![key],
                "MyIngress.forward".into(),
                vec![vec![0, 2]],
                BmAddEntryOptions::new(None),
            )
            .unwrap();
        assert_eq!(handle, 0);
        assert_eq!(client.bm_mt_get_num_entries(0, route.clone()).unwrap(), 1);
        let entries = client.bm_mt_get_entries(0, route.clone()).unwrap();
        let lpm = entries[0].match_key.as_ref().unwrap()[0]
            .lpm
            .clone()
            .unwrap();
        assert_eq!(
            (lpm.key.unwrap(), lpm.prefix_length),
            (vec![10, 0, 0, 0], Some(8))
        );
        // A bad table name is BMv2's exception, and the connection goes on.
        let refused = client
            .bm_mt_get_num_entries(0, "nosuch".into())
            .unwrap_err();
        assert!(
            format!("{refused:?}").contains("InvalidTableOperation"),
            "{refused:?}"
        );
        assert_eq!(client.bm_get_config_md5().unwrap().len(), 16);
        // The program is P4 source: there is no BMv2 JSON to give, and the client is told why.
        let refused = client.bm_get_config().unwrap_err();
        assert!(format!("{refused:?}").contains("--json"), "{refused:?}");
        assert_eq!(client.bm_mgmt_get_info().unwrap().device_id, Some(7));
        drop(client);
        server.join().unwrap().unwrap();
    }

    #[test]
    fn a_string_past_the_limit_is_refused_before_it_is_read() {
        let (_device, services) = services();
        let mut call = call_begin("standard:bm_mt_get_num_entries");
        call.extend(string_field(2, LIMITS.string_bytes + 1, false));
        let (_, out) = answer(&services, &call);
        // An exception was answered (message type 3).
        assert_eq!(out.get(3), Some(&3), "{out:?}");
        let mut negative = call_begin("standard:bm_mt_get_num_entries");
        negative.extend([11, 0, 2, 0xff, 0xff, 0xff, 0xfe]);
        let (_, out) = answer(&services, &negative);
        assert_eq!(out.get(3), Some(&3), "{out:?}");
    }

    #[test]
    fn a_call_past_its_byte_budget_closes_the_connection() {
        let (_device, services) = services();
        let mut call = call_begin("standard:bm_load_new_config");
        // Two strings each within the string limit, together past the call's.
        call.extend(string_field(1, LIMITS.string_bytes, true));
        call.extend(string_field(2, LIMITS.string_bytes, true));
        let (served, _) = answer(&services, &call);
        assert!(served.is_err());
    }

    #[test]
    fn garbage_unknown_services_and_cut_calls_end_in_errors_not_panics() {
        let (_device, services) = services();
        assert!(answer(&services, b"GET / HTTP/1.1\r\n\r\n").0.is_err());
        let (_, out) = answer(&services, &call_begin("nosuch:bm_get_config"));
        assert_eq!(out.get(3), Some(&3), "an exception: {out:?}");
        let cut = &call_begin("standard:bm_get_config_md5")[..9];
        assert!(
            answer(&services, cut).0.is_ok(),
            "a cut call is the end of the stream"
        );
        // Nesting past the limit: a list of lists of lists...
        let mut deep = call_begin("standard:bm_mt_add_entry");
        for _ in 0..LIMITS.depth * 2 {
            deep.extend([15, 0, 3, 15, 0, 0, 0, 1]);
        }
        let (_, out) = answer(&services, &deep);
        assert_eq!(out.get(3), Some(&3), "{out:?}");
        // A container past the limit.
        let mut wide = call_begin("standard:bm_mt_add_entry");
        wide.extend([15, 0, 3, 12]);
        wide.extend((LIMITS.container_items as i32 + 1).to_be_bytes());
        let (_, out) = answer(&services, &wide);
        assert_eq!(out.get(3), Some(&3), "{out:?}");
    }
}
