//! The device's engine as this server runs it: its controller is the P4Runtime [`Arbitration`]
//! and its pipeline a P4Runtime [`Pipeline`]; the services reach it with [`Call::call`], which
//! awaits the engine's answer without blocking the async runtime (an engine that has stopped
//! is UNAVAILABLE).

use std::future::Future;

use softswitch_device::engine as device;
use tonic::Status;

use crate::arbitration::Arbitration;
use crate::pipeline::{Compiled, Pipeline};

pub use device::{Stopped, Transmit};

/// The engine thread's state.
pub type Engine = device::Engine<Arbitration>;
/// A handle on the engine thread.
pub type EngineHandle = device::EngineHandle<Arbitration>;
/// What the engine thread is asked to do.
pub type Event = device::Event<Arbitration>;

/// Runs a closure on the engine thread from async code.
pub trait Call {
    /// Runs `f` on the engine thread and returns its result.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> impl Future<Output = Result<R, Status>> + Send;
}

impl Call for EngineHandle {
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> impl Future<Output = Result<R, Status>> + Send {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.send(Event::Call(Box::new(move |engine| {
            let _ = tx.send(f(engine));
        })));
        async move {
            sent.map_err(stopped)?;
            rx.await.map_err(|_| stopped(Stopped))
        }
    }
}

/// The engine has stopped: what a client is told.
fn stopped(e: Stopped) -> Status {
    Status::unavailable(e.to_string())
}

/// Replaces the running pipeline (or loads the first) with `compiled`, on the engine's wall
/// clock; tables, counters, registers, queues and replication start empty.
pub fn load(engine: &mut Engine, compiled: Compiled) {
    tracing::debug!(
        tables = compiled.info.tables.len(),
        actions = compiled.info.actions.len(),
        counters = compiled.info.counters.len(),
        registers = compiled.info.registers.len(),
        cookie = compiled.cookie,
        "pipeline loaded (state reset)"
    );
    let clock = engine.clock();
    engine.load(Pipeline::new(compiled, clock));
}
