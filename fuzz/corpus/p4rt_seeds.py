"""Writes the seed corpus of the P4Runtime fuzz targets (p4rt_write/, p4rt_set_pipeline/) with
the official P4Runtime Python bindings, for softswitch's server test program switch.p4:

  target/debug/softswitch p4info --format binary softswitch/tests/server/switch.p4 > /tmp/switch.p4info.bin
  PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python .venv/bin/python fuzz/corpus/p4rt_seeds.py /tmp/switch.p4info.bin

The seeds are committed; rerun this only to change them."""

import pathlib
import sys

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent


def by_name(entities, name):
    return next(e for e in entities if e.preamble.name == name)


def main():
    info = p4info_pb2.P4Info()
    info.ParseFromString(pathlib.Path(sys.argv[1]).read_bytes())
    route = by_name(info.tables, "MyIngress.route")
    acl = by_name(info.tables, "MyIngress.acl")
    forward = by_name(info.actions, "MyIngress.forward")
    drop = by_name(info.actions, "MyIngress.drop")
    counter = by_name(info.counters, "MyIngress.port_counter")
    register = by_name(info.registers, "MyIngress.last_length")

    def update(kind, **entity):
        u = p4runtime_pb2.Update(type=kind)
        for field, value in entity.items():
            getattr(u.entity, field).CopyFrom(value)
        return u

    entry = p4runtime_pb2.TableEntry(table_id=route.preamble.id)
    m = entry.match.add(field_id=route.match_fields[0].id)
    m.lpm.value, m.lpm.prefix_len = bytes([10, 0, 1, 0]), 24
    entry.action.action.action_id = forward.preamble.id
    entry.action.action.params.add(param_id=forward.params[0].id, value=b"\x01")
    default = p4runtime_pb2.TableEntry(table_id=route.preamble.id, is_default_action=True)
    default.action.action.action_id = drop.preamble.id
    rule = p4runtime_pb2.TableEntry(table_id=acl.preamble.id, priority=10)
    t = rule.match.add(field_id=acl.match_fields[0].id)
    t.ternary.value, t.ternary.mask = bytes([10, 0, 0, 0]), bytes([255, 0, 0, 0])
    r = rule.match.add(field_id=acl.match_fields[1].id)
    r.range.low, r.range.high = b"\x06", b"\x11"
    rule.action.action.action_id = drop.preamble.id
    cell = p4runtime_pb2.CounterEntry(counter_id=counter.preamble.id)
    cell.index.index = 3
    cell.data.packet_count, cell.data.byte_count = 5, 500
    reg = p4runtime_pb2.RegisterEntry(register_id=register.preamble.id)
    reg.index.index = 2
    reg.data.bitstring = b"\x00\x00\x05\xdc"
    group = p4runtime_pb2.PacketReplicationEngineEntry()
    group.multicast_group_entry.multicast_group_id = 1
    group.multicast_group_entry.replicas.add(egress_port=1, instance=1)
    group.multicast_group_entry.replicas.add(egress_port=2, instance=1)
    session = p4runtime_pb2.PacketReplicationEngineEntry()
    session.clone_session_entry.session_id = 5
    session.clone_session_entry.replicas.add(egress_port=3, instance=1)

    good = p4runtime_pb2.WriteRequest(device_id=1, updates=[
        update(p4runtime_pb2.Update.INSERT, table_entry=entry),
        update(p4runtime_pb2.Update.MODIFY, table_entry=default),
        update(p4runtime_pb2.Update.INSERT, table_entry=rule),
        update(p4runtime_pb2.Update.MODIFY, counter_entry=cell),
        update(p4runtime_pb2.Update.MODIFY, register_entry=reg),
        update(p4runtime_pb2.Update.INSERT, packet_replication_engine_entry=group),
        update(p4runtime_pb2.Update.INSERT, packet_replication_engine_entry=session),
        update(p4runtime_pb2.Update.DELETE, table_entry=entry),
    ])
    bad_entry = p4runtime_pb2.TableEntry()
    bad_entry.CopyFrom(entry)
    bad_entry.match[0].lpm.value = bytes([10, 0, 1, 1])
    bad_entry.match[0].lpm.prefix_len = 40
    bad = p4runtime_pb2.WriteRequest(device_id=1, updates=[
        update(p4runtime_pb2.Update.INSERT, table_entry=bad_entry),
        update(p4runtime_pb2.Update.INSERT, table_entry=entry),
        update(p4runtime_pb2.Update.INSERT, table_entry=entry),
        update(p4runtime_pb2.Update.UNSPECIFIED, register_entry=reg),
    ])
    (HERE / "p4rt_write" / "entities.bin").write_bytes(good.SerializeToString())
    (HERE / "p4rt_write" / "refused.bin").write_bytes(bad.SerializeToString())

    source = (ROOT / "softswitch/tests/server/switch.p4").read_bytes()
    config = p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=source)
    config.cookie.cookie = 7
    verify = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=1, config=config,
        action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    (HERE / "p4rt_set_pipeline" / "switch.bin").write_bytes(verify.SerializeToString())
    other = p4runtime_pb2.SetForwardingPipelineConfigRequest()
    other.CopyFrom(verify)
    other.config.p4_device_config = (HERE / "frontend" / "minimal.p4").read_bytes()
    (HERE / "p4rt_set_pipeline" / "other_program.bin").write_bytes(other.SerializeToString())


if __name__ == "__main__":
    main()
