"""`python3 -m lossless_mininet PLAN.json`: the Mininet half of `lossless net up`. Builds the
network the plan describes (computed by the Rust control plane), starts it, tells the control
plane it is up (status.json beside the plan, then `ready` on the sync pipe), waits for the
switches to be programmed, then opens the Mininet CLI or waits to be told to stop; tears the
network down on the way out, whatever ends it (stop, EOF, SIGINT, SIGTERM, an error).
"""

import json
import os
import signal
import sys

from mininet.cli import CLI
from mininet.link import Link, TCLink
from mininet.log import error, info, setLogLevel
from mininet.net import Mininet

from .nodes import Bmv2GrpcSwitch, LosslessHost, SoftswitchP4Switch

SWITCH_CLASSES = {"softswitch": SoftswitchP4Switch, "bmv2": Bmv2GrpcSwitch}


class Sync:
    """The pipe pair to the control plane: lines out (ready, tested), lines in (programmed,
    stop). EOF in means stop."""

    def __init__(self, fds):
        read_fd, write_fd = (int(fd) for fd in fds.split(","))
        self.incoming = os.fdopen(read_fd, "r")
        self.outgoing = os.fdopen(write_fd, "w")

    def say(self, line):
        self.outgoing.write(line + "\n")
        self.outgoing.flush()

    def hear(self):
        return self.incoming.readline().strip()


def build(plan):
    """The Mininet network of the plan, built and not started."""
    net = Mininet(controller=None, build=False, autoSetMacs=False, inNamespace=False)
    for host in plan["hosts"]:
        params = dict(ip=host["ip"], mac=host["mac"], lossless=plan["lossless"])
        if host.get("gateway"):
            params["defaultRoute"] = "via %s" % host["gateway"]
        net.addHost(host["name"], cls=LosslessHost, **params)
    for switch in plan["switches"]:
        net.addSwitch(switch["name"], cls=SWITCH_CLASSES[switch["kind"]],
                      sw_path=switch["sw_path"], grpc_port=switch["grpc_port"],
                      device_id=switch["device_id"], env=switch.get("env", {}),
                      log_dir=plan["dir"], log_console=switch.get("log_console", False),
                      pcap_dump=switch.get("pcap_dump", False), json_path=switch.get("json_path"))
    for link in plan["links"]:
        params = dict(port1=link["port1"], port2=link["port2"],
                      addr1=link.get("addr1"), addr2=link.get("addr2"))
        cls = Link
        if link.get("bw") is not None:
            cls = TCLink
            params["bw"] = link["bw"]
        net.addLink(link["node1"], link["node2"], cls=cls, **params)
    net.build()
    return net


def configure_hosts(net, plan):
    """Static neighbours and the topology's own host commands, then the eBPF hooks."""
    for spec in plan["hosts"]:
        host = net.get(spec["name"])
        for ip, mac in spec.get("neighbours", []):
            host.cmd("ip neigh replace %s lladdr %s dev eth0 nud permanent" % (ip, mac))
        for command in spec.get("commands", []):
            out = host.cmd(command + "; echo lossless-status=$?")
            if "lossless-status=0" not in out:
                raise RuntimeError("%s: `%s` failed: %s" % (spec["name"], command, out))
        if plan.get("host_hooks"):
            host.attach_hooks(plan["host_hooks"])


def status(net, plan):
    """What `lossless net status` shows: nodes with their pids and interfaces, switches with
    their gRPC addresses, device ids (and BMv2's Thrift ports), links."""
    nodes = []
    for node in net.hosts + net.switches:
        kind = "switch" if node in net.switches else "host"
        pid = node.process.pid if kind == "switch" else node.pid
        intfs = [dict(name=i.name, port=node.ports[i], mac=i.MAC(), ip=i.IP())
                 for i in node.intfList() if i.name != "lo"]
        entry = dict(name=node.name, kind=kind, pid=pid, shell_pid=node.pid, intfs=intfs)
        if kind == "switch":
            entry.update(grpc=node.grpc_address, device_id=node.device_id, log=node.log_file)
            if node.thrift_port is not None:
                entry["thrift_port"] = int(node.thrift_port)
        nodes.append(entry)
    links = [[l.intf1.name, l.intf2.name] for l in net.links]
    return dict(name=plan["name"], nodes=nodes, links=links)


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2)
    os.rename(tmp, path)


def terminate(signum, frame):
    raise SystemExit(128 + signum)


def main():
    plan_path = sys.argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    setLogLevel(plan.get("log_level", "info"))
    sync = Sync(os.environ["LOSSLESS_NET_SYNC"])
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    net = None
    code = 0
    try:
        net = build(plan)
        net.start()
        configure_hosts(net, plan)
        write_json(os.path.join(plan["dir"], "status.json"), status(net, plan))
        sync.say("ready")
        answer = sync.hear()
        if answer != "programmed":
            raise RuntimeError("the control plane did not program the switches: %s"
                               % (answer or "it went away"))
        if plan.get("test") == "pingall":
            loss = net.pingAll(timeout=2)
            sync.say("tested %s" % loss)
            code = 0 if loss == 0 else 1
        if plan.get("interactive"):
            CLI(net)
        else:
            while sync.hear() not in ("stop", ""):
                pass
    except (KeyboardInterrupt, SystemExit) as stop:
        info("\n*** Stopping (%s)\n" % (type(stop).__name__))
        code = 130
    except Exception as e:  # pylint: disable=broad-except
        error("*** %s\n" % e)
        code = 1
    finally:
        # Ignore further signals: a second Ctrl-C must not leave the teardown half done.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if net is not None:
            for host in net.hosts:
                try:
                    host.detach_hooks()
                except Exception as e:  # pylint: disable=broad-except
                    error("*** %s\n" % e)
                    code = code or 1
            net.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
