"""Writes a fabric with PFC on priority 0, where every DSCP no class names goes: ordinary,
lossy traffic becomes lossless, and a congested port's pauses stop every flow that shares an
upstream queue with it, wherever that flow goes — PFC's local protection turned into
head-of-line blocking (Guo et al., "RDMA over Commodity Ethernet at Scale", SIGCOMM 2016;
NVIDIA's and Cisco's RoCE guides: PFC on the RoCE priority only). Run from this folder:
python3 make.py

The star of ../../topologies/star.py, with a second host on s1: h4 (10.0.1.2, s1's port 3).
Every port of every switch has PFC on priority 3 (DSCP 26, RDMA) and here on priority 0 too.
An incast of DSCP 0 traffic h1, h3 -> h2 congests s2's port 1: s2 pauses priority 0 of s1 and
s3, and h4's flow to h3, whose own ports are idle, waits behind h1's in s1's paused queue.

Priority 0's entries ask for pauses of 0xffff quanta (the most a PAUSE can ask, what NICs and
switches commonly send): the test paces every link to 8 Mb/s, a frame a millisecond, and the
RDMA profile's 977 quanta (500 µs at 1 Gb/s) would end before the next frame.

`fixed/` is the same fabric with PFC on priority 3 only: the incast's excess is dropped at s2's
queue toward h2, and nothing else waits. Everything else is the leaf/spine example's
(../../topologies/): 1 Gb/s links, priority 3 lossless and ECN-marked, CNPs (DSCP 48) in
priority 6.
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ among the fabrics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../topologies"))
from lossless_runtime import I, PFC, entry, write  # noqa: E402
from star import SWITCHES, switch, topology  # noqa: E402

EXTRA_HOSTS = {1: 1}
LOSSY_PFC = dict(PFC, quanta=0xFFFF)


def pfc_on_priority_0(entries):
    """`entries` with a priority-0 pfc_profile entry beside each port's RDMA one."""
    out = []
    for e in entries:
        out.append(e)
        if e["table"] == f"{I}.pfc_profile":
            match = dict(e["match"], **{"standard_metadata.priority": 0})
            out.append(entry(f"{I}.pfc_profile", f"{I}.lossless", LOSSY_PFC, match))
    return out


for folder, edit in [(".", pfc_on_priority_0), ("fixed", lambda e: e)]:
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "topology.json"), topology(EXTRA_HOSTS))
    for i in range(1, SWITCHES + 1):
        write(os.path.join(folder, f"s{i}-runtime.json"), switch(i, EXTRA_HOSTS, edit))
