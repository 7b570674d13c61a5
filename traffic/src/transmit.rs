//! How the sender's frames leave: an AF_PACKET socket, a `sendmmsg` per batch (the default,
//! and what works everywhere), or an AF_XDP socket (`--engine afxdp`): frames written straight
//! into memory shared with the kernel and handed over on a ring, a `sendto` per batch only when
//! the kernel asks to be woken. Where AF_XDP cannot be had, the sender falls back to AF_PACKET
//! and says why.

use std::io;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Result, TrafficError};
use crate::packet_socket::{PacketSocket, MAX_BATCH};
use sysutil::interface::Interface;

/// Send buffer requested for an AF_PACKET socket.
const SEND_BUFFER: usize = 4 << 20;

/// How long [`Transmitter::finish`] waits for the kernel to send what it was handed.
const FINISH_WITHIN: Duration = Duration::from_secs(1);

/// The sending engine asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// AF_PACKET, `sendmmsg`.
    #[default]
    AfPacket,
    /// AF_XDP, zero-copy where the driver offers it, else copy mode; AF_PACKET where it is
    /// missing.
    Afxdp,
}

/// The socket the frames leave by.
pub struct Transmitter {
    socket: Socket,
    /// Why AF_XDP was asked for and not used, if it was.
    fallback: Option<String>,
}

enum Socket {
    /// The socket and the frames of one batch, written before each `sendmmsg`.
    Packet(PacketSocket, Vec<Vec<u8>>),
    Xdp(Box<afxdp::TxHalf>, afxdp::Mode),
}

impl std::fmt::Debug for Transmitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transmitter")
            .field("engine", &self.describe())
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Transmitter {
    /// Opens `engine`'s socket on `iface` (in the calling thread's network namespace); with
    /// [`Engine::Afxdp`], AF_PACKET if AF_XDP cannot be had (see [`Transmitter::fallback`]).
    pub fn open(iface: &Interface, engine: Engine) -> Result<Transmitter> {
        let fallback = match engine {
            Engine::AfPacket => None,
            Engine::Afxdp => match afxdp::Xsk::open(&iface.name, false) {
                Ok(xsk) => {
                    return Ok(Transmitter {
                        socket: Socket::Xdp(Box::new(xsk.tx), xsk.mode),
                        fallback: None,
                    })
                }
                Err(e) => Some(e.to_string()),
            },
        };
        let socket = PacketSocket::open(iface.index, false).map_err(TrafficError::io(format!(
            "open a packet socket on {}",
            iface.name
        )))?;
        socket
            .set_send_buffer(SEND_BUFFER)
            .map_err(TrafficError::io(format!(
                "set the send buffer on {}",
                iface.name
            )))?;
        Ok(Transmitter {
            socket: Socket::Packet(socket, vec![Vec::new(); MAX_BATCH]),
            fallback,
        })
    }

    /// The engine in use: `af-packet`, `afxdp (copy mode)` or `afxdp (zero-copy mode)`.
    pub fn describe(&self) -> String {
        match &self.socket {
            Socket::Packet(..) => "af-packet".into(),
            Socket::Xdp(_, mode) => format!("afxdp ({mode} mode)"),
        }
    }

    /// Why AF_XDP was asked for and AF_PACKET is used instead, if so.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Sends `count` frames of `len` bytes, frame `i` written in place by `write(i, frame)` (into
    /// the memory shared with the kernel on AF_XDP, so nothing is copied twice), retrying while
    /// the kernel lacks room; returns the number of retries. `count` is at most [`MAX_BATCH`].
    pub fn send_with(
        &mut self,
        count: usize,
        len: usize,
        mut write: impl FnMut(usize, &mut [u8]),
    ) -> io::Result<u64> {
        let mut retries = 0;
        match &mut self.socket {
            Socket::Packet(socket, buffers) => {
                let frames = &mut buffers[..count];
                for (i, frame) in frames.iter_mut().enumerate() {
                    frame.resize(len, 0);
                    write(i, frame);
                }
                let mut done = 0;
                while done < count {
                    match socket.send_batch(&frames[done..]) {
                        Ok(n) => done += n,
                        Err(e) if is_transient(&e) => {
                            retries += 1;
                            std::thread::yield_now();
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Socket::Xdp(tx, _) => {
                for i in 0..count {
                    loop {
                        match tx.send_with(len, |frame| write(i, frame)) {
                            Ok(()) => break,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                retries += 1;
                                tx.flush()?;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
                tx.flush()?;
            }
        }
        Ok(retries)
    }

    /// Waits (a while at most) until the kernel has sent every frame it was handed.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Socket::Xdp(tx, _) = &mut self.socket {
            let start = Instant::now();
            while tx.in_flight() > 0 && start.elapsed() < FINISH_WITHIN {
                tx.flush()?;
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

/// Whether a send failed only for lack of room for now.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR)
    )
}
