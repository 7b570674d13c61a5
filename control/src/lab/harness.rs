//! The lab harness: what every lab is made of, so that a lab says only what it sets up, what it
//! watches and what it reports. A lab
//! - builds its topology, a [`Bed`]: senders, an optional forwarding router and a receiver,
//!   each in its own namespace (the load-balancing lab, whose fabric of spines is no bed,
//!   builds its own, which holds its data planes the same way);
//! - attaches data planes configured with typed settings ([`Bed::attach`], [`Attached`]);
//! - runs its traffic while it watches ([`run`], which may report the receiver's progress;
//!   [`Sampler`] paces the labs that sample every [`SAMPLE`] and print a row every
//!   [`SAMPLES_PER_ROW`] samples);
//! - reports through [`crate::output`];
//! - and cleans up by dropping the bed: the data planes are detached, then the namespaces go,
//!   on every exit (error, Ctrl-C, panic).

use std::{
    cell::RefCell,
    net::IpAddr,
    time::{Duration, Instant},
};

use crate::output::{SAMPLE, SAMPLES_PER_ROW};
use host::{
    attach::{self, AttachRequest},
    pinned_maps::PinnedMaps,
};
use hostconfig::{
    attachment::{Attachment, Mode},
    config::{HostConfig, Setting},
};
use sysutil::{
    netns::{check, subnet_link, Endpoint, Namespace},
    pins::PinDir,
};
use traffic::{
    Interval, RateController, Receiver, RecvConfig, RecvSummary, SendConfig, SendSummary, Sender,
    StopFlag,
};
use wire::ethernet::Address;

/// The priority the labs' traffic uses (DSCP 26).
pub const PRIORITY: usize = 3;

/// ECN marking of [`PRIORITY`]: a phantom queue that drains at `drain_bps` and marks by RED
/// from `kmin` to `kmax` bytes of backlog, with probability up to `pmax`.
pub fn ecn_marking(drain_bps: u64, kmin: u32, kmax: u32, pmax: f64) -> [Setting; 4] {
    [
        Setting::EcnRateBps(PRIORITY, drain_bps),
        Setting::EcnKminBytes(PRIORITY, kmin),
        Setting::EcnKmaxBytes(PRIORITY, kmax),
        Setting::EcnPmax(PRIORITY, pmax),
    ]
}

/// How long a receiver waits after the last frame before it ends a run that was not stopped.
const RECEIVER_IDLE: Duration = Duration::from_secs(2);

/// Makes `ns` forward IPv4 between its interfaces.
pub fn enable_forwarding(ns: &Namespace) -> anyhow::Result<()> {
    let output = ns
        .command("sysctl")
        .args(["-qw", "net.ipv4.ip_forward=1"])
        .output()?;
    check("sysctl ip_forward", output).map(drop)
}

/// The data planes a lab attached, detached when this is dropped (by their pin directories, so
/// from any namespace), so a lab leaves no pins behind on any exit.
#[derive(Default)]
pub struct Attached(RefCell<Vec<PinDir>>);

impl Attached {
    /// Attaches `attachments` configured as `config` to `ifname` in `ns` (XDP in native mode)
    /// and returns its maps.
    pub fn attach(
        &self,
        ns: &Namespace,
        ifname: &str,
        attachments: Vec<Attachment>,
        config: HostConfig,
    ) -> anyhow::Result<PinnedMaps> {
        let request = AttachRequest {
            interface: ifname.to_owned(),
            mode: Mode::Native,
            attachments,
            config,
        };
        let attached = ns.run(|| attach::attach(&request))??;
        self.0.borrow_mut().push(attached.dir.clone());
        Ok(PinnedMaps::at(attached.dir))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        for dir in self.0.get_mut().iter() {
            if let Err(e) = attach::detach_dir(dir) {
                eprintln!("warning: detaching {}: {e:#}", dir.interface());
            }
        }
    }
}

/// The shape of a [`Bed`]. Its namespaces are named by these prefixes (tests look for
/// leftovers by them); its addresses are 10.`net`.x.y.
pub struct Shape {
    /// The second octet of every address of the bed.
    pub net: u8,
    /// The senders' namespace prefix.
    pub sender: &'static str,
    /// The number of senders (1 without a router).
    pub senders: u32,
    /// The router's namespace prefix; without one, the sender is linked straight to the
    /// receiver.
    pub router: Option<&'static str>,
    /// The receiver's namespace prefix.
    pub receiver: &'static str,
}

