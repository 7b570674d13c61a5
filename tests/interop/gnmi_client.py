"""A real gNMI client for the tests of the gNMI servers of `lossless agent` and softswitch:
pygnmi's (from PyPI) own generated gnmi_pb2 and stub decode what the server sends, and each value
is reported with the type its encoding gave it, so that an encoding regression shows.

    gnmi_client.py HOST PORT IFACE requests   Capabilities, Get, ONCE and POLL of the agent's
                                              paths; one JSON object
    gnmi_client.py HOST PORT IFACE get PATH.. Capabilities, then a Get (JSON) of each PATH: its
                                              leaves, or its error; one JSON object
    gnmi_client.py HOST PORT IFACE stream [PATH..]
                                              a STREAM subscription: SAMPLE of the interface's
                                              in-pkts, ON_CHANGE of each PATH (default: the
                                              agent's priority 3 PFC pauses); one JSON line per
                                              response, until killed
    gnmi_client.py HOST PORT IFACE refused    requests past the server's limits; their errors

Every call has a deadline (TIMEOUT), so a server that stops answering fails the client.

Over TLS when GNMI_CA names the CA file the server's certificate chains to, with the client
certificate GNMI_CERT and its key GNMI_KEY if set; a server the client cannot reach (a refused
handshake) prints {"unreachable": "..."}.
"""

import json
import os
import queue
import re
import sys

import grpc
from google.protobuf import json_format
from pygnmi.spec.v080 import gnmi_pb2
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub

HOST, PORT, IFACE, WHAT = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
IN_PKTS = f"/interfaces/interface[name={IFACE}]/state/counters/in-pkts"
PAUSES = f"lossless:/interfaces/interface[name={IFACE}]/pfc/priority[index=3]/state/pause-frames-received"
# Seconds any one call may take.
TIMEOUT = 10


def path(text):
    """A gnmi_pb2.Path of `[origin:]/elem[key=value]/...` (the test's paths have no escapes)."""
    origin, _, rest = text.rpartition(":/") if ":/" in text else ("", "", text.lstrip("/"))
    elems = []
    for part in filter(None, rest.split("/")):
        name, *keys = re.split(r"\[|\]", part)
        keys = dict(k.split("=", 1) for k in keys if k)
        elems.append(gnmi_pb2.PathElem(name=name, key=keys))
    return gnmi_pb2.Path(origin=origin, elem=elems)


def text(p):
    """A received path as the test names it: elements only, keys in brackets."""
    return "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in p.elem)


def value(typed):
    """A TypedValue as {"kind": its oneof field, "type": the JSON type of what it holds,
    "value": that}: RFC 7951 (json_ietf) must give a string for a uint64, plain json a number."""
    kind = typed.WhichOneof("value")
    held = getattr(typed, kind)
    if kind in ("json_ietf_val", "json_val"):
        held = json.loads(held)
    return {"kind": kind, "type": type(held).__name__, "value": held}


def leaves(notification):
    """{path: value()} of a notification's updates."""
    return {text(u.path): value(u.val) for u in notification.update}


def status(error):
    return {"code": error.code().name, "details": error.details()}


def subscribe_request(mode, encoding, subscriptions):
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            mode=mode, encoding=encoding, subscription=[gnmi_pb2.Subscription(**s) for s in subscriptions]
        )
    )


