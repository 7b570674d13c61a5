//! A frame as a listing, one line per layer, each deeper one indented under a `\ `, for logs and
//! test failures:
//!
//! ```text
//! Ethernet src=02:00:00:00:00:01 dst=02:00:00:00:00:02 type=Ipv4
//! \ IPv4 src=10.0.0.1 dst=10.0.0.2 proto=Udp len=40 ttl=64 dscp=26 ecn=Ect0
//!  \ UDP src=49152 dst=4791 len=32
//!   \ BTH opcode=RcSendOnly qp=0x000012 psn=3430008 pkey=0xffff
//!    \ ICRC ok, payload 16 bytes
//! ```
//!
//! A layer that cannot be read says why in place of its line, and the listing stops there.
//! Nothing is allocated: [`PrettyPrinter`] writes straight into the formatter.

use core::fmt;
use core::net::IpAddr;

use super::bth::{self, Opcode, ROCEV2_PORT};
use super::ethernet::{self, EtherType};
use super::icrc::{self, ICRC_LEN};
use super::ip::Protocol;
use super::ip_header::IpRepr;
use super::{aeth, cnp, pfc, udp, Error};

/// Shows a frame (Ethernet header first, no FCS) as a listing when formatted with `{}`.
#[derive(Debug, Clone, Copy)]
pub struct PrettyPrinter<'a> {
    frame: &'a [u8],
}

impl<'a> PrettyPrinter<'a> {
    /// A listing of `frame`.
    pub fn new(frame: &'a [u8]) -> Self {
        PrettyPrinter { frame }
    }
}

/// Writes the lines of a listing, each at the next depth.
struct Listing<'f, 'g> {
    f: &'f mut fmt::Formatter<'g>,
    depth: usize,
}

impl Listing<'_, '_> {
    /// Writes one line at the current depth and goes one deeper.
    fn line(&mut self, text: impl fmt::Display) -> fmt::Result {
        if self.depth > 0 {
            writeln!(self.f)?;
            for _ in 1..self.depth {
                self.f.write_str(" ")?;
            }
            self.f.write_str("\\ ")?;
        }
        self.depth += 1;
        write!(self.f, "{text}")
    }

    /// Writes why `layer` could not be read; the listing ends there.
    fn fail(&mut self, layer: &str, error: Error) -> fmt::Result {
        self.line(format_args!("{layer} ({error})"))
    }
}

impl fmt::Display for PrettyPrinter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Listing { f, depth: 0 };
        let header = match ethernet::Frame::new_checked(self.frame)
            .and_then(|frame| ethernet::Repr::parse(&frame))
        {
            Ok(header) => header,
            Err(error) => return out.fail("Ethernet", error),
        };
        out.line(header)?;
        let payload = &self.frame[header.buffer_len()..];
        match header.ethertype {
            EtherType::Ipv4 | EtherType::Ipv6 => ip_packet(&mut out, header.ethertype, payload),
            EtherType::MacControl => {
                match pfc::Packet::new_checked(payload).and_then(|body| pfc::Repr::parse(&body)) {
                    Ok(repr) => out.line(repr),
                    Err(error) => out.fail("MAC control", error),
                }
            }
            _ => out.line(format_args!("payload {} bytes", payload.len())),
        }
    }
}

/// An IP packet of the version `ethertype` names, and what it carries.
fn ip_packet(out: &mut Listing, ethertype: EtherType, bytes: &[u8]) -> fmt::Result {
    match IpRepr::parse(ethertype, bytes) {
        Ok(repr) => {
            out.line(repr)?;
            let upper = repr.upper();
            let ip = &bytes[..upper.end];
            transport(out, upper.protocol, ip, upper.start, upper.addresses)
        }
        Err(error) => out.fail(IpRepr::name(ethertype), error),
    }
}

/// The transport of IP packet `ip` (header included), whose header is `ip_len` bytes.
fn transport(
    out: &mut Listing,
    protocol: Protocol,
    ip: &[u8],
    ip_len: usize,
    (src, dst): (IpAddr, IpAddr),
) -> fmt::Result {
    if protocol != Protocol::Udp {
        return out.line(format_args!("payload {} bytes", ip.len() - ip_len));
    }
    let datagram = match udp::Packet::new_checked(&ip[ip_len..]) {
        Ok(datagram) => datagram,
        Err(error) => return out.fail("UDP", error),
    };
    match udp::Repr::parse(&datagram, src, dst) {
        Ok(repr) => out.line(repr)?,
        Err(error) => return out.fail("UDP", error),
    }
    if datagram.dst_port() != ROCEV2_PORT {
        return Ok(());
    }
    let end = ip_len + usize::from(datagram.len());
    roce(out, &ip[..end], ip_len + udp::HEADER_LEN)
}

