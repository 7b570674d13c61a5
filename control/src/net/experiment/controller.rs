//! The fabric's controller as the experiments run it (`lb`, `link-failure`, `collective`): the
//! one P4Runtime primary of the leaves' uplink groups, which switches the load-balancing policy
//! live between runs and, for link-failure, follows the kernel's link events and drains the
//! spine of a link that lost its carrier; and the groups' timers, scaled to the link.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};

use super::{Fabric, WIRE_OVERHEAD_BYTES};
use crate::net::{
    leaf_spine::{Policy, Tuning},
    uplinks::{self, Uplinks},
};
use sysutil::{interface::Interface, netlink::LinkEvents, netns::run_in};

/// The uplink groups' timers, as options of the experiments that switch policies.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyTimers {
    /// Flowlet gap (flowlet, dlb), µs: a flow may change member after an idle gap this long
    /// [default: 16 frame times at the link rate, the queueing PFC allows before it pauses,
    /// so a flow moved after such a gap does not overtake its own frames].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub flowlet_timeout_us: Option<u64>,
    /// DLB: a port's load estimate older than this counts as idle, µs [default: 4 frame times
    /// at the link rate].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub dlb_load_age_us: Option<u64>,
}

impl PolicyTimers {
    /// The uplink groups' timers: given, or scaled to the frame time of `frame_bytes`-byte
    /// frames at `link_rate` b/s.
    pub fn tuning(&self, link_rate: u64, frame_bytes: usize) -> Tuning {
        let frame_us = (frame_bytes as u64 + WIRE_OVERHEAD_BYTES) * 8 * 1_000_000 / link_rate;
        Tuning {
            flowlet_timeout_us: self.flowlet_timeout_us.unwrap_or(16 * frame_us).max(1),
            dlb_load_age_us: self.dlb_load_age_us.unwrap_or(4 * frame_us).max(1),
            ..Tuning::default()
        }
    }
}

/// How often the controller looks for a policy to switch to while no link event comes.
const CONTROLLER_POLL: Duration = Duration::from_millis(20);

/// What the controller did on a link event: when it saw the event that changed the live
/// spines, and when every leaf had its new group.
#[derive(Clone, Copy, Debug)]
pub struct Reaction {
    /// When it saw the event.
    pub seen: Instant,
    /// When every leaf had its new group.
    pub written: Instant,
    /// The spines the groups spread over since.
    pub live_spines: usize,
}

/// A policy to switch to, and where to answer.
type SetPolicy = (Policy, std::sync::mpsc::Sender<anyhow::Result<()>>);

/// The fabric's controller for the experiment: a thread in the network's namespace, the one
/// P4Runtime primary writing the leaves' uplink groups. It switches the policy when asked and,
/// when told to reroute, follows the kernel's link events and drains a spine whose link to a
/// leaf lost its carrier (and puts it back when the link returns).
pub struct Controller {
    commands: std::sync::mpsc::Sender<SetPolicy>,
    stop: Arc<AtomicBool>,
    live_spines: Arc<AtomicUsize>,
    reactions: Arc<Mutex<Vec<Reaction>>>,
    thread: std::thread::JoinHandle<anyhow::Result<()>>,
}

/// Every leaf-spine link's interfaces (leaf side, spine side), by (leaf, spine).
pub fn link_ends(fabric: &Fabric) -> anyhow::Result<BTreeMap<(u16, u16), [String; 2]>> {
    let shape = fabric.shape;
    let intf = |node: &str, port: u16| -> anyhow::Result<String> {
        fabric
            .running
            .node(node)?
            .intfs
            .iter()
            .find(|i| i.port == u32::from(port))
            .map(|i| i.name.clone())
            .with_context(|| format!("{node} has no port {port}"))
    };
    let mut ends = BTreeMap::new();
    for l in 1..=shape.leaves {
        for s in 1..=shape.spines {
            ends.insert(
                (l, s),
                [
                    intf(&format!("leaf{l}"), shape.hosts + s)?,
                    intf(&format!("spine{s}"), l)?,
                ],
            );
        }
    }
    Ok(ends)
}

