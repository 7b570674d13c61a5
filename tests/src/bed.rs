//! Running privileged tests: the skip rule, the CLI under test, a sender/receiver pair.

use std::{net::Ipv4Addr, path::PathBuf, process::Output};

use anyhow::Context as _;
use lossless::netns::{check, veth_pair, Endpoint, Namespace};

/// Whether a test that needs root and network namespaces can run. Outside CI a non-root run
/// prints the reason and skips; under `CI=true` a skip is a failure.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let reason = "needs root (network namespaces, eBPF)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test} {reason}, and under CI=true a skipped test is a failure");
    }
    eprintln!("SKIPPED {test}: {reason}");
    false
}

/// The `lossless` binary under test: `$LOSSLESS_BIN`, else the one in the same profile
/// directory as the running binary (`target/PROFILE/` for a bin, its `deps/` for a test).
pub fn lossless_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("LOSSLESS_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("running binary path");
    let dir = exe.parent().expect("binary directory");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().expect("profile directory")
    } else {
        dir
    };
    profile_dir.join("lossless")
}

/// Two namespaces joined by a veth pair: `tx` sends, `rx` is where the programs attach.
pub struct Link {
    /// The sending end's namespace.
    pub tx_ns: Namespace,
    /// The receiving end's namespace.
    pub rx_ns: Namespace,
    /// The sending interface.
    pub tx: Endpoint,
    /// The receiving interface.
    pub rx: Endpoint,
}

impl Link {
    /// A fresh pair of namespaces and a veth between them (10.77.0.1 → 10.77.0.2).
    pub fn new() -> anyhow::Result<Self> {
        let tx_ns = Namespace::create("ltx")?;
        let rx_ns = Namespace::create("lrx")?;
        let (tx, rx) = veth_pair(
            &tx_ns,
            Ipv4Addr::new(10, 77, 0, 1),
            &rx_ns,
            Ipv4Addr::new(10, 77, 0, 2),
        )?;
        Ok(Link {
            tx_ns,
            rx_ns,
            tx,
            rx,
        })
    }

    /// Runs `lossless ARGS` in `ns`, failing with its stderr.
    pub fn lossless(ns: &Namespace, args: &[&str]) -> anyhow::Result<Output> {
        let output = ns
            .command(lossless_bin())
            .args(args)
            .output()
            .context("running lossless")?;
        check(&format!("lossless {}", args.join(" ")), output)
    }

    /// `lossless host stats IFACE --json` in `ns`, parsed.
    pub fn stats(ns: &Namespace, iface: &str) -> anyhow::Result<serde_json::Value> {
        let out = Self::lossless(ns, &["host", "stats", iface, "--json"])?;
        serde_json::from_slice(&out.stdout).context("stats --json is not JSON")
    }
}

/// Detaches `iface` in `ns` when dropped, so a failing test leaves no pins behind.
pub struct Attached<'a> {
    ns: &'a Namespace,
    iface: String,
}

impl<'a> Attached<'a> {
    /// Runs `lossless host attach IFACE EXTRA...` in `ns`.
    pub fn new(ns: &'a Namespace, iface: &str, extra: &[&str]) -> anyhow::Result<Self> {
        let mut args = vec!["host", "attach", iface];
        args.extend_from_slice(extra);
        Link::lossless(ns, &args)?;
        Ok(Attached {
            ns,
            iface: iface.to_owned(),
        })
    }

    /// Detaches now, reporting errors.
    pub fn detach(mut self) -> anyhow::Result<()> {
        let iface = std::mem::take(&mut self.iface);
        Link::lossless(self.ns, &["host", "detach", &iface]).map(drop)
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        if !self.iface.is_empty() {
            let _ = Link::lossless(self.ns, &["host", "detach", &self.iface]);
        }
    }
}
