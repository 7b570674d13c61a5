"""Writes the leaf/spine example: topology.json (the P4 tutorials' shape, plus `gateway_mac` per
host for the simulator, sim/) and one runtime JSON per switch (the tutorials' shape: table
entries, clone sessions) for lossless.p4. Run from this folder: python3 make.py

Two spines, three leaves, two hosts per leaf. Leaf L: ports 1-2 to its hosts, 3 to spine1, 4 to
spine2. Spine S: port L to leaf L. Routes as the topology crate aggregates them: a leaf sends
10.0.0.0/8 up over ECMP group 1 (both spines), its hosts' /32s to them and drops the rest of its
own /24; a spine sends each leaf's /24 to it. ECMP hash offset 0 on leaves, 4 on spines. Hosts h<L><H>: 10.0.L.H, MAC 08:00:00:00:0L:0H. Switch port
MACs 00:aa:<switch id>:00:00:<port>. All links 1 Gb/s, 2 µs. Priority 3 (DSCP 26) is lossless
and ECN-marked; CNPs (DSCP 48) travel in priority 6.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ among the fabrics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lossless_runtime import (I, LINK_LATENCY, LINK_MBPS, common, entry, forward,  # noqa: E402
                              host, host_mac, port_mac, route, runtime, write)

SPINES, LEAVES, HOSTS_PER_LEAF = 2, 3, 2
FLOWLET_TIMEOUT_US, DLB_LOAD_AGE_US = 100, 500


def switch_id(name):
    kind, n = name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")):])
    return n if kind == "spine" else 0x10 + n


def mac(switch, port):
    return port_mac(switch_id(switch), port)


def leaf(n):
    name = f"leaf{n}"
    entries, sessions = common(range(1, HOSTS_PER_LEAF + SPINES + 1), 0)
    for h in range(1, HOSTS_PER_LEAF + 1):
        entries.append(route(f"10.0.{n}.{h}", 32, h))
        entries.append(forward(h, h, mac(name, h), host_mac(n, h)))
    for s in range(1, SPINES + 1):
        port = HOSTS_PER_LEAF + s
        entries.append(forward(port, port, mac(name, port), mac(f"spine{s}", n)))
        entries.append(entry(f"{I}.ecmp_member", f"{I}.set_nexthop", {"nexthop": port},
                             {"meta.group": 1, "meta.member": s - 1}))
    entries.append(entry(f"{I}.ipv4_lpm", f"{I}.set_ecmp_group", {"group": 1},
                         {"hdr.ipv4.dstAddr": ["10.0.0.0", 8]}))
    entries.append(entry(f"{I}.ipv4_lpm", f"{I}.drop", {},
                         {"hdr.ipv4.dstAddr": [f"10.0.{n}.0", 24]}))
    entries.append(entry(f"{I}.ecmp_group", f"{I}.set_group",
                         {"policy": 0, "size": SPINES, "flowlet_timeout_us": FLOWLET_TIMEOUT_US},
                         {"meta.group": 1}))
    uplinks = [HOSTS_PER_LEAF + s for s in range(1, SPINES + 1)] + [0] * (8 - SPINES)
    dlb = {f"port{i}": port for i, port in enumerate(uplinks)}
    entries.append(entry(f"{I}.dlb_members", f"{I}.set_dlb_ports",
                         dict(dlb, load_age_us=DLB_LOAD_AGE_US), {"meta.group": 1}))
    return name, runtime(entries, sessions)


def spine(n):
    name = f"spine{n}"
    entries, sessions = common(range(1, LEAVES + 1), 4)
    for l in range(1, LEAVES + 1):
        entries.append(route(f"10.0.{l}.0", 24, l))
        entries.append(forward(l, l, mac(name, l), mac(f"leaf{l}", HOSTS_PER_LEAF + n)))
    return name, runtime(entries, sessions)


def topology():
    hosts, links = {}, []
    for l in range(1, LEAVES + 1):
        for h in range(1, HOSTS_PER_LEAF + 1):
            name = f"h{l}{h}"
            hosts[name] = host(l, h, mac(f"leaf{l}", h))
            links.append([name, f"leaf{l}-p{h}", LINK_LATENCY, LINK_MBPS])
        for s in range(1, SPINES + 1):
            links.append([f"leaf{l}-p{HOSTS_PER_LEAF + s}", f"spine{s}-p{l}", LINK_LATENCY,
                          LINK_MBPS])
    switches = {f"spine{s}": {"runtime_json": f"spine{s}-runtime.json"}
                for s in range(1, SPINES + 1)}
    switches.update({f"leaf{l}": {"runtime_json": f"leaf{l}-runtime.json"}
                     for l in range(1, LEAVES + 1)})
    return {"hosts": hosts, "switches": switches, "links": links}


write("topology.json", topology())
for name, rt in [spine(s) for s in range(1, SPINES + 1)] + [leaf(l) for l in range(1, LEAVES + 1)]:
    write(f"{name}-runtime.json", rt)
