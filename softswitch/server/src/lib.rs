//! softswitch-server: the gRPC server of one device, P4Runtime ([`p4rt`]) and the Queues
//! service ([`queues`]). The pipeline lives on the device's engine thread ([`engine`] is it for
//! this server), which the services reach through closures; clients are arbitrated by
//! [`arbitration`], which is also the engine's controller (PacketIn, digests, idle-timeout
//! notifications); [`entities`] translates P4Runtime entities, [`packetio`] packet I/O and
//! digest data, [`digests`] digest lists, [`idle`] idle-timeout notifications, [`pipeline`]
//! device configs, [`p4info`] a program's P4Info. [`thrift`] serves BMv2's runtime Thrift
//! services (`simple_switch_CLI`) over the same engine; [`gnmi`] its counters over gNMI;
//! [`tls`] the gRPC services' TLS;
//! [`audit`] the audit trail of the control writes of both.
#![forbid(unsafe_code)]

pub mod arbitration;
pub mod audit;
pub mod bytes;
pub mod digests;
pub mod engine;
pub mod entities;
pub mod gnmi;
pub mod idle;
pub mod p4info;
pub mod p4rt;
pub mod packetio;
pub mod pipeline;
pub mod queues;
pub mod thrift;
pub mod tls;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use p4runtime::lossless::softswitch::v1::queues_server::QueuesServer;
use p4runtime::p4::v1::p4_runtime_server::P4RuntimeServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};

use arbitration::Arbitration;
use engine::{EngineHandle, Transmit};
use pipeline::Compiled;

/// The default P4Runtime address, as simple_switch_grpc's.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9559";

/// A running device: the engine thread and the arbitration its services share.
pub struct Device {
    /// The engine.
    pub engine: EngineHandle,
    /// The clients.
    pub arbitration: Arc<Arbitration>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Device {
    /// Starts the engine of device `device_id` with its ports, CPU port and first pipeline.
    pub fn start(
        device_id: u64,
        ports: BTreeMap<u16, Box<dyn Transmit>>,
        cpu_port: Option<u16>,
        program: Option<Compiled>,
    ) -> Self {
        let arbitration = Arc::new(Arbitration::new(device_id));
        let (engine, thread) = EngineHandle::start(ports, cpu_port, arbitration.clone());
        if let Some(compiled) = program {
            // The engine was just started: it is there to take the call.
            let _ = engine.call_blocking(move |e| engine::load(e, compiled));
        }
        Device {
            engine,
            arbitration,
            thread: Some(thread),
        }
    }

    /// Serves P4Runtime and Queues on `listener` until `shutdown` completes: in the clear,
    /// or over TLS with `tls` (every connection handshakes before it reaches the services).
    pub async fn serve(
        &self,
        listener: TcpListener,
        tls: Option<Arc<tls::Tls>>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), tonic::transport::Error> {
        let router = tonic::transport::Server::builder()
            .add_service(
                P4RuntimeServer::new(p4rt::P4RuntimeService::new(
                    self.engine.clone(),
                    self.arbitration.clone(),
                ))
                .max_decoding_message_size(p4rt::MAX_REQUEST_BYTES),
            )
            .add_service(
                QueuesServer::new(queues::QueuesService::new(
                    self.engine.clone(),
                    self.arbitration.clone(),
                ))
                .max_decoding_message_size(p4rt::MAX_REQUEST_BYTES),
            );
        let Some(tls) = tls else {
            return router
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
                .await;
        };
        let (accepted, incoming) = tokio::sync::mpsc::channel(tls::MAX_HANDSHAKES);
        let acceptor = tokio::spawn(tls::accept(tls, listener, accepted));
        let served = router
            .serve_with_incoming_shutdown(ReceiverStream::new(incoming), shutdown)
            .await;
        acceptor.abort();
        served
    }
}

impl Drop for Device {
    /// Stops the engine and waits for it.
    fn drop(&mut self) {
        self.engine.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
