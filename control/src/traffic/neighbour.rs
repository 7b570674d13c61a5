//! The destination's MAC address from the kernel's neighbour table (IPv4 ARP
//! and IPv6 neighbour discovery alike), read over rtnetlink in the calling
//! thread's network namespace, and resolved on demand by sending a datagram to
//! the destination's discard port.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::error::{Result, TrafficError};
use super::interface::Interface;
use super::sys::{self, check};
use crate::wire::ethernet::Address;

/// The UDP discard port, the target of the datagram that triggers resolution.
const DISCARD_PORT: u16 = 9;

/// How often the datagram is sent again while waiting.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// How often the table is read again while waiting.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Neighbour states with a usable link-layer address (the kernel's NUD_VALID).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// Lengths and types of the netlink messages used here (linux/netlink.h, linux/neighbour.h).
const NLMSG_HDR_LEN: usize = 16;
const NDMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// Rounds up to the 4-byte alignment of netlink messages and attributes.
fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// What one datagram of a neighbour dump said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DumpPart {
    /// The entry asked for, with a usable address.
    Found(Address),
    /// Not in this part; more parts follow.
    More,
    /// The dump ended without it.
    Done,
}

/// Looks for a usable entry of `ip` on interface `ifindex` in one datagram of a neighbour dump.
fn scan_dump(datagram: &[u8], ip: IpAddr, ifindex: u32) -> io::Result<DumpPart> {
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed netlink message");
    let mut rest = datagram;
    while rest.len() >= NLMSG_HDR_LEN {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        if len < NLMSG_HDR_LEN || len > rest.len() {
            return Err(malformed());
        }
        let body = &rest[NLMSG_HDR_LEN..len];
        match kind {
            NLMSG_DONE => return Ok(DumpPart::Done),
            NLMSG_ERROR => {
                let errno = body.get(0..4).ok_or_else(malformed)?;
                return Err(io::Error::from_raw_os_error(-i32::from_ne_bytes(
                    errno.try_into().unwrap(),
                )));
            }
            RTM_NEWNEIGH if body.len() >= NDMSG_LEN => {
                if let Some(mac) = entry_address(body, ip, ifindex) {
                    return Ok(DumpPart::Found(mac));
                }
            }
            _ => {}
        }
        rest = &rest[align4(len).min(rest.len())..];
    }
    Ok(DumpPart::More)
}

