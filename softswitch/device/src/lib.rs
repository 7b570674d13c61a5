//! softswitch-device: the switch loop. Ports ([`ports`]: AF_XDP or AF_PACKET) hand received
//! frames, in batches ([`batch`]), to one engine thread ([`engine`]) that runs them through softswitch-core's switch and sends what it
//! produces back out of the ports, keeps the wall clock the switch reads, and runs a
//! controller's requests between two packets. It knows no controller protocol: the server
//! plugs in through [`engine::Controller`]. The switch's trace goes to the log ([`trace`]),
//! lines a client can cause at will rate-limited ([`throttle`]).

pub mod batch;
pub mod engine;
pub mod ports;
pub mod throttle;
pub mod trace;
