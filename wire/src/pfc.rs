//! IEEE 802.1Qbb priority-based flow control: a MAC control frame (EtherType
//! 0x8808, opcode 0x0101) to 01:80:c2:00:00:01 with a class-enable vector and
//! eight pause times in quanta of 512 bit times, padded to the minimum frame.

use core::fmt;

use super::ethernet::{self, Address, EtherType, Vlan, MIN_FRAME_LEN};
use super::{check_len, read_u16, view, write_u16, Error, Result};

/// The destination address of PAUSE and PFC frames.
pub const DST_ADDR: Address = Address([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);

/// The MAC control opcode of PFC.
pub const OPCODE: u16 = 0x0101;

/// Number of priorities.
pub const PRIORITIES: usize = 8;

/// Length of a PFC frame without FCS (padded to the Ethernet minimum).
pub const FRAME_LEN: usize = MIN_FRAME_LEN;

/// Bit times in one pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

/// How long `quanta` pause quanta last on a link of `link_bps` bits per second, in ns (a link
/// of 0 b/s counts as 1 b/s).
#[inline(always)]
pub const fn quanta_to_ns(quanta: u16, link_bps: u64) -> u64 {
    // quanta × 512 × 10^9 < 2^56: no overflow, and no 128-bit division (which eBPF lacks).
    (quanta as u64 * BITS_PER_QUANTUM * 1_000_000_000) / if link_bps == 0 { 1 } else { link_bps }
}

mod field {
    use crate::Field;

    pub const OPCODE: Field = 0..2;
    pub const CLASS_ENABLE: Field = 2..4;
    pub const TIMES: Field = 4..20;
}

/// Length of the PFC body after the EtherType.
pub const BODY_LEN: usize = field::TIMES.end;

view! {
    /// A read/write view of a PFC body: what follows the MAC-control EtherType.
    Packet,
    /// Fails with `Truncated` if the buffer cannot hold a PFC body.
    check_len = BODY_LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// MAC control opcode (0x0101 for PFC).
    pub fn opcode(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::OPCODE.start)
    }

    /// Class-enable vector: bit i enables priority i; bits 8..15 are reserved.
    pub fn class_enable(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CLASS_ENABLE.start)
    }

    /// Pause time of `priority` (0..=7) in quanta.
    pub fn pause_time(&self, priority: usize) -> u16 {
        read_u16(self.buffer.as_ref(), field::TIMES.start + 2 * priority)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the MAC control opcode.
    pub fn set_opcode(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::OPCODE.start, value);
    }

    /// Sets the class-enable vector.
    pub fn set_class_enable(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), field::CLASS_ENABLE.start, value);
    }

    /// Sets the pause time of `priority` (0..=7) in quanta.
    pub fn set_pause_time(&mut self, priority: usize, quanta: u16) {
        write_u16(
            self.buffer.as_mut(),
            field::TIMES.start + 2 * priority,
            quanta,
        );
    }
}

/// A PFC frame's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    /// Bit i set: the frame applies to priority i.
    pub class_enable: u8,
    /// Pause time per priority in quanta; 0 on an enabled priority means resume (XON).
    pub pause_times: [u16; PRIORITIES],
}

impl Repr {
    /// Pauses the priorities of `mask` for `quanta`, or resumes them if `quanta` is 0.
    pub fn new(mask: u8, quanta: u16) -> Repr {
        let mut pause_times = [0; PRIORITIES];
        for (priority, time) in pause_times.iter_mut().enumerate() {
            if mask & (1 << priority) != 0 {
                *time = quanta;
            }
        }
        Repr {
            class_enable: mask,
            pause_times,
        }
    }