/// The RoCEv2 headers of IP packet `ip`, whose BTH starts at `bth_at`, and its ICRC.
fn roce(out: &mut Listing, ip: &[u8], bth_at: usize) -> fmt::Result {
    let transport = match bth::Packet::new_checked(&ip[bth_at..]) {
        Ok(transport) => transport,
        Err(error) => return out.fail("BTH", error),
    };
    let header = bth::Repr::parse(&transport);
    out.line(header)?;
    let mut payload_at = bth_at + bth::HEADER_LEN;
    match header.opcode {
        Opcode::Cnp => {
            match cnp::Packet::new_checked(&ip[bth_at..]).and_then(|p| cnp::Repr::parse(&p)) {
                Ok(repr) => {
                    out.line(repr)?;
                    payload_at += cnp::RESERVED_LEN;
                }
                Err(error) => return out.fail("CNP", error),
            }
        }
        Opcode::RcAck => match aeth::Packet::new_checked(transport.payload()) {
            Ok(ack) => {
                out.line(aeth::Repr::parse(&ack))?;
                payload_at += aeth::HEADER_LEN;
            }
            Err(error) => return out.fail("AETH", error),
        },
        _ => {}
    }
    let Some(payload) = (ip.len() - payload_at.min(ip.len())).checked_sub(ICRC_LEN) else {
        return out.fail("ICRC", Error::Truncated);
    };
    match icrc::verify(ip) {
        Ok(true) => out.line(format_args!("ICRC ok, payload {payload} bytes")),
        Ok(false) => out.line(format_args!("ICRC incorrect, payload {payload} bytes")),
        Err(error) => out.fail("ICRC", error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use std::format;

    fn listing(frame: &[u8]) -> std::string::String {
        format!("{}", PrettyPrinter::new(frame))
    }

    #[test]
    fn roce_layer_by_layer() {
        assert_eq!(
            listing(vectors::ROCE_V4),
            "Ethernet src=02:00:00:00:00:01 dst=02:00:00:00:00:02 type=Ipv4\n\
             \\ IPv4 src=10.0.0.1 dst=10.0.0.2 proto=Udp len=40 ttl=64 dscp=26 ecn=Ect0\n\
             \x20\\ UDP src=49152 dst=4791 len=32\n\
             \x20\x20\\ BTH opcode=RcSendOnly qp=0x000012 psn=3430008 pkey=0xffff\n\
             \x20\x20\x20\\ ICRC ok, payload 16 bytes"
        );
    }

    #[test]
    fn cnp_ack_pfc_and_tags() {
        let cnp = listing(vectors::CNP_V4);
        assert!(
            cnp.ends_with("\\ CNP qp=0x000012 pkey=0xffff\n    \\ ICRC ok, payload 0 bytes"),
            "{cnp}"
        );
        let ack = listing(vectors::ACK_V4);
        assert!(
            ack.ends_with("\\ AETH Ack(31) msn=258\n    \\ ICRC ok, payload 0 bytes"),
            "{ack}"
        );
        assert!(listing(vectors::ROCE_V6).contains("\\ IPv6 src=fd00::1 dst=fd00::2"));
        assert!(listing(vectors::ROCE_QINQ).contains("svlan=200 pcp=5 cvlan=100 pcp=3"));
        assert!(listing(vectors::PFC)
            .ends_with("\\ PFC enable=0x48 times=[0, 0, 0, 65535, 0, 0, 4660, 0]"));
    }

    #[test]
    fn says_where_and_why_a_frame_stops() {
        let mut bad = vectors::ROCE_V4.to_vec();
        bad[60] ^= 1;
        assert!(listing(&bad).ends_with("\\ ICRC incorrect, payload 16 bytes"));
        bad[22] ^= 1; // TTL: the IPv4 checksum no longer holds.
        assert!(listing(&bad).ends_with("\\ IPv4 (bad checksum)"));
        assert_eq!(
            listing(&vectors::ROCE_V4[..10]),
            "Ethernet (packet truncated)"
        );
        assert!(listing(&vectors::ROCE_V4[..40]).ends_with("\\ IPv4 (packet truncated)"));
        assert!(listing(&vectors::PFC[..20]).ends_with("\\ MAC control (packet truncated)"));
    }
}
