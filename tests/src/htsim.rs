//! htsim, the reference simulator `lossless sim` is measured against (Broadcom's csg-htsim,
//! its RoCE binary `htsim_roce`): found by `LOSSLESS_HTSIM` (its folder: `bin/htsim_roce` and
//! `connection_matrices/`), else on `PATH`, as p4toolchain finds p4c; a run both simulators
//! make alike, from one description ([`SideBySide`]: htsim's command line and our scenario);
//! and what htsim printed, read ([`HtsimRun`]).
//!
//! How the two are configured alike, and what could not be made alike, is docs/sim.md's
//! "Fidelity" section; the values are the constants below.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;
use sim::scenario::{CnpSource, CongestionControl, HostSettings, Scenario};
use topology::{Policy, Tuning};

/// The environment variable that names htsim's folder.
pub const ENV: &str = "LOSSLESS_HTSIM";

/// The binary: RoCE senders over lossless (PFC) input queues on a 2- or 3-tier fat-tree.
pub const ROCE: &str = "htsim_roce";

/// Link rate of every link, Gb/s.
pub const LINK_GBPS: u64 = 100;
/// Propagation delay of every link, ns: htsim's default hop latency (1 µs), 200 m of fibre.
pub const HOP_LATENCY_NS: u64 = 1_000;
/// Our IP MTU (its frames are this plus a 14-byte Ethernet header, plus 24 bytes of FCS,
/// preamble and gap on the wire).
pub const IP_MTU: u32 = 9000;
/// htsim's `-mtu`: its payload per packet, to which it adds 64 bytes of headers and which it
/// serialises without preamble or gap; this value makes a full packet take as long on a link
/// in both (9,038 bytes).
pub const HTSIM_MTU: u32 = IP_MTU + 14 + 24 - 64;
/// PFC: pause the upstream at this many packets (htsim: in one input port's queues; ours: in
/// the egress queue the packet joins), htsim's default.
pub const PFC_XOFF_PACKETS: u32 = 15;
/// PFC: resume it at this many (htsim: below; ours: at), htsim's default.
pub const PFC_XON_PACKETS: u32 = 12;
/// Switch buffer, bytes (ours, shared by a switch's ports; htsim's queues get a port's share).
pub const BUFFER_BYTES: u64 = 32 << 20;

/// htsim, found.
#[derive(Clone, Debug)]
pub struct Htsim {
    /// `htsim_roce`.
    pub roce: PathBuf,
    /// Its `connection_matrices/` folder (sample matrices and their generators).
    pub matrices: PathBuf,
}

/// Finds htsim: `$LOSSLESS_HTSIM/bin/htsim_roce`, else `htsim_roce` on `PATH`; its connection
/// matrices in `$LOSSLESS_HTSIM/connection_matrices`, else beside the binary (as in htsim's
/// source tree, where `connection_matrices/` sits beside the binaries) or one folder up.
pub fn find() -> Result<Htsim, String> {
    let roce = match std::env::var_os(ENV).map(PathBuf::from) {
        Some(dir) => {
            let roce = dir.join("bin").join(ROCE);
            if !roce.is_file() {
                return Err(format!(
                    "${ENV} names {}, which has no bin/{ROCE}",
                    dir.display()
                ));
            }
            roce
        }
        None => {
            on_path(ROCE).ok_or_else(|| format!("needs htsim: set ${ENV} or put {ROCE} on PATH"))?
        }
    };
    let beside = roce.parent().map(Path::to_path_buf).unwrap_or_default();
    let candidates = [
        std::env::var_os(ENV).map(|d| PathBuf::from(d).join("connection_matrices")),
        Some(beside.join("connection_matrices")),
        beside.parent().map(|p| p.join("connection_matrices")),
    ];
    let matrices = candidates
        .into_iter()
        .flatten()
        .find(|d| d.is_dir())
        .ok_or_else(|| {
            format!(
                "found {} but no connection_matrices/ near it",
                roce.display()
            )
        })?;
    Ok(Htsim { roce, matrices })
}

