//! The ACK Extended Transport Header: the 4 bytes after the BTH of an RC Acknowledge
//! (opcode 0x11), a syndrome (what the ACK says: ACK with credits, RNR NAK, NAK) and the
//! message sequence number of the responder.

use core::fmt;

use super::{read_u24, view, write_u24, Result};

mod field {
    use crate::Field;

    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
    pub const PAYLOAD: usize = 4;
}

/// Length of the AETH.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// What an Acknowledge says, from the top 3 bits of its syndrome (InfiniBand spec, 9.7.5.2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syndrome {
    /// ACK; the low 5 bits are the credit count code (0x1f: credits not given).
    Ack(u8),
    /// Receiver not ready; the low 5 bits are the RNR timer code.
    RnrNak(u8),
    /// NAK; the low 5 bits say why ([`NakCode`]).
    Nak(u8),
    /// A reserved top-3-bits value, with the whole syndrome.
    Reserved(u8),
}

impl Syndrome {
    /// The syndrome byte of this meaning.
    pub fn byte(self) -> u8 {
        match self {
            Syndrome::Ack(code) => code & 0x1f,
            Syndrome::RnrNak(code) => 0x20 | (code & 0x1f),
            Syndrome::Nak(code) => 0x60 | (code & 0x1f),
            Syndrome::Reserved(byte) => byte,
        }
    }
}

crate::named_enum! {
    /// Why a NAK was sent: the low 5 bits of a NAK syndrome (InfiniBand spec, 9.7.5.2.6), its
    /// number; the other values are reserved. Named as JSON, metrics and tables name it
    /// (`psn_sequence_error`, ...).
    #[repr(u8)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum NakCode {
        /// PSN sequence error: a packet arrived past the expected PSN (a lost packet); the
        /// requester goes back to the NAK's PSN.
        PsnSequenceError => "psn_sequence_error",
        /// Invalid request: unsupported opcode, or a length the responder cannot take.
        InvalidRequest => "invalid_request",
        /// Remote access error: an R_Key or address the responder refuses.
        RemoteAccessError => "remote_access_error",
        /// Remote operational error: the responder could not complete the request.
        RemoteOperationalError => "remote_operational_error",
        /// Invalid RD request (reliable datagram).
        InvalidRdRequest => "invalid_rd_request",
    }
}

impl NakCode {
    /// The code of the low 5 bits `code`, or `None` for a reserved value.
    pub const fn from_code(code: u8) -> Option<NakCode> {
        Self::from_index(code as usize)
    }
}

impl From<u8> for Syndrome {
    fn from(byte: u8) -> Self {
        let code = byte & 0x1f;
        match byte >> 5 {
            0 => Syndrome::Ack(code),
            1 => Syndrome::RnrNak(code),
            3 => Syndrome::Nak(code),
            _ => Syndrome::Reserved(byte),
        }
    }
}

view! {
    /// A read/write view of an AETH and what follows it.
    Packet,
    /// Fails with `Truncated` if the buffer cannot hold an AETH.
    check_len = HEADER_LEN,
    /// What follows the AETH (payload of an atomic acknowledge, or the ICRC).
    payload
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// The message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::MSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the syndrome byte.
    pub fn set_syndrome(&mut self, value: u8) {
        self.buffer.as_mut()[field::SYNDROME] = value;
    }

    /// Sets the message sequence number (low 24 bits).
    pub fn set_msn(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), field::MSN.start, value);
    }
}

/// An AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// What the acknowledge says.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Reads an AETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            syndrome: packet.syndrome().into(),
            msn: packet.msn(),
        }
    }

    /// Length of the header.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        packet.check_len()?;
        packet.set_syndrome(self.syndrome.byte());
        packet.set_msn(self.msn);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AETH {:?} msn={}", self.syndrome, self.msn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bth, vectors, Error};

    /// The AETH of vectors::ACK_V4: `AETH(syndrome=0x1f, msn=0x000102)`, after its BTH.
    fn scapy_aeth() -> &'static [u8] {
        &vectors::ACK_V4[54..58]
    }

    #[test]
    fn parse_scapy() {
        let bth = bth::Packet::new_checked(&vectors::ACK_V4[42..]).unwrap();
        assert_eq!(bth.opcode(), bth::Opcode::RcAck);
        let packet = Packet::new_checked(bth.payload()).unwrap();
        assert_eq!(
            Repr::parse(&packet),
            Repr {
                syndrome: Syndrome::Ack(0x1f),
                msn: 0x102
            }
        );
        assert_eq!(packet.payload().len(), 4, "the ICRC follows");
    }

    #[test]
    fn emit_round_trip() {
        let repr = Repr::parse(&Packet::new_checked(scapy_aeth()).unwrap());
        let mut out = [0u8; HEADER_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, scapy_aeth());
        for syndrome in [
            Syndrome::RnrNak(0x0e),
            Syndrome::Nak(0),
            Syndrome::Reserved(0x40),
        ] {
            let repr = Repr {
                syndrome,
                msn: 0xabcdef,
            };
            repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
            assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()), repr);
        }
        assert_eq!(out[1..], [0xab, 0xcd, 0xef]);
    }

    #[test]
    fn nak_codes_follow_their_values() {
        for (value, code) in NakCode::ALL.iter().enumerate() {
            assert_eq!(*code as usize, value);
            assert_eq!(NakCode::from_code(value as u8), Some(*code));
            assert_eq!(
                Syndrome::from(Syndrome::Nak(*code as u8).byte()),
                Syndrome::Nak(value as u8)
            );
        }
        assert_eq!(NakCode::from_code(5), None);
        assert_eq!(Syndrome::Nak(NakCode::PsnSequenceError as u8).byte(), 0x60);
    }

    #[test]
    fn truncated() {
        crate::assert_prefixes_truncated(&scapy_aeth()[..HEADER_LEN], |b| {
            Packet::new_checked(b).map(drop)
        });
        let repr = Repr {
            syndrome: Syndrome::Ack(0),
            msn: 0,
        };
        assert_eq!(
            repr.emit(&mut Packet::new_unchecked(&mut [0u8; 3][..])),
            Err(Error::Truncated)
        );
    }
}
