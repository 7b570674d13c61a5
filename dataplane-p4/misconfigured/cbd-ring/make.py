"""Writes a fabric whose routes close a cyclic buffer dependency, the condition of a PFC deadlock (Hu et al.,
"Deadlocks in Datacenter Networks: Why Do They Form, and How to Avoid Them", HotNets 2016,
Fig. 1; Shpiner et al., "Unlocking Credit Loop Deadlock", HotNets 2016). Run from this folder:
python3 make.py

Three switches in a ring, one host each. Switch Si: port 1 to host hi (10.0.i.1), port 2 to the
next switch clockwise, port 3 to the previous one. Every switch routes the next switch's /24
out of port 2, as it should, but also the previous switch's /24 out of port 2: clockwise,
two hops, instead of one hop back (a static route copied from the next switch, or a route
that bounced after a failure). With hi sending to the host two hops clockwise, every ring link
carries two flows, each switch's queue to the next fills, and PFC pauses the upstream port it
fills from, which is the previous switch's queue to it: three queues each waiting on the next,
around the ring. The switches keep their PAUSEs in force while over XOFF, and in the simulator
the ring freezes for good (docs/sim.md, "A PFC deadlock").

`fixed/` is the same fabric with the previous switch's /24 out of port 3: no cycle, and the
same traffic runs to the end. Everything else is the leaf/spine example's (../../topologies/):
1 Gb/s, 2 µs links, priority 3 (DSCP 26) lossless and ECN-marked, CNPs in priority 6.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ among the fabrics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../topologies"))
from lossless_runtime import (LINK_LATENCY, LINK_MBPS, common, forward, host,  # noqa: E402
                              host_mac, port_mac, route, runtime, write)

SWITCHES = 3
HOST_PORT, NEXT_PORT, PREVIOUS_PORT = 1, 2, 3


def next_of(i):
    return i % SWITCHES + 1


def previous_of(i):
    return (i - 2) % SWITCHES + 1


def switch(i, back_port):
    entries, sessions = common([HOST_PORT, NEXT_PORT, PREVIOUS_PORT], 0)
    entries += [
        route(f"10.0.{i}.1", 32, HOST_PORT),
        forward(HOST_PORT, HOST_PORT, port_mac(i, HOST_PORT), host_mac(i, 1)),
        forward(NEXT_PORT, NEXT_PORT, port_mac(i, NEXT_PORT),
                port_mac(next_of(i), PREVIOUS_PORT)),
        forward(PREVIOUS_PORT, PREVIOUS_PORT, port_mac(i, PREVIOUS_PORT),
                port_mac(previous_of(i), NEXT_PORT)),
        route(f"10.0.{next_of(i)}.0", 24, NEXT_PORT),
        route(f"10.0.{previous_of(i)}.0", 24, back_port),
    ]
    return runtime(entries, sessions)


def topology():
    hosts = {f"h{i}": host(i, 1, port_mac(i, HOST_PORT)) for i in range(1, SWITCHES + 1)}
    links = [[f"h{i}", f"s{i}-p{HOST_PORT}", LINK_LATENCY, LINK_MBPS]
             for i in range(1, SWITCHES + 1)]
    links += [[f"s{i}-p{NEXT_PORT}", f"s{next_of(i)}-p{PREVIOUS_PORT}", LINK_LATENCY, LINK_MBPS]
              for i in range(1, SWITCHES + 1)]
    switches = {f"s{i}": {"runtime_json": f"s{i}-runtime.json"} for i in range(1, SWITCHES + 1)}
    return {"hosts": hosts, "switches": switches, "links": links}


for folder, back_port in [(".", NEXT_PORT), ("fixed", PREVIOUS_PORT)]:
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "topology.json"), topology())
    for i in range(1, SWITCHES + 1):
        write(os.path.join(folder, f"s{i}-runtime.json"), switch(i, back_port))
