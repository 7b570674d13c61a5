//! rtnetlink framing, once: a request to the kernel, the datagrams of its answer walked
//! message by message, and a message's attributes (linux/netlink.h, linux/rtnetlink.h).
//! The route and neighbour lookups of the traffic tool speak through it.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, OwnedFd};

use super::sys::{self, check};

/// Length of `struct nlmsghdr`.
pub const NLMSG_HDR_LEN: usize = 16;
/// An error (or, with errno 0, an acknowledgement).
pub const NLMSG_ERROR: u16 = 2;
/// The end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// A request.
pub const NLM_F_REQUEST: u16 = 0x1;
/// A dump of a whole table.
pub const NLM_F_DUMP: u16 = 0x300;

/// Rounds up to the 4-byte alignment of netlink messages and attributes.
pub fn align4(len: usize) -> usize {
    (len + 3) & !3
}

fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message")
}

/// A request being built: the header, a fixed body, then attributes.
pub struct Request(Vec<u8>);

impl Request {
    /// A request of `kind` with `flags` and the fixed-size `body` (an ndmsg, an rtmsg...).
    pub fn new(kind: u16, flags: u16, body: &[u8]) -> Request {
        let mut bytes = vec![0u8; NLMSG_HDR_LEN];
        bytes[4..6].copy_from_slice(&kind.to_ne_bytes());
        bytes[6..8].copy_from_slice(&flags.to_ne_bytes());
        bytes[8..12].copy_from_slice(&1u32.to_ne_bytes());
        bytes.extend_from_slice(body);
        bytes.resize(align4(bytes.len()), 0);
        Request(bytes)
    }

    /// Appends the attribute `kind` with `value`.
    pub fn attribute(mut self, kind: u16, value: &[u8]) -> Request {
        self.0
            .extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(value);
        self.0.resize(align4(self.0.len()), 0);
        self
    }

    /// Sends the request on a fresh NETLINK_ROUTE socket of the calling thread's network
    /// namespace and hands each message of the answer (its type and body) to `on_message`
    /// until it returns `Some`, the answer ends (`NLMSG_DONE`, or the last message of an
    /// answer that is not a dump) or the kernel reports an error.
    pub fn exchange<T>(
        mut self,
        mut on_message: impl FnMut(u16, &[u8]) -> Option<T>,
    ) -> io::Result<Option<T>> {
        let len = self.0.len() as u32;
        self.0[0..4].copy_from_slice(&len.to_ne_bytes());
        let dump = u16::from_ne_bytes([self.0[6], self.0[7]]) & NLM_F_DUMP == NLM_F_DUMP;
        let socket = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
        send(&socket, &self.0)?;
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: the buffer is writable for its length.
            let len = check(unsafe {
                libc::recv(
                    socket.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            } as libc::c_int)?;
            match walk(&buffer[..len as usize], &mut on_message)? {
                Walk::Found(value) => return Ok(Some(value)),
                Walk::Done => return Ok(None),
                Walk::More if !dump => return Ok(None),
                Walk::More => {}
            }
        }
    }
}

/// What one datagram of an answer said.
#[derive(Debug, PartialEq, Eq)]
pub enum Walk<T> {
    /// A message gave what was looked for.
    Found(T),
    /// Not in this datagram; more may follow.
    More,
    /// The answer ended without it.
    Done,
}

/// Hands the messages of one datagram to `on_message` until it returns `Some`.
pub fn walk<T>(
    datagram: &[u8],
    on_message: &mut impl FnMut(u16, &[u8]) -> Option<T>,
) -> io::Result<Walk<T>> {
    let mut rest = datagram;
    while rest.len() >= NLMSG_HDR_LEN {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        if len < NLMSG_HDR_LEN || len > rest.len() {
            return Err(malformed());
        }
        let body = &rest[NLMSG_HDR_LEN..len];
        match kind {
            NLMSG_DONE => return Ok(Walk::Done),
            NLMSG_ERROR => {
                let errno =
                    i32::from_ne_bytes(body.get(0..4).ok_or_else(malformed)?.try_into().unwrap());
                if errno == 0 {
                    return Ok(Walk::Done);
                }
                return Err(io::Error::from_raw_os_error(-errno));
            }
            _ => {
                if let Some(value) = on_message(kind, body) {
                    return Ok(Walk::Found(value));
                }
            }
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(Walk::More)
}

/// The attributes (type, value) that follow a message's fixed part; stops at the first
/// malformed one.
pub fn attributes(mut attrs: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if attrs.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes(attrs[0..2].try_into().unwrap()));
        let kind = u16::from_ne_bytes(attrs[2..4].try_into().unwrap());
        if len < 4 || len > attrs.len() {
            attrs = &[];
            return None;
        }
        let value = &attrs[4..len];
        attrs = &attrs[align4(len).min(attrs.len())..];
        Some((kind, value))
    })
}

/// An IPv4 or IPv6 address attribute's value as an address.
pub fn ip_address(value: &[u8]) -> Option<std::net::IpAddr> {
    match value.len() {
        4 => Some(<[u8; 4]>::try_from(value).unwrap().into()),
        16 => Some(<[u8; 16]>::try_from(value).unwrap().into()),
        _ => None,
    }
}

/// Sends one datagram to the kernel on a netlink socket.
fn send(socket: &OwnedFd, message: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain data; all-zero (pid 0: the kernel) is the address wanted.
    let mut kernel: libc::sockaddr_nl = unsafe { mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the message and the address are valid for the lengths given.
    check(unsafe {
        libc::sendto(
            socket.as_raw_fd(),
            message.as_ptr().cast(),
            message.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        ) as libc::c_int
    })
    .map(drop)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A netlink message of `kind` with `body`, padded to 4 bytes.
    pub fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut out = ((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes().to_vec();
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&[0; 10]);
        out.extend_from_slice(body);
        out.resize(align4(out.len()), 0);
        out
    }

    /// Attributes `(kind, value)` in netlink's layout.
    pub fn encode_attributes(attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (kind, value) in attrs {
            out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            out.extend_from_slice(&kind.to_ne_bytes());
            out.extend_from_slice(value);
            out.resize(align4(out.len()), 0);
        }
        out
    }

    #[test]
    fn errors_acks_and_garbage() {
        let mut first = |_: u16, body: &[u8]| Some(body.len());
        let error = message(NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes());
        assert_eq!(
            walk(&error, &mut first).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        let ack = message(NLMSG_ERROR, &0i32.to_ne_bytes());
        assert_eq!(walk(&ack, &mut first).unwrap(), Walk::Done);
        let mut bad = message(24, &[0; 8]);
        bad[0] = 200;
        assert!(walk(&bad, &mut first).is_err());
        assert_eq!(
            walk(&message(24, &[0; 8]), &mut first).unwrap(),
            Walk::Found(8)
        );
    }

    #[test]
    fn attributes_stop_at_garbage() {
        let mut bytes = encode_attributes(&[(1, &[10, 0, 0, 1]), (5, &[1, 2])]);
        let read: Vec<_> = attributes(&bytes).collect();
        assert_eq!(read, [(1, &[10, 0, 0, 1][..]), (5, &[1, 2][..])]);
        bytes[8] = 100; // the second's length runs past the end
        assert_eq!(attributes(&bytes).count(), 1);
    }
}
