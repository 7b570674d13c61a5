//! How far BMv2 has got with the packets it was given, read from its debug log
//! (`simple_switch --log-console -L debug`): BMv2 runs ingress, egress and transmission on
//! threads of their own, and its log is the only place that says when a packet, and every
//! copy of it, is done. Which packet a transmitted frame came from is read there too.
//!
//! A packet is a set of units of work, each in ingress or in a queue or egress. The lines of
//! `targets/simple_switch/simple_switch.cpp` (BMv2 1.15) that start or end one, all logged with
//! the packet's id (`[ID.COPY]`): "Cloning packet to egress port" and "Replicating packet on
//! port" start a unit; "Dropping packet at the end of ingress" / "... of egress",
//! "Multicast requested for packet" (the original is discarded, its replicas start their own)
//! and "Transmitting packet of size S out of port P" end one. Resubmission, recirculation and
//! "Egress port is P" move a unit on. Two ends are silent in BMv2's log: a tail drop in a full
//! egress queue, and a resubmitted or recirculated packet dropped because the input buffer is
//! full; a packet lost that way is never done (the caller's wait times out saying so).

use std::collections::HashMap;

/// What one log line says about the packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The switch is up ("Thrift server was started").
    Ready,
    /// Units of packet `id` started (+) or ended (-).
    Units { id: u64, delta: i64 },
    /// A multicast of packet `id` discarded its original; its replicas' lines follow.
    Multicast { id: u64 },
    /// Packet `id` left on `port` with `size` bytes.
    Transmitted { id: u64, port: u16, size: usize },
    /// Nothing the accounting needs.
    Other,
}

/// Reads one line of BMv2's console log.
pub fn parse(line: &str) -> Event {
    if line.contains("] Thrift server was started") {
        return Event::Ready;
    }
    // `[12:00:00.000] [bmv2] [D] [thread 1] [3.0] [cxt 0] message`
    let mut rest = line;
    let mut fields = Vec::with_capacity(6);
    while fields.len() < 6 {
        let Some(inner) = rest.strip_prefix('[') else {
            break;
        };
        let Some(end) = inner.find(']') else {
            break;
        };
        fields.push(&inner[..end]);
        rest = inner[end + 1..]
            .strip_prefix(' ')
            .unwrap_or(&inner[end + 1..]);
    }
    let [_, _, "D", _, packet, context] = fields[..] else {
        return Event::Other;
    };
    if !context.starts_with("cxt ") {
        return Event::Other;
    }
    let Some(id) = packet.split_once('.').and_then(|(id, _)| id.parse().ok()) else {
        return Event::Other;
    };
    let units = |delta| Event::Units { id, delta };
    if rest.starts_with("Cloning packet to egress port ")
        || rest.starts_with("Replicating packet on port ")
    {
        return units(1);
    }
    if rest.starts_with("Dropping packet at the end of ") {
        return units(-1);
    }
    if rest.starts_with("Multicast requested for packet") {
        return Event::Multicast { id };
    }
    if let Some(sizes) = rest.strip_prefix("Transmitting packet of size ") {
        let size = sizes.split(' ').next().and_then(|s| s.parse().ok());
        let port = sizes.rsplit(' ').next().and_then(|p| p.parse().ok());
        if let (Some(size), Some(port)) = (size, port) {
            return Event::Transmitted { id, port, size };
        }
    }
    Event::Other
}

/// Units of work in flight, per packet id.
#[derive(Debug, Default)]
pub struct InFlight {
    units: HashMap<u64, i64>,
}

impl InFlight {
    /// Packet `id` was handed to the switch.
    pub fn sent(&mut self, id: u64) {
        *self.units.entry(id).or_default() += 1;
    }

    /// Applies what a log line said; an error if the count of a packet went below zero (the
    /// log and the accounting disagree).
    pub fn apply(&mut self, event: &Event) -> Result<(), String> {
        let (id, delta) = match *event {
            Event::Units { id, delta } => (id, delta),
            Event::Multicast { id } | Event::Transmitted { id, .. } => (id, -1),
            Event::Ready | Event::Other => return Ok(()),
        };
        let units = self.units.entry(id).or_default();
        *units += delta;
        match *units {
            0 => {
                self.units.remove(&id);
                Ok(())
            }
            n if n < 0 => Err(format!(
                "BMv2's log ended more work on packet {id} than began"
            )),
            _ => Ok(()),
        }
    }

    /// Whether every packet is done.
    pub fn idle(&self) -> bool {
        self.units.is_empty()
    }

    /// The packets not done, sorted.
    pub fn busy(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.units.keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(packet: &str, message: &str) -> String {
        format!("[23:18:23.821] [bmv2] [D] [thread 28660] [{packet}] [cxt 0] {message}")
    }

    #[test]
    fn lines_of_bmv2_are_read() {
        assert_eq!(
            parse("[23:18:22.003] [bmv2] [I] [thread 28655] Thrift server was started"),
            Event::Ready
        );
        assert_eq!(
            parse(&line(
                "12.3",
                "Transmitting packet of size 38 out of port 3"
            )),
            Event::Transmitted {
                id: 12,
                port: 3,
                size: 38
            }
        );
        assert_eq!(
            parse(&line("0.1", "Cloning packet to egress port 101")),
            Event::Units { id: 0, delta: 1 }
        );
        assert_eq!(
            parse(&line("4.0", "Dropping packet at the end of egress")),
            Event::Units { id: 4, delta: -1 }
        );
        assert_eq!(
            parse(&line("4.0", "Multicast requested for packet")),
            Event::Multicast { id: 4 }
        );
        assert_eq!(parse(&line("4.0", "Egress port is 3")), Event::Other);
        assert_eq!(parse("* hdr.ipv4.dstAddr    : 0a000102"), Event::Other);
        // A program's log_msg is logged at info level: never taken for the switch's own lines.
        assert_eq!(
            parse("[23:18:23.821] [bmv2] [I] [thread 1] [0.0] [cxt 0] Dropping packet at the end of egress"),
            Event::Other
        );
    }

    #[test]
    fn a_packet_is_done_when_every_copy_is() {
        let mut flight = InFlight::default();
        flight.sent(0);
        for event in [
            parse(&line("0.0", "Cloning packet to egress port 5")),
            parse(&line("0.0", "Transmitting packet of size 60 out of port 1")),
        ] {
            flight.apply(&event).unwrap();
        }
        assert_eq!(flight.busy(), [0]);
        flight
            .apply(&parse(&line("0.1", "Dropping packet at the end of egress")))
            .unwrap();
        assert!(flight.idle());
        assert!(flight
            .apply(&parse(&line("0.1", "Dropping packet at the end of egress")))
            .is_err());
    }
}
