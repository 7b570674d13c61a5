"""An independent P4Runtime client: the official `p4runtime` Python bindings and gRPC drive a
P4Runtime server (softswitch) through arbitration (a primary and a refused backup), a pipeline
push, a table write read back (by table and by wildcard), per-update errors decoded from the
status details (also of batches too large for every error to fit gRPC's default metadata
limit), a PacketOut and counter reads (one cell, every cell). Exits non-zero with a
message on the first mismatch.

usage: p4runtime_client.py ADDRESS DEVICE_ID PROGRAM.p4 PROGRAM.p4info.bin
(the P4Info, binary, is decoded here by protobuf's own parser; the text-format parser of these
old generated bindings cannot read map fields such as type_info's)."""

import queue
import sys
import threading
import time

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

ELECTION_ID = p4runtime_pb2.Uint128(high=0, low=10)
BACKUP_ELECTION_ID = p4runtime_pb2.Uint128(high=0, low=5)


def fail(message):
    sys.exit(f"interop: {message}")


def by_name(entities, name):
    for e in entities:
        if e.preamble.name == name or e.preamble.alias == name:
            return e
    fail(f"no {name} in the P4Info")


def open_stream(stub, device_id, election_id):
    """A StreamChannel that has sent its arbitration; returns (requests, responses)."""
    requests = queue.Queue()
    requests.put(p4runtime_pb2.StreamMessageRequest(
        arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=device_id, election_id=election_id)))
    return requests, stub.StreamChannel(iter(requests.get, None))


def update_errors(error):
    """The p4.v1.Error of each update of a failed Write, from the google.rpc.Status details."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for detail in status.details:
                e = p4runtime_pb2.Error()
                if not detail.Unpack(e):
                    fail(f"a detail is not a p4.v1.Error: {detail}")
                errors.append(e)
            return errors
    fail(f"the status carries no details: {error}")


def main():
    address, device_id, program, p4info_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    p4info = p4info_pb2.P4Info()
    with open(p4info_path, "rb") as f:
        p4info.ParseFromString(f.read())
    channel = grpc.insecure_channel(address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    # Arbitration: become primary; a second client with a lower election id is a backup.
    requests, responses = open_stream(stub, device_id, ELECTION_ID)
    first = next(responses)
    if not first.HasField("arbitration") or first.arbitration.status.code != code_pb2.OK:
        fail(f"expected to be primary, got {first}")
    backup_requests, backup_responses = open_stream(stub, device_id, BACKUP_ELECTION_ID)
    told = next(backup_responses)
    if (not told.HasField("arbitration") or told.arbitration.status.code != code_pb2.ALREADY_EXISTS
            or told.arbitration.election_id != ELECTION_ID):
        fail(f"a backup should be told ALREADY_EXISTS with the primary's id, got {told}")
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

    # A backup may not set the pipeline.
    try:
        stub.SetForwardingPipelineConfig(p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=device_id, election_id=BACKUP_ELECTION_ID, config=config,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))
        fail("a backup set the pipeline")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.PERMISSION_DENIED:
            fail(f"a backup's SetForwardingPipelineConfig should be PERMISSION_DENIED, got {e.code()}")
    backup_requests.put(None)

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
    wildcard = p4runtime_pb2.ReadRequest(device_id=device_id)
    wildcard.entities.add().table_entry.SetInParent()
    entities = [e for r in stub.Read(wildcard) for e in r.entities]
    if [e.table_entry for e in entities] != [entry]:
        fail(f"a wildcard read (table_id 0) gave {entities}, wrote {entry}")
    print("interop: entry read back", flush=True)

    # A batch with a duplicate and a malformed entry (bits set past the prefix) is UNKNOWN with one
    # p4.v1.Error per update, OK for the update that was applied, as the specification says.
    other = p4runtime_pb2.Update()
    other.CopyFrom(update)
    other.entity.table_entry.match[0].lpm.value = bytes([11, 0, 0, 0])
    bad = p4runtime_pb2.Update()
    bad.CopyFrom(update)
    bad.entity.table_entry.match[0].lpm.value = bytes([12, 0, 0, 1])
    try:
        stub.Write(p4runtime_pb2.WriteRequest(
            device_id=device_id, election_id=ELECTION_ID, updates=[update, other, bad]))
        fail("a duplicate insert was accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.UNKNOWN:
            fail(f"a failed batch should be UNKNOWN, got {e.code()}")
        codes = [err.canonical_code for err in update_errors(e)]
        if codes != [code_pb2.ALREADY_EXISTS, code_pb2.OK, code_pb2.INVALID_ARGUMENT]:
            fail(f"per-update codes {codes}")
    print("interop: per-update errors", flush=True)

    # Large failed batches stay within what grpcio accepts by default (8 KiB of trailers): 124
    # updates (softswitch's REPORTED_UPDATES) each get their p4.v1.Error; 500 get UNKNOWN with
    # the errors of the first ones, not RESOURCE_EXHAUSTED with none.
    for count in (124, 500):
        try:
            stub.Write(p4runtime_pb2.WriteRequest(
                device_id=device_id, election_id=ELECTION_ID, updates=[bad] * count))
            fail("a batch of malformed entries was accepted")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNKNOWN:
                fail(f"a failed batch of {count} should be UNKNOWN, got {e.code()}: {e.details()}")
            errors = update_errors(e)
            if count == 124 and len(errors) != 124:
                fail(f"a batch of 124 got {len(errors)} errors")
            if not 124 <= len(errors) <= count or any(
                    err.canonical_code != code_pb2.INVALID_ARGUMENT for err in errors):
                fail(f"a batch of {count} got {len(errors)} errors: {errors[:3]}")
            if count == 500 and f"the first failure past them is number {len(errors) + 1}" not in e.details():
                fail(f"the status does not say where the unreported failures are: {e.details()}")
    print("interop: large failed batches", flush=True)

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
    every = p4runtime_pb2.ReadRequest(device_id=device_id)
    every.entities.add().counter_entry.counter_id = counter.preamble.id
    cells = [e.counter_entry for r in stub.Read(every) for e in r.entities]
    if len(cells) != counter.size or sum(c.data.packet_count for c in cells) != 1:
        fail(f"reading every cell of {counter.size} gave {len(cells)} cells")
    print("interop: counter read", flush=True)
    requests.put(None)
    channel.close()
    print("interop: ok", flush=True)


if __name__ == "__main__":
    main()
