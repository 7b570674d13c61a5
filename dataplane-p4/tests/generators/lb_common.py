"""Shared by the load-balancing generators (lb.py on softswitch's virtual clock, lb_realtime.py
for both switches): the ECMP groups behind 10.G0.0.0/16, a flow of a group, the search for a
flow whose flowlets start on given members, and the checks that need no clock (ecmp, spray,
e-ecmp, the hash offset)."""

from lossless_stf import *

ECMP, FLOWLET, DLB, SPRAY, EECMP = 0, 1, 2, 3, 4
MEMBER_PORT = {0: 3, 1: 4}


def groups(lines, policies, timeout_us):
    """A route 10.G0.0.0/16 to each group G, of `policies` ({group: policy}), two members on
    ports 3 and 4, flowlet timeout `timeout_us`; the group entries get ids groupG."""
    for group, policy in policies.items():
        lines.append(f"add {INGRESS}.ipv4_lpm hdr.ipv4.dstAddr:{ip_int(f'10.{group}0.0.0'):#x}/16 "
                     f"{INGRESS}.set_ecmp_group(group:{group})")
        lines.append(f"add {INGRESS}.ecmp_group meta.group:{group} {INGRESS}.set_group(policy:{policy}, "
                     f"size:2, flowlet_timeout_us:{timeout_us}) = group{group}")
        for member, port in MEMBER_PORT.items():
            lines.append(f"add {INGRESS}.ecmp_member meta.group:{group} meta.member:{member} "
                         f"{INGRESS}.set_nexthop(nexthop:{port})")


def flow(group, sport, psn=0, qp=0x12):
    return roce(1, 3, dst_ip=f"10.{group}0.0.7", sport=sport, psn=psn, qp=qp)


def sport_where(group, salt_members, start=49152, size=2):
    """The first UDP source port from `start` whose flowlets (by number) start on the given
    members of a group of `size`."""
    for sport in range(start, 65536):
        if all(flowlet_member(flow(group, sport), n, size) == m for n, m in salt_members.items()):
            return sport
    raise AssertionError("no such port")


def through(lines, p, member):
    """Sends `p` in on port 1 and expects it forwarded out of `member`'s port."""
    lines.append(packet(1, p))
    lines.append(expect(MEMBER_PORT[member], forwarded(p, MEMBER_PORT[member])))


def switch_policy(lines, group, policy, timeout_us):
    """Replaces group `group`'s entry (id groupG) by one of `policy`, two members."""
    lines.append(f"remove {INGRESS}.ecmp_group group{group}")
    lines.append(f"add {INGRESS}.ecmp_group meta.group:{group} {INGRESS}.set_group(policy:{policy}, "
                 f"size:2, flowlet_timeout_us:{timeout_us})")


def ecmp_and_spray(lines, timeout_us):
    """Group 1 (ecmp) keeps each of four flows on its member and spreads them, then, switched
    to spray at run time by replacing its entry, alternates one flow's members; group 4
    (spray) takes its members in turn. Nothing here depends on time."""
    lines.append("# ecmp: four flows, three packets each; each flow keeps its member.")
    ports_used = set()
    for sport in range(49152, 49156):
        m = member_of(flow(1, sport), 0, 2)
        ports_used.add(MEMBER_PORT[m])
        lines.append(f"# sport {sport}: member {m}")
        for psn in range(3):
            through(lines, flow(1, sport, psn), m)
    assert ports_used == {3, 4}, "the flows should use both members"

    lines.append("# Group 1 switched to spray at run time: the same flow now alternates.")
    switch_policy(lines, 1, SPRAY, timeout_us)
    for psn in range(4):
        through(lines, flow(1, 49152, 10 + psn), psn % 2)

    lines.append("# spray (group 4): members in turn.")
    for psn in range(4):
        through(lines, flow(4, 50000, psn), psn % 2)


QPS = range(0x100, 0x108)


def eecmp(lines, timeout_us):
    """Group 7 (e-ecmp): one 5-tuple with eight destination QPs spreads over both members, each
    QP keeping its own; switched to ecmp at run time, the same packets all take one member."""
    lines.append("# e-ecmp (group 7): one 5-tuple, eight destination QPs, two packets each.")
    members = set()
    for qp in QPS:
        m = member_of_qp(flow(7, 49152, qp=qp), 2)
        members.add(m)
        lines.append(f"# QP {qp:#x}: member {m}")
        for psn in range(2):
            through(lines, flow(7, 49152, psn, qp=qp), m)
    assert members == {0, 1}, "the QPs should use both members"

    lines.append("# Group 7 switched to ecmp at run time: the same packets take one member.")
    switch_policy(lines, 7, ECMP, timeout_us)
    m = member_of(flow(7, 49152), 0, 2)
    for qp in QPS:
        through(lines, flow(7, 49152, 2, qp=qp), m)


def hash_offset(lines):
    """With the switch's hash offset at 4, ecmp picks members by the hash's bits from 4 up:
    flows whose member changes with it move, and back at 0 they return."""
    sports = range(49152, 49164)
    before = [member_of(flow(7, s), 0, 2) for s in sports]
    after = [member_of(flow(7, s), 0, 2, offset=4) for s in sports]
    assert before != after and set(after) == {0, 1}, "the offset should move some flows"
    lines.append("# Hash offset 4 (group 7, ecmp): members from the hash's bits 4 and up.")
    lines.append(f"setdefault {INGRESS}.ecmp_hash {INGRESS}.set_hash_offset(offset:4)")
    for s, m in zip(sports, after):
        through(lines, flow(7, s, 3), m)
    lines.append("# Back to offset 0.")
    lines.append(f"setdefault {INGRESS}.ecmp_hash {INGRESS}.set_hash_offset(offset:0)")
    for s, m in zip(sports, before):
        through(lines, flow(7, s, 4), m)
