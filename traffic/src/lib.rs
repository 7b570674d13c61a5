//! RoCEv2 traffic: a paced sender and a counting receiver.
//!
//! [`Sender`] sends RoCEv2 frames over N QPs, each at the rate of its
//! [`RateController`], paced by departure timestamps; [`Receiver`] counts what
//! arrives per QP. Both work on AF_PACKET sockets (the sender also on AF_XDP,
//! [`transmit`]) in the network namespace of the calling thread, so a test bed can run them on threads moved into
//! namespaces with `setns`. [`collective`] runs one rank of a collective over RC SENDs, with
//! [`rc`]'s go-back-N transport. [`cli`] is `lossless traffic send|recv|collective`.

pub mod cli;
pub mod collective;
pub mod collective_cli;
pub mod counters;
pub mod error;
pub mod frame_class;
pub mod notify;
pub mod pacing;
pub mod packet_socket;
pub mod pfc_honour;
pub mod rate;
pub mod rc;
pub mod receiver;
pub mod sender;
pub mod stop;
pub mod transmit;

pub use cli::{run, TrafficCommand};
pub use counters::{FrameCounts, Interval, IntervalQp, QpSummary, RecvSummary};
pub use error::TrafficError;
pub use rate::{FixedRate, RateController};
pub use receiver::{Receiver, RecvConfig};
pub use sender::{SendConfig, SendSummary, Sender};
pub use stop::StopFlag;
pub use transmit::Engine;

#[cfg(test)]
mod loopback;
