//! `--dump-packet-data N` (BMv2's): the first N bytes of every frame a port receives and every
//! frame it sends, in hex, as info lines of the log, worded as BMv2's device manager words them
//! (`Received packet of length 102 on port 1: 0800...`, `Sending packet of length ...`), so
//! they show wherever the log goes (`--log-console`, `--log-file`) when it takes info lines.

use std::fmt;

/// A frame's first bytes as lowercase hex without separators, as BMv2 prints them.
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// How many bytes of each frame to log; 0 logs nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketData(pub usize);

impl PacketData {
    /// Logs `frame`, received on `port`.
    pub fn received(self, port: u16, frame: &[u8]) {
        self.log("Received", port, frame);
    }

    /// Logs `frame`, about to be sent on `port`.
    pub fn sending(self, port: u16, frame: &[u8]) {
        self.log("Sending", port, frame);
    }

    /// Logs `frame` as BMv2 words it, `what` saying whether it was received or is being sent.
    fn log(self, what: &str, port: u16, frame: &[u8]) {
        if self.0 > 0 {
            tracing::info!(
                "{what} packet of length {} on port {port}: {}",
                frame.len(),
                Hex(&frame[..frame.len().min(self.0)])
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_lowercase_hex_without_separators() {
        assert_eq!(Hex(&[0x08, 0x00, 0xab, 0xff]).to_string(), "0800abff");
        assert_eq!(Hex(&[]).to_string(), "");
    }
}
