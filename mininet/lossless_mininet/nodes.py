"""The node classes: P4 switches that serve P4Runtime and BMv2's Thrift runtime (softswitch,
BMv2's simple_switch_grpc), taking the P4 tutorials' P4RuntimeSwitch arguments, and a host
that runs commands with a timeout, can carry lossless's eBPF hooks (`lossless host attach` in
its namespace) and run the traffic tool; and what they share about processes.
"""

import os
import select
import shlex
import signal
import socket
import subprocess
import time

from mininet.log import debug, info
from mininet.node import Host, Switch

# The offloads a software switch port and its peers need off: checksums left to "the NIC"
# would never be filled in, and GRO/GSO/TSO would hand the switch frames larger than the MTU.
OFFLOADS_OFF = ["rx", "off", "tx", "off", "sg", "off", "gro", "off", "gso", "off", "tso", "off"]

# How long a switch may take to listen on its gRPC port (BMv2 loads its libraries first).
START_TIMEOUT_S = 30.0

# What LosslessHost.run prints after a command, before its exit status.
STATUS_MARK = "lossless-status="


def offloads_off(node, intf):
    """Turns the offloads of `intf` (a node's interface) off; fails loudly if ethtool does."""
    out = node.cmd("ethtool -K %s %s >/dev/null 2>&1; echo $?" % (intf, " ".join(OFFLOADS_OFF)))
    if out.strip().splitlines()[-1:] != ["0"]:
        raise RuntimeError("ethtool -K %s failed on %s" % (intf, node.name))


