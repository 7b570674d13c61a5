"""Shared by the load-balancing generators (lb.py on softswitch's virtual clock, lb_realtime.py
for both switches): the ECMP groups behind 10.G0.0.0/16, a flow of a group, and the search for
a flow whose flowlets start on given members."""

from lossless_stf import *

ECMP, FLOWLET, DLB, SPRAY = 0, 1, 2, 3
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


def flow(group, sport, psn=0):
    return roce(1, 3, dst_ip=f"10.{group}0.0.7", sport=sport, psn=psn)


def sport_where(group, salt_members, start=49152, size=2):
    """The first UDP source port from `start` whose flowlets (by number) start on the given
    members of a group of `size`."""
    for sport in range(start, 65536):
        if all(flowlet_member(flow(group, sport), n, size) == m for n, m in salt_members.items()):
            return sport
    raise AssertionError("no such port")


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
            p = flow(1, sport, psn)
            lines.append(packet(1, p))
            lines.append(expect(MEMBER_PORT[m], forwarded(p, MEMBER_PORT[m])))
    assert ports_used == {3, 4}, "the flows should use both members"

    lines.append("# Group 1 switched to spray at run time: the same flow now alternates.")
    lines.append(f"remove {INGRESS}.ecmp_group group1")
    lines.append(f"add {INGRESS}.ecmp_group meta.group:1 {INGRESS}.set_group(policy:{SPRAY}, size:2, "
                 f"flowlet_timeout_us:{timeout_us})")
    for psn in range(4):
        p = flow(1, 49152, 10 + psn)
        lines.append(packet(1, p))
        lines.append(expect(MEMBER_PORT[psn % 2], forwarded(p, MEMBER_PORT[psn % 2])))

    lines.append("# spray (group 4): members in turn.")
    for psn in range(4):
        p = flow(4, 50000, psn)
        lines.append(packet(1, p))
        lines.append(expect(MEMBER_PORT[psn % 2], forwarded(p, MEMBER_PORT[psn % 2])))
