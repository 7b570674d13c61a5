"""Writes a fabric where one switch maps the RDMA DSCP to a lossy priority: the host's RoCEv2
frames, lossless on every other hop, land at that switch in priority 0, which has no PFC, and
are dropped there when its queue overflows (Guo et al., "RDMA over Commodity Ethernet at
Scale", SIGCOMM 2016: DSCP-based PFC needs the same DSCP -> priority map end to end; vendors'
RoCE guides' "trust DSCP" settings). Run from this folder: python3 make.py

The star of ../../topologies/star.py, one host a switch. Every switch maps DSCP 26 to
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
from lossless_runtime import DSCP_DATA, I, write  # noqa: E402
from star import HUB, SWITCHES, switch, topology  # noqa: E402


def remap(entries, priority):
    """`entries` with DSCP_DATA's dscp_priority entry sent to `priority`."""
    for e in entries:
        if e["table"] == f"{I}.dscp_priority" and e["match"]["hdr.ipv4.dscp"] == DSCP_DATA:
            e["action_params"]["priority"] = priority
    return entries


for folder, hub_priority in [(".", 0), ("fixed", 3)]:
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "topology.json"), topology({}))
    for i in range(1, SWITCHES + 1):
        edit = (lambda e: remap(e, hub_priority)) if i == HUB else (lambda e: e)
        write(os.path.join(folder, f"s{i}-runtime.json"), switch(i, {}, edit))