def started(pid):
    """When process `pid` started (clock ticks after boot, /proc/PID/stat's 22nd field), which
    tells it from a later process given the same pid."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 1:].split()[19])


def children_of(pid):
    """The pids of every descendant of process `pid`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    stat = f.read()
            except OSError:
                continue
            parents.setdefault(int(stat[stat.rindex(")") + 1:].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_in_namespace(ns_path, keep):
    """SIGKILLs every process in the network namespace `ns_path` names but `keep`."""
    try:
        target = os.stat(ns_path)
    except OSError:
        return
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (keep, os.getpid()):
            continue
        try:
            ns = os.stat("/proc/%s/ns/net" % entry)
            if (ns.st_dev, ns.st_ino) == (target.st_dev, target.st_ino):
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            continue


def listening(port, host="127.0.0.1"):
    """Whether a server accepts TCP connections at host:port (in this process's namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class P4RuntimeSwitch(Switch):
    """A P4 switch process serving P4Runtime on 127.0.0.1:grpc_port and BMv2's Thrift runtime
    on thrift_port, one port per Mininet interface (`-i PORT@INTF`). The arguments are the P4
    tutorials' P4RuntimeSwitch's: sw_path, json_path (the program it starts with; none: a
    controller sets the pipeline), grpc_port, thrift_port, device_id, log_console, pcap_dump,
    log_file, cpu_port; and record, called with (name, role, pid) for each process it starts.
    Subclasses say how to start it."""

    next_grpc_port = 50051
    next_thrift_port = 9090
    next_device_id = 0

    def __init__(self, name, sw_path=None, json_path=None, grpc_port=None, thrift_port=None,
                 pcap_dump=False, log_console=False, verbose=False, device_id=None,
                 enable_debugger=False, log_file=None, cpu_port=None, env=None, log_dir=None,
                 record=None, **kwargs):
        Switch.__init__(self, name, **kwargs)
        self.sw_path = sw_path or self.default_sw_path
        self.json_path = json_path
        if json_path is not None and not os.path.isfile(json_path):
            raise ValueError("%s: no program file %s" % (name, json_path))
        if grpc_port is None:
            grpc_port = P4RuntimeSwitch.next_grpc_port
            P4RuntimeSwitch.next_grpc_port += 1
        self.grpc_port = int(grpc_port)
        if thrift_port is None:
            thrift_port = P4RuntimeSwitch.next_thrift_port
            P4RuntimeSwitch.next_thrift_port += 1
        self.thrift_port = int(thrift_port)
        if device_id is None:
            device_id = P4RuntimeSwitch.next_device_id
            P4RuntimeSwitch.next_device_id += 1
        self.device_id = int(device_id)
        self.pcap_dump = pcap_dump
        self.log_console = log_console or verbose
        self.cpu_port = cpu_port
        self.env = dict(env or {})
        self.log_dir = log_dir or "/tmp"
        self.log_file = log_file or os.path.join(self.log_dir, "%s.log" % name)
        self.record = record or (lambda name, role, pid: None)
        self.process = None
        self.captures = []

    @property
    def grpc_address(self):
        """Where the switch's P4Runtime server listens."""
        return "127.0.0.1:%d" % self.grpc_port

    def data_ports(self):
        """(port, interface name) of every data port, by port, loopback left out."""
        return sorted((self.ports[intf], intf.name) for intf in self.intfList()
                      if intf.name != "lo")

    def command(self):
        """The switch's command line (a list)."""
        raise NotImplementedError

    def start(self, controllers):
        """Starts the switch and waits until its gRPC port listens."""
        if listening(self.grpc_port):
            raise RuntimeError("%s: something already listens on %s" % (self.name, self.grpc_address))
        for _, intf in self.data_ports():
            offloads_off(self, intf)
        command = self.command()
        info("*** Starting %s: %s\n" % (self.name, " ".join(command)))
        env = dict(os.environ)
        env.update(self.env)
        log = open(self.log_file, "w")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        log.close()
        self.record(self.name, "switch", self.process.pid)
        self.wait_listening()

    def wait_listening(self):
        """Waits until the gRPC port accepts connections; fails if the process dies first or
        the port never opens within START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening(self.grpc_port):
            if self.process.poll() is not None:
                raise RuntimeError("%s exited with %s before listening on %s; its log, %s:\n%s"
                                   % (self.name, self.process.returncode, self.grpc_address,
                                      self.log_file, self.log_tail()))
            if time.monotonic() > deadline:
                raise RuntimeError("%s never listened on %s; its log, %s:\n%s"
                                   % (self.name, self.grpc_address, self.log_file,
                                      self.log_tail()))
            time.sleep(0.05)
        debug("%s listens on %s\n" % (self.name, self.grpc_address))

    def log_tail(self, lines=20):
        try:
            with open(self.log_file) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, deleteIntfs=True):
        """Stops the switch (SIGTERM, then SIGKILL after 5 s) and its captures."""
        for process in [self.process] + self.captures:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.process = None
        self.captures = []
        Switch.stop(self, deleteIntfs)


class SoftswitchP4Switch(P4RuntimeSwitch):
    """lossless's softswitch (`softswitch run`): json_path is the program it starts with (P4
    source or BMv2 JSON); Thrift listens on 127.0.0.1:thrift_port.
    pcap_dump writes one capture per port (dumpcap) into the log directory, since softswitch
    itself writes none; log_console sets SOFTSWITCH_LOG=debug (a line per packet)."""

    default_sw_path = "softswitch"

    def command(self):
        command = [self.sw_path, "run"]
        if self.json_path:
            command.append(self.json_path)
        for port, intf in self.data_ports():
            command += ["-i", "%d@%s" % (port, intf)]
        command += ["--grpc-server-addr", self.grpc_address, "--device-id", str(self.device_id),
                    "--thrift-addr", "127.0.0.1:%d" % self.thrift_port]
        if self.cpu_port is not None:
            command += ["--cpu-port", str(self.cpu_port)]
        if self.log_console:
            self.env.setdefault("SOFTSWITCH_LOG", "debug")
        return command

    def start(self, controllers):
        if self.pcap_dump:
            for _, intf in self.data_ports():
                path = os.path.join(self.log_dir, "%s.pcap" % intf)
                capture = subprocess.Popen(["dumpcap", "-q", "-i", intf, "-w", path],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.captures.append(capture)
                self.record(self.name, "capture", capture.pid)
        P4RuntimeSwitch.start(self, controllers)


class Bmv2GrpcSwitch(P4RuntimeSwitch):
    """BMv2's simple_switch_grpc: json_path is p4c's BMv2 JSON it starts with (none:
    --no-p4); 8 priority queues per port (lossless.p4's priorities); its notification socket
    and Thrift port are its own, so several run side by side."""

    default_sw_path = "simple_switch_grpc"

    def command(self):
        command = [self.sw_path, "--device-id", str(self.device_id),
                   "--thrift-port", str(self.thrift_port),
                   "--notifications-addr",
                   "ipc://%s" % os.path.join(self.log_dir, "%s-notifications.ipc" % self.name)]
        for port, intf in self.data_ports():
            command += ["-i", "%d@%s" % (port, intf)]
        if self.pcap_dump:
            command += ["--pcap", self.log_dir]
        if self.log_console:
            command.append("--log-console")
        command.append(self.json_path or "--no-p4")
        command += ["--", "--grpc-server-addr", self.grpc_address, "--priority-queues", "8"]
        if self.cpu_port is not None:
            command += ["--cpu-port", str(self.cpu_port)]
        return command


class LosslessHost(Host):
    """A host with IPv6 and offloads off (every frame it sends is one a program sent, with its
    checksums filled in) that can attach lossless's eBPF hooks to its interface and run the
    traffic tool. `lossless` is the control plane's binary."""

    def __init__(self, name, lossless="lossless", **kwargs):
        Host.__init__(self, name, **kwargs)
        self.lossless = lossless
        self.hooks = None

    def config(self, **params):
        # The P4 tutorials' hosts call their interface eth0, and their topology files' host
        # commands (`route add default gw ... dev eth0`) say so.
        self.defaultIntf().rename("eth0")
        result = Host.config(self, **params)
        for key in ("all", "default", "lo"):
            self.cmd("sysctl -qw net.ipv6.conf.%s.disable_ipv6=1" % key)
        for intf in self.intfList():
            if intf.name != "lo":
                offloads_off(self, intf.name)
        return result

    def run(self, command, timeout):
        """Runs one line in the host's shell, as Mininet's `h1 CMD` does (so what it sets, a
        directory or a variable, stays set), for at most `timeout` seconds: returns (exit
        status, output), the status None when it did not finish in time and was interrupted
        (Ctrl-C, then SIGKILL of what it started). A trailing `# comment` is the command's."""
        self.sendCmd("eval %s; printf '\\n%s%%d\\n' $?" % (shlex.quote(command), STATUS_MARK))
        output = self.output_within(timeout)
        interrupted = self.waiting
        output += self.interrupt()
        if self.waiting:
            raise RuntimeError("%s: its shell does not answer after `%s`" % (self.name, command))
        body, _, status = output.rpartition(STATUS_MARK)
        if interrupted:
            return None, body
        try:
            return int(status.strip()), body
        except ValueError:
            raise RuntimeError("%s: `%s` printed no exit status: %s" % (self.name, command, output))

    def interrupt(self):
        """Ends the command the shell is running, if any (Ctrl-C, then SIGKILL of what it
        started), so that the shell takes commands again; returns what it printed."""
        output = ""
        if self.waiting and self.shell is not None:
            self.sendInt()
            output += self.output_within(2)
        if self.waiting and self.shell is not None:
            for pid in children_of(self.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            output += self.output_within(5)
        return output

    def output_within(self, seconds):
        """The running command's output until it finishes or `seconds` pass. (Mininet's own
        monitor(timeoutms) polls the shell's pty for writing too, which is always ready, and
        then blocks in its read: wait for something to read here.)"""
        deadline = time.monotonic() + seconds
        output = ""
        while self.waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self.readbuf or select.select([self.stdout.fileno()], [], [], min(left, 1.0))[0]:
                output += self.monitor(findPid=False)
        return output

    def run_lossless(self, *args):
        """Runs `lossless ARGS` in this host's shell; returns its output, raises on failure."""
        command = " ".join([self.lossless] + [str(a) for a in args])
        out = self.cmd(command + " 2>&1; echo lossless-status=$?")
        body, _, status = out.rpartition("lossless-status=")
        if status.strip() != "0":
            raise RuntimeError("%s: %s failed: %s" % (self.name, command, body))
        return body

    def attach_hooks(self, hooks):
        """`lossless host attach IFACE --hooks HOOKS` on the host's interface."""
        out = self.run_lossless("host", "attach", self.defaultIntf().name,
                                "--hooks", ",".join(hooks))
        info("*** %s: %s" % (self.name, out))
        self.hooks = hooks

    def detach_hooks(self):
        """Detaches what attach_hooks attached (a no-op if nothing is)."""
        if self.hooks is not None and self.shell is not None:
            self.run_lossless("host", "detach", self.defaultIntf().name)
            self.hooks = None

    def traffic(self, *args):
        """Starts `lossless traffic ARGS` in the host; returns the Popen."""
        return self.popen([self.lossless, "traffic"] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def terminate(self):
        try:
            self.detach_hooks()
        finally:
            Host.terminate(self)