/// [`find`], or the skip rule (`SKIPPED` outside CI, a failure under `CI=true`).
pub fn find_or_skip(test: &str) -> Option<Htsim> {
    match find() {
        Ok(h) => Some(h),
        Err(reason) => {
            testkit::skip(test, &reason);
            None
        }
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path: OsString = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// One run both simulators make alike: a fat-tree of `hosts` hosts in `tiers` tiers (htsim's
/// `-tiers`), every link at [`LINK_GBPS`] with [`HOP_LATENCY_NS`], the connection matrix
/// `matrix` read unchanged by both, ECMP in every switch, PFC, no congestion control.
#[derive(Clone, Debug)]
pub struct SideBySide {
    /// Hosts (htsim's `-nodes`).
    pub hosts: u32,
    /// Switch tiers, 2 or 3.
    pub tiers: u8,
    /// The connection matrix.
    pub matrix: PathBuf,
    /// Simulated time limit, µs.
    pub end_us: u64,
    /// The seed of each simulator's random choices (which paths ECMP gives the flows).
    pub seed: u64,
}

impl SideBySide {
    /// The radix of htsim's fat-tree of this many hosts (its `FatTreeTopology::set_params`:
    /// the K with K²/2 hosts in 2 tiers, K³/4 in 3).
    pub fn radix(&self) -> anyhow::Result<u32> {
        let hosts_of = |k: u32| match self.tiers {
            2 => k * k / 2,
            _ => k * k * k / 4,
        };
        anyhow::ensure!(
            self.tiers == 2 || self.tiers == 3,
            "htsim builds 2 or 3 tiers, not {}",
            self.tiers
        );
        (2..=64)
            .step_by(2)
            .find(|&k| hosts_of(k) == self.hosts)
            .with_context(|| format!("no {}-tier fat-tree has {} hosts", self.tiers, self.hosts))
    }

    /// Our fabric: htsim's 2-tier fat-tree of radix K is our `leaf-spine:K/2,K,K/2` (K leaves
    /// of K/2 hosts, each linked to all K/2 spines), its 3-tier one our `fat-tree:K`; hosts in
    /// the same order (host i under leaf or edge i / (K/2)).
    pub fn topology(&self) -> anyhow::Result<String> {
        let k = self.radix()?;
        let shape = match self.tiers {
            2 => format!("leaf-spine:{},{k},{}", k / 2, k / 2),
            _ => format!("fat-tree:{k}"),
        };
        let cable_m = HOP_LATENCY_NS * 1000 / topology::fabric::PROPAGATION_PS_PER_METRE;
        Ok(format!(
            "{shape},speed={LINK_GBPS}G,cable={cable_m}m,mtu={IP_MTU},buffer={BUFFER_BYTES}"
        ))
    }

    /// Our scenario: the fabric, the matrix, ECMP, PFC at htsim's thresholds, no congestion
    /// control and no CNPs.
    pub fn scenario(&self) -> anyhow::Result<Scenario> {
        let mut tuning = Tuning {
            policy: Policy::Ecmp,
            ..Tuning::default()
        };
        tuning.pfc.xoff_packets = PFC_XOFF_PACKETS;
        tuning.pfc.xon_packets = PFC_XON_PACKETS;
        Ok(Scenario {
            topology: self.topology()?,
            workload: vec![format!("matrix:{}", self.matrix.display())],
            tuning,
            hosts: HostSettings {
                cc: CongestionControl::None,
                cnp: CnpSource::None,
                ..HostSettings::default()
            },
            failures: Vec::new(),
            seed: self.seed,
            time: format!("{}us", self.end_us),
        })
    }

    /// htsim's command line for the same run: its fat-tree, ECMP at every switch
    /// (`ecmp_host`), its lossless input queues with PFC at the same thresholds, each output
    /// queue a port's share of our switch buffer. It runs in `workdir`, where htsim writes its
    /// log (`logout.dat`) and `idmap.txt`.
    pub fn htsim_command(&self, htsim: &Htsim, workdir: &Path) -> anyhow::Result<Command> {
        let k = self.radix()?;
        let queue_packets = BUFFER_BYTES / u64::from(k) / u64::from(HTSIM_MTU);
        let mut c = Command::new(&htsim.roce);
        c.current_dir(workdir)
            .arg("-nodes")
            .arg(self.hosts.to_string())
            .arg("-tm")
            .arg(std::path::absolute(&self.matrix)?)
            .args(["-strat", "ecmp_host", "-paths", "8"])
            .args(["-linkspeed", &(LINK_GBPS * 1000).to_string()])
            .args(["-mtu", &HTSIM_MTU.to_string()])
            .args([
                "-hop_latency",
                &(HOP_LATENCY_NS as f64 / 1000.0).to_string(),
            ])
            .args(["-switch_latency", "0"])
            .args(["-q", &queue_packets.to_string()])
            .args(["-tiers", &self.tiers.to_string()])
            .args([
                "-pfc_thresholds",
                &PFC_XON_PACKETS.to_string(),
                &PFC_XOFF_PACKETS.to_string(),
            ])
            .args(["-end", &self.end_us.to_string()])
            .args(["-seed", &self.seed.to_string()]);
        Ok(c)
    }
}

/// A flow htsim finished: its sender had the acknowledgement of its last byte.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    /// Its sending host.
    pub src: u32,
    /// Its receiving host.
    pub dst: u32,
    /// When, µs from the start of the run.
    pub at_us: f64,
}

/// What one htsim run printed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HtsimRun {
    /// Flows in its matrix (its `Connection` lines).
    pub connections: u64,
    /// Flows it finished, in the order it finished them (kept when asked: [`read_output`]).
    pub finished: Vec<Finished>,
    /// How many it finished.
    pub finished_count: u64,
    /// Times a lossless queue overflowed ("LOSSLESS not working!": a frame it should have
    /// dropped, which it keeps).
    pub overflows: u64,
    /// Bytes its senders sent again after a NAK (its `Rtx:` line).
    pub retransmitted_bytes: u64,
    /// Whether it printed its last line (`New: ... Rtx: ...`), so ran to its end.
    pub completed: bool,
}

