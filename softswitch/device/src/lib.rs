//! softswitch-device: the switch loop. One engine thread ([`engine`]) reads the ports' receive
//! rings ([`ports`]: AF_XDP or AF_PACKET), runs the frames through softswitch-core's switch and
//! sends what it produces back out of the ports, keeps the wall clock the switch reads, and
//! runs a controller's requests between two batches of frames. It knows no controller
//! protocol: the server plugs in through [`engine::Controller`]. The switch's trace goes to the
//! log ([`trace`]), lines a client can cause at will rate-limited ([`throttle`]).

pub mod engine;
pub mod ports;
pub mod throttle;
pub mod trace;
