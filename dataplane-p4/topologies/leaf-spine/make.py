"""Writes the leaf/spine example: topology.json (the P4 tutorials' shape, plus `gateway_mac` per
host for the in-process fabric) and one runtime JSON per switch (the tutorials' shape: table
entries, clone sessions) for lossless.p4. Run from this folder: python3 make.py

Two spines, three leaves, two hosts per leaf. Leaf L: ports 1-2 to its hosts, 3 to spine1, 4 to
spine2. Spine S: port L to leaf L. Routes as the topology crate aggregates them: a leaf sends
10.0.0.0/8 up over ECMP group 1 (both spines), its hosts' /32s to them and drops the rest of its
own /24; a spine sends each leaf's /24 to it. ECMP hash offset 0 on leaves, 4 on spines. Hosts h<L><H>: 10.0.L.H, MAC 08:00:00:00:0L:0H. Switch port
MACs 00:aa:<switch id>:00:00:<port>. All links 1 Gb/s, 2 µs. Priority 3 (DSCP 26) is lossless
and ECN-marked; CNPs (DSCP 48) travel in priority 6.
"""

import json

SPINES, LEAVES, HOSTS_PER_LEAF = 2, 3, 2
LINK_MBPS, LINK_LATENCY = 1000, "2us"
PRIORITY_DATA, PRIORITY_CNP = 3, 6
# One pause quantum (512 bit times) at 1 Gb/s is 0.512 µs: 524 in 1/1024 µs.
QUANTUM_Q10 = 524
PFC = dict(xoff_packets=16, xon_packets=4, quanta=977, refresh_us=100, limit=500, stall_us=2000)
RED = dict(kmin_packets=5, kmax_packets=20, pmax_q16=13107)
CNP = dict(interval_us=50, dscp=48)
FLOWLET_TIMEOUT_US, DLB_LOAD_AGE_US = 100, 500
I, E = "LosslessIngress", "LosslessEgress"


def switch_id(name):
    kind, n = name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")):])
    return n if kind == "spine" else 0x10 + n


def port_mac(switch, port):
    return f"00:aa:{switch_id(switch):02x}:00:00:{port:02x}"


def host_mac(leaf, h):
    return f"08:00:00:00:{leaf:02x}:{h:02x}"


def entry(table, action, params=None, match=None):
    e = {"table": table}
    if match is None:
        e["default_action"] = True
    else:
        e["match"] = match
    e["action_name"] = action
    e["action_params"] = params or {}
    return e


def common(name, ports, hash_offset):
    entries = [
        entry(f"{I}.ecmp_hash", f"{I}.set_hash_offset", {"offset": hash_offset}),
        entry(f"{I}.dscp_priority", f"{I}.set_priority", {"priority": PRIORITY_DATA},
              {"hdr.ipv4.dscp": 26}),
        entry(f"{I}.dscp_priority", f"{I}.set_priority", {"priority": PRIORITY_CNP},
              {"hdr.ipv4.dscp": 48}),
        entry(f"{E}.cnp_config", f"{E}.cnp", CNP, {"standard_metadata.priority": PRIORITY_DATA}),
    ]
    for p in ports:
        entries.append(entry(f"{I}.pfc_rx_port", f"{I}.set_pause_quantum",
                             {"quantum_q10": QUANTUM_Q10}, {"standard_metadata.ingress_port": p}))
        entries.append(entry(f"{I}.pfc_profile", f"{I}.lossless", PFC,
                             {"standard_metadata.egress_spec": p,
                              "standard_metadata.priority": PRIORITY_DATA}))
        entries.append(entry(f"{E}.ecn_profile", f"{E}.red", RED,
                             {"standard_metadata.egress_port": p,
                              "standard_metadata.priority": PRIORITY_DATA}))
    sessions = [{"clone_session_id": 100 + p, "replicas": [{"egress_port": p, "instance": 1}]}
                for p in ports]
    return entries, sessions


def runtime(name, entries, sessions):
    return {
        "target": "bmv2",
        "p4info": "build/lossless.p4.p4info.txtpb",
        "bmv2_json": "build/lossless.json",
        "table_entries": entries,
        "clone_session_entries": sessions,
    }


def leaf(n):
    name = f"leaf{n}"
    entries, sessions = common(name, range(1, HOSTS_PER_LEAF + SPINES + 1), 0)
    for h in range(1, HOSTS_PER_LEAF + 1):
        entries.append(entry(f"{I}.ipv4_lpm", f"{I}.set_nexthop", {"nexthop": h},
                             {"hdr.ipv4.dstAddr": [f"10.0.{n}.{h}", 32]}))
        entries.append(entry(f"{I}.nexthop", f"{I}.forward",
                             {"port": h, "src_mac": port_mac(name, h), "dst_mac": host_mac(n, h)},
                             {"meta.nexthop": h}))
    for s in range(1, SPINES + 1):
        port = HOSTS_PER_LEAF + s
        entries.append(entry(f"{I}.nexthop", f"{I}.forward",
                             {"port": port, "src_mac": port_mac(name, port),
                              "dst_mac": port_mac(f"spine{s}", n)},
                             {"meta.nexthop": port}))
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
    return name, runtime(name, entries, sessions)


def spine(n):
    name = f"spine{n}"
    entries, sessions = common(name, range(1, LEAVES + 1), 4)
    for l in range(1, LEAVES + 1):
        entries.append(entry(f"{I}.ipv4_lpm", f"{I}.set_nexthop", {"nexthop": l},
                             {"hdr.ipv4.dstAddr": [f"10.0.{l}.0", 24]}))
        entries.append(entry(f"{I}.nexthop", f"{I}.forward",
                             {"port": l, "src_mac": port_mac(name, l),
                              "dst_mac": port_mac(f"leaf{l}", HOSTS_PER_LEAF + n)},
                             {"meta.nexthop": l}))
    return name, runtime(name, entries, sessions)


def topology():
    hosts, links = {}, []
    for l in range(1, LEAVES + 1):
        for h in range(1, HOSTS_PER_LEAF + 1):
            name = f"h{l}{h}"
            gw = f"10.0.{l}.254"
            hosts[name] = {
                "ip": f"10.0.{l}.{h}/24",
                "mac": host_mac(l, h),
                "gateway_mac": port_mac(f"leaf{l}", h),
                "commands": [f"route add default gw {gw} dev eth0",
                             f"arp -i eth0 -s {gw} {port_mac(f'leaf{l}', h)}"],
            }
            links.append([name, f"leaf{l}-p{h}", LINK_LATENCY, LINK_MBPS])
        for s in range(1, SPINES + 1):
            links.append([f"leaf{l}-p{HOSTS_PER_LEAF + s}", f"spine{s}-p{l}", LINK_LATENCY,
                          LINK_MBPS])
    switches = {f"spine{s}": {"runtime_json": f"spine{s}-runtime.json"}
                for s in range(1, SPINES + 1)}
    switches.update({f"leaf{l}": {"runtime_json": f"leaf{l}-runtime.json"}
                     for l in range(1, LEAVES + 1)})
    return {"hosts": hosts, "switches": switches, "links": links}


def write(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


write("topology.json", topology())
for name, rt in [spine(s) for s in range(1, SPINES + 1)] + [leaf(l) for l in range(1, LEAVES + 1)]:
    write(f"{name}-runtime.json", rt)