def requests(stub):
    capabilities = stub.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=TIMEOUT)
    out = {"capabilities": json_format.MessageToDict(capabilities, preserving_proto_field_name=True)}
    got = stub.Get(
        gnmi_pb2.GetRequest(
            path=[path(IN_PKTS), path(f"lossless:/interfaces/interface[name={IFACE}]/pfc")],
            encoding=gnmi_pb2.JSON,
        ),
        timeout=TIMEOUT,
    )
    out["get"] = [leaves(n) for n in got.notification]
    try:
        stub.Get(
            gnmi_pb2.GetRequest(path=[path("/interfaces/interface[name=no-such-interface]")], encoding=gnmi_pb2.JSON),
            timeout=TIMEOUT,
        )
        out["get_missing"] = "answered"
    except grpc.RpcError as error:
        out["get_missing"] = status(error)
    agent = stub.Get(
        gnmi_pb2.GetRequest(path=[path("lossless:/agent/interfaces")], encoding=gnmi_pb2.JSON), timeout=TIMEOUT
    )
    out["agent"] = leaves(agent.notification[0])
    for name, request in [
        ("bytes_encoding", gnmi_pb2.GetRequest(path=[path(IN_PKTS)], encoding=gnmi_pb2.BYTES)),
        ("unserved_origin", gnmi_pb2.GetRequest(path=[path("elsewhere:/interfaces")], encoding=gnmi_pb2.JSON)),
    ]:
        try:
            stub.Get(request, timeout=TIMEOUT)
            out[name] = "answered"
        except grpc.RpcError as error:
            out[name] = status(error)
    once = stub.Subscribe(
        iter([subscribe_request(gnmi_pb2.SubscriptionList.ONCE, gnmi_pb2.PROTO, [{"path": path(IN_PKTS)}])]),
        timeout=TIMEOUT,
    )
    out["once"] = []
    for response in once:
        if response.HasField("update"):
            out["once"].append(leaves(response.update))
        if response.sync_response:
            out["once"].append("sync_response")
            break
    once.cancel()
    # POLL: the SubscriptionList, then a Poll each time the previous answer has synced.
    sending = queue.Queue()
    sending.put(subscribe_request(gnmi_pb2.SubscriptionList.POLL, gnmi_pb2.JSON_IETF, [{"path": path(IN_PKTS)}]))
    poll = stub.Subscribe(iter(sending.get, None), timeout=TIMEOUT)
    out["poll"] = []
    answer = {}
    for response in poll:
        if response.HasField("update"):
            answer.update(leaves(response.update))
        if response.sync_response:
            out["poll"].append(answer)
            answer = {}
            if len(out["poll"]) == 3:
                break
            sending.put(gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()))
    sending.put(None)
    poll.cancel()
    return out


def get(stub, paths):
    capabilities = stub.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=TIMEOUT)
    out = {"capabilities": json_format.MessageToDict(capabilities, preserving_proto_field_name=True), "get": {}}
    for text_path in paths:
        try:
            got = stub.Get(gnmi_pb2.GetRequest(path=[path(text_path)], encoding=gnmi_pb2.JSON), timeout=TIMEOUT)
            found = {}
            for notification in got.notification:
                found.update(leaves(notification))
            out["get"][text_path] = found
        except grpc.RpcError as error:
            out["get"][text_path] = status(error)
    return out


def stream(stub, on_change):
    subscriptions = [{"path": path(IN_PKTS), "mode": gnmi_pb2.SAMPLE, "sample_interval": 200_000_000}]
    subscriptions += [{"path": path(p), "mode": gnmi_pb2.ON_CHANGE} for p in on_change or [PAUSES]]
    responses = stub.Subscribe(
        iter([subscribe_request(gnmi_pb2.SubscriptionList.STREAM, gnmi_pb2.JSON_IETF, subscriptions)])
    )
    for response in responses:
        if response.sync_response:
            print(json.dumps({"synced": True}), flush=True)
        else:
            print(json.dumps({"leaves": leaves(response.update)}), flush=True)


def refused(stub):
    """The status of each refused request."""
    errors = {}
    too_fast = {"path": path(IN_PKTS), "mode": gnmi_pb2.SAMPLE, "sample_interval": 1_000_000}
    too_many = [{"path": path(IN_PKTS), "mode": gnmi_pb2.SAMPLE}] * 65
    for name, subscriptions in [("too_fast", [too_fast]), ("too_many", too_many)]:
        request = subscribe_request(gnmi_pb2.SubscriptionList.STREAM, gnmi_pb2.JSON_IETF, subscriptions)
        try:
            next(stub.Subscribe(iter([request]), timeout=TIMEOUT))
            errors[name] = "answered"
        except grpc.RpcError as error:
            errors[name] = status(error)
    return errors


def open_channel():
    if "GNMI_CA" not in os.environ:
        return grpc.insecure_channel(f"{HOST}:{PORT}")

    def read(name):
        return open(os.environ[name], "rb").read() if os.environ.get(name) else None

    credentials = grpc.ssl_channel_credentials(read("GNMI_CA"), read("GNMI_KEY"), read("GNMI_CERT"))
    return grpc.secure_channel(f"{HOST}:{PORT}", credentials)


with open_channel() as channel:
    try:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
    except grpc.FutureTimeoutError:
        print(json.dumps({"unreachable": f"no connection within {TIMEOUT}s"}))
        sys.exit(0)
    stub = gNMIStub(channel)
    if WHAT == "requests":
        print(json.dumps(requests(stub)))
    elif WHAT == "get":
        print(json.dumps(get(stub, sys.argv[5:])))
    elif WHAT == "stream":
        stream(stub, sys.argv[5:])
    elif WHAT == "refused":
        print(json.dumps(refused(stub)))
    else:
        sys.exit(f"unknown request {WHAT}")
