//! rtnetlink, the kernel's routing netlink, in the calling thread's network namespace, over
//! the netlink-packet-route and netlink-sys crates: a request and its answer ([`ask`]) and the
//! kernel's link events ([`LinkEvents`]). The route and neighbour lookups of the traffic tool,
//! the XDP program of an interface and the balancer's carrier watch all speak through it.

use std::io;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Largest datagram read: iproute2 reads 32 KiB too.
const DATAGRAM_BYTES: usize = 32 * 1024;

/// The rtnetlink multicast group of link events (linux/rtnetlink.h RTMGRP_LINK).
const RTMGRP_LINK: u32 = 1;

fn invalid(error: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("netlink: {error}"))
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

/// Hands the messages of one datagram to `on_message` until it returns `Some`. The end of a
/// dump and an acknowledgement end the walk; an error the kernel reports is returned as one,
/// and so is a datagram whose framing is broken. A well-framed message the crate cannot read
/// (a message type or an attribute layout it does not know) is passed over.
pub fn walk<T>(
    datagram: &[u8],
    on_message: &mut impl FnMut(RouteNetlinkMessage) -> Option<T>,
) -> io::Result<Walk<T>> {
    let mut rest = datagram;
    while !rest.is_empty() {
        let length = NetlinkBuffer::new_checked(rest).map_err(invalid)?.length() as usize;
        let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..length]);
        match message.map(|m| m.payload) {
            Ok(NetlinkPayload::Done(_)) => return Ok(Walk::Done),
            Ok(NetlinkPayload::Error(error)) if error.code.is_none() => return Ok(Walk::Done),
            Ok(NetlinkPayload::Error(error)) => return Err(error.to_io()),
            Ok(NetlinkPayload::InnerMessage(inner)) => {
                if let Some(value) = on_message(inner) {
                    return Ok(Walk::Found(value));
                }
            }
            Ok(_) | Err(_) => {}
        }
        // Messages are 4-byte aligned; the length was checked against the datagram.
        rest = &rest[length.next_multiple_of(4).min(rest.len())..];
    }
    Ok(Walk::More)
}

/// Sends `request` to the kernel (a dump of a whole table with `dump`) on a fresh socket and
/// hands each message of the answer to `on_message` until it returns `Some`, the answer ends
/// or the kernel reports an error.
pub fn ask<T>(
    request: RouteNetlinkMessage,
    dump: bool,
    mut on_message: impl FnMut(RouteNetlinkMessage) -> Option<T>,
) -> io::Result<Option<T>> {
    let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(request));
    packet.header.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
    packet.header.sequence_number = 1;
    packet.finalize();
    let mut bytes = vec![0; packet.buffer_len()];
    packet.serialize(&mut bytes);

    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    socket.send(&bytes, 0)?;
    let mut buffer = vec![0; DATAGRAM_BYTES];
    loop {
        let size = socket.recv(&mut &mut buffer[..], 0)?;
        match walk(&buffer[..size], &mut on_message)? {
            Walk::Found(value) => return Ok(Some(value)),
            Walk::Done => return Ok(None),
            // An answer that is not a dump is one datagram.
            Walk::More if !dump => return Ok(None),
            Walk::More => {}
        }
    }
}

/// The kernel's link events (RTM_NEWLINK, RTM_DELLINK: an interface added, changed or
/// deleted), subscribed to on creation.
pub struct LinkEvents {
    socket: Socket,
    buffer: Vec<u8>,
}

impl LinkEvents {
    /// Subscribes to the link events of the calling thread's network namespace.
    pub fn subscribe() -> io::Result<LinkEvents> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind(&SocketAddr::new(0, RTMGRP_LINK))?;
        Ok(LinkEvents {
            socket,
            buffer: vec![0; DATAGRAM_BYTES],
        })
    }

    /// Makes [`LinkEvents::wait`] give up after `timeout` without events, with an error of
    /// kind [`io::ErrorKind::WouldBlock`], so a watcher can check whether it should stop.
    pub fn set_timeout(&mut self, timeout: std::time::Duration) -> io::Result<()> {
        use std::os::fd::AsRawFd as _;
        let value = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: a valid timeval of the size given, on the socket's own descriptor.
        let result = unsafe {
            libc::setsockopt(
                self.socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&value as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for the next datagram of events and returns the interface indexes it names, or
    /// `None` when events were lost (the kernel's buffer overflowed) or cannot be read:
    /// anything may have changed.
    pub fn wait(&mut self) -> io::Result<Option<Vec<u32>>> {
        loop {
            match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(size) => return Ok(link_indexes(&self.buffer[..size]).ok()),
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => continue,
                Err(error) if error.raw_os_error() == Some(libc::ENOBUFS) => return Ok(None),
                Err(error) => return Err(error),
            }
        }
    }
}

/// The interface indexes of the link messages in one datagram of events.
fn link_indexes(datagram: &[u8]) -> io::Result<Vec<u32>> {
    let mut indexes = Vec::new();
    walk(datagram, &mut |message| {
        if let RouteNetlinkMessage::NewLink(link) | RouteNetlinkMessage::DelLink(link) = message {
            indexes.push(link.header.index);
        }
        None::<()>
    })?;
    Ok(indexes)
}

/// Test helpers: messages as the kernel sends them.
#[cfg(test)]
pub mod tests {
    use netlink_packet_core::{DoneMessage, ErrorMessage, NLM_F_MULTIPART};
    use netlink_packet_route::link::LinkMessage;

    use super::*;

    /// `payload` serialized as the kernel sends it, in a dump (NLM_F_MULTIPART).
    pub fn datagram(payloads: Vec<NetlinkPayload<RouteNetlinkMessage>>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for payload in payloads {
            let mut message = NetlinkMessage::new(NetlinkHeader::default(), payload);
            message.header.flags = NLM_F_MULTIPART;
            message.finalize();
            let at = bytes.len();
            bytes.resize(at + message.buffer_len(), 0);
            message.serialize(&mut bytes[at..]);
        }
        bytes
    }

    fn link(index: u32) -> LinkMessage {
        let mut link = LinkMessage::default();
        link.header.index = index;
        link
    }

    #[test]
    fn errors_acks_and_garbage() {
        let mut first = |_: RouteNetlinkMessage| Some(());
        let mut error = ErrorMessage::default();
        error.code = std::num::NonZeroI32::new(-libc::EPERM);
        let refused = datagram(vec![NetlinkPayload::Error(error)]);
        assert_eq!(
            walk(&refused, &mut first).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        let ack = datagram(vec![NetlinkPayload::Error(ErrorMessage::default())]);
        assert_eq!(walk(&ack, &mut first).unwrap(), Walk::Done);
        let done = datagram(vec![NetlinkPayload::Done(DoneMessage::default())]);
        assert_eq!(walk(&done, &mut first).unwrap(), Walk::Done);
        let mut bad = datagram(vec![NetlinkPayload::InnerMessage(
            RouteNetlinkMessage::NewLink(link(3)),
        )]);
        bad[0] = 200; // longer than the datagram
        assert!(walk(&bad, &mut first).is_err());
        assert!(walk(&[1, 2, 3], &mut first).is_err());
    }

    #[test]
    fn reads_the_index_of_each_link_message() {
        let events = datagram(vec![
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link(7))),
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetLink(link(9))),
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(link(12))),
        ]);
        assert_eq!(link_indexes(&events).unwrap(), [7, 12]);
    }
}