/// The link-layer address of a neighbour message body if it is `ip` on `ifindex` and usable.
fn entry_address(body: &[u8], ip: IpAddr, ifindex: u32) -> Option<Address> {
    let entry_ifindex = i32::from_ne_bytes(body[4..8].try_into().unwrap());
    let state = u16::from_ne_bytes(body[8..10].try_into().unwrap());
    if entry_ifindex != ifindex as i32 || state & NUD_VALID == 0 {
        return None;
    }
    let (mut dst, mut lladdr) = (None, None);
    let mut attrs = &body[NDMSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes(attrs[0..2].try_into().unwrap()));
        let kind = u16::from_ne_bytes(attrs[2..4].try_into().unwrap());
        if len < 4 || len > attrs.len() {
            return None;
        }
        let value = &attrs[4..len];
        match (kind, value.len()) {
            (NDA_DST, 4) => dst = Some(IpAddr::from(<[u8; 4]>::try_from(value).unwrap())),
            (NDA_DST, 16) => dst = Some(IpAddr::from(<[u8; 16]>::try_from(value).unwrap())),
            (NDA_LLADDR, 6) => lladdr = Some(Address(value.try_into().unwrap())),
            _ => {}
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    lladdr.filter(|_| dst == Some(ip))
}

/// Looks `ip` up in the neighbour table of interface `ifindex`.
pub fn lookup(ip: IpAddr, ifindex: u32) -> io::Result<Option<Address>> {
    let socket = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let mut request = [0u8; NLMSG_HDR_LEN + NDMSG_LEN];
    request[0..4].copy_from_slice(&((NLMSG_HDR_LEN + NDMSG_LEN) as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request[8..12].copy_from_slice(&1u32.to_ne_bytes());
    request[NLMSG_HDR_LEN] = family as u8;
    send(&socket, &request)?;
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
        match scan_dump(&buffer[..len as usize], ip, ifindex)? {
            DumpPart::Found(mac) => return Ok(Some(mac)),
            DumpPart::Done => return Ok(None),
            DumpPart::More => {}
        }
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

/// The MAC address of `ip` on `iface`: from the neighbour table, or after
/// triggering resolution (ARP or neighbour discovery) and waiting at most
/// `timeout` for it.
pub fn resolve(ip: IpAddr, iface: &Interface, timeout: Duration) -> Result<Address> {
    let read_error = || TrafficError::io(format!("read the neighbour table of {}", iface.name));
    if let Some(mac) = lookup(ip, iface.index).map_err(read_error())? {
        return Ok(mac);
    }
    let any: IpAddr = if ip.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind((any, 0)).map_err(TrafficError::io("open a UDP socket"))?;
    sys::set_option(
        &socket,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        iface.name.as_bytes(),
    )
    .map_err(TrafficError::io(format!(
        "bind a UDP socket to {}",
        iface.name
    )))?;
    let start = Instant::now();
    let mut last_sent: Option<Instant> = None;
    while start.elapsed() < timeout {
        if last_sent.is_none_or(|t| t.elapsed() >= RETRY_EVERY) {
            // Failures (unreachable, refused) are expected while resolution is pending.
            let _ = socket.send_to(b"lossless: resolve", SocketAddr::new(ip, DISCARD_PORT));
            last_sent = Some(Instant::now());
        }
        std::thread::sleep(POLL_EVERY);
        if let Some(mac) = lookup(ip, iface.index).map_err(read_error())? {
            return Ok(mac);
        }
    }
    Err(TrafficError::Unresolved {
        ip,
        iface: iface.name.clone(),
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message of `kind` with `body`, padded to 4 bytes.
    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut out = ((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes().to_vec();
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&[0; 10]);
        out.extend_from_slice(body);
        out.resize(align4(out.len()), 0);
        out
    }

    /// An RTM_NEWNEIGH body: ndmsg, then NDA_DST and NDA_LLADDR.
    fn neighbour(ifindex: i32, state: u16, ip: IpAddr, mac: [u8; 6]) -> Vec<u8> {
        let mut body = vec![if ip.is_ipv4() { 2 } else { 10 }, 0, 0, 0];
        body.extend_from_slice(&ifindex.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[0, 1]);
        let dst = match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        for (kind, value) in [(NDA_DST, dst), (NDA_LLADDR, mac.to_vec())] {
            body.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&kind.to_ne_bytes());
            body.extend_from_slice(&value);
            body.resize(align4(body.len()), 0);
        }
        body
    }

    #[test]
    fn finds_usable_entries_only() {
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        let v6: IpAddr = "fd00::2".parse().unwrap();
        let mut datagram = message(RTM_NEWNEIGH, &neighbour(3, 0x01, v4, [2, 0, 0, 0, 0, 9])); // incomplete
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(4, 0x02, v4, [2, 0, 0, 0, 0, 8]),
        )); // other interface
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(3, 0x04, v6, [2, 0, 0, 0, 0, 6]),
        )); // stale: usable
        datagram.extend(message(
            RTM_NEWNEIGH,
            &neighbour(3, 0x02, v4, [2, 0, 0, 0, 0, 2]),
        ));
        assert_eq!(
            scan_dump(&datagram, v4, 3).unwrap(),
            DumpPart::Found(Address([2, 0, 0, 0, 0, 2]))
        );
        assert_eq!(
            scan_dump(&datagram, v6, 3).unwrap(),
            DumpPart::Found(Address([2, 0, 0, 0, 0, 6]))
        );
        assert_eq!(scan_dump(&datagram, v4, 5).unwrap(), DumpPart::More);
        datagram.extend(message(NLMSG_DONE, &[0; 4]));
        assert_eq!(
            scan_dump(&datagram, "10.0.0.9".parse().unwrap(), 3).unwrap(),
            DumpPart::Done
        );
    }

    #[test]
    fn errors_and_garbage() {
        let error = message(NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes());
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(
            scan_dump(&error, v4, 1).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        let mut bad = message(RTM_NEWNEIGH, &neighbour(1, 2, v4, [0; 6]));
        bad[0] = 200;
        assert!(scan_dump(&bad, v4, 1).is_err());
    }

    #[test]
    fn reads_own_table() {
        let lo = Interface::lookup("lo").unwrap();
        assert_eq!(
            lookup("192.0.2.1".parse().unwrap(), lo.index).unwrap(),
            None
        );
        assert_eq!(
            lookup("2001:db8::1".parse().unwrap(), lo.index).unwrap(),
            None
        );
    }
}
