"""Checks one of the P4 tutorials' exercises the way its README says it should behave, in the
network `lossless net up` brought up from the exercise's own topology (its `--run` script:
LOSSLESS_NET names the network, LOSSLESS_BIN the lossless binary). Runs from the exercise's
folder, by the test venv's Python (scapy): `check_exercise.py EXERCISE`.

Frames are sent and read on the hosts' own eth0, through sockets opened inside each host's
network namespace (setns on this thread), and decoded by scapy with the exercise's own header
classes (its send.py, receive.py, calc.py, ...); pings are the kernel's; a controller is the
exercise's own mycontroller.py, unchanged. Prints what it saw, and exits non-zero with the
reason when the exercise did not do what its README says.
"""

import contextlib
import ctypes
import json
import os
import random
import select
import socket
import subprocess
import sys
import time

from scapy.all import IP, TCP, UDP, Ether

LOSSLESS = os.environ["LOSSLESS_BIN"]
CLONE_NEWNET = 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)

# How long a frame may take to cross a network of software switches on a loaded machine.
ARRIVAL_S = 5.0
# How long to watch for a frame that must not arrive, once the frames that must have.
ABSENCE_S = 1.0


class Port:
    """A host's eth0 as a raw AF_PACKET socket opened in its namespace: frames sent as scapy
    built them, frames received (not those the host sent) decoded by scapy."""

    def __init__(self):
        self.socket = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.socket.bind(("eth0", 0))

    def fileno(self):
        return self.socket.fileno()

    def send(self, frame):
        self.socket.send(bytes(frame))

    def recv(self):
        data, address = self.socket.recvfrom(65535)
        if address[2] == socket.PACKET_OUTGOING:
            return None
        return Ether(data)

    def close(self):
        self.socket.close()


class Failed(Exception):
    """The exercise did not do what its README says."""


def check(condition, message):
    if not condition:
        raise Failed(message)


