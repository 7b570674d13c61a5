//! A network interface as the calling thread's network namespace sees it:
//! index, MAC address (SIOCGIFHWADDR) and IP addresses (getifaddrs).

use std::ffi::CStr;
use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

use crate::error::{NetError, Result};
use crate::sys::{self, check};
use wire::ethernet::Address;

/// An interface's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Name, e.g. `veth0`.
    pub name: String,
    /// Index.
    pub index: u32,
    /// MAC address.
    pub mac: Address,
    /// MTU: the largest IP packet it sends.
    pub mtu: usize,
}

/// An `ifreq` naming `name`, or `None` if the name does not fit.
fn ifreq(name: &str) -> Option<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return None;
    }
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut request: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Some(request)
}

/// Runs an interface ioctl on a throw-away socket of the calling thread's namespace.
fn ioctl(request: libc::c_ulong, ifreq: &mut libc::ifreq) -> io::Result<()> {
    let socket = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    // SAFETY: `ifreq` is a valid ifreq for the interface requests used here.
    check(unsafe { libc::ioctl(socket.as_raw_fd(), request as _, ifreq as *mut libc::ifreq) })
        .map(drop)
}

impl Interface {
    /// Looks an interface up by name.
    pub fn lookup(name: &str) -> Result<Interface> {
        let missing = || NetError::NoInterface(name.to_owned());
        let mut request = ifreq(name).ok_or_else(missing)?;
        ioctl(libc::SIOCGIFINDEX, &mut request).map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) => missing(),
            _ => NetError::io(format!("index of {name}"))(e),
        })?;
        // SAFETY: SIOCGIFINDEX filled the ifindex member.
        let index = unsafe { request.ifr_ifru.ifru_ifindex } as u32;
        ioctl(libc::SIOCGIFHWADDR, &mut request)
            .map_err(NetError::io(format!("MAC address of {name}")))?;
        // SAFETY: SIOCGIFHWADDR filled the hwaddr member.
        let hwaddr = unsafe { request.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (dst, src) in mac.iter_mut().zip(hwaddr.sa_data.iter()) {
            *dst = *src as u8;
        }
        ioctl(libc::SIOCGIFMTU, &mut request).map_err(NetError::io(format!("MTU of {name}")))?;
        // SAFETY: SIOCGIFMTU filled the mtu member.
        let mtu = unsafe { request.ifr_ifru.ifru_mtu } as usize;
        Ok(Interface {
            name: name.to_owned(),
            index,
            mac: Address(mac),
            mtu,
        })
    }

    /// The name of the interface with index `index` in this namespace, if there is one.
    pub fn name_of(index: u32) -> Option<String> {
        let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
        // SAFETY: `name` has the IFNAMSIZ bytes if_indextoname may write.
        if unsafe { libc::if_indextoname(index, name.as_mut_ptr()) }.is_null() {
            return None;
        }
        // SAFETY: on success if_indextoname wrote a NUL-terminated name into `name`.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) };
        name.to_str().ok().map(str::to_owned)
    }

    /// Whether the interface is up with its carrier (IFF_UP and IFF_RUNNING).
    pub fn is_running(name: &str) -> bool {
        let Some(mut request) = ifreq(name) else {
            return false;
        };
        if ioctl(libc::SIOCGIFFLAGS, &mut request).is_err() {
            return false;
        }
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        let flags = i32::from(unsafe { request.ifr_ifru.ifru_flags });
        let wanted = libc::IFF_UP | libc::IFF_RUNNING;
        flags & wanted == wanted
    }

    /// The link speed the driver reports (ethtool), in bits per second, if it reports one.
    pub fn speed_bps(&self) -> Option<u64> {
        /// `struct ethtool_cmd` (linux/ethtool.h), as ETHTOOL_GSET fills it.
        #[repr(C)]
        #[derive(Default)]
        struct EthtoolCmd {
            cmd: u32,
            supported: u32,
            advertising: u32,
            speed: u16,
            duplex: u8,
            port: u8,
            phy_address: u8,
            transceiver: u8,
            autoneg: u8,
            mdio_support: u8,
            maxtxpkt: u32,
            maxrxpkt: u32,
            speed_hi: u16,
            eth_tp_mdix: u8,
            eth_tp_mdix_ctrl: u8,
            lp_advertising: u32,
            reserved: [u32; 2],
        }
        const ETHTOOL_GSET: u32 = 1;
        const SPEED_UNKNOWN: u32 = u32::MAX;
        let mut command = EthtoolCmd {
            cmd: ETHTOOL_GSET,
            ..EthtoolCmd::default()
        };
        let mut request = ifreq(&self.name)?;
        request.ifr_ifru.ifru_data = (&mut command as *mut EthtoolCmd).cast();
        ioctl(libc::SIOCETHTOOL, &mut request).ok()?;
        let mbps = u32::from(command.speed) | (u32::from(command.speed_hi) << 16);
        (mbps != 0 && mbps != SPEED_UNKNOWN && mbps != u32::from(u16::MAX))
            .then(|| u64::from(mbps) * 1_000_000)
    }

    /// An address of this interface of the same family as `like`: for IPv6 a
    /// global one if there is one, else a link-local one.
    pub fn address_like(&self, like: IpAddr) -> Result<IpAddr> {
        let addresses = self
            .addresses()
            .map_err(NetError::io(format!("addresses of {}", self.name)))?;
        let pick = match like {
            IpAddr::V4(_) => addresses.iter().find(|a| a.is_ipv4()),
            IpAddr::V6(_) => addresses
                .iter()
                .filter(|a| a.is_ipv6())
                .min_by_key(|a| matches!(a, IpAddr::V6(v6) if v6.is_unicast_link_local())),
        };
        pick.copied().ok_or_else(|| NetError::NoAddress {
            iface: self.name.clone(),
            family: if like.is_ipv4() { "IPv4" } else { "IPv6" },
        })
    }

    /// Whether `ip` is one of this interface's addresses.
    pub fn holds(&self, ip: IpAddr) -> Result<bool> {
        let addresses = self
            .addresses()
            .map_err(NetError::io(format!("addresses of {}", self.name)))?;
        Ok(addresses.contains(&ip))
    }

    /// Every IP address of this interface.
    fn addresses(&self) -> io::Result<Vec<IpAddr>> {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs fills `list`, freed below.
        check(unsafe { libc::getifaddrs(&mut list) })?;
        let mut found = Vec::new();
        let mut entry = list;
        while !entry.is_null() {
            // SAFETY: `entry` is a node of the list getifaddrs returned.
            let node = unsafe { &*entry };
            entry = node.ifa_next;
            if node.ifa_addr.is_null() {
                continue;
            }
            // SAFETY: ifa_name is a NUL-terminated string of the node, alive until freeifaddrs.
            let name = unsafe { CStr::from_ptr(node.ifa_name) };
            if name.to_bytes() != self.name.as_bytes() {
                continue;
            }
            // SAFETY: ifa_addr points at a sockaddr whose family says its real type.
            match i32::from(unsafe { (*node.ifa_addr).sa_family }) {
                libc::AF_INET => {
                    // SAFETY: family AF_INET: the kernel's address is a whole sockaddr_in, alive
                    // until freeifaddrs.
                    let addr = unsafe { &*node.ifa_addr.cast::<libc::sockaddr_in>() };
                    found.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                        addr.sin_addr.s_addr,
                    ))));
                }
                libc::AF_INET6 => {
                    // SAFETY: family AF_INET6: a whole sockaddr_in6, alive until freeifaddrs.
                    let addr = unsafe { &*node.ifa_addr.cast::<libc::sockaddr_in6>() };
                    found.push(IpAddr::V6(Ipv6Addr::from(addr.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
        // SAFETY: `list` came from getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(list) };
        Ok(found)
    }
}

/// The index of `interface` in the current network namespace.
pub fn ifindex(interface: &str) -> anyhow::Result<u32> {
    let name = std::ffi::CString::new(interface)?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        anyhow::bail!("no interface named {interface} in this network namespace");
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_exists() {
        let lo = Interface::lookup("lo").unwrap();
        assert_eq!(lo.mac, Address([0; 6]));
        assert!(lo.mtu >= 1500);
        assert!(lo.index > 0);
        assert_eq!(
            lo.address_like("10.0.0.1".parse().unwrap()).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }

    #[test]
    fn missing_interface() {
        assert!(matches!(
            Interface::lookup("no-such-if0"),
            Err(NetError::NoInterface(_))
        ));
        assert!(matches!(
            Interface::lookup("a-name-far-too-long-for-linux"),
            Err(NetError::NoInterface(_))
        ));
    }
}
