//! BMv2's packet-in socket (`simple_switch --packet-in ipc://PATH`): the way BMv2's own test
//! tools (PTF's `nn` platform) give a switch packets on numbered ports and read what it sends,
//! without network interfaces.
//!
//! The socket is a nanomsg PAIR socket on nanomsg's IPC transport, a Unix stream socket. Its
//! wire format (nanomsg's scalability-protocols RFC and its `sipc` transport): each side first
//! sends an 8-byte header, `00 'S' 'P' 00`, the protocol number (PAIR is 16) as a big-endian
//! 16-bit value and two zero bytes; then every message is a type byte (1, a normal message),
//! its length as a big-endian 64-bit value, and its bytes. BMv2's message
//! (`dev_mgr_packet_in.cpp`): three 32-bit integers in the host's byte order, the type
//! (3 a packet into the switch, 4 a packet out of it), the port and the length, then the
//! packet. No crate speaks this without linking the C libraries, and it is this small.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The SP protocol number of a PAIR socket.
const PAIR: u16 = 16;
/// The IPC transport's type byte of a normal message.
const NORMAL_MESSAGE: u8 = 1;
/// BMv2's message types.
const PACKET_IN: i32 = 3;
const PACKET_OUT: i32 = 4;
/// The largest message accepted from the switch: a jumbo frame and its header, with room.
const MAX_MESSAGE: u64 = 1 << 20;

/// The writing half of a connection to BMv2's packet-in socket.
pub struct PacketSocket {
    stream: UnixStream,
}

/// The reading half: packets BMv2 sent out of its ports.
pub struct PacketReader {
    stream: UnixStream,
}

/// Connects to the socket BMv2 bound at `path` and exchanges the protocol headers.
pub fn connect(path: &Path) -> io::Result<(PacketSocket, PacketReader)> {
    let mut stream = UnixStream::connect(path)?;
    let mut header = [0u8; 8];
    header[1..3].copy_from_slice(b"SP");
    header[4..6].copy_from_slice(&PAIR.to_be_bytes());
    stream.write_all(&header)?;
    let mut peer = [0u8; 8];
    stream.read_exact(&mut peer)?;
    if peer != header {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a nanomsg PAIR socket: its header is {peer:02x?}"),
        ));
    }
    let reader = PacketReader {
        stream: stream.try_clone()?,
    };
    Ok((PacketSocket { stream }, reader))
}

impl PacketSocket {
    /// Sends `data` into the switch on `port`.
    pub fn send(&mut self, port: u16, data: &[u8]) -> io::Result<()> {
        let length = i32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet too long"))?;
        let mut message = Vec::with_capacity(9 + 12 + data.len());
        message.push(NORMAL_MESSAGE);
        message.extend_from_slice(&(12 + data.len() as u64).to_be_bytes());
        for word in [PACKET_IN, i32::from(port), length] {
            message.extend_from_slice(&word.to_ne_bytes());
        }
        message.extend_from_slice(data);
        self.stream.write_all(&message)
    }
}

impl PacketReader {
    /// The next packet the switch sent, as (port, bytes); `None` when the switch closed the
    /// socket. Messages other than packets out are skipped.
    pub fn next_packet(&mut self) -> io::Result<Option<(u16, Vec<u8>)>> {
        loop {
            let mut head = [0u8; 9];
            match self.stream.read_exact(&mut head) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e),
            }
            let length = u64::from_be_bytes(head[1..].try_into().expect("8 bytes"));
            if head[0] != NORMAL_MESSAGE || !(12..=MAX_MESSAGE).contains(&length) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected message: type {}, {length} bytes", head[0]),
                ));
            }
            let mut message = vec![0u8; length as usize];
            self.stream.read_exact(&mut message)?;
            let word = |i: usize| i32::from_ne_bytes(message[i..i + 4].try_into().expect("4"));
            let (kind, port, size) = (word(0), word(4), word(8));
            if kind != PACKET_OUT {
                continue;
            }
            let packet = message.split_off(12);
            if usize::try_from(size).ok() != Some(packet.len()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a packet out says {size} bytes and carries {}",
                        packet.len()
                    ),
                ));
            }
            let port = u16::try_from(port).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("packet out of port {port}"),
                )
            })?;
            return Ok(Some((port, packet)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A fake switch end: checks the header and the packet in, answers with a packet out.
    #[test]
    fn packets_go_in_and_come_out_framed_as_bmv2_does() {
        let path = std::env::temp_dir().join(format!("softswitch-pi-{}.ipc", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let switch = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut header = [0u8; 8];
            s.read_exact(&mut header).unwrap();
            assert_eq!(header, [0, b'S', b'P', 0, 0, 16, 0, 0]);
            s.write_all(&header).unwrap();
            let mut message = [0u8; 9 + 12 + 3];
            s.read_exact(&mut message).unwrap();
            assert_eq!(message[0], 1);
            assert_eq!(u64::from_be_bytes(message[1..9].try_into().unwrap()), 15);
            assert_eq!(message[9..13], 3i32.to_ne_bytes());
            assert_eq!(message[13..17], 7i32.to_ne_bytes());
            assert_eq!(message[17..21], 3i32.to_ne_bytes());
            assert_eq!(&message[21..], b"abc");
            let mut out = vec![1u8];
            out.extend_from_slice(&14u64.to_be_bytes());
            for w in [4i32, 9, 2] {
                out.extend_from_slice(&w.to_ne_bytes());
            }
            out.extend_from_slice(b"xy");
            s.write_all(&out).unwrap();
        });
        let (mut socket, mut reader) = connect(&path).unwrap();
        socket.send(7, b"abc").unwrap();
        assert_eq!(reader.next_packet().unwrap(), Some((9, b"xy".to_vec())));
        switch.join().unwrap();
        assert_eq!(reader.next_packet().unwrap(), None);
        std::fs::remove_file(&path).unwrap();
    }
}
