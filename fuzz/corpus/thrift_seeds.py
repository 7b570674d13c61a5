"""Writes the seed corpus of the Thrift fuzz target (thrift_calls/): the bytes BMv2's own
Python clients (the `bm_runtime` and `sswitch_runtime` packages simple_switch_CLI imports, from
a BMv2 build's lib/python) send for a session of calls against softswitch's server test
program switch.p4, one file per session:

  PYTHONPATH=$LOSSLESS_P4REF/lib/python /usr/bin/python3 fuzz/corpus/thrift_seeds.py

The seeds are committed; rerun this only to change them."""

import pathlib

from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TTransport

from bm_runtime.simple_pre_lag import SimplePreLAG
from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import (BmAddEntryOptions, BmCounterValue, BmMatchParam,
                                        BmMatchParamLPM, BmMatchParamExact, BmMatchParamType,
                                        BmMeterRateConfig)
from sswitch_runtime import SimpleSwitch
from sswitch_runtime.ttypes import MirroringSessionConfig

HERE = pathlib.Path(__file__).parent / "thrift_calls"


def session(name, calls):
    """Writes the calls `calls` makes on the three clients as seed `name`."""
    buffer = TTransport.TMemoryBuffer()
    protocol = TBinaryProtocol.TBinaryProtocol(buffer)
    clients = {
        service: cls.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, service))
        for service, cls in [("standard", Standard), ("simple_pre_lag", SimplePreLAG),
                             ("simple_switch", SimpleSwitch)]
    }
    for service, method, args in calls:
        # send_X writes the call without waiting for an answer.
        getattr(clients[service], "send_" + method)(*args)
    HERE.mkdir(exist_ok=True)
    (HERE / name).write_bytes(buffer.getvalue())


def lpm(value, length):
    return BmMatchParam(type=BmMatchParamType.LPM, lpm=BmMatchParamLPM(key=value,
                                                                        prefix_length=length))


def main():
    session("config", [("standard", "bm_get_config_md5", []),
                       ("standard", "bm_get_config", []),
                       ("standard", "bm_mgmt_get_info", []),
                       ("standard", "bm_dev_mgr_show_ports", [])])
    session("tables", [
        ("standard", "bm_mt_add_entry", [0, "MyIngress.route", [lpm(b"\x0a\x00\x00\x00", 8)],
                                         "MyIngress.forward", [b"\x00\x02"],
                                         BmAddEntryOptions()]),
        ("standard", "bm_mt_get_entries", [0, "MyIngress.route"]),
        ("standard", "bm_mt_get_default_entry", [0, "MyIngress.route"]),
        ("standard", "bm_mt_modify_entry", [0, "MyIngress.route", 0, "MyIngress.drop", []]),
        ("standard", "bm_mt_read_counter", [0, "MyIngress.route", 0]),
        ("standard", "bm_mt_set_default_action", [0, "MyIngress.smac", "MyIngress.set_tos",
                                                  [b"\x07"]]),
        ("standard", "bm_mt_add_entry", [0, "MyIngress.smac",
                                         [BmMatchParam(type=BmMatchParamType.EXACT,
                                                       exact=BmMatchParamExact(key=b"\x00" * 6))],
                                         "NoAction", [], BmAddEntryOptions()]),
        ("standard", "bm_mt_get_num_entries", [0, "MyIngress.smac"]),
        ("standard", "bm_mt_delete_entry", [0, "MyIngress.route", 0]),
        ("standard", "bm_mt_clear_entries", [0, "MyIngress.smac", True]),
    ])
    session("cells", [
        ("standard", "bm_counter_read", [0, "MyIngress.port_counter", 1]),
        ("standard", "bm_counter_write", [0, "MyIngress.port_counter", 1,
                                          BmCounterValue(bytes=100, packets=2)]),
        ("standard", "bm_counter_reset_all", [0, "MyIngress.port_counter"]),
        ("standard", "bm_register_write", [0, "MyIngress.last_length", 3, 42]),
        ("standard", "bm_register_read", [0, "MyIngress.last_length", 3]),
        ("standard", "bm_register_read_all", [0, "MyIngress.last_length"]),
        ("standard", "bm_register_write_range", [0, "MyIngress.last_length", 1, 4, 7]),
        ("standard", "bm_register_reset", [0, "MyIngress.last_length"]),
        ("standard", "bm_meter_set_rates", [0, "nothing", 0,
                                            [BmMeterRateConfig(units_per_micros=0.5,
                                                               burst_size=10)] * 2]),
        ("standard", "bm_reset_state", []),
    ])
    session("pre_and_mirroring", [
        ("simple_pre_lag", "bm_mc_mgrp_create", [0, 1]),
        ("simple_pre_lag", "bm_mc_node_create", [0, 0, "1010", ""]),
        ("simple_pre_lag", "bm_mc_node_associate", [0, 1, 0]),
        ("simple_pre_lag", "bm_mc_get_entries", [0]),
        ("simple_pre_lag", "bm_mc_node_dissociate", [0, 1, 0]),
        ("simple_pre_lag", "bm_mc_node_destroy", [0, 0]),
        ("simple_pre_lag", "bm_mc_mgrp_destroy", [0, 1]),
        ("simple_switch", "mirroring_session_add", [5, MirroringSessionConfig(port=3)]),
        ("simple_switch", "mirroring_session_get", [5]),
        ("simple_switch", "mirroring_session_delete", [5]),
        ("simple_switch", "set_egress_priority_queue_depth", [2, 3, 16]),
        ("simple_switch", "set_all_egress_queue_rates", [1000]),
        ("simple_switch", "get_time_elapsed_us", []),
    ])


if __name__ == "__main__":
    main()
