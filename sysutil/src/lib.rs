//! The Linux plumbing the lossless commands share, with no eBPF build: netlink requests and
//! link events, network namespaces, interfaces, their neighbours and routes, the few checked libc calls
//! under them, the pin layout of the host data plane under bpffs (where every command finds an
//! attached interface's maps), and whether a stream takes colour.

pub mod clock;
pub mod error;
pub mod interface;
pub mod namespace;
pub mod neighbour;
pub mod netlink;
pub mod netns;
pub mod pins;
pub mod route;
pub mod sys;
pub mod terminal;

pub use error::NetError;
