//! A switch of the fabric: softswitch's core running the P4 program, its traffic manager
//! serving each port when that port's link can take a frame ([`Serving::OnTransmit`]), and a
//! MAC per port that honours received PFC frames as a switch's MAC does: a paused priority is
//! not served until the pause ends (the frame also goes to the program, which counts and
//! records it). Frames the switch makes itself (PAUSE, resume, CNP clones) are queued at the
//! top priority, as a MAC sends control frames ahead of data. A PAUSE the program sends stays in
//! force until the program sends its resume: the MAC re-sends it before it runs out
//! ([`SentPauses`]), as a switch keeps a priority paused while its queue stays over XOFF.

use std::sync::Arc;

use hdrhistogram::Histogram;
use softswitch_core::ir::Program;
use softswitch_core::switch::{Clock, Serving, Switch, Transmit};
use softswitch_core::tm::PRIORITIES;
use wire::{ethernet, pfc};

use crate::event::{Event, EventQueue, LinkId, NodeId};
use crate::frame::{self, Frame};
use crate::link::Wires;
use crate::time::{bits_ps, frame_ps, whole_us, Ps};

/// The priority the switch's own frames (clones) are queued at.
pub const CONTROL_PRIORITY: u8 = 7;

/// Significant figures of the queue-depth histograms: 1% steps, about 60 kB a switch up to a
/// terabyte of queue.
pub const QUEUE_FIGURES: u8 = 2;

/// A recirculation pass takes as long as a frame of this many bytes on the port's link.
pub const MIN_PASS_BYTES: u64 = 64;
/// The fewest PFC frames' time between two refreshes of a PAUSE by a MAC, so that a tiny pause
/// time (`pfc.pause_us` of a few µs) cannot fill its port with refreshes: at most an eighth of
/// the link.
const REFRESH_MIN_FRAMES: u64 = 8;

/// The highest port a switch may use (v1model's egress_spec is 9 bits; 511 drops).
pub const MAX_PORT: u16 = 510;

/// What the simulator saw of one switch, beside the program's own counters.
#[derive(Debug)]
pub struct SwitchStats {
    /// PFC frames received per port that paused (quanta > 0) each priority.
    pub pauses_received: Vec<[u64; PRIORITIES]>,
    /// Time each port's priority was held by a received pause, picoseconds.
    pub paused_ps: Vec<[Ps; PRIORITIES]>,
    /// Bytes queued on the port's priority as each data packet left (itself included).
    pub queue_bytes: Histogram<u64>,
    /// Frames the program sent to a port with no link.
    pub unconnected: u64,
    /// PAUSE frames the MACs re-sent to keep a pause of the program's in force.
    pub pauses_refreshed: u64,
}

/// The PAUSEs the program has sent out of one port and not yet ended with a resume. A switch
/// keeps a priority paused for as long as the queue that caused the pause stays over XOFF, its
/// MAC re-sending the PAUSE before the quanta run out; lossless.p4 decides when to pause and
/// when to resume, but re-sends a PAUSE only when a frame arrives for the full queue, and none
/// arrives from the upstream it has paused (on BMv2 its hold's recirculations do). So the MAC
/// re-sends the program's last PAUSE of a priority at half its pause time until the program
/// sends the resume, while the switch holds packets of that priority: a pause of packets that
/// have all gone (a count of the program's left high by a drop) is left to run out.
#[derive(Clone, Copy, Debug, Default)]
struct SentPauses {
    /// The source address of the program's PAUSE frames on this port.
    src: [u8; 6],
    /// Per priority: the quanta of the program's last PAUSE (0: none, or resumed since).
    quanta: [u16; PRIORITIES],
    /// Per priority: when the MAC re-sends it (meaningful while `quanta` is above 0).
    refresh_at: [Ps; PRIORITIES],
}

