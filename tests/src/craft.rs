//! Test frames built with an independent encoder (etherparse), and what to read back.

use etherparse::{
    IpHeaders, Ipv4Dscp, Ipv4Ecn, Ipv4Header, Ipv6FlowLabel, Ipv6Header, PacketBuilder,
    SlicedPacket,
};

/// UDP destination port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;

/// The ECN codepoints (RFC 3168), as the frames' bits give them ([`Ecn::bits`]).
pub use wire::ip::Ecn;

/// What a test frame carries.
#[derive(Clone, Debug)]
pub struct FrameSpec {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source address (v4 mapped into the last 4 bytes for IPv6).
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// IPv6 instead of IPv4.
    pub ipv6: bool,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// UDP destination port (4791 for RoCEv2).
    pub dst_port: u16,
    /// UDP source port.
    pub src_port: u16,
    /// Destination QP in the BTH.
    pub qp: u32,
    /// PSN in the BTH.
    pub psn: u32,
    /// Bytes of payload after the BTH (before the 4-byte ICRC).
    pub payload: usize,
}

impl FrameSpec {
    /// A RoCEv2 RC SEND-only frame, DSCP 26 (priority 3 by default), ECT(0).
    pub fn roce(src_mac: [u8; 6], dst_mac: [u8; 6], src_ip: [u8; 4], dst_ip: [u8; 4]) -> Self {
        FrameSpec {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            ipv6: false,
            dscp: 26,
            ecn: Ecn::Ect0,
            dst_port: ROCEV2_PORT,
            src_port: 49152,
            qp: 0x11,
            psn: 0,
            payload: 128,
        }
    }

    /// The frame's bytes. The ICRC is left zero: these tests check ECN, not the ICRC.
    pub fn build(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(12 + self.payload + 4);
        payload.extend_from_slice(&[0x04, 0x00, 0xff, 0xff, 0x00]); // SEND only, P_Key 0xffff
        payload.extend_from_slice(&self.qp.to_be_bytes()[1..]);
        payload.push(0x80); // AckReq
        payload.extend_from_slice(&self.psn.to_be_bytes()[1..]);
        payload.extend((0..self.payload).map(|i| i as u8));
        payload.extend_from_slice(&[0; 4]);
        let ip = if self.ipv6 {
            let mut header = Ipv6Header {
                traffic_class: (self.dscp << 2) | self.ecn.bits(),
                flow_label: Ipv6FlowLabel::ZERO,
                hop_limit: 64,
                source: mapped_v6(self.src_ip),
                destination: mapped_v6(self.dst_ip),
                ..Default::default()
            };
            header.next_header = etherparse::IpNumber::UDP;
            IpHeaders::Ipv6(header, Default::default())
        } else {
            let mut header =
                Ipv4Header::new(0, 64, etherparse::IpNumber::UDP, self.src_ip, self.dst_ip)
                    .expect("valid header");
            header.dscp = Ipv4Dscp::try_new(self.dscp).expect("dscp < 64");
            header.ecn = Ipv4Ecn::try_new(self.ecn.bits()).expect("ecn < 4");
            IpHeaders::Ipv4(header, Default::default())
        };
        let builder = PacketBuilder::ethernet2(self.src_mac, self.dst_mac)
            .ip(ip)
            .udp(self.src_port, self.dst_port);
        let mut frame = Vec::with_capacity(builder.size(payload.len()));
        builder
            .write(&mut frame, &payload)
            .expect("writing to a Vec");
        frame
    }
}

