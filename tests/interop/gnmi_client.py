"""A real gNMI client (pygnmi, from PyPI) for the tests of `lossless agent`'s and softswitch's
gNMI servers: its own generated gnmi_pb2 decodes what they send.

    gnmi_client.py HOST PORT IFACE requests   Capabilities, Get, ONCE and POLL; one JSON object
    gnmi_client.py HOST PORT IFACE stream     a STREAM subscription (SAMPLE of the interface's
                                              in-pkts, ON_CHANGE of its priority 3 PFC pauses);
                                              one JSON line per response, until killed
    gnmi_client.py HOST PORT IFACE refused    requests past the server's limits; their errors
"""

import json
import sys

import grpc
from pygnmi.client import gNMIclient
from pygnmi.spec.v080.gnmi_pb2_grpc import gNMIStub

HOST, PORT, IFACE, WHAT = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
IN_PKTS = f"/interfaces/interface[name={IFACE}]/state/counters/in-pkts"
PAUSES = f"lossless:/interfaces/interface[name={IFACE}]/pfc/priority[index=3]/state/pause-frames-received"


def leaves(notification):
    """{path: value} of a parsed notification's updates, values as integers."""
    return {u["path"]: int(u["val"]) for u in notification.get("update", {}).get("update", [])}


def requests(client):
    out = {"capabilities": client.capabilities()}
    got = client.get(path=[IN_PKTS, f"lossless:/interfaces/interface[name={IFACE}]/pfc"], encoding="json")
    out["get"] = [leaves({"update": n}) for n in got["notification"]]
    try:
        client.get(path=["/interfaces/interface[name=no-such-interface]"], encoding="json")
        out["get_missing"] = "answered"
    except Exception as error:  # pygnmi wraps the gRPC status
        out["get_missing"] = str(error)
    once = client.subscribe2(
        subscribe={"mode": "once", "encoding": "proto", "subscription": [{"path": IN_PKTS}]}
    )
    out["once"] = []
    for response in once:
        out["once"].append(response)
        if "sync_response" in response:
            break
    poll = client.subscribe2(
        subscribe={"mode": "poll", "encoding": "json_ietf", "subscription": [{"path": IN_PKTS}]}
    )
    out["poll"] = [leaves(poll.get_update(timeout=10)) for _ in range(3)]
    poll.close()
    return out


def stream(client):
    subscription = client.subscribe2(
        subscribe={
            "mode": "stream",
            "encoding": "json_ietf",
            "subscription": [
                {"path": IN_PKTS, "mode": "sample", "sample_interval": 200_000_000},
                {"path": PAUSES, "mode": "on_change"},
            ],
        }
    )
    first = True
    for response in subscription:
        line = {"leaves": leaves(response)}
        if first:
            line["synced"] = "sync_response" in response
            first = False
        print(json.dumps(line), flush=True)


def refused(client):
    """The status of each refused request, through pygnmi's stub (its subscriber threads keep
    an error to themselves)."""
    stub = gNMIStub(grpc.insecure_channel(f"{HOST}:{PORT}"))
    errors = {}
    too_fast = {"path": IN_PKTS, "mode": "sample", "sample_interval": 1_000_000}
    too_many = [{"path": IN_PKTS, "mode": "sample"}] * 65
    for name, subscription in [("too_fast", [too_fast]), ("too_many", too_many)]:
        request = client._build_subscriptionrequest({"mode": "stream", "subscription": subscription})
        try:
            next(stub.Subscribe(iter([request]), timeout=10))
            errors[name] = "answered"
        except grpc.RpcError as error:
            errors[name] = f"{error.code().name}: {error.details()}"
    return errors


with gNMIclient(target=(HOST, PORT), insecure=True) as client:
    if WHAT == "requests":
        print(json.dumps(requests(client)))
    elif WHAT == "stream":
        stream(client)
    elif WHAT == "refused":
        print(json.dumps(refused(client)))
    else:
        sys.exit(f"unknown request {WHAT}")
