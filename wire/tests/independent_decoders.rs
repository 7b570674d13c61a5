//! The test vectors against two encoders and decoders independent of this crate: scapy (from
//! the test venv) rebuilds every vector from the expression it names, byte for byte, and tshark
//! decodes every frame to the same fields this crate reads. Both skip (and fail under
//! `CI=true`) where the venv or tshark is missing.
#![forbid(unsafe_code)]

use std::net::IpAddr;
use std::process::Command;

use wire::ethernet::{self, EtherType, Vlan};
use wire::roce::RoceFrame;
use wire::vectors::{self, Vector};
use wire::{aeth, bth, pfc};

#[test]
fn scapy_builds_every_vector() {
    let Some(python) = testkit::venv_python_or_skip("scapy_builds_every_vector") else {
        return;
    };
    let mut script = String::from(
        "import sys\nfrom scapy.all import *\nfrom scapy.contrib.roce import BTH, AETH, cnp\n\
         from scapy.contrib.mac_control import MACControlClassBasedFlowControl\n\
         src = '02:00:00:00:00:01'\ndst = '02:00:00:00:00:02'\npay = Raw(bytes(range(16)))\n",
    );
    for v in vectors::SCAPY {
        script += &format!("print(raw({}).hex())\n", v.scapy);
    }
    let output = testkit::output_of(Command::new(&python).arg("-c").arg(&script));
    let printed = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), vectors::SCAPY.len());
    for (v, line) in vectors::SCAPY.iter().zip(lines) {
        assert_eq!(line, hex(v.bytes), "{}: scapy builds other bytes", v.name);
    }
}

/// The fields this test compares, in tshark's `-T fields` order.
const FIELDS: &[&str] = &[
    "eth.src",
    "eth.dst",
    "ieee8021ad.id",
    "ieee8021ad.priority",
    "vlan.id",
    "vlan.priority",
    "ip.src",
    "ipv6.src",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ip.checksum.status",
    "udp.srcport",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "macc.opcode",
    "macc.cbfc.enbv",
    "macc.cbfc.pause_time.c3",
    "macc.cbfc.pause_time.c6",
];

#[test]
fn tshark_reads_what_wire_reads() {
    if !testkit::runs_or_skip(
        "tshark_reads_what_wire_reads",
        "tshark",
        "-v",
        "needs tshark (cargo xtask setup installs it)",
    ) {
        return;
    }
    let frames: Vec<&Vector> = vectors::SCAPY
        .iter()
        .filter(|v| !v.name.starts_with("UDP_"))
        .collect();
    let mut args = vec![
        "-o",
        "ip.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "separator=|",
    ];
    for field in FIELDS {
        args.extend(["-e", field]);
    }
    let bytes: Vec<&[u8]> = frames.iter().map(|v| v.bytes).collect();
    let text = testkit::tshark(&bytes, &args).unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), frames.len(), "{text}");
    for (v, line) in frames.iter().zip(lines) {
        let got: Vec<&str> = line.split('|').collect();
        assert_eq!(got.len(), FIELDS.len(), "{}: {line}", v.name);
        let shown: Vec<(&str, String)> = FIELDS
            .iter()
            .copied()
            .zip(got)
            .filter(|(_, value)| !value.is_empty())
            .map(|(field, value)| (field, value.to_owned()))
            .collect();
        assert_eq!(shown, expected(v), "{}", v.name);
    }
}

/// The non-empty fields tshark should show for `v`, as this crate reads them.
fn expected(v: &Vector) -> Vec<(&'static str, String)> {
    let header = ethernet::Repr::parse(&ethernet::Frame::new_checked(v.bytes).unwrap()).unwrap();
    let mut fields = vec![
        ("eth.src", header.src_addr.to_string()),
        ("eth.dst", header.dst_addr.to_string()),
    ];
    match header.vlan {
        Vlan::Untagged => {}
        Vlan::Single(tag) => fields.extend([
            ("vlan.id", tag.vid.to_string()),
            ("vlan.priority", tag.pcp.to_string()),
        ]),
        Vlan::Double { outer, inner } => fields.extend([
            ("ieee8021ad.id", outer.vid.to_string()),
            ("ieee8021ad.priority", outer.pcp.to_string()),
            ("vlan.id", inner.vid.to_string()),
            ("vlan.priority", inner.pcp.to_string()),
        ]),
    }
    if header.ethertype == EtherType::MacControl {
        let body = pfc::Repr::parse_frame(v.bytes).unwrap();
        fields.extend([
            ("macc.opcode", format!("{:#06x}", pfc::OPCODE)),
            ("macc.cbfc.enbv", format!("{:#06x}", body.class_enable)),
            ("macc.cbfc.pause_time.c3", body.pause_times[3].to_string()),
            ("macc.cbfc.pause_time.c6", body.pause_times[6].to_string()),
        ]);
        return fields;
    }
    let (frame, payload) = RoceFrame::parse(v.bytes).unwrap();
    match frame.src_ip {
        IpAddr::V4(src) => fields.push(("ip.src", src.to_string())),
        IpAddr::V6(src) => fields.push(("ipv6.src", src.to_string())),
    }
    if frame.src_ip.is_ipv4() {
        fields.extend([
            ("ip.dsfield.dscp", frame.dscp.to_string()),
            ("ip.dsfield.ecn", frame.ecn.bits().to_string()),
            // 1: tshark found the header checksum good.
            ("ip.checksum.status", "1".to_owned()),
        ]);
    }
    fields.extend([
        ("udp.srcport", frame.src_port.to_string()),
        ("udp.dstport", bth::ROCEV2_PORT.to_string()),
        (
            "infiniband.bth.opcode",
            frame.bth.opcode.value().to_string(),
        ),
        (
            "infiniband.bth.destqp",
            format!("{:#08x}", frame.bth.dest_qp),
        ),
        ("infiniband.bth.psn", frame.bth.psn.to_string()),
    ]);
    if frame.bth.opcode == bth::Opcode::RcAck {
        let ack = aeth::Repr::parse(&aeth::Packet::new_checked(payload).unwrap());
        fields.extend([
            ("infiniband.aeth.syndrome", ack.syndrome.byte().to_string()),
            ("infiniband.aeth.msn", ack.msn.to_string()),
        ]);
    }
    fields
}

/// Lower-case hex digits of `bytes`, as scapy's `.hex()` prints them.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