/// Reads htsim's standard output line by line (a large run prints millions of lines); keeps
/// each finished flow when `keep_flows`, else only counts them.
pub fn read_output(out: impl BufRead, keep_flows: bool) -> anyhow::Result<HtsimRun> {
    let mut run = HtsimRun::default();
    for line in out.lines() {
        let line = line.context("reading htsim's output")?;
        if line.starts_with("Connection ") {
            run.connections += 1;
        } else if let Some(rest) = line.strip_prefix("Flow ") {
            // Flow Roce_SRC_DST ID finished at T total bytes B
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap_or_default();
            let at = words.nth(3).and_then(|t| t.parse::<f64>().ok());
            let ends = name
                .strip_prefix("Roce_")
                .and_then(|n| n.split_once('_'))
                .and_then(|(s, d)| Some((s.parse().ok()?, d.parse().ok()?)));
            let (Some(at_us), Some((src, dst))) = (at, ends) else {
                anyhow::bail!("htsim printed a finish line we cannot read: {line}");
            };
            run.finished_count += 1;
            if keep_flows {
                run.finished.push(Finished { src, dst, at_us });
            }
        } else if line.contains("LOSSLESS not working") {
            run.overflows += 1;
        } else if let Some(rest) = line.strip_prefix("New: ") {
            run.completed = true;
            run.retransmitted_bytes = rest
                .split_once("Rtx: ")
                .and_then(|(_, r)| r.trim().parse().ok())
                .with_context(|| format!("htsim's last line: {line}"))?;
        }
    }
    Ok(run)
}

/// Runs htsim as `command` (from [`SideBySide::htsim_command`]) to its end and reads what it
/// printed; fails if it fails.
pub fn run(mut command: Command, keep_flows: bool) -> anyhow::Result<HtsimRun> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    let out = child.stdout.take().expect("stdout is piped");
    let read = read_output(std::io::BufReader::new(out), keep_flows);
    let status = child.wait().context("waiting for htsim")?;
    anyhow::ensure!(status.success(), "{command:?}: {status}");
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htsims_lines_are_read() {
        let text = "Connection 19->0 starting at 0 size 2000000\nstartflow Roce_19_0 at 0\n\
                    Flow Roce_19_0 42 finished at 348.62 total bytes 2000000\n\
                     Queue LS1->DST0(0) LOSSLESS not working! I should have dropped this packet12\n\
                    Done\nNew: 0 Rtx: 9000\n";
        let run = read_output(text.as_bytes(), true).unwrap();
        assert_eq!(
            run,
            HtsimRun {
                connections: 1,
                finished: vec![Finished {
                    src: 19,
                    dst: 0,
                    at_us: 348.62
                }],
                finished_count: 1,
                overflows: 1,
                retransmitted_bytes: 9000,
                completed: true,
            }
        );
        assert!(read_output("Flow x finished at soon\n".as_bytes(), false).is_err());
    }

    #[test]
    fn htsims_fat_trees_are_ours() {
        let side = |hosts, tiers| SideBySide {
            hosts,
            tiers,
            matrix: PathBuf::from("m.cm"),
            end_us: 1000,
            seed: 1,
        };
        assert_eq!(
            side(32, 2).topology().unwrap(),
            "leaf-spine:4,8,4,speed=100G,cable=200m,mtu=9000,buffer=33554432"
        );
        assert!(side(128, 3).topology().unwrap().starts_with("fat-tree:8,"));
        assert!(side(1024, 3)
            .topology()
            .unwrap()
            .starts_with("fat-tree:16,"));
        assert!(side(100, 3).topology().is_err());
    }
}
