//! Raw frames in and out of an interface through an AF_PACKET socket.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use sysutil::netns::Namespace;

/// An AF_PACKET raw socket bound to one interface (of the namespace it was opened in).
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl RawSocket {
    /// Opens a socket on `ifname` in `ns` (see [`RawSocket::open`]); a test fails if it cannot.
    pub fn open_in(ns: &Namespace, ifname: &str) -> Self {
        ns.run(|| Self::open(ifname))
            .and_then(|socket| socket)
            .unwrap_or_else(|e| panic!("a raw socket on {ifname}: {e:#}"))
    }

    /// Opens a socket on `ifname` that receives every frame (ETH_P_ALL). Call it on a thread
    /// inside the interface's namespace; the socket stays bound to it afterwards.
    pub fn open(ifname: &str) -> anyhow::Result<Self> {
        let ifindex = sysutil::interface::ifindex(ifname)? as i32;
        let protocol = (libc::ETH_P_ALL as u16).to_be() as i32;
        // SAFETY: plain socket(2); the fd is owned right away.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, protocol) };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("socket(AF_PACKET)");
        }
        // SAFETY: raw is a fresh, valid fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a sockaddr_ll is integers and a byte array, for which all zeroes is valid.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol as u16;
        addr.sll_ifindex = ifindex;
        // SAFETY: `addr` is a whole sockaddr_ll of the length given, alive for the call.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&addr) as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("bind AF_PACKET to {ifname}"));
        }
        Ok(RawSocket { fd, ifindex })
    }

    /// Sends one frame as is.
    pub fn send(&self, frame: &[u8]) -> anyhow::Result<()> {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error()).context("send on AF_PACKET");
        }
        Ok(())
    }

    /// Receives frames that arrive on the interface (not the ones it sends) until `count`
    /// have matched `keep`, or fails after `timeout`.
    pub fn receive(
        &self,
        count: usize,
        timeout: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> anyhow::Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        let mut frames = Vec::new();
        while frames.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "received {} of {count} expected frames before the timeout",
                    frames.len()
                );
            }
            frames.extend(self.poll_frames(left, &keep)?);
        }
        Ok(frames)
    }

    /// Waits at most `wait` for arriving frames, then returns every queued one that matches
    /// `keep` (possibly none).
    pub fn poll_frames(
        &self,
        wait: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut frames = Vec::new();
        let mut buf = vec![0u8; 65536];
        let mut timeout_ms = wait.as_millis().max(1) as i32;
        loop {
            let mut pollfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pollfd, 1, timeout_ms) } <= 0 {
                return Ok(frames);
            }
            timeout_ms = 0;
            // SAFETY: a sockaddr_ll is integers and a byte array, for which all zeroes is valid.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of_val(&from) as u32;
            // SAFETY: `buf` is valid for `buf.len()` bytes and `from` for `from_len`, both
            // alive for the call.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    &mut from as *mut _ as *mut libc::sockaddr,
                    &mut from_len,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error()).context("recvfrom on AF_PACKET");
            }
            let outgoing = from.sll_pkttype == libc::PACKET_OUTGOING;
            let frame = &buf[..n as usize];
            if !outgoing && from.sll_ifindex == self.ifindex && keep(frame) {
                frames.push(frame.to_vec());
            }
        }
    }
}

/// `lossless telemetry collect --json` running in a namespace, as the mirroring tests run it.
pub struct Collector {
    child: std::process::Child,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    /// What it said on starting.
    started: String,
}

impl Collector {
    /// Starts the collector on `iface` in `ns`, writing `pcap` and stopping after `count` ERSPAN
    /// frames or twice [`crate::bed::TIMEOUT`], with `extra` arguments; returns once its socket
    /// is open (it says so on stderr), so that frames sent next are seen.
    pub fn start(
        ns: &Namespace,
        iface: &str,
        count: usize,
        pcap: &std::path::Path,
        extra: &[&std::ffi::OsStr],
    ) -> Collector {
        use std::io::BufRead as _;
        let mut child = ns
            .command(crate::bed::lossless_bin())
            .args(["telemetry", "collect", "--interface", iface])
            .args(["--count", &count.to_string()])
            .args([
                "--duration",
                &format!("{}s", 2 * crate::bed::TIMEOUT.as_secs()),
            ])
            .arg("--pcap")
            .arg(pcap)
            .args(extra)
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting the collector: {e}"));
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped"));
        let mut started = String::new();
        stderr.read_line(&mut started).unwrap();
        assert!(started.contains("collecting ERSPAN on"), "{started}");
        Collector {
            child,
            stderr,
            started,
        }
    }

    /// Waits for the collector to end; its JSON summary (a test fails if it failed).
    pub fn summary(mut self) -> serde_json::Value {
        let out = self.child.wait_with_output().unwrap();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stderr, &mut rest);
        assert!(
            out.status.success(),
            "collector failed: {}{rest}",
            self.started
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}
