"""An independent P4Runtime client: the official `p4runtime` Python bindings and gRPC drive a
P4Runtime server (softswitch) through arbitration, a pipeline push, a table write read back,
a PacketOut and a counter read. Exits non-zero with a message on the first mismatch.

usage: p4runtime_client.py ADDRESS DEVICE_ID PROGRAM.p4 PROGRAM.p4info.bin
(the P4Info, binary, is decoded here by protobuf's own parser; the text-format parser of these
old generated bindings cannot read map fields such as type_info's)."""

import queue
import sys
import threading
import time

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

ELECTION_ID = p4runtime_pb2.Uint128(high=0, low=1)


def fail(message):
    sys.exit(f"interop: {message}")


def by_name(entities, name):
    for e in entities:
        if e.preamble.name == name or e.preamble.alias == name:
            return e
    fail(f"no {name} in the P4Info")


def main():
    address, device_id, program, p4info_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    p4info = p4info_pb2.P4Info()
    with open(p4info_path, "rb") as f:
        p4info.ParseFromString(f.read())
    channel = grpc.insecure_channel(address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    # Arbitration: become primary.
    requests = queue.Queue()
    requests.put(p4runtime_pb2.StreamMessageRequest(
        arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=device_id, election_id=ELECTION_ID)))
    responses = stub.StreamChannel(iter(requests.get, None))
    first = next(responses)
    if not first.HasField("arbitration") or first.arbitration.status.code != 0:
        fail(f"expected to be primary, got {first}")
    print("interop: primary", flush=True)

    # Push the pipeline: the device config is the P4 source.
    with open(program, "rb") as f:
        source = f.read()
    config = p4runtime_pb2.ForwardingPipelineConfig(p4info=p4info, p4_device_config=source)
    config.cookie.cookie = 7
    stub.SetForwardingPipelineConfig(p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=device_id, election_id=ELECTION_ID, config=config,
        action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))
    got = stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(
        device_id=device_id, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY))
    if got.config.cookie.cookie != 7:
        fail(f"cookie not kept: {got}")
    print("interop: pipeline set", flush=True)

    # Write a route and read it back.
    table = by_name(p4info.tables, "MyIngress.route")
    action = by_name(p4info.actions, "MyIngress.forward")
    entry = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
    match = entry.match.add()
    match.field_id = table.match_fields[0].id
    match.lpm.value = bytes([10, 0, 0, 0])
    match.lpm.prefix_len = 8
    entry.action.action.action_id = action.preamble.id
    param = entry.action.action.params.add()
    param.param_id = action.params[0].id
    param.value = bytes([2])
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    update.entity.table_entry.CopyFrom(entry)
    stub.Write(p4runtime_pb2.WriteRequest(device_id=device_id, election_id=ELECTION_ID, updates=[update]))
    read = p4runtime_pb2.ReadRequest(device_id=device_id)
    read.entities.add().table_entry.table_id = table.preamble.id
    entities = [e for r in stub.Read(read) for e in r.entities]
    if len(entities) != 1 or entities[0].table_entry != entry:
        fail(f"read back {entities}, wrote {entry}")
    print("interop: entry read back", flush=True)

    # A duplicate is refused with per-update details, as the specification says.
    try:
        stub.Write(p4runtime_pb2.WriteRequest(device_id=device_id, election_id=ELECTION_ID, updates=[update]))
        fail("a duplicate insert was accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.UNKNOWN:
            fail(f"a failed batch should be UNKNOWN, got {e.code()}")

    # A PacketOut enters at the CPU port, whose cell of port_counter counts it.
    out = p4runtime_pb2.PacketOut(payload=bytes(60))
    packet_out = by_name(p4info.controller_packet_metadata, "packet_out")
    for m in packet_out.metadata:
        out.metadata.add(metadata_id=m.id, value=bytes([1]))
    requests.put(p4runtime_pb2.StreamMessageRequest(packet=out))
    counter = by_name(p4info.counters, "MyIngress.port_counter")
    read = p4runtime_pb2.ReadRequest(device_id=device_id)
    cell = read.entities.add().counter_entry
    cell.counter_id = counter.preamble.id
    cell.index.index = 255
    deadline = time.monotonic() + 10
    while True:
        entities = [e for r in stub.Read(read) for e in r.entities]
        data = entities[0].counter_entry.data
        if data.packet_count == 1 and data.byte_count == 62:
            break
        if time.monotonic() > deadline:
            fail(f"the counter never counted the PacketOut: {entities}")
        time.sleep(0.01)
    print("interop: counter read", flush=True)
    requests.put(None)
    channel.close()
    print("interop: ok", flush=True)


if __name__ == "__main__":
    main()
