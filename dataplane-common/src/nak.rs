//! RoCEv2 NAKs as the host programs count them: an RC Acknowledge (BTH opcode 0x11) whose AETH
//! syndrome says NAK (by its code, [`wire::aeth::NakCode`]) or RNR NAK. Counted at XDP as
//! received and at TC egress as sent, per interface and per QP (the BTH DestQP, which is the
//! requester's QP on both ends).

use wire::aeth::{NakCode, Syndrome};

use crate::Hook;

counters! {
    /// NAKs of one direction, by syndrome.
    pub struct NakCounters {
        /// NAK, PSN sequence error (a lost packet: the requester goes back N).
        pub psn_sequence_error: u64,
        /// NAK, invalid request.
        pub invalid_request: u64,
        /// NAK, remote access error.
        pub remote_access_error: u64,
        /// NAK, remote operational error.
        pub remote_operational_error: u64,
        /// NAK, invalid RD request.
        pub invalid_rd_request: u64,
        /// NAK with a reserved code.
        pub reserved_code: u64,
        /// RNR NAK (receiver not ready), any timer value.
        pub rnr_nak: u64,
    }
}

impl NakCounters {
    /// Counts the AETH syndrome byte `syndrome` if it is a NAK or an RNR NAK; returns whether
    /// it was one.
    #[inline(always)]
    pub fn count(&mut self, syndrome: u8) -> bool {
        let slot = match Syndrome::from(syndrome) {
            Syndrome::RnrNak(_) => &mut self.rnr_nak,
            Syndrome::Nak(code) => match NakCode::from_code(code) {
                Some(NakCode::PsnSequenceError) => &mut self.psn_sequence_error,
                Some(NakCode::InvalidRequest) => &mut self.invalid_request,
                Some(NakCode::RemoteAccessError) => &mut self.remote_access_error,
                Some(NakCode::RemoteOperationalError) => &mut self.remote_operational_error,
                Some(NakCode::InvalidRdRequest) => &mut self.invalid_rd_request,
                None => &mut self.reserved_code,
            },
            Syndrome::Ack(_) | Syndrome::Reserved(_) => return false,
        };
        *slot += 1;
        true
    }

    /// Each counter with its name (as in JSON: the [`NakCode`] names, `reserved_code`,
    /// `rnr_nak`).
    pub fn by_syndrome(&self) -> [(&'static str, u64); 7] {
        let NakCounters {
            psn_sequence_error,
            invalid_request,
            remote_access_error,
            remote_operational_error,
            invalid_rd_request,
            reserved_code,
            rnr_nak,
        } = *self;
        [
            (NakCode::PsnSequenceError.name(), psn_sequence_error),
            (NakCode::InvalidRequest.name(), invalid_request),
            (NakCode::RemoteAccessError.name(), remote_access_error),
            (
                NakCode::RemoteOperationalError.name(),
                remote_operational_error,
            ),
            (NakCode::InvalidRdRequest.name(), invalid_rd_request),
            ("reserved_code", reserved_code),
            ("rnr_nak", rnr_nak),
        ]
    }

    /// Every NAK of every syndrome, RNR NAKs included.
    pub fn total(&self) -> u64 {
        self.by_syndrome().iter().map(|(_, n)| n).sum()
    }
}

/// Whether the AETH syndrome byte `syndrome` says NAK (any code) or RNR NAK: what
/// [`NakCounters::count`] counts.
#[inline(always)]
pub fn is_nak(syndrome: u8) -> bool {
    matches!(
        Syndrome::from(syndrome),
        Syndrome::Nak(_) | Syndrome::RnrNak(_)
    )
}

/// The NAKs of one QP, by hook: index [`Hook::Xdp`] received, [`Hook::TcEgress`] sent. Shared
/// by all CPUs; two CPUs counting the same QP at once may lose one count.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NakQpCounters {
    /// Indexed by [`Hook`].
    pub per_hook: [NakCounters; Hook::COUNT],
}

// SAFETY: plain `#[repr(C)]` records of `u64`s without padding.
pod!(NakCounters, NakQpCounters);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nak_syndrome_has_its_counter_and_acks_have_none() {
        let mut counters = NakCounters::default();
        for code in NakCode::ALL {
            assert!(counters.count(Syndrome::Nak(code as u8).byte()));
        }
        assert!(counters.count(Syndrome::Nak(0x1f).byte()));
        assert!(counters.count(Syndrome::RnrNak(0x0e).byte()));
        assert!(!counters.count(Syndrome::Ack(0x1f).byte()));
        assert!(!counters.count(0x40), "a reserved syndrome is no NAK");
        assert!(counters.by_syndrome().iter().all(|(_, n)| *n == 1));
        assert!(is_nak(Syndrome::RnrNak(1).byte()) && !is_nak(Syndrome::Ack(0x1f).byte()));
        assert_eq!(counters.total(), 7);
    }
}