/// A sender's namespace and its link.
pub struct SenderLink {
    /// Its namespace.
    pub ns: Namespace,
    /// Its end of its link.
    pub end: Endpoint,
    /// The other end: the router's, or the receiver's.
    pub peer: Endpoint,
}

/// An interface of a [`Bed`].
#[derive(Clone, Copy, Debug)]
pub enum Port {
    /// Sender `i`'s end of its link.
    Sender(usize),
    /// The router's end of sender `i`'s link: the router's ingress from it.
    RouterFrom(usize),
    /// The receiver's interface.
    Receiver,
}

/// A lab's topology: senders, each on its own link to a forwarding router (10.NET.i+1.2 behind
/// 10.NET.i+1.1, from sender 0), and the router's link to the receiver (10.NET.100.2 behind
/// 10.NET.100.1); or, without a router, one sender (10.NET.0.1) linked to the receiver
/// (10.NET.0.2). Its data planes are detached, then its namespaces deleted, when it is dropped.
pub struct Bed {
    // Fields drop in order: the data planes first, the router (which holds every link) last.
    attached: Attached,
    /// The senders.
    pub senders: Vec<SenderLink>,
    /// The receiver's namespace.
    pub receiver_ns: Namespace,
    /// The receiver's interface.
    pub receiver: Endpoint,
    router_ns: Option<Namespace>,
}

/// A lab's namespaces and links, whose interfaces ("ports") take the host data plane; what
/// is attached is detached when the lab is dropped.
pub trait LabPorts {
    /// How the lab names its interfaces.
    type Port;

    /// The interface `port` and its namespace.
    fn port(&self, port: Self::Port) -> anyhow::Result<(&Namespace, &Endpoint)>;

    /// What is attached to the lab's interfaces.
    fn attached(&self) -> &Attached;

    /// Attaches `attachments` configured as `config` to `port`; they are detached when the
    /// lab is dropped.
    fn attach(
        &self,
        port: Self::Port,
        attachments: Vec<Attachment>,
        config: HostConfig,
    ) -> anyhow::Result<PinnedMaps> {
        let (ns, endpoint) = self.port(port)?;
        self.attached()
            .attach(ns, &endpoint.ifname, attachments, config)
    }
}

impl LabPorts for Bed {
    type Port = Port;

    fn port(&self, port: Port) -> anyhow::Result<(&Namespace, &Endpoint)> {
        let sender = |i: usize| {
            self.senders
                .get(i)
                .ok_or_else(|| anyhow::anyhow!("the bed has no sender {i}"))
        };
        Ok(match port {
            Port::Sender(i) => {
                let link = sender(i)?;
                (&link.ns, &link.end)
            }
            Port::RouterFrom(i) => {
                let router = self
                    .router_ns
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("the bed has no router"))?;
                (router, &sender(i)?.peer)
            }
            Port::Receiver => (&self.receiver_ns, &self.receiver),
        })
    }

    fn attached(&self) -> &Attached {
        &self.attached
    }
}

impl Bed {
    /// Builds the namespaces and links of `shape`, with routes and forwarding.
    pub fn build(shape: &Shape) -> anyhow::Result<Bed> {
        let Some(router) = shape.router else {
            anyhow::ensure!(shape.senders == 1, "a bed without a router has one sender");
            let sender_ns = Namespace::create(shape.sender)?;
            let receiver_ns = Namespace::create(shape.receiver)?;
            let (end, receiver) = subnet_link(&sender_ns, &receiver_ns, [10, shape.net, 0])?;
            return Ok(Bed {
                attached: Attached::default(),
                senders: vec![SenderLink {
                    ns: sender_ns,
                    end,
                    peer: receiver.clone(),
                }],
                receiver_ns,
                receiver,
                router_ns: None,
            });
        };
        let router_ns = Namespace::create(router)?;
        let receiver_ns = Namespace::create(shape.receiver)?;
        let (_, receiver) = subnet_link(&router_ns, &receiver_ns, [10, shape.net, 100])?;
        enable_forwarding(&router_ns)?;
        let net = format!("10.{}", shape.net);
        receiver_ns.ip(&[
            "route",
            "add",
            &format!("{net}.0.0/16"),
            "via",
            &format!("{net}.100.1"),
        ])?;
        let mut senders = Vec::new();
        for i in 0..shape.senders {
            let subnet = u8::try_from(i + 1)?;
            let ns = Namespace::create(shape.sender)?;
            let (peer, end) = subnet_link(&router_ns, &ns, [10, shape.net, subnet])?;
            ns.ip(&[
                "route",
                "add",
                &format!("{net}.100.0/24"),
                "via",
                &format!("{net}.{subnet}.1"),
            ])?;
            senders.push(SenderLink { ns, end, peer });
        }
        Ok(Bed {
            attached: Attached::default(),
            senders,
            receiver_ns,
            receiver,
            router_ns: Some(router_ns),
        })
    }

