"""Shared pieces of the lossless.p4 STF generators: one switch with four ports, the hosts
behind them, the table entries every test starts from, and packet builders.

Expected packets come from scapy (Ether/IP/UDP, scapy.contrib.roce for BTH, CNP and ICRC,
scapy.contrib.mac_control for PFC) and from hashes computed here (zlib's CRC-32, and the
CRC-16/ARC of the references softswitch's STF corpus generators share, written from its
definition), never from softswitch. Run a generator from the repository root with the venv
that `cargo xtask setup` makes, e.g.
    .venv/bin/python dataplane-p4/tests/generators/ecn.py > dataplane-p4/tests/ecn.stf
"""

import os
import sys
import zlib

from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.contrib.roce import BTH, cnp
from scapy.contrib.mac_control import MACControlClassBasedFlowControl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "../../../softswitch/tests/corpus/generators"))
from reference import crc16_arc  # noqa: E402 (after the path that finds it)

INGRESS = "LosslessIngress"
EGRESS = "LosslessEgress"

DSCP_DATA, PRIORITY_DATA = 26, 3
DSCP_CNP, PRIORITY_CNP = 48, 6
REVERSE_SESSION_BASE = 100
PORTS = (1, 2, 3, 4)


def switch_mac(port):
    return f"00:aa:00:00:00:{port:02x}"


def host_mac(port):
    return f"08:00:00:00:00:{port:02x}"


def host_ip(port):
    return f"10.0.{port}.{port}"


def mac_int(mac):
    return int(mac.replace(":", ""), 16)


def ip_int(ip):
    return int.from_bytes(bytes(int(b) for b in ip.split(".")), "big")


def queue_index(port, priority):
    return (port << 3) | priority


def setup(lines):
    """Priorities from DSCP, a /32 route and next hop per host port, and the clone session
    that sends PAUSE and CNP frames back out of each port."""
    lines.append(f"add {INGRESS}.dscp_priority hdr.ipv4.dscp:{DSCP_DATA} "
                 f"{INGRESS}.set_priority(priority:{PRIORITY_DATA})")
    lines.append(f"add {INGRESS}.dscp_priority hdr.ipv4.dscp:{DSCP_CNP} "
                 f"{INGRESS}.set_priority(priority:{PRIORITY_CNP})")
    for port in PORTS:
        lines.append(f"add {INGRESS}.ipv4_lpm hdr.ipv4.dstAddr:{ip_int(host_ip(port)):#x}/32 "
                     f"{INGRESS}.set_nexthop(nexthop:{port})")
        lines.append(nexthop_entry(port, port))
        lines.append(f"mirroring_add {REVERSE_SESSION_BASE + port} {port}")


def nexthop_entry(nexthop, port):
    return (f"add {INGRESS}.nexthop meta.nexthop:{nexthop} {INGRESS}.forward(port:{port}, "
            f"src_mac:{mac_int(switch_mac(port)):#x}, dst_mac:{mac_int(host_mac(port)):#x})")


def roce(src_port, dst_port, *, sport=49152, qp=0x12, psn=0, ecn=2, dscp=DSCP_DATA, ttl=64,
         payload=32, dst_ip=None, ip_id=1):
    """A RoCEv2 SEND-only packet (with ICRC) from the host on src_port to the host on
    dst_port, as it arrives at the switch."""
    return (Ether(src=host_mac(src_port), dst=switch_mac(src_port))
            / IP(src=host_ip(src_port), dst=dst_ip or host_ip(dst_port), tos=(dscp << 2) | ecn,
                 ttl=ttl, id=ip_id, flags="DF")
            / UDP(sport=sport, dport=4791, chksum=0)
            / BTH(opcode=4, dqpn=qp, psn=psn)
            / Raw(bytes(range(payload))))


def forwarded(pkt, out_port, *, ecn=None):
    """`pkt` as the switch sends it out of out_port: MACs of that link, TTL - 1, ECN set to
    `ecn` if given, IPv4 checksum recomputed. scapy recomputes the ICRC too, which must come out
    unchanged since it masks TTL, ECN and the IPv4 checksum."""
    out = pkt.copy()
    out[Ether].src = switch_mac(out_port)
    out[Ether].dst = host_mac(out_port)
    out[IP].ttl -= 1
    if ecn is not None:
        out[IP].tos = (out[IP].tos & 0xfc) | ecn
    out[IP].chksum = None
    return out


