//! The destination's MAC address from the kernel's IPv4 neighbour table, read
//! from the calling thread's network namespace (`/proc/thread-self/net/arp`:
//! `/proc/net` would show the namespace of the process's main thread), and
//! resolved on demand by sending a datagram to the destination's discard port.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::error::{Result, TrafficError};
use super::sys;
use crate::wire::ethernet::Address;

/// The ARP table of the calling thread's network namespace.
const ARP_TABLE: &str = "/proc/thread-self/net/arp";

/// `ATF_COM`: the entry is complete (resolved).
const ATF_COM: u32 = 0x2;

/// The UDP discard port, the target of the datagram that triggers resolution.
const DISCARD_PORT: u16 = 9;

/// How often the datagram is sent again while waiting.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// Finds the complete entry for `ip` on `iface` in the text of an ARP table.
fn find_in_table(table: &str, ip: Ipv4Addr, iface: &str) -> Option<Address> {
    table.lines().skip(1).find_map(|line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let [addr, _hw_type, flags, mac, _mask, device] = columns[..] else {
            return None;
        };
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
        if addr.parse::<Ipv4Addr>().ok()? != ip || device != iface || flags & ATF_COM == 0 {
            return None;
        }
        mac.parse()
            .ok()
            .filter(|mac: &Address| *mac != Address::default())
    })
}

/// Looks `ip` up in the neighbour table of `iface`.
pub fn lookup(ip: Ipv4Addr, iface: &str) -> io::Result<Option<Address>> {
    Ok(find_in_table(
        &std::fs::read_to_string(ARP_TABLE)?,
        ip,
        iface,
    ))
}

/// The MAC address of `ip` on `iface`: from the neighbour table, or after
/// triggering resolution and waiting at most `timeout` for it. IPv4 only.
pub fn resolve(ip: IpAddr, iface: &str, timeout: Duration) -> Result<Address> {
    let IpAddr::V4(ip4) = ip else {
        return Err(TrafficError::Config(
            "IPv6 destinations need a destination MAC".into(),
        ));
    };
    let read_error = TrafficError::io(format!("read {ARP_TABLE}"));
    if let Some(mac) = lookup(ip4, iface).map_err(read_error)? {
        return Ok(mac);
    }
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .map_err(TrafficError::io("open a UDP socket"))?;
    sys::set_option(
        &socket,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        iface.as_bytes(),
    )
    .map_err(TrafficError::io(format!("bind a UDP socket to {iface}")))?;
    let start = Instant::now();
    let mut last_sent: Option<Instant> = None;
    while start.elapsed() < timeout {
        if last_sent.is_none_or(|t| t.elapsed() >= RETRY_EVERY) {
            // Failures (unreachable, refused) are expected while resolution is pending.
            let _ = socket.send_to(b"lossless: resolve", SocketAddr::new(ip, DISCARD_PORT));
            last_sent = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(5));
        if let Some(mac) =
            lookup(ip4, iface).map_err(TrafficError::io(format!("read {ARP_TABLE}")))?
        {
            return Ok(mac);
        }
    }
    Err(TrafficError::Unresolved {
        ip,
        iface: iface.to_owned(),
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        veth0
10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        veth0
10.0.0.4         0x1         0x2         02:00:00:00:00:04     *        veth1
";

    #[test]
    fn finds_complete_entries_only() {
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(
            find_in_table(TABLE, ip("10.0.0.2"), "veth0"),
            Some(Address([2, 0, 0, 0, 0, 2]))
        );
        assert_eq!(find_in_table(TABLE, ip("10.0.0.3"), "veth0"), None);
        assert_eq!(find_in_table(TABLE, ip("10.0.0.4"), "veth0"), None);
        assert_eq!(find_in_table(TABLE, ip("10.0.0.9"), "veth0"), None);
        assert_eq!(find_in_table("", ip("10.0.0.2"), "veth0"), None);
    }

    #[test]
    fn reads_own_table() {
        assert!(lookup(Ipv4Addr::new(192, 0, 2, 1), "lo").is_ok());
    }
}