/// A switch node.
pub struct SwitchNode {
    /// Its name.
    pub name: String,
    /// The switch.
    pub core: Switch,
    /// Outgoing link of each port.
    out: Vec<Option<LinkId>>,
    /// Whether each port's transmitter is sending.
    busy: Vec<bool>,
    /// Per port and priority, until when a received PFC frame holds it.
    paused_until: Vec<[Ps; PRIORITIES]>,
    /// Per port, the time of the wake-up scheduled for it (0: none).
    wake_at: Vec<Ps>,
    /// Per port, the program's PAUSEs the MAC keeps in force.
    sent_pauses: Vec<SentPauses>,
    backlogged: Vec<u16>,
    /// What the simulator saw.
    pub stats: SwitchStats,
}

impl SwitchNode {
    /// A switch running `program`, its shared buffer `buffer_bytes` (`None`: the core's
    /// packet bound only), every queue as deep as the core allows so that the buffer decides.
    pub fn new(name: String, program: Arc<Program>, buffer_bytes: Option<u64>) -> Self {
        let mut core = Switch::new(program, Clock::Virtual(0));
        core.set_serving(Serving::OnTransmit);
        core.set_clone_priority(Some(CONTROL_PRIORITY));
        core.set_buffer_bytes(buffer_bytes);
        core.set_queue_depth(None, None, softswitch_core::tm::MAX_DEPTH)
            .expect("the deepest queue is a valid depth");
        SwitchNode {
            name,
            core,
            out: Vec::new(),
            busy: Vec::new(),
            paused_until: Vec::new(),
            wake_at: Vec::new(),
            sent_pauses: Vec::new(),
            backlogged: Vec::new(),
            stats: SwitchStats {
                pauses_received: Vec::new(),
                paused_ps: Vec::new(),
                queue_bytes: Histogram::new(QUEUE_FIGURES)
                    .expect("2 significant figures are valid"),
                unconnected: 0,
                pauses_refreshed: 0,
            },
        }
    }

    /// Connects `port`'s transmitter to `link`.
    pub fn attach(&mut self, port: u16, link: LinkId) {
        let n = usize::from(port) + 1;
        if self.out.len() < n {
            self.out.resize(n, None);
            self.busy.resize(n, false);
            self.paused_until.resize(n, [0; PRIORITIES]);
            self.wake_at.resize(n, 0);
            self.sent_pauses.resize(n, SentPauses::default());
            self.stats.pauses_received.resize(n, [0; PRIORITIES]);
            self.stats.paused_ps.resize(n, [0; PRIORITIES]);
        }
        self.out[usize::from(port)] = Some(link);
    }

    /// The link `port` sends on.
    pub fn link(&self, port: u16) -> Option<LinkId> {
        self.out.get(usize::from(port)).copied().flatten()
    }

    /// A frame arrives on `port` at `now`. A PFC frame goes to the program first (which
    /// records the pause where its egress reads it), then holds the MAC.
    pub fn receive(
        &mut self,
        node: NodeId,
        port: u16,
        frame: Frame,
        now: Ps,
        wires: &mut Wires<'_>,
    ) {
        let pause = pfc::Repr::parse_frame(&frame.data).ok();
        self.core.set_time_us(whole_us(now));
        self.core.receive_sized(port, frame.data, frame.unstored);
        if let Some(p) = pause {
            self.pause(node, port, &p, now, wires);
        }
        self.send_backlogged(node, now, wires);
    }

    /// Sends on every port whose queues went from empty to holding a packet (the ingress of a
    /// frame, or an egress that cloned, can queue on any port), and on the ports those sends
    /// backlog in turn.
    fn send_backlogged(&mut self, node: NodeId, now: Ps, wires: &mut Wires<'_>) {
        let mut ports = std::mem::take(&mut self.backlogged);
        self.core.take_backlogged(&mut ports);
        while let Some(p) = ports.pop() {
            self.send_port(node, p, now, wires);
            self.core.take_backlogged(&mut ports);
        }
        self.backlogged = ports;
    }