def cnp_for(pkt, *, qp=None):
    """The CNP this switch sends back for data packet `pkt` (as it arrived): to the previous
    hop from the port's own MAC, addresses swapped, DSCP 48, BTH opcode 0x81 with BECN to
    `qp` (default the packet's DestQP), 16 reserved bytes, ICRC by scapy."""
    return (Ether(src=pkt[Ether].dst, dst=pkt[Ether].src)
            / IP(src=pkt[IP].dst, dst=pkt[IP].src, tos=DSCP_CNP << 2, ttl=64, id=0, flags="DF")
            / UDP(sport=pkt[UDP].sport, dport=4791, chksum=0)
            / cnp(pkt[BTH].dqpn if qp is None else qp))


def pfc_frame(port, priority, quanta):
    """The PFC frame this switch sends out of `port`: class `priority` with `quanta`."""
    fields = {f"c{priority}_enabled": 1, f"c{priority}_pause_time": quanta}
    return (Ether(src=switch_mac(port), dst="01:80:c2:00:00:01", type=0x8808)
            / MACControlClassBasedFlowControl(**fields))


def pfc_from_peer(port, priority, quanta):
    """A PFC frame the peer on `port` sends to the switch."""
    fields = {f"c{priority}_enabled": 1, f"c{priority}_pause_time": quanta}
    return (Ether(src=host_mac(port), dst="01:80:c2:00:00:01", type=0x8808)
            / MACControlClassBasedFlowControl(**fields))


def hexstr(pkt):
    return (pkt if isinstance(pkt, bytes) else raw(pkt)).hex()


def packet(port, pkt):
    return f"packet {port} {hexstr(pkt)}"


def expect(port, pkt):
    return f"expect {port} {hexstr(pkt)} $"


def unchanged_burst(lines, in_port, out_port, pkts):
    """Sends `pkts` at once on in_port and expects each forwarded, unmarked, out of out_port."""
    for p in pkts:
        lines.append(packet(in_port, p))
    for p in pkts:
        lines.append(expect(out_port, forwarded(p, out_port)))
    lines.append("wait")


def one_pause_and_resume(lines, port, priority, quanta):
    """Expects the one PAUSE (`quanta`) and the one resume (quanta 0) the switch sends out of
    `port` for `priority`, waits, and checks the counters that saw one of each; returns the
    queue index of `port`'s `priority`."""
    lines.append(expect(port, pfc_frame(port, priority, quanta)))
    lines.append(expect(port, pfc_frame(port, priority, 0)))
    lines.append("wait")
    q = queue_index(port, priority)
    lines.append(f"counter_read {INGRESS}.pfc_pause_tx {q} packets == 1")
    lines.append(f"counter_read {EGRESS}.pfc_resume_tx {q} packets == 1")
    return q


def primed_burst(lines, out_port, burst, qp=0x12, sport=49152):
    """A not-ECT packet alone (of flow qp/sport), a wait that lets it leave, then `burst`
    from port 1: on a rate-limited queue the burst queues behind the first packet's departure,
    so its n-th packet (from 0) finds n ahead of it, on softswitch's clock and on BMv2's alike
    while the burst arrives within one packet time."""
    first = roce(1, out_port, psn=99, ecn=0, qp=qp, sport=sport)
    lines.append(packet(1, first))
    lines.append(expect(out_port, forwarded(first, out_port)))
    lines.append("wait")
    for p in burst:
        lines.append(packet(1, p))


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def five_tuple(pkt):
    """The bytes of the 5-tuple as the program hashes them."""
    return (bytes.fromhex(f"{ip_int(pkt[IP].src):08x}{ip_int(pkt[IP].dst):08x}")
            + bytes([pkt[IP].proto])
            + pkt[UDP].sport.to_bytes(2, "big") + pkt[UDP].dport.to_bytes(2, "big"))


def member_of(pkt, salt, size, offset=0):
    """The group member hash_member picks: (crc16(5-tuple, salt) >> the switch's hash offset)
    % size."""
    return (crc16_arc(five_tuple(pkt) + salt.to_bytes(2, "big")) >> offset) % size


def member_of_qp(pkt, size):
    """The group member hash_member_qp (e-ecmp) picks: (crc32(5-tuple, destination QP) mod
    65536) % size."""
    return (crc32(five_tuple(pkt) + pkt[BTH].dqpn.to_bytes(3, "big")) & 0xFFFF) % size


def flowlet_slot(pkt):
    """The flowlet register slot of a flow: crc32(5-tuple) % 4096."""
    return crc32(five_tuple(pkt)) % 4096


def flowlet_member(pkt, number, size):
    """The member a flow's flowlet number `number` starts on: the hash salted with the number
    plus the flow's slot (16-bit sum)."""
    return member_of(pkt, (number + flowlet_slot(pkt)) & 0xFFFF, size)
