"""What every example fabric's generator writes the same way: lossless.p4's per-switch entries
(DSCP to priority, PFC, RED, CNPs, clone sessions for the frames the switch makes), the runtime
JSON around them (the P4 tutorials' shape), host and port addresses, and the files.

Imported by the `make.py` of each fabric (leaf-spine/, ../misconfigured/*/) and by star.py;
run those, not this.
"""

import json

LINK_MBPS, LINK_LATENCY = 1000, "2us"
PRIORITY_DATA, PRIORITY_CNP = 3, 6
DSCP_DATA, DSCP_CNP = 26, 48
# One pause quantum (512 bit times) at 1 Gb/s is 0.512 µs: 524 in 1/1024 µs.
QUANTUM_Q10 = 524
PFC = dict(xoff_packets=16, xon_packets=4, quanta=977, refresh_us=100, limit=500, stall_us=2000)
RED = dict(kmin_packets=5, kmax_packets=20, pmax_q16=13107)
CNP = dict(interval_us=50, dscp=DSCP_CNP)
I, E = "LosslessIngress", "LosslessEgress"


def port_mac(switch_id, port):
    """The MAC of a switch port: 00:aa:<switch id>:00:00:<port>."""
    return f"00:aa:{switch_id:02x}:00:00:{port:02x}"


def host_mac(subnet, h):
    """The MAC of host `h` of subnet 10.0.<subnet>.0/24: 08:00:00:00:<subnet>:<h>."""
    return f"08:00:00:00:{subnet:02x}:{h:02x}"


def entry(table, action, params=None, match=None):
    """A table entry, or the table's default action when `match` is None."""
    e = {"table": table}
    if match is None:
        e["default_action"] = True
    else:
        e["match"] = match
    e["action_name"] = action
    e["action_params"] = params or {}
    return e


def common(ports, hash_offset):
    """The entries and clone sessions every switch has: classes, and on each port PFC and RED
    for the lossless priority and a clone session for the PAUSE and CNP frames it sends."""
    entries = [
        entry(f"{I}.ecmp_hash", f"{I}.set_hash_offset", {"offset": hash_offset}),
        entry(f"{I}.dscp_priority", f"{I}.set_priority", {"priority": PRIORITY_DATA},
              {"hdr.ipv4.dscp": DSCP_DATA}),
        entry(f"{I}.dscp_priority", f"{I}.set_priority", {"priority": PRIORITY_CNP},
              {"hdr.ipv4.dscp": DSCP_CNP}),
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


def route(prefix, length, nexthop):
    """An `ipv4_lpm` entry sending `prefix/length` to `nexthop`."""
    return entry(f"{I}.ipv4_lpm", f"{I}.set_nexthop", {"nexthop": nexthop},
                 {"hdr.ipv4.dstAddr": [prefix, length]})


def forward(nexthop, port, src_mac, dst_mac):
    """A `nexthop` entry: out of `port`, rewriting the MACs."""
    return entry(f"{I}.nexthop", f"{I}.forward",
                 {"port": port, "src_mac": src_mac, "dst_mac": dst_mac},
                 {"meta.nexthop": nexthop})


def runtime(entries, sessions):
    """A switch's runtime JSON."""
    return {
        "target": "bmv2",
        "p4info": "build/lossless.p4.p4info.txtpb",
        "bmv2_json": "build/lossless.json",
        "table_entries": entries,
        "clone_session_entries": sessions,
    }


def host(subnet, h, gateway_mac):
    """Host `h` of 10.0.<subnet>.0/24, its gateway the switch port with `gateway_mac`."""
    gw = f"10.0.{subnet}.254"
    return {
        "ip": f"10.0.{subnet}.{h}/24",
        "mac": host_mac(subnet, h),
        "gateway_mac": gateway_mac,
        "commands": [f"route add default gw {gw} dev eth0",
                     f"arp -i eth0 -s {gw} {gateway_mac}"],
    }


def write(path, value):
    """Writes `value` as indented JSON."""
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