    /// Sends on `port`, then on whatever that backlogs.
    fn send(&mut self, node: NodeId, port: u16, now: Ps, wires: &mut Wires<'_>) {
        self.send_port(node, port, now, wires);
        self.send_backlogged(node, now, wires);
    }

    /// A PFC frame received on `port`: holds (or frees) its priorities on that port's
    /// transmitter for the frame's quanta at the port's link rate.
    fn pause(&mut self, node: NodeId, port: u16, p: &pfc::Repr, now: Ps, wires: &mut Wires<'_>) {
        let Some(link) = self.link(port) else { return };
        let rate = wires.links[link as usize].rate_bps;
        let port_index = usize::from(port);
        for prio in 0..PRIORITIES {
            if p.class_enable & (1 << prio) == 0 {
                continue;
            }
            let quanta = p.pause_times[prio];
            let until = now + bits_ps(u64::from(quanta) * pfc::BITS_PER_QUANTUM, rate);
            // Time is counted up to each pause's end when it starts; a pause that replaces
            // one before its end takes back what had not elapsed.
            let held = &mut self.paused_until[port_index][prio];
            let total = &mut self.stats.paused_ps[port_index][prio];
            *total = *total - held.saturating_sub(now) + (until - now);
            *held = until;
            if quanta > 0 {
                self.stats.pauses_received[port_index][prio] += 1;
            }
        }
        self.send(node, port, now, wires);
    }

    /// `port`'s transmitter is free at `now` (its last frame is out).
    pub fn transmitted(&mut self, node: NodeId, port: u16, now: Ps, wires: &mut Wires<'_>) {
        self.busy[usize::from(port)] = false;
        self.send(node, port, now, wires);
    }

    /// A wake-up for `port` comes due.
    pub fn wake(&mut self, node: NodeId, port: u16, now: Ps, wires: &mut Wires<'_>) {
        let at = &mut self.wake_at[usize::from(port)];
        if *at == now {
            *at = 0;
            self.send(node, port, now, wires);
        }
    }

    /// Time each port's priority was held by received pauses up to `end` (a pause still on at
    /// `end` counts to `end`).
    pub fn paused_ps(&self, end: Ps) -> Vec<[Ps; PRIORITIES]> {
        self.stats
            .paused_ps
            .iter()
            .zip(&self.paused_until)
            .map(|(total, until)| std::array::from_fn(|p| total[p] - until[p].saturating_sub(end)))
            .collect()
    }

    /// Sends `port`'s next frame if its transmitter is free and an unpaused queue holds one;
    /// if only paused queues do, wakes the port when the first pause ends.
    fn send_port(&mut self, node: NodeId, port: u16, now: Ps, wires: &mut Wires<'_>) {
        let index = usize::from(port);
        let Some(link) = self.link(port) else {
            // A port with no cable: what the program sends there is lost.
            self.core.set_time_us(whole_us(now));
            while self.core.transmit(port, 0xff) != Transmit::Idle {
                self.stats.unconnected += 1;
            }
            return;
        };
        if self.busy[index] {
            return;
        }
        let rate = wires.links[link as usize].rate_bps;
        if let Some(frame) = self.due_refresh(index, now, rate) {
            self.stats.pauses_refreshed += 1;
            self.busy[index] = true;
            wires.links[link as usize].send(link, now, frame, wires.events);
            return;
        }
        let paused = &self.paused_until[index];
        let eligible = (0..PRIORITIES)
            .filter(|&p| paused[p] <= now)
            .fold(0u8, |m, p| m | 1 << p);
        self.core.set_time_us(whole_us(now));
        match self.core.transmit(port, eligible) {
            Transmit::Frame(t) => {
                let frame = Frame {
                    data: t.data,
                    unstored: t.unstored,
                };
                if t.priority != CONTROL_PRIORITY {
                    let queued = self.core.queue_bytes(port, t.priority) + frame.len();
                    // The histogram grows to what it is given: recording cannot fail.
                    let _ = self.stats.queue_bytes.record(queued);
                } else {
                    self.sent_pfc(index, &frame.data, now, rate);
                }
                self.busy[index] = true;
                wires.links[link as usize].send(link, now, frame, wires.events);
            }
            Transmit::Recirculated => {
                // The pass takes the pipeline as long as a frame of the port's link would:
                // the port looks again then.
                let at = now + frame_ps(MIN_PASS_BYTES, rate);
                self.wake_later(node, port, at, now, wires.events);
            }
            Transmit::Idle => {
                let resume = (0..PRIORITIES)
                    .filter(|&p| paused[p] > now && self.core.queue_occupancy(port, p as u8) > 0)
                    .map(|p| paused[p]);
                let sent = &self.sent_pauses[index];
                let refresh = (0..PRIORITIES)
                    .filter(|&p| sent.quanta[p] > 0)
                    .map(|p| sent.refresh_at[p]);
                if let Some(at) = resume.chain(refresh).min() {
                    self.wake_later(node, port, at, now, wires.events);
                }
            }
        }
    }

