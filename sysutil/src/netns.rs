//! Network namespaces and veth pairs for test beds, labs and demos.
//!
//! Every name is unique per process, so test beds run in parallel; everything is removed on
//! drop, also when a test panics. Code runs inside a namespace on a thread of its own that
//! joins it with `setns`, so the caller's namespace never changes.

use std::{
    fs::File,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
};

use anyhow::{bail, Context as _};

use wire::ethernet::Address;

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A name no other test bed of this machine uses now: `PREFIX` + pid + a counter, at most
/// 15 bytes so it also fits an interface name.
pub fn unique_name(prefix: &str) -> String {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}{}x{id}", std::process::id() % 100_000);
    name.chars().take(15).collect()
}

/// Runs `ip` with `args`; fails with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    check(&format!("ip {}", args.join(" ")), output).map(drop)
}

/// Fails unless `output` is a success, with the command's stderr in the message.
pub fn check(what: &str, output: Output) -> anyhow::Result<Output> {
    if !output.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output)
}

/// A network namespace, deleted (with every interface in it) on drop.
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates a namespace with a unique name starting with `prefix`, loopback up.
    pub fn create(prefix: &str) -> anyhow::Result<Self> {
        let name = unique_name(prefix);
        ip(&["netns", "add", &name])?;
        let ns = Namespace { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its bind mount, for `nsenter --net=`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Runs `ip ARGS` inside it.
    pub fn ip(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// The kernel's count of packets `ifname` received, from `ip -s -j link` inside it.
    pub fn rx_packets(&self, ifname: &str) -> anyhow::Result<u64> {
        self.rx_counter(ifname, "packets")
    }

    /// The kernel's receive counter `counter` (`packets`, `bytes`, `dropped`, ...) of
    /// `ifname`, from `ip -s -j link` inside it.
    pub fn rx_counter(&self, ifname: &str, counter: &str) -> anyhow::Result<u64> {
        let output = Command::new("ip")
            .args(["-n", &self.name, "-s", "-j", "link", "show", "dev", ifname])
            .output()
            .context("running ip (iproute2)")?;
        let output = check(&format!("ip -s link show {ifname}"), output)?;
        let links: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        links[0]["stats64"]["rx"][counter]
            .as_u64()
            .with_context(|| format!("no rx {counter} count for {ifname}"))
    }

    /// A command that runs `program` inside it through nsenter, which (unlike `ip netns
    /// exec`) keeps the host's /sys and so /sys/fs/bpf visible.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net={}", self.path().display()))
            .arg("--")
            .arg(program);
        command
    }

    /// Turns IPv6 off in it, for the interfaces there and those made later (no link-local
    /// addresses, router solicitations or MLD reports). Nothing to do where IPv6 is off already
    /// (a kernel booted with `ipv6.disable=1` has no `/proc/sys/net/ipv6`).
    pub fn disable_ipv6(&self) -> anyhow::Result<()> {
        if !self.run(|| Path::new("/proc/sys/net/ipv6").exists())? {
            return Ok(());
        }
        let out = self
            .command("sysctl")
            .args([
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .output()
            .context("running sysctl")?;
        check(&format!("turning IPv6 off in {}", self.name()), out)?;
        Ok(())
    }

    /// Keeps the kernel from handing out `ports` as the ephemeral source port of a connection
    /// made in it (`net.ipv4.ip_local_reserved_ports`, per namespace), so a server that binds
    /// one of them later cannot find it taken by a client's connection to another.
    pub fn reserve_local_ports(&self, ports: std::ops::RangeInclusive<u16>) -> anyhow::Result<()> {
        let out = self
            .command("sysctl")
            .arg("-qw")
            .arg(format!(
                "net.ipv4.ip_local_reserved_ports={}-{}",
                ports.start(),
                ports.end()
            ))
            .output()
            .context("running sysctl")?;
        check(&format!("reserving ports in {}", self.name()), out)?;
        Ok(())
    }

    /// Runs `f` on a thread that has joined this namespace, and returns its result.
    pub fn run<R: Send, F: FnOnce() -> R + Send>(&self, f: F) -> anyhow::Result<R> {
        run_in(&self.path(), f)
    }
}

/// Runs `f` on a thread that has joined the network namespace at `path` (a bind mount, or
/// `/proc/PID/ns/net`), and returns its result.
pub fn run_in<R: Send, F: FnOnce() -> R + Send>(path: &Path, f: F) -> anyhow::Result<R> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: a valid namespace fd; setns only affects this thread.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error()).context("setns");
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// One end of a veth pair: its namespace, name, MAC and IPv4 address.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The namespace it lives in.
    pub namespace: String,
    /// Interface name.
    pub ifname: String,
    /// MAC address.
    pub mac: [u8; 6],
    /// IPv4 address (without prefix length).
    pub ipv4: std::net::Ipv4Addr,
}

/// Creates a veth pair: the end `a_name` in namespace `a`, its peer `b_name` in `b`, both down
/// and without addresses.
pub fn add_veth(a: &Namespace, a_name: &str, b: &Namespace, b_name: &str) -> anyhow::Result<()> {
    ip(&[
        "link",
        "add",
        a_name,
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        b_name,
        "netns",
        b.name(),
    ])
}

/// Creates a veth pair between `a` and `b`, addresses `a_ip/24` and `b_ip/24`, both up, with
/// tx checksum offload off (so redirected frames carry real checksums) and GRO on (so a veth
/// accepts frames that XDP sends) — see docs/ARCHITECTURE.md.
pub fn veth_pair(
    a: &Namespace,
    a_ip: std::net::Ipv4Addr,
    b: &Namespace,
    b_ip: std::net::Ipv4Addr,
) -> anyhow::Result<(Endpoint, Endpoint)> {
    let a_name = unique_name("va");
    let b_name = unique_name("vb");
    add_veth(a, &a_name, b, &b_name)?;
    let mut ends = Vec::new();
    for (ns, name, addr) in [(a, &a_name, a_ip), (b, &b_name, b_ip)] {
        ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", name])?;
        ns.ip(&["link", "set", name, "up"])?;
        let ethtool = ns
            .command("ethtool")
            .args(["-K", name, "tx", "off", "gro", "on"])
            .output()?;
        check(&format!("ethtool -K {name}"), ethtool)?;
        ends.push(Endpoint {
            namespace: ns.name().to_owned(),
            ifname: name.clone(),
            mac: mac_of(ns, name)?,
            ipv4: addr,
        });
    }
    let b_end = ends.pop().expect("two ends");
    let a_end = ends.pop().expect("two ends");
    Ok((a_end, b_end))
}

fn mac_of(ns: &Namespace, ifname: &str) -> anyhow::Result<[u8; 6]> {
    // `ip -br link`: "NAME STATE MAC FLAGS"; /sys/class/net shows the host's namespace only.
    let output = Command::new("ip")
        .args(["-n", ns.name(), "-br", "link", "show", "dev", ifname])
        .output()?;
    let text = String::from_utf8_lossy(&check("ip -br link", output)?.stdout).into_owned();
    let mac = text.split_whitespace().nth(2).unwrap_or_default();
    let mac: Address = mac
        .parse()
        .with_context(|| format!("no MAC for {ifname} in '{}'", text.trim()))?;
    Ok(mac.0)
}

/// A veth pair ([`veth_pair`]) from `a` to `b` in the /24 `subnet`: `a` holds its `.1`, `b` its
/// `.2`, the addressing of every link the labs, test beds and benchmarks build.
pub fn subnet_link(
    a: &Namespace,
    b: &Namespace,
    subnet: [u8; 3],
) -> anyhow::Result<(Endpoint, Endpoint)> {
    let [x, y, z] = subnet;
    let host = |n| std::net::Ipv4Addr::new(x, y, z, n);
    veth_pair(a, host(1), b, host(2))
}
