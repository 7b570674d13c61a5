//! What softswitch shows of each frame a port receives and sends: the `--dump-packet-data`
//! log lines ([`PacketData`]), the `--pcap` captures ([`Capture`]) and the `--gnmi-addr`
//! counters ([`PortCounters`]), all taken where BMv2's device manager takes them: as the
//! engine reads a port's receive ring ([`received`]) and in its transmitter ([`Tapped`]).

use std::sync::Arc;

use softswitch_device::engine::Transmit;
use softswitch_device::ports;

use softswitch_server::gnmi::PortCounters;

use crate::dump::PacketData;
use crate::pcap::Capture;

/// What sees each frame port `port` receives: its log line, its capture (`input`) and its
/// count (`counters`), or `None` when none is asked for.
pub fn received(
    port: u16,
    data: PacketData,
    input: Option<Capture>,
    counters: Option<Arc<PortCounters>>,
) -> Option<ports::Tap> {
    if data == PacketData(0) && input.is_none() && counters.is_none() {
        return None;
    }
    Some(Box::new(move |frame: &[u8]| {
        data.received(port, frame);
        if let Some(input) = &input {
            input.record(frame);
        }
        if let Some(counters) = &counters {
            counters.received(frame.len());
        }
    }))
}

/// A port's transmitter that logs each frame it is given, records each frame it sent, and
/// counts both.
pub struct Tapped {
    /// The port's own transmitter.
    inner: Box<dyn Transmit>,
    /// The port.
    port: u16,
    /// How much of each frame to log.
    data: PacketData,
    /// Where the frames it sends go, if anywhere.
    output: Option<Capture>,
    /// What counts them, if anything.
    counters: Option<Arc<PortCounters>>,
}

impl Tapped {
    /// Port `port`'s transmitter `inner`, tapped as asked (itself when nothing is asked for).
    pub fn wrap(
        inner: Box<dyn Transmit>,
        port: u16,
        data: PacketData,
        output: Option<Capture>,
        counters: Option<Arc<PortCounters>>,
    ) -> Box<dyn Transmit> {
        if data == PacketData(0) && output.is_none() && counters.is_none() {
            return inner;
        }
        Box::new(Tapped {
            inner,
            port,
            data,
            output,
            counters,
        })
    }
}

impl Transmit for Tapped {
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.data.sending(self.port, frame);
        let sent = self.inner.send(frame);
        if let (Ok(()), Some(output)) = (&sent, &self.output) {
            output.record(frame);
        }
        if let Some(counters) = &self.counters {
            counters.sent(frame.len(), sent.is_ok());
        }
        sent
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn room(&mut self) -> Option<u32> {
        self.inner.room()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use pcap_file::pcap::PcapReader;
    use testkit::TempDir as Dir;

    /// A port that takes every frame but the one starting with 0xff.
    struct Port;

    impl Transmit for Port {
        fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
            match frame.first() {
                Some(0xff) => Err(std::io::ErrorKind::WouldBlock.into()),
                _ => Ok(()),
            }
        }
    }

    #[test]
    fn the_output_capture_holds_the_frames_sent_and_not_those_lost() {
        let dir = Dir::new("softswitch", "taps-output");
        let path = dir.0.join("veth1_out.pcap");
        let capture = Capture::create(&path).unwrap();
        let mut tx = Tapped::wrap(Box::new(Port), 1, PacketData(16), Some(capture), None);
        assert!(tx.send(&[1, 2, 3]).is_ok());
        assert!(tx.send(&[0xff, 0]).is_err());
        assert!(tx.send(&[4, 5]).is_ok());
        let mut reader = PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let mut frames = Vec::new();
        while let Some(packet) = reader.next_packet() {
            frames.push(packet.unwrap().data.into_owned());
        }
        assert_eq!(frames, [vec![1, 2, 3], vec![4, 5]]);
    }

    #[test]
    fn the_port_counters_count_frames_sent_and_refused_apart() {
        let counters = Arc::new(PortCounters::default());
        let mut tx = Tapped::wrap(
            Box::new(Port),
            1,
            PacketData(0),
            None,
            Some(counters.clone()),
        );
        assert!(tx.send(&[1, 2, 3]).is_ok());
        assert!(tx.send(&[0xff, 0]).is_err());
        let mut rx = received(1, PacketData(0), None, Some(counters.clone())).unwrap();
        rx(&[0; 60]);
        assert_eq!(format!("{counters:?}"), "PortCounters { in_frames: 1, in_octets: 60, out_frames: 1, out_octets: 3, out_errors: 1 }");
    }

    #[test]
    fn nothing_asked_for_taps_nothing() {
        assert!(received(1, PacketData(0), None, None).is_none());
        assert!(received(1, PacketData(8), None, None).is_some());
        assert!(received(1, PacketData(0), None, Some(Arc::default())).is_some());
    }
}