    /// Half the time `quanta` pause a link of `rate_bps`: when the MAC re-sends a PAUSE, well
    /// before it runs out at the far end whatever frame its refresh waits behind. Never sooner
    /// than [`REFRESH_MIN_FRAMES`] PFC frames' time, so refreshes (sent ahead of data) take at
    /// most that share of the link: a pause shorter than that may lapse between refreshes.
    fn refresh_after(quanta: u16, rate_bps: u64) -> Ps {
        let half = bits_ps(u64::from(quanta) * pfc::BITS_PER_QUANTUM, rate_bps) / 2;
        half.max(REFRESH_MIN_FRAMES * frame_ps(pfc::FRAME_LEN as u64, rate_bps))
    }

    /// The program's frame `data`, just sent on port `index` at `now`: if it is a PFC frame,
    /// its PAUSEs are kept in force from now on and its resumes end theirs.
    fn sent_pfc(&mut self, index: usize, data: &[u8], now: Ps, rate_bps: u64) {
        let Ok(p) = pfc::Repr::parse_frame(data) else {
            return;
        };
        let sent = &mut self.sent_pauses[index];
        if let Ok(f) = ethernet::Frame::new_checked(data) {
            sent.src = f.src_addr().0;
        }
        for prio in (0..PRIORITIES).filter(|&prio| p.class_enable & (1 << prio) != 0) {
            let quanta = p.pause_times[prio];
            sent.quanta[prio] = quanta;
            sent.refresh_at[prio] = now + Self::refresh_after(quanta, rate_bps);
        }
    }

    /// The PAUSE the MAC re-sends on port `index` at `now`, if one is due. A due pause whose
    /// priority no longer has a packet in the switch is let go instead.
    fn due_refresh(&mut self, index: usize, now: Ps, rate_bps: u64) -> Option<Frame> {
        loop {
            let sent = &self.sent_pauses[index];
            let prio =
                (0..PRIORITIES).find(|&p| sent.quanta[p] > 0 && sent.refresh_at[p] <= now)?;
            let holds = self
                .core
                .queue_ports()
                .any(|q| self.core.queue_occupancy(q, prio as u8) > 0);
            let sent = &mut self.sent_pauses[index];
            if holds {
                let quanta = sent.quanta[prio];
                sent.refresh_at[prio] = now + Self::refresh_after(quanta, rate_bps);
                return Some(frame::pfc(sent.src, 1 << prio, quanta));
            }
            sent.quanta[prio] = 0;
        }
    }

    /// Wakes `port` at `at`, unless an earlier wake-up is due.
    fn wake_later(&mut self, node: NodeId, port: u16, at: Ps, now: Ps, events: &mut EventQueue) {
        let wake = &mut self.wake_at[usize::from(port)];
        if *wake == 0 || *wake > at || *wake < now {
            *wake = at;
            events.at(at, Event::Wake(node, port));
        }
    }
}
