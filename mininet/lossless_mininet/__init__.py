"""Mininet node classes for lossless: P4 switches (softswitch, BMv2's simple_switch_grpc) and
hosts that carry lossless's eBPF hooks. `lossless net up` drives them; they work as well in a
Mininet script of one's own (PYTHONPATH=mininet, Debian's /usr/bin/python3).
"""

from .nodes import Bmv2GrpcSwitch, LosslessHost, P4RuntimeSwitch, SoftswitchP4Switch

__all__ = ["Bmv2GrpcSwitch", "LosslessHost", "P4RuntimeSwitch", "SoftswitchP4Switch"]
