"""Writes a fabric where one switch maps the RDMA DSCP to a lossy priority: the host's RoCEv2
frames, lossless on every other hop, land at that switch in priority 0, which has no PFC, and
are dropped there when its queue overflows (Guo et al., "RDMA over Commodity Ethernet at
Scale", SIGCOMM 2016: DSCP-based PFC needs the same DSCP -> priority map end to end; vendors'
RoCE guides' "trust DSCP" settings). Run from this folder: python3 make.py

Three switches in a star, one host each. Switch Si: port 1 to host hi (10.0.i.1). s2 is the
hub: its port 2 goes to s1's port 2, its port 3 to s3's port 2. Every switch maps DSCP 26 to
priority 3, with PFC and RED on priority 3 of every port, except s2 here, which maps it to
priority 0 (the default class: what a switch that does not trust DSCP, or whose map was
copied from another fabric, does). An incast h1, h3 -> h2 congests s2's port 1: in priority 3
it would pause s1 and s3, and they the senders; in priority 0 it drops.

`fixed/` is the same fabric with s2 mapping DSCP 26 to priority 3, as the others do.
Everything else is the leaf/spine example's (../../topologies/): 1 Gb/s links, priority 3
(DSCP 26) lossless and ECN-marked, CNPs (DSCP 48) in priority 6.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ among the fabrics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../topologies"))
from lossless_runtime import (DSCP_DATA, I, LINK_MBPS, common, forward, host,  # noqa: E402
                              host_mac, port_mac, route, runtime, write)

SWITCHES = 3
HUB = 2
HOST_PORT = 1
# The hub's port to each edge switch, and each edge switch's port to the hub.
HUB_PORT = {1: 2, 3: 3}
EDGE_UPLINK = 2


def remap(entries, priority):
    """`entries` with DSCP_DATA's dscp_priority entry sent to `priority`."""
    for e in entries:
        if e["table"] == f"{I}.dscp_priority" and e["match"]["hdr.ipv4.dscp"] == DSCP_DATA:
            e["action_params"]["priority"] = priority
    return entries


def switch(i, data_priority):
    if i == HUB:
        ports = [HOST_PORT] + sorted(HUB_PORT.values())
        entries, sessions = common(ports, 0)
        entries += [route(f"10.0.{i}.1", 32, HOST_PORT),
                    forward(HOST_PORT, HOST_PORT, port_mac(i, HOST_PORT), host_mac(i, 1))]
        for edge, port in HUB_PORT.items():
            entries += [route(f"10.0.{edge}.0", 24, port),
                        forward(port, port, port_mac(i, port), port_mac(edge, EDGE_UPLINK))]
        return runtime(remap(entries, data_priority), sessions)
    entries, sessions = common([HOST_PORT, EDGE_UPLINK], 0)
    entries += [route(f"10.0.{i}.1", 32, HOST_PORT),
                forward(HOST_PORT, HOST_PORT, port_mac(i, HOST_PORT), host_mac(i, 1)),
                forward(EDGE_UPLINK, EDGE_UPLINK, port_mac(i, EDGE_UPLINK),
                        port_mac(HUB, HUB_PORT[i]))]
    entries += [route(f"10.0.{j}.0", 24, EDGE_UPLINK)
                for j in range(1, SWITCHES + 1) if j != i]
    return runtime(entries, sessions)


def topology():
    hosts = {f"h{i}": host(i, 1, port_mac(i, HOST_PORT)) for i in range(1, SWITCHES + 1)}
    links = [[f"h{i}", f"s{i}-p{HOST_PORT}", "0ms", LINK_MBPS] for i in range(1, SWITCHES + 1)]
    links += [[f"s{edge}-p{EDGE_UPLINK}", f"s{HUB}-p{port}", "0ms", LINK_MBPS]
              for edge, port in HUB_PORT.items()]
    switches = {f"s{i}": {"runtime_json": f"s{i}-runtime.json"} for i in range(1, SWITCHES + 1)}
    return {"hosts": hosts, "switches": switches, "links": links}


for folder, hub_priority in [(".", 0), ("fixed", 3)]:
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "topology.json"), topology())
    for i in range(1, SWITCHES + 1):
        write(os.path.join(folder, f"s{i}-runtime.json"), switch(i, hub_priority))