fn mapped_v6(v4: [u8; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[0] = 0xfd;
    out[12..].copy_from_slice(&v4);
    out
}

/// Inserts an 802.1Q (or 802.1ad) tag with `pcp` behind the MAC addresses.
pub fn with_vlan(frame: &[u8], tpid: u16, pcp: u8, vid: u16) -> Vec<u8> {
    let tci = ((pcp as u16) << 13) | (vid & 0x0fff);
    let mut out = frame[..12].to_vec();
    out.extend_from_slice(&tpid.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    out
}

/// The ECN bits of an IP frame, read by etherparse; `None` if etherparse finds no IP header.
pub fn ecn_of(frame: &[u8]) -> Option<u8> {
    let sliced = SlicedPacket::from_ethernet(frame).ok()?;
    match sliced.net? {
        etherparse::NetSlice::Ipv4(v4) => Some(v4.header().ecn().value()),
        etherparse::NetSlice::Ipv6(v6) => Some(v6.header().traffic_class() & 0b11),
    }
}

/// Whether the IPv4 header checksum of `frame` is right (true for non-IPv4 frames).
pub fn ipv4_checksum_ok(frame: &[u8]) -> bool {
    let Ok(sliced) = SlicedPacket::from_ethernet(frame) else {
        return false;
    };
    match sliced.net {
        Some(etherparse::NetSlice::Ipv4(v4)) => {
            let header = v4.header().to_header();
            header.header_checksum == header.calc_header_checksum()
        }
        _ => true,
    }
}

/// The UDP source port of a frame (our tests use it as a sequence number).
pub fn udp_src_port(frame: &[u8]) -> Option<u16> {
    match SlicedPacket::from_ethernet(frame).ok()?.transport? {
        etherparse::TransportSlice::Udp(udp) => Some(udp.source_port()),
        _ => None,
    }
}

/// Runs a Python program with scapy (`scapy.all`, `scapy.contrib.roce` and
/// `scapy.contrib.mac_control` imported) through the clone's `.venv` that
/// `cargo xtask setup` makes, and returns what it printed.
fn run_scapy(body: &str) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let python = testkit::venv_python();
    let program = format!(
        "import json, sys\nfrom scapy.all import *\nfrom scapy.contrib.roce import *\n\
         from scapy.contrib.mac_control import *\n{body}"
    );
    let output = std::process::Command::new(&python)
        .args(["-c", &program])
        .output()
        .with_context(|| format!("running {} (run `cargo xtask setup`)", python.display()))?;
    let output = sysutil::netns::check("scapy", output)?;
    Ok(String::from_utf8(output.stdout)?)
}

/// The bytes of a frame built by scapy from `expression`: an encoder independent of ours.
pub fn scapy_frame(expression: &str) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    let hex = run_scapy(&format!("sys.stdout.write(raw({expression}).hex())"))?;
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).context("scapy printed non-hex"))
        .collect()
}

/// An 802.1Qbb PFC frame built by scapy from [`TEST_MAC`](crate::bed::TEST_MAC) to the MAC
/// control multicast address, with the fields `fields` (`cN_enabled=1, cN_pause_time=T`, ...).
pub fn scapy_pfc(fields: &str) -> Vec<u8> {
    let src = crate::bed::TEST_MAC.map(|b| format!("{b:02x}")).join(":");
    scapy_frame(&format!(
        "Ether(src='{src}', dst='01:80:c2:00:00:01')/MACControlClassBasedFlowControl({fields})"
    ))
    .unwrap()
}

/// Decodes `frame` with scapy as `p = Ether(frame)` and returns `expression` (a Python
/// expression over `p` giving something JSON can print) as JSON. `icrc_ok(p)` and
/// `ipv4_checksum_ok(p)` recompute the ICRC and the IPv4 checksum with scapy.
pub fn scapy_decode(frame: &[u8], expression: &str) -> anyhow::Result<serde_json::Value> {
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let text = run_scapy(&format!(
        "def icrc_ok(p):\n    q = p.copy()\n    q[BTH].icrc = None\n    return Ether(raw(q))[BTH].icrc == p[BTH].icrc\n\
         def ipv4_checksum_ok(p):\n    q = p[IP].copy()\n    q.chksum = None\n    return IP(raw(q)).chksum == p[IP].chksum\n\
         p = Ether(bytes.fromhex('{hex}'))\nprint(json.dumps({expression}))"
    ))?;
    Ok(serde_json::from_str(&text)?)
}

/// Decodes `frames` with tshark and returns its verbose text (`tshark -V`): a second
/// independent decoder.
pub fn tshark_verbose(frames: &[Vec<u8>]) -> anyhow::Result<String> {
    let frames: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    testkit::tshark(&frames, &["-V"]).map_err(anyhow::Error::msg)
}

/// The tshark fields the mirroring tests read of an ERSPAN frame, in this order: the outer
/// destination, the ERSPAN version and session, the GRE sequence number, and the inner BTH
/// opcode and destination QP and AETH syndrome.
pub const ERSPAN_FIELDS: &[&str] = &[
    "ip.dst",
    "erspan.version",
    "erspan.spanid",
    "gre.sequence_number",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.aeth.syndrome",
];

/// tshark's fields `fields` (`-T fields -e FIELD...`) of every frame of the capture `pcap`, one
/// row per frame.
pub fn tshark_fields(pcap: &std::path::Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut command = std::process::Command::new("tshark");
    command.arg("-r").arg(pcap).args(["-T", "fields"]);
    for field in fields {
        command.args(["-e", field]);
    }
    let out = command
        .output()
        .expect("running tshark (cargo xtask setup)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}
