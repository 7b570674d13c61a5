"""`python3 -m lossless_mininet PLAN.json`: the Mininet half of `lossless net up`. Builds the
network the plan describes (computed by the Rust control plane), recording every process it
starts as it starts it (processes.json beside the plan), starts it, runs the hosts' commands,
tells the control plane it is up (status.json, then `ready` on the sync pipe), waits for the
switches to be programmed, then opens the Mininet CLI or waits to be told to stop; tears the
network down on the way out, whatever ends it (stop, EOF, SIGINT, SIGTERM, an error), and with
it everything still running in the hosts.
"""

import json
import os
import signal
import sys

from mininet.cli import CLI
from mininet.link import Link, TCLink
from mininet.log import error, info, setLogLevel
from mininet.net import Mininet

from .nodes import Bmv2GrpcSwitch, LosslessHost, SoftswitchP4Switch, kill_in_namespace, started

SWITCH_CLASSES = {"softswitch": SoftswitchP4Switch, "bmv2": Bmv2GrpcSwitch}

# Set once the teardown has begun: a signal then no longer interrupts it.
STOPPING = False


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


class Recorder:
    """processes.json: every process the glue started (host shells, switches, captures), with
    its start time, rewritten whole as each starts, so that `lossless net down` finds them
    however the glue ends."""

    def __init__(self, path):
        self.path = path
        self.records = []

    def __call__(self, node, role, pid):
        self.records.append(dict(node=node, role=role, pid=pid, started=started(pid)))
        write_json(self.path, self.records)


def build(net, plan, record):
    """Builds the plan's network into `net` (a new Mininet), without starting it."""
    for host in plan["hosts"]:
        params = dict(ip=host["ip"], mac=host["mac"], lossless=plan["lossless"])
        if host.get("gateway"):
            params["defaultRoute"] = "via %s" % host["gateway"]
        node = net.addHost(host["name"], cls=LosslessHost, **params)
        record(host["name"], "host", node.pid)
    for switch in plan["switches"]:
        net.addSwitch(switch["name"], cls=SWITCH_CLASSES[switch["kind"]],
                      sw_path=switch["sw_path"], grpc_port=switch["grpc_port"],
                      thrift_port=switch["thrift_port"], device_id=switch["device_id"],
                      cpu_port=switch.get("cpu_port"), env=switch.get("env", {}),
                      log_dir=plan["dir"], log_console=switch.get("log_console", False),
                      pcap_dump=switch.get("pcap_dump", False), json_path=switch.get("json_path"),
                      record=record)
    for link in plan["links"]:
        params = dict(port1=link["port1"], port2=link["port2"])
        cls = Link
        if link.get("bw") is not None:
            cls = TCLink
            params["bw"] = link["bw"]
        addrs = (link.get("addr1"), link.get("addr2"))
        # Mininet 2.3.0 writes `address None` for a missing end when one is given: give both
        # or neither, and set a lone one on its interface afterwards.
        if None not in addrs:
            params.update(addr1=addrs[0], addr2=addrs[1])
        made = net.addLink(link["node1"], link["node2"], cls=cls, **params)
        if None in addrs:
            for intf, addr in ((made.intf1, addrs[0]), (made.intf2, addrs[1])):
                if addr is not None:
                    intf.setMAC(addr)
    net.build()


def configure_hosts(net, plan):
    """Static neighbours and the topology's own host commands, then the eBPF hooks. A command
    that fails or does not finish within the plan's timeout is logged and the network goes
    on, as Mininet goes on; our own neighbour entries must succeed."""
    timeout = plan.get("command_timeout", 30)
    for spec in plan["hosts"]:
        host = net.get(spec["name"])
        for ip, mac in spec.get("neighbours", []):
            command = "ip neigh replace %s lladdr %s dev eth0 nud permanent" % (ip, mac)
            status, out = host.run(command, timeout)
            if status != 0:
                raise RuntimeError("%s: `%s` failed: %s" % (spec["name"], command, out))
        for command in spec.get("commands", []):
            status, out = host.run(command, timeout)
            said = ": " + out.strip() if out.strip() else ""
            if status is None:
                error("*** %s: `%s` did not finish in %g s; interrupted%s\n"
                      % (spec["name"], command, timeout, said))
            elif status != 0:
                error("*** %s: `%s` failed (exit status %d)%s\n"
                      % (spec["name"], command, status, said))
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
    if not STOPPING:
        raise SystemExit(128 + signum)


def begin_teardown():
    """From here on signals are ignored: a second Ctrl-C must not leave the teardown half
    done (and one that came just before is ignored by `terminate`)."""
    global STOPPING
    STOPPING = True
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def main():
    plan_path = sys.argv[1]
    with open(plan_path) as f:
        plan = json.load(f)
    setLogLevel(plan.get("log_level", "info"))
    sync = Sync(os.environ["LOSSLESS_NET_SYNC"])
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    record = Recorder(os.path.join(plan["dir"], "processes.json"))
    # Made before anything is built, so that the teardown takes down whatever was.
    net = Mininet(controller=None, build=False, autoSetMacs=False, inNamespace=False)
    code = 0
    try:
        build(net, plan, record)
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
        begin_teardown()
        for host in net.hosts:
            try:
                # A teardown may come in the middle of a host's command.
                host.interrupt()
                host.detach_hooks()
            except Exception as e:  # pylint: disable=broad-except
                error("*** %s\n" % e)
                code = code or 1
            # What runs in the host (its commands' daemons, `lossless net exec` there) goes
            # with it, while its shell still tells which namespace is the host's.
            if host.shell is not None and host.shell.poll() is None:
                kill_in_namespace("/proc/%d/ns/net" % host.pid, keep=host.pid)
        net.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
