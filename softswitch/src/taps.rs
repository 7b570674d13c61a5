//! What softswitch shows of each frame a port receives and sends: the `--dump-packet-data`
//! log lines ([`PacketData`]) and the `--pcap` captures ([`Capture`]), both taken where BMv2's
//! device manager takes them, on the port's receive thread ([`received`]) and in its
//! transmitter ([`Tapped`]).

use softswitch_device::engine::Transmit;
use softswitch_device::ports;

use crate::dump::PacketData;
use crate::pcap::Capture;

/// What sees each frame port `port` receives: its log line and its capture (`input`), or
/// `None` when neither is asked for.
pub fn received(port: u16, data: PacketData, input: Option<Capture>) -> Option<ports::Tap> {
    if data == PacketData(0) && input.is_none() {
        return None;
    }
    Some(Box::new(move |frame: &[u8]| {
        data.received(port, frame);
        if let Some(input) = &input {
            input.record(frame);
        }
    }))
}

/// A port's transmitter that logs each frame it is given and records each frame it sent.
pub struct Tapped {
    /// The port's own transmitter.
    inner: Box<dyn Transmit>,
    /// The port.
    port: u16,
    /// How much of each frame to log.
    data: PacketData,
    /// Where the frames it sends go, if anywhere.
    output: Option<Capture>,
}

impl Tapped {
    /// Port `port`'s transmitter `inner`, tapped as asked (itself when nothing is asked for).
    pub fn wrap(
        inner: Box<dyn Transmit>,
        port: u16,
        data: PacketData,
        output: Option<Capture>,
    ) -> Box<dyn Transmit> {
        if data == PacketData(0) && output.is_none() {
            return inner;
        }
        Box::new(Tapped {
            inner,
            port,
            data,
            output,
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
        sent
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn room(&mut self) -> Option<u32> {
        self.inner.room()
    }
}