class Network:
    """The running network, as `lossless net status --json` reports it."""

    def __init__(self):
        status = json.loads(subprocess.check_output([LOSSLESS, "net", "status", "--json"]))
        self.nodes = {node["name"]: node for node in status["nodes"]}

    def pid(self, host):
        return self.nodes[host]["pid"]

    def ip(self, host):
        return self.nodes[host]["intfs"][0]["ip"]

    def mac(self, host):
        return self.nodes[host]["intfs"][0]["mac"]

    @contextlib.contextmanager
    def inside(self, host):
        """This thread in `host`'s network namespace for the block: sockets opened in it
        stay the host's."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open("/proc/%d/ns/net" % self.pid(host), os.O_RDONLY)
        try:
            if LIBC.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into %s" % host)
            yield
        finally:
            LIBC.setns(own, CLONE_NEWNET)
            os.close(own)
            os.close(target)

    def port(self, host):
        """`host`'s eth0, for sending and reading frames."""
        with self.inside(host):
            return Port()

    def command(self, host, args, **kwargs):
        """`args` run in `host`'s network namespace (a Popen)."""
        return subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % self.pid(host), "--"]
                                + args, **kwargs)

    def ping(self, source, address, tries=3):
        """Whether `source` gets an echo reply from `address` (a ping each try)."""
        for _ in range(tries):
            ping = self.command(source, ["ping", "-c", "1", "-W", "2", address],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if ping.wait() == 0:
                return True
        return False

    def ping_all(self, hosts):
        """Every host of `hosts` pings every other (Mininet's pingall)."""
        lost = [(a, b) for a in hosts for b in hosts
                if a != b and not self.ping(a, self.ip(b).split("/")[0])]
        check(not lost, "pings lost between %s" % lost)
        print("pingall: %d pairs answered" % (len(hosts) * (len(hosts) - 1)))


def frames(port, until, keep=lambda frame: True, seconds=ARRIVAL_S):
    """The frames `port` reads (decoded by scapy) that `keep`, until `until(kept)` holds or
    `seconds` pass."""
    kept = []
    deadline = time.monotonic() + seconds
    while not until(kept):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([port], [], [], left)
        if ready:
            frame = port.recv()
            if frame is not None and keep(frame):
                kept.append(frame)
    return kept


def marked(text):
    """A filter for frames whose payload carries `text`."""
    data = text.encode()
    return lambda frame: data in bytes(frame)


def mark():
    """A payload no other frame on the wire carries."""
    return "lossless-%d-%d" % (os.getpid(), random.getrandbits(32))


def bring(network, source, frame, to, not_to=(), label=""):
    """Sends `frame` from `source` with a fresh mark as its payload; returns the copy `to`
    received, checking that the hosts of `not_to` received none."""
    watch = {host: network.port(host) for host in (to,) + tuple(not_to)}
    sender = network.port(source)
    text = mark()
    sender.send(frame / text)
    got = frames(watch[to], lambda kept: kept, keep=marked(text))
    check(got, "%s: %s received nothing from %s" % (label, to, source))
    for other in not_to:
        stray = frames(watch[other], lambda kept: kept, keep=marked(text), seconds=ABSENCE_S)
        check(not stray, "%s: %s received it too" % (label, other))
    for port in list(watch.values()) + [sender]:
        port.close()
    print("%s: %s received it" % (label, to))
    return got[0]


def exercise_module(name):
    """A module of the exercise's own (send, receive, calc, ...), imported from its folder."""
    sys.path.insert(0, os.getcwd())
    return __import__(name)


def basic(network):
    network.ping_all(["h1", "h2", "h3", "h4"])


def basic_tunnel(network):
    tunnel = exercise_module("myTunnel_header").MyTunnel

    def message(dst, dst_id=None):
        frame = Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff")
        if dst_id is not None:
            frame = frame / tunnel(dst_id=dst_id)
        return frame / IP(dst=dst) / TCP(dport=1234, sport=random.randint(49152, 65535))

    bring(network, "h1", message("10.0.2.2"), "h2", ["h3"], "IPv4 to h2")
    bring(network, "h1", message("10.0.3.3"), "h3", ["h2"], "IPv4 to h3")
    got = bring(network, "h1", message("10.0.2.2", 2), "h2", ["h3"], "tunnel 2 to h2")
    check(tunnel in got, "tunnel 2 to h2 arrived without its tunnel header: %r" % got)
    got = bring(network, "h1", message("10.0.3.3", 2), "h2", ["h3"], "tunnel 2, h3's address")
    check(tunnel in got and got[IP].dst == "10.0.3.3", "the tunnel's frame changed: %r" % got)


def calc(network):
    p4calc = exercise_module("calc").P4calc
    port = network.port("h1")
    mask = 0xFFFFFFFF
    cases = [("+", 1, 1, 2), ("-", 3, 5, (3 - 5) & mask), ("&", 0xF0F0, 0xFF00, 0xF000),
             ("|", 0xF0F0, 0x0F0F, 0xFFFF), ("^", 0xFFFF, 0x0F0F, 0xF0F0),
             ("+", mask, 2, 1)]
    for op, a, b, answer in cases:
        # calc.py's request: its destination MAC, EtherType 0x1234 (bound by calc.py).
        request = Ether(dst="00:04:00:00:00:00", type=0x1234) / p4calc(
            op=op, operand_a=a, operand_b=b) / " "
        port.send(request)
        replies = frames(port, lambda kept: kept, keep=lambda f: p4calc in f
                         and f[p4calc].result != 0xDEADBABE and f[p4calc].operand_a == a
                         and f[p4calc].operand_b == b and f[p4calc].op == op.encode())
        check(replies, "%d %s %d: no answer" % (a, op, b))
        result = replies[0][p4calc].result
        check(result == answer, "%d %s %d = %d, not %d" % (a, op, b, result, answer))
        print("%d %s %d = %d" % (a, op, b, result))
    port.close()


def load(network, seconds):
    """The README's high-rate flow: `iperf -c 10.0.2.22 -t SECONDS -u` from h11 to an
    `iperf -s -u` on h22 (1 Mb/s into the 0.5 Mb/s link from s1 to s2). Returns both."""
    server = network.command("h22", ["iperf", "-s", "-u"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    client = network.command("h11", ["timeout", "-s", "KILL", str(seconds + 5), "iperf", "-c",
                                     "10.0.2.22", "-t", str(seconds), "-u"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return server, client


def probes_under_load(network, frame, enough, seconds=25, rate=10):
    """h1 sends `frame` to h2 (UDP port 4321, which receive.py watches) `rate` times a
    second, a second alone, then under the load, until the frames h2 received are `enough`
    or `seconds` of load pass; returns them, in order. The queue builds once the kernel holds
    as much of the flow as a sender's socket may have in flight (about 200 KB, 3 to 4 s into
    the load): from then on the switch's own egress queue grows."""
    receiver = network.port("h2")
    sender = network.port("h1")
    text = mark()
    got = []
    started = time.monotonic()
    processes = ()
    sent = 0
    try:
        while not enough(got) and time.monotonic() - started < seconds + 1:
            if not processes and time.monotonic() - started >= 1:
                processes = load(network, seconds)
            sender.send(frame / text)
            sent += 1
            got += frames(receiver, lambda kept: False, keep=marked(text), seconds=1.0 / rate)
    finally:
        for process in processes:
            process.kill()
            process.wait()
        receiver.close()
        sender.close()
    print("%d of %d probes arrived in %.1f s" % (len(got), sent, time.monotonic() - started))
    return got


def ecn(network):
    tos = lambda got: [frame[IP].tos for frame in got]
    got = probes_under_load(network, Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff")
                            / IP(dst="10.0.2.2", tos=1) / UDP(dport=4321, sport=1234),
                            lambda got: 1 in tos(got) and 3 in tos(got))
    print("tos: %s" % " ".join("0x%x" % t for t in tos(got)))
    check(1 in tos(got), "no probe arrived unmarked (tos 0x1)")
    check(3 in tos(got), "no probe was marked (tos 0x3) under load")


def mri(network):
    option = exercise_module("receive").IPOption_MRI

    def depths(got):
        """The deepest queue each probe recorded on its way."""
        found = []
        for frame in got:
            options = [o for o in frame[IP].options if isinstance(o, option)]
            check(options, "a probe arrived without its MRI option: %r" % frame)
            traces = options[0].swtraces
            check(traces and len(traces) == options[0].count, "its traces: %r" % options[0])
            found.append(max(t.qdepth for t in traces))
        return found

    got = probes_under_load(network, Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff")
                            / IP(dst="10.0.2.2", options=option(count=0, swtraces=[]))
                            / UDP(dport=4321, sport=1234), lambda got: any(depths(got)))
    print("deepest queue per probe: %s" % depths(got))
    check(any(depths(got)), "every queue depth was 0, under load")


def firewall(network):
    def connects(client, server, port):
        listener = None
        with network.inside(server):
            listener = socket.socket()
            listener.bind(("0.0.0.0", port))
            listener.listen()
        try:
            with network.inside(client):
                attempt = socket.socket()
            attempt.settimeout(2)
            try:
                attempt.connect((network.ip(server).split("/")[0], port))
                attempt.sendall(b"lossless")
                return True
            except OSError:
                return False
            finally:
                attempt.close()
        finally:
            listener.close()

    check(connects("h1", "h2", 5001), "h1 could not connect to h2 (internal)")
    check(connects("h1", "h3", 5002), "h1 could not connect to h3 (internal to external)")
    check(connects("h2", "h4", 5003), "h2 could not connect to h4 (internal to external)")
    check(not connects("h3", "h1", 5004), "h3 connected to h1: the firewall let it in")
    check(not connects("h4", "h2", 5005), "h4 connected to h2: the firewall let it in")
    print("internal hosts connect out and to each other; external hosts cannot connect in")


def link_monitor(network):
    probe_hdrs = exercise_module("probe_hdrs")
    # send.py's route: out of s1 port 4, s4 port 1, s2 port 4, s3 port 1, s1 port 3, s3 port 2,
    # s2 port 3, s4 port 2, s1 port 1 (back to h1).
    route = [4, 1, 4, 1, 3, 2, 3, 2, 1]

    def probe():
        """The probe's report, as (switch, port) → bytes sent since the last probe."""
        frame = Ether(dst="ff:ff:ff:ff:ff:ff", src=network.mac("h1")) / probe_hdrs.Probe(hop_cnt=0)
        for egress in route:
            frame = frame / probe_hdrs.ProbeFwd(egress_spec=egress)
        port = network.port("h1")
        port.send(frame)
        back = frames(port, lambda kept: kept, keep=lambda f: probe_hdrs.ProbeData in f)
        port.close()
        check(back, "the probe did not come back to h1")
        report = {}
        layer = back[0][probe_hdrs.ProbeData]
        while isinstance(layer, probe_hdrs.ProbeData):
            check(layer.cur_time >= layer.last_time, "time ran backwards: %r" % layer)
            report[(layer.swid, layer.port)] = layer.byte_cnt
            layer = layer.payload
        check(len(report) == len(route), "%d hops reported, the route has %d: %s"
              % (len(report), len(route), report))
        return report

    probe()
    # Between two probes, a known volume from h1 to h4: out of s1 port 4 and s4 port 1, both
    # on the probe's route; s3 port 1 (to h3) is on the route and not on that path.
    burst = Ether(src=network.mac("h1"), dst="08:00:00:00:01:00") / IP(dst="10.0.4.4") / UDP(
        dport=4321, sport=1234) / (b"x" * 1000)
    port = network.port("h1")
    for _ in range(100):
        port.send(burst)
    port.close()
    sent = 100 * len(burst)
    report = probe()
    for (switch, egress), count in sorted(report.items()):
        print("switch %d port %d: %d bytes" % (switch, egress, count))
    for hop in ((1, 4), (4, 1)):
        check(report[hop] >= sent * 9 // 10, "s%d port %d reported %d bytes of the %d sent"
              % (hop + (report[hop], sent)))
    check(report[(3, 1)] < sent // 10, "s3 port 1 reported %d bytes, off the burst's path"
          % report[(3, 1)])


def load_balance(network):
    count = 20
    watch = {host: network.port(host) for host in ("h2", "h3")}
    sender = network.port("h1")
    text = mark()
    for _ in range(count):
        sender.send(Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff") / IP(dst="10.0.0.1")
                    / TCP(dport=1234, sport=random.randint(49152, 65535)) / text)
    got = {host: 0 for host in watch}
    deadline = time.monotonic() + ARRIVAL_S
    while sum(got.values()) < count and time.monotonic() < deadline:
        for host, port in watch.items():
            got[host] += len(frames(port, lambda kept: False, keep=marked(text), seconds=0.1))
    print("of %d messages to 10.0.0.1: h2 %d, h3 %d" % (count, got["h2"], got["h3"]))
    check(sum(got.values()) == count, "messages lost")
    check(all(got.values()), "one server got every message: no balancing")


def multicast(network):
    network.ping_all(["h1", "h2", "h3", "h4"])


def qos(network):
    for name, layer, expected in (("UDP", UDP(dport=4321, sport=1234), 0xB9),
                                  ("TCP", TCP(), 0xB1)):
        frame = Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff") / IP(dst="10.0.2.2", tos=1)
        got = bring(network, "h1", frame / layer, "h2", label=name)
        check(got[IP].tos == expected, "%s arrived with tos 0x%x, not 0x%x"
              % (name, got[IP].tos, expected))
        print("%s: tos 0x%x" % (name, got[IP].tos))


def source_routing(network):
    send = exercise_module("send")
    for ports, ttl in (([2, 3, 2, 2, 1], 59), ([2, 1], 62)):
        frame = Ether(src=network.mac("h1"), dst="ff:ff:ff:ff:ff:ff")
        for i, port in enumerate(ports):
            frame = frame / send.SourceRoute(bos=int(i == len(ports) - 1), port=port)
        frame = frame / IP(dst="10.0.2.2") / UDP(dport=4321, sport=1234)
        label = "route %s" % " ".join(map(str, ports))
        got = bring(network, "h1", frame, "h2", ["h3"], label)
        check(send.SourceRoute not in got, "%s: h2 got the source routes too" % label)
        check(got[IP].ttl == ttl, "%s: ttl %d at h2, not %d" % (label, got[IP].ttl, ttl))


@contextlib.contextmanager
def controller(script):
    """The exercise's own controller `script`, unchanged, run from its folder in the switches'
    namespace (`lossless net exec` of a switch: they listen on 127.0.0.1 there), its output
    kept; stopped afterwards."""
    os.makedirs("logs", exist_ok=True)
    output = open("logs/controller.txt", "w+")
    process = subprocess.Popen([LOSSLESS, "net", "exec", "s1", "--", sys.executable, script],
                               stdout=output, stderr=subprocess.STDOUT)
    try:
        yield process, output
    finally:
        process.kill()
        process.wait()
        output.seek(0)
        print(output.read()[-4000:])
        output.close()


def reply_while(network, process, source, address, seconds=30):
    """Pings until `source` gets a reply from `address` (the controller programs as the
    pings come), or the controller ends, or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if network.ping(source, address, tries=1):
            return True
    return False


def p4runtime(network):
    with controller("mycontroller.py") as (process, output):
        check(reply_while(network, process, "h1", "10.0.2.2"), "h1 never got a reply from h2")
        check(network.ping("h2", "10.0.1.1"), "h2 got no reply from h1")
        # The controller prints the tunnels' counters every 2 s: wait for a round after the
        # pings with packets counted on both tunnels.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            output.seek(0)
            lines = [l for l in output.read().splitlines() if "TunnelCounter" in l]
            if any(" 0 packets" not in l for l in lines[-4:]) and len(lines) >= 4:
                break
            time.sleep(0.5)
        check(lines, "the controller printed no counter")
        counted = [l for l in lines[-4:] if " 0 packets" not in l]
        check(len(counted) == 4, "tunnel counters still at 0: %s" % lines[-4:])


def lines_of(output, text):
    """The lines of the controller's output so far that hold `text`."""
    output.seek(0)
    return [line for line in output.read().splitlines() if text in line]


def pings_answered(network, source, address, seconds, interval=0.2):
    """`source` pings `address` every `interval` seconds for `seconds`: the counts sent and
    answered, as ping's summary says."""
    count = int(seconds / interval)
    ping = network.command(source, ["ping", "-q", "-i", str(interval), "-W", "2", "-c",
                                    str(count), address],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    summary = ping.communicate()[0]
    for line in summary.splitlines():
        if "packets transmitted" in line:
            parts = line.split(",")
            return int(parts[0].split()[0]), int(parts[1].split()[0])
    raise Failed("ping printed no summary: %r" % summary)


def counted(switch, counter):
    """The packets `counter` of `switch` (a switch of the network) counted over all its cells,
    read over P4Runtime by `lossless p4` (a client of its own beside the exercise's
    controller)."""
    cells = json.loads(subprocess.check_output(
        [LOSSLESS, "p4", "--switch", switch, "--json", "counters", "read", counter]))
    return sum(cell["packets"] for cell in cells)


def flowcache(network):
    # mycontroller.py's flow entries and their idle timeout.
    flows = ["(SA=10.0.1.1, DA=10.0.2.2, proto=1)", "(SA=10.0.2.2, DA=10.0.1.1, proto=1)"]
    idle_timeout_s = 3
    with controller("mycontroller.py") as (process, output):
        # The first packets of each flow go to the controller as PacketIn, on as PacketOut, and
        # the flow is installed on each switch of the path (s1, s2) as it comes.
        check(reply_while(network, process, "h1", "10.0.2.2"), "h1 never got a reply from h2")
        for switch in ("s1", "s2"):
            for flow in flows:
                check(any(switch in line and flow in line
                          for line in lines_of(output, "added table entry")),
                      "no flow %s installed on %s" % (flow, switch))
        # Both counters count on both switches: PacketIns at the egress, PacketOuts at the
        # ingress. Read over every cell, not at the index the controller prints: the program
        # counts a PacketOut at an index taken from hdr.ipv4, which its parser leaves invalid
        # for PacketOuts (undefined in P4: BMv2 reads the previous packet's address there,
        # softswitch 0).
        for switch in ("s1", "s2"):
            for counter in ("MyEgress.egressPktInCounter", "MyIngress.ingressPktOutCounter"):
                packets = counted(switch, counter)
                check(packets > 0, "%s on %s counted nothing" % (counter, switch))
                print("%s on %s: %d packets" % (counter, switch, packets))
        # Pings for twice the idle timeout: every one answered by the installed flows, whose
        # entries, hit, are not reported idle.
        deleted = len(lines_of(output, "Deleted flow_cache entry"))
        sent, answered = pings_answered(network, "h1", "10.0.2.2", 2 * idle_timeout_s)
        check(sent == answered, "%d of %d pings answered" % (answered, sent))
        check(len(lines_of(output, "Deleted flow_cache entry")) == deleted,
              "flow entries deleted while pings hit them: %s"
              % lines_of(output, "Deleted flow_cache entry")[deleted:])
        print("%d pings answered, no flow entry deleted while they flowed" % sent)
        # The pings stop: each entry times out, the controller is notified and deletes it
        # (one notification a switch every 5 s, as it reads them).
        gone = set()
        deadline = time.monotonic() + 6 * idle_timeout_s
        while len(gone) < 4 and time.monotonic() < deadline and process.poll() is None:
            gone = {(switch, flow) for line in lines_of(output, "Deleted flow_cache entry")[deleted:]
                    for switch in ("s1", "s2") for flow in flows
                    if "on %s." % switch in line and flow in line}
            time.sleep(0.5)
        check(len(gone) == 4, "idle entries deleted: %s (the controller %s)"
              % (sorted(gone), "runs" if process.poll() is None else "ended"))
        print("idle flow entries notified and deleted: %s" % sorted(gone))


EXERCISES = {
    "basic": basic, "basic_tunnel": basic_tunnel, "calc": calc, "ecn": ecn,
    "firewall": firewall, "flowcache": flowcache, "link_monitor": link_monitor,
    "load_balance": load_balance, "mri": mri, "multicast": multicast, "p4runtime": p4runtime,
    "qos": qos, "source_routing": source_routing,
}


def main():
    name = sys.argv[1]
    try:
        EXERCISES[name](Network())
    except Failed as failure:
        print("FAILED %s: %s" % (name, failure))
        sys.exit(1)
    print("PASSED %s" % name)


if __name__ == "__main__":
    main()