    /// The configuration of sender `i`'s traffic to the receiver, addressed to the MAC of the
    /// other end of its link.
    pub fn send_config(&self, i: usize) -> SendConfig {
        let link = &self.senders[i];
        let mut config = SendConfig::new(link.end.ifname.clone(), IpAddr::V4(self.receiver.ipv4));
        config.dst_mac = Some(Address(link.peer.mac));
        config
    }

    /// Opens sender `i` with `config`, in its namespace.
    pub fn open_sender(&self, i: usize, config: SendConfig) -> anyhow::Result<Sender> {
        Ok(self.senders[i].ns.run(|| Sender::open(config))??)
    }

    /// Opens the receiver, in its namespace. When the run is not stopped it ends
    /// [`RECEIVER_IDLE`] after the last frame.
    pub fn open_receiver(&self) -> anyhow::Result<Receiver> {
        let config = RecvConfig {
            iface: self.receiver.ifname.clone(),
            duration: None,
            count: None,
            idle_timeout: Some(RECEIVER_IDLE),
            cnp: None,
        };
        Ok(self.receiver_ns.run(|| Receiver::open(config))??)
    }
}

/// One sender of a run: the sender, its QPs' rate controllers, and when it starts after the
/// run's start.
pub struct Sending<R> {
    /// The sender.
    pub sender: Sender,
    /// One rate controller per QP.
    pub rates: Vec<R>,
    /// When it starts, after the run's start.
    pub start: Duration,
}

/// What a run gave: what the lab watched, what each sender sent (with its rate controllers,
/// for their timelines) and what the receiver counted.
pub struct Ran<R, T> {
    /// What `watch` returned.
    pub watched: T,
    /// Each sender's summary and rate controllers, in order.
    pub sent: Vec<(SendSummary, Vec<R>)>,
    /// The receiver's summary.
    pub received: RecvSummary,
}

/// What a lab's `watch` may ask of a run under way ([`run`]).
pub struct Running<'a> {
    /// When the run started.
    pub start: Instant,
    senders: &'a dyn Fn() -> bool,
    receiver: &'a dyn Fn() -> bool,
}

impl Running<'_> {
    /// Whether every sender is done.
    pub fn senders_finished(&self) -> bool {
        (self.senders)()
    }

    /// Whether the receiver is done (its count reached, idle, stopped, or failed).
    pub fn receiver_finished(&self) -> bool {
        (self.receiver)()
    }
}

/// How often a receiver reports what arrived, and to what: a lab's live progress.
pub type Reports<'a> = (Duration, &'a (dyn Fn(&Interval) + Sync));