    /// Reads a PFC body; fails with `Malformed` on another opcode or reserved vector bits.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        if packet.opcode() != OPCODE {
            return Err(Error::Malformed("MAC control opcode is not PFC"));
        }
        let class_enable = u8::try_from(packet.class_enable())
            .map_err(|_| Error::Malformed("PFC class-enable vector has reserved bits set"))?;
        let mut pause_times = [0; PRIORITIES];
        for (priority, time) in pause_times.iter_mut().enumerate() {
            *time = packet.pause_time(priority);
        }
        Ok(Repr {
            class_enable,
            pause_times,
        })
    }

    /// Reads a whole frame: Ethernet header (untagged, to the PFC address) and body.
    pub fn parse_frame(frame: &[u8]) -> Result<Repr> {
        let frame = ethernet::Frame::new_checked(frame)?;
        let header = ethernet::Repr::parse(&frame)?;
        if header.ethertype != EtherType::MacControl
            || header.dst_addr != DST_ADDR
            || !header.vlan.is_empty()
        {
            return Err(Error::Unsupported(
                "not a MAC control frame to 01:80:c2:00:00:01",
            ));
        }
        Repr::parse(&Packet::new_checked(frame.payload())?)
    }

    /// Length of the body.
    pub fn buffer_len(&self) -> usize {
        BODY_LEN
    }

    /// Writes the body.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_len(packet.buffer.as_ref(), BODY_LEN)?;
        packet.set_opcode(OPCODE);
        packet.set_class_enable(u16::from(self.class_enable));
        for (priority, time) in self.pause_times.iter().enumerate() {
            packet.set_pause_time(priority, *time);
        }
        Ok(())
    }

    /// Writes a whole frame from `src_addr`, zero-padded to `FRAME_LEN` bytes,
    /// into the start of `buffer`; returns its length.
    pub fn emit_frame(&self, src_addr: Address, buffer: &mut [u8]) -> Result<usize> {
        check_len(buffer, FRAME_LEN)?;
        let header = ethernet::Repr {
            dst_addr: DST_ADDR,
            src_addr,
            vlan: Vlan::Untagged,
            ethertype: EtherType::MacControl,
        };
        let mut frame = ethernet::Frame::new_unchecked(&mut buffer[..FRAME_LEN]);
        header.emit(&mut frame)?;
        self.emit(&mut Packet::new_unchecked(frame.payload_mut()))?;
        frame.payload_mut()[BODY_LEN..].fill(0);
        Ok(FRAME_LEN)
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PFC enable={:#04x} times={:?}",
            self.class_enable, self.pause_times
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;

    fn expected() -> Repr {
        let mut repr = Repr {
            class_enable: 0x48,
            ..Repr::default()
        };
        repr.pause_times[3] = 0xffff;
        repr.pause_times[6] = 0x1234;
        repr
    }

    #[test]
    fn parse_scapy() {
        let frame = vectors::PFC.to_vec();
        assert_eq!(Repr::parse_frame(&frame).unwrap(), expected());
    }

    #[test]
    fn emit_matches_scapy() {
        let frame = vectors::PFC.to_vec();
        let mut out = [0xaau8; 64];
        let len = expected().emit_frame(vectors::SRC, &mut out).unwrap();
        assert_eq!(out[..len], frame[..]);
    }

    #[test]
    fn pause_and_resume() {
        let pause = Repr::new(0b1000_1000, 0xffff);
        assert_eq!(pause.pause_times, [0, 0, 0, 0xffff, 0, 0, 0, 0xffff]);
        assert_eq!(Repr::new(0b1000, 0).pause_times, [0; 8]);
        // 65535 quanta at 100 Gb/s: 65535 * 5.12 ns.
        assert_eq!(quanta_to_ns(0xffff, 100_000_000_000), 335_539);
    }

    #[test]
    fn quanta_at_link_speeds() {
        // One quantum at 100 Gb/s is 5.12 ns; 0xffff quanta at 1 Gb/s about 33.55 ms.
        assert_eq!(quanta_to_ns(100, 100_000_000_000), 512);
        assert_eq!(quanta_to_ns(0xffff, 1_000_000_000), 33_553_920);
        assert_eq!(quanta_to_ns(0, 1_000_000_000), 0);
    }

    #[test]
    fn malformed() {
        let mut frame = vectors::PFC.to_vec();
        frame[14..16].copy_from_slice(&[0x00, 0x01]); // 802.3x PAUSE opcode
        assert!(matches!(
            Repr::parse_frame(&frame),
            Err(Error::Malformed(_))
        ));
        let mut frame = vectors::PFC.to_vec();
        frame[16] = 1; // reserved vector bit
        assert!(matches!(
            Repr::parse_frame(&frame),
            Err(Error::Malformed(_))
        ));
        let mut frame = vectors::PFC.to_vec();
        frame[0] = 0x03; // another destination
        assert!(matches!(
            Repr::parse_frame(&frame),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn truncated() {
        let frame = vectors::PFC.to_vec();
        crate::assert_prefixes_truncated(&frame[..14 + BODY_LEN], |b| {
            Repr::parse_frame(b).map(drop)
        });
        assert_eq!(
            expected().emit_frame(Address::default(), &mut [0u8; 59]),
            Err(Error::Truncated)
        );
    }
}