impl Controller {
    /// Connects to every leaf and subscribes to the network's link events, then returns.
    pub fn start(fabric: &Fabric, tuning: Tuning, reroute: bool) -> anyhow::Result<Controller> {
        let ends = link_ends(fabric)?;
        let shape = fabric.shape;
        let targets = uplinks::leaf_targets(
            fabric
                .running
                .status
                .as_ref()
                .context("the network is still coming up")?,
        );
        let netns = fabric.running.netns_path();
        let stop = Arc::new(AtomicBool::new(false));
        let live_spines = Arc::new(AtomicUsize::new(usize::from(shape.spines)));
        let reactions = Arc::new(Mutex::new(Vec::new()));
        let (commands, asked) = std::sync::mpsc::channel::<SetPolicy>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stopped, live_count, recorded) =
            (stop.clone(), live_spines.clone(), reactions.clone());
        let thread = std::thread::spawn(move || {
            run_in(&netns, move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(async {
                        let mut leaves = Uplinks::connect(shape, tuning, targets).await?;
                        let mut events = LinkEvents::subscribe()?;
                        events.set_timeout(CONTROLLER_POLL)?;
                        let _ = ready_tx.send(());
                        let mut policy = Policy::Ecmp;
                        let mut live: Vec<u16> = (1..=shape.spines).collect();
                        while !stopped.load(Ordering::Relaxed) {
                            while let Ok((wanted, answer)) = asked.try_recv() {
                                let written = leaves.write(wanted, &live).await;
                                if written.is_ok() {
                                    policy = wanted;
                                }
                                let _ = answer.send(written);
                            }
                            match events.wait() {
                                Ok(_) if reroute => {}
                                Ok(_) => continue,
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                                Err(e) => return Err(e).context("reading link events"),
                            }
                            let seen = Instant::now();
                            let now_live: Vec<u16> = (1..=shape.spines)
                                .filter(|s| {
                                    ends.iter().filter(|((_, spine), _)| spine == s).all(
                                        |(_, [a, b])| {
                                            Interface::is_running(a) && Interface::is_running(b)
                                        },
                                    )
                                })
                                .collect();
                            // With no spine left there is no path to move to.
                            if now_live == live || now_live.is_empty() {
                                continue;
                            }
                            leaves.write(policy, &now_live).await?;
                            live = now_live;
                            live_count.store(live.len(), Ordering::Relaxed);
                            recorded.lock().expect("not poisoned").push(Reaction {
                                seen,
                                written: Instant::now(),
                                live_spines: live.len(),
                            });
                        }
                        anyhow::Ok(())
                    })
            })?
        });
        match ready_rx.recv() {
            Ok(()) => Ok(Controller {
                commands,
                stop,
                live_spines,
                reactions,
                thread,
            }),
            Err(_) => Err(thread
                .join()
                .map_err(|_| anyhow::anyhow!("the controller panicked"))?
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("the controller ended early"))),
        }
    }

    /// Switches every leaf's group to `policy` (over the live spines) and waits until it is
    /// written.
    pub fn set_policy(&self, policy: Policy) -> anyhow::Result<()> {
        let (answer, answered) = std::sync::mpsc::channel();
        self.commands
            .send((policy, answer))
            .map_err(|_| anyhow::anyhow!("the controller ended"))?;
        answered
            .recv()
            .map_err(|_| anyhow::anyhow!("the controller ended"))?
    }

    /// How many spines the leaves' groups spread over now.
    pub fn live_spines(&self) -> anyhow::Result<usize> {
        if self.thread.is_finished() {
            bail!("the controller ended");
        }
        Ok(self.live_spines.load(Ordering::Relaxed))
    }

    /// The first reaction that took the fabric to `live_spines` at or after `since`.
    pub fn reaction(&self, since: Instant, live_spines: usize) -> Option<Reaction> {
        self.reactions
            .lock()
            .expect("not poisoned")
            .iter()
            .find(|r| r.seen >= since && r.live_spines == live_spines)
            .copied()
    }

    /// Stops it and waits for its thread.
    pub fn finish(self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the controller panicked"))?
    }
}