/// Runs the senders (each from its start) and the receiver on their own threads while `watch`
/// runs on this one. When `watch` returns `Some` and the lab was not stopped, the senders end
/// on their own and the receiver by its count or idle timeout; otherwise (`None`, an error, or
/// `stop`) everyone is stopped at once. With `reports`, the receiver hands what arrived to it
/// at its interval. Returns `None` when `watch` did.
pub fn run<R: RateController + Send, T>(
    senders: Vec<Sending<R>>,
    mut receiver: Receiver,
    reports: Option<Reports<'_>>,
    stop: &StopFlag,
    watch: impl FnOnce(&Running<'_>) -> anyhow::Result<Option<T>>,
) -> anyhow::Result<Option<Ran<R, T>>> {
    let sender_stops: Vec<StopFlag> = senders.iter().map(|s| s.sender.stop_flag()).collect();
    let receiver_stop = receiver.stop_flag();
    let start = Instant::now();
    let (watched, sent, received) = std::thread::scope(|scope| {
        let receiving = scope.spawn(move || match reports {
            Some((every, on_interval)) => receiver.run_every(every, on_interval),
            None => receiver.run(),
        });
        let sending: Vec<_> = senders
            .into_iter()
            .zip(&sender_stops)
            .map(|(mut sending, own_stop)| {
                scope.spawn(move || {
                    while Instant::now() < start + sending.start && !own_stop.is_stopped() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let summary = sending.sender.run(&mut sending.rates);
                    (summary, sending.rates)
                })
            })
            .collect();
        let watched = watch(&Running {
            start,
            senders: &|| sending.iter().all(|s| s.is_finished()),
            receiver: &|| receiving.is_finished(),
        });
        if !matches!(watched, Ok(Some(_))) || stop.is_stopped() {
            sender_stops.iter().for_each(StopFlag::stop);
            receiver_stop.stop();
        }
        let sent: Vec<_> = sending
            .into_iter()
            .map(|s| s.join().expect("sender thread"))
            .collect();
        let received = receiving.join().expect("receiver thread");
        (watched, sent, received)
    });
    let Some(watched) = watched? else {
        return Ok(None);
    };
    let sent = sent
        .into_iter()
        .map(|(summary, rates)| Ok((summary?, rates)))
        .collect::<anyhow::Result<_>>()?;
    Ok(Some(Ran {
        watched,
        sent,
        received: received?,
    }))
}

/// One reading of a [`Sampler`]: the reading now, the one at the sample before and the one at
/// the row before (at a row's end), with the time since each.
pub struct Reading<'a, C> {
    /// The reading now.
    pub now: &'a C,
    /// The reading at the sample before, and the time since.
    pub since_sample: (&'a C, f64),
    /// At every [`SAMPLES_PER_ROW`]-th sample: the reading at the row before, and the time
    /// since (seconds).
    pub since_row: Option<(&'a C, f64)>,
}

/// Paces a lab's watching: a reading every [`SAMPLE`], differenced against the sample before
/// (a row of the lab's CSV) and, every [`SAMPLES_PER_ROW`] samples, against the row before (a
/// row of the table it prints).
pub struct Sampler<C> {
    sample: (C, Instant),
    row: (C, Instant),
    samples: u32,
}

impl<C: Clone> Sampler<C> {
    /// A sampler whose first reading is `first`.
    pub fn new(first: C) -> Sampler<C> {
        Sampler {
            sample: (first.clone(), Instant::now()),
            row: (first, Instant::now()),
            samples: 0,
        }
    }

    /// The latest reading.
    pub fn last(&self) -> &C {
        &self.sample.0
    }

    /// Takes a reading with `read` every [`SAMPLE`] (the last one at `end`) and hands each to
    /// `on_reading`, until `end`; `false` if `stop` was set first.
    pub fn until(
        &mut self,
        end: Instant,
        stop: &StopFlag,
        mut read: impl FnMut() -> anyhow::Result<C>,
        mut on_reading: impl FnMut(Reading<'_, C>) -> anyhow::Result<()>,
    ) -> anyhow::Result<bool> {
        while Instant::now() < end {
            if stop.is_stopped() {
                return Ok(false);
            }
            std::thread::sleep(SAMPLE.min(end.saturating_duration_since(Instant::now())));
            let now = read()?;
            self.samples += 1;
            let row_due = self.samples.is_multiple_of(SAMPLES_PER_ROW);
            on_reading(Reading {
                now: &now,
                since_sample: (&self.sample.0, self.sample.1.elapsed().as_secs_f64()),
                since_row: row_due.then(|| (&self.row.0, self.row.1.elapsed().as_secs_f64())),
            })?;
            self.sample = (now.clone(), Instant::now());
            if row_due {
                self.row = (now, Instant::now());
            }
        }
        Ok(true)
    }
}

/// Jain's fairness index of `xs`: 1 when all are equal, 1/n when one has everything.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain_index(&[1.0, 0.0]), 0.5);
        assert_eq!(jain_index(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn a_sampler_reads_every_sample_and_rows_every_tenth() {
        let mut sampler = Sampler::new(0u32);
        let mut count = 0;
        let (mut samples, mut rows) = (Vec::new(), Vec::new());
        let end = Instant::now() + SAMPLE * (SAMPLES_PER_ROW + 2);
        let done = sampler
            .until(
                end,
                &StopFlag::new(),
                || {
                    count += 1;
                    Ok(count)
                },
                |r| {
                    samples.push((*r.since_sample.0, *r.now));
                    if let Some((before, _)) = r.since_row {
                        rows.push((*before, *r.now));
                    }
                    Ok(())
                },
            )
            .unwrap();
        assert!(done);
        assert!(samples.len() >= SAMPLES_PER_ROW as usize, "{samples:?}");
        assert!(samples.windows(2).all(|w| w[1].0 == w[0].1), "{samples:?}");
        assert_eq!(rows[0], (0, SAMPLES_PER_ROW));
        assert_eq!(*sampler.last(), count);
        let stopped = StopFlag::new();
        stopped.stop();
        assert!(!sampler
            .until(end + SAMPLE, &stopped, || Ok(0), |_| Ok(()))
            .unwrap());
    }
}
