"""The small fabric of the seeded misconfigurations shown on Mininet (../misconfigured/
dscp-mismatch/, pfc-on-lossy/): three switches in a star, switch Si's port 1 to host hi
(10.0.i.1). s2 is the hub: its port 2 goes to s1's port 2, its port 3 to s3's port 2. A fabric
may add hosts to an edge switch, on its ports from 3 up (10.0.i.2, ...).

Imported by those folders' `make.py`; run those, not this.
"""

from lossless_runtime import (LINK_MBPS, common, forward, host, host_mac, port_mac, route,
                              runtime)

SWITCHES = 3
HUB = 2
HOST_PORT = 1
# The hub's port to each edge switch, and each edge switch's port to the hub.
HUB_PORT = {1: 2, 3: 3}
EDGE_UPLINK = 2


def extra_port(h):
    """The edge switch port of its host number `h` (2, 3, ...): 3, 4, ..."""
    return h + 1


def switch(i, extra_hosts, edit):
    """Switch Si's runtime JSON, with `extra_hosts` more hosts if an edge switch; `edit` gets
    its entries (lossless_runtime's `common` and the routes) and returns those to write."""
    if i == HUB:
        ports = [HOST_PORT] + sorted(HUB_PORT.values())
        entries, sessions = common(ports, 0)
        entries += [route(f"10.0.{i}.1", 32, HOST_PORT),
                    forward(HOST_PORT, HOST_PORT, port_mac(i, HOST_PORT), host_mac(i, 1))]
        for edge, port in HUB_PORT.items():
            entries += [route(f"10.0.{edge}.0", 24, port),
                        forward(port, port, port_mac(i, port), port_mac(edge, EDGE_UPLINK))]
        return runtime(edit(entries), sessions)
    hosts = range(2, 2 + extra_hosts.get(i, 0))
    entries, sessions = common([HOST_PORT, EDGE_UPLINK] + [extra_port(h) for h in hosts], 0)
    entries += [route(f"10.0.{i}.1", 32, HOST_PORT),
                forward(HOST_PORT, HOST_PORT, port_mac(i, HOST_PORT), host_mac(i, 1)),
                forward(EDGE_UPLINK, EDGE_UPLINK, port_mac(i, EDGE_UPLINK),
                        port_mac(HUB, HUB_PORT[i]))]
    for h in hosts:
        p = extra_port(h)
        entries += [route(f"10.0.{i}.{h}", 32, p), forward(p, p, port_mac(i, p), host_mac(i, h))]
    entries += [route(f"10.0.{j}.0", 24, EDGE_UPLINK)
                for j in range(1, SWITCHES + 1) if j != i]
    return runtime(edit(entries), sessions)


def topology(extra_hosts):
    """The topology JSON; `extra_hosts` maps an edge switch to its number of hosts beyond hi,
    named on from h4."""
    hosts = {f"h{i}": host(i, 1, port_mac(i, HOST_PORT)) for i in range(1, SWITCHES + 1)}
    links = [[f"h{i}", f"s{i}-p{HOST_PORT}", "0ms", LINK_MBPS] for i in range(1, SWITCHES + 1)]
    n = SWITCHES
    for i, count in sorted(extra_hosts.items()):
        for h in range(2, 2 + count):
            n += 1
            hosts[f"h{n}"] = host(i, h, port_mac(i, extra_port(h)))
            links.append([f"h{n}", f"s{i}-p{extra_port(h)}", "0ms", LINK_MBPS])
    links += [[f"s{edge}-p{EDGE_UPLINK}", f"s{HUB}-p{port}", "0ms", LINK_MBPS]
              for edge, port in HUB_PORT.items()]
    switches = {f"s{i}": {"runtime_json": f"s{i}-runtime.json"} for i in range(1, SWITCHES + 1)}
    return {"hosts": hosts, "switches": switches, "links": links}
