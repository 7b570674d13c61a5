//! RED (random early detection) marking: the probability of marking as a function of backlog.

use crate::config::EcnProfile;

/// Fixed-point 1.0 for [`EcnProfile::pmax_fixed`] and [`mark_threshold`]: probabilities are
/// kept in units of 2^-24, compared against the top 24 bits of a random `u32`.
pub const PMAX_ONE: u32 = 1 << 24;

/// The marking probability at `backlog_bytes`, in units of 1/[`PMAX_ONE`]:
/// 0 below Kmin, Pmax·(q−Kmin)/(Kmax−Kmin) between, [`PMAX_ONE`] (certain) at or above Kmax.
#[inline(always)]
pub fn mark_threshold(profile: &EcnProfile, backlog_bytes: u64) -> u32 {
    let kmin = profile.kmin_bytes as u64;
    let kmax = profile.kmax_bytes as u64;
    if backlog_bytes < kmin {
        return 0;
    }
    if backlog_bytes >= kmax || kmax <= kmin {
        return PMAX_ONE;
    }
    // (q - kmin) < (kmax - kmin) <= 2^32 and pmax <= 2^24: the product fits in 56 bits.
    ((profile.pmax_fixed as u64 * (backlog_bytes - kmin)) / (kmax - kmin)) as u32
}

/// Whether to mark, given the backlog and a source of uniformly random `u32`s
/// (`bpf_get_prandom_u32`), drawn only between Kmin and Kmax, where the answer depends on it.
#[inline(always)]
pub fn should_mark(profile: &EcnProfile, backlog_bytes: u64, random: impl FnOnce() -> u32) -> bool {
    let threshold = mark_threshold(profile, backlog_bytes);
    threshold >= PMAX_ONE || (threshold > 0 && (random() >> 8) < threshold)
}

/// The probability of marking at `backlog_bytes` as a float, for reports and tests.
pub fn mark_probability(profile: &EcnProfile, backlog_bytes: u64) -> f64 {
    mark_threshold(profile, backlog_bytes) as f64 / PMAX_ONE as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> EcnProfile {
        EcnProfile {
            enabled: 1,
            kmin_bytes: 1000,
            kmax_bytes: 5000,
            pmax_fixed: PMAX_ONE / 2,
            rate_bytes_per_sec: 1,
        }
    }

    #[test]
    fn zero_below_kmin_and_one_at_kmax() {
        let p = profile();
        assert_eq!(mark_threshold(&p, 0), 0);
        assert_eq!(mark_threshold(&p, 999), 0);
        assert_eq!(mark_threshold(&p, 5000), PMAX_ONE);
        assert_eq!(mark_threshold(&p, u64::MAX), PMAX_ONE);
        assert!(!should_mark(&p, 999, || 0));
        assert!(should_mark(&p, 5000, || u32::MAX));
    }

    #[test]
    fn linear_between_kmin_and_kmax() {
        let p = profile();
        assert_eq!(mark_threshold(&p, 1000), 0);
        assert_eq!(mark_threshold(&p, 3000), PMAX_ONE / 4);
        assert!((mark_probability(&p, 4999) - 0.5 * 3999.0 / 4000.0).abs() < 1e-6);
    }

    #[test]
    fn random_draw_against_threshold() {
        let p = profile();
        // At q = 3000 the probability is 1/4: the lowest quarter of the random range marks.
        assert!(should_mark(&p, 3000, || (1 << 30) - 256));
        assert!(!should_mark(&p, 3000, || 1 << 30));
    }

    #[test]
    fn degenerate_profile_marks_from_kmin() {
        let mut p = profile();
        p.kmax_bytes = p.kmin_bytes;
        assert_eq!(mark_threshold(&p, 999), 0);
        assert_eq!(mark_threshold(&p, 1000), PMAX_ONE);
    }

    #[test]
    fn empirical_fraction_follows_the_curve() {
        let p = profile();
        // A deterministic stream of well-spread u32s (a multiplicative congruential generator).
        let mut x: u32 = 1;
        let mut marked = 0;
        let n = 100_000;
        for _ in 0..n {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            marked += should_mark(&p, 4000, || x) as u32;
        }
        let expected = mark_probability(&p, 4000) * n as f64;
        assert!(
            (marked as f64 - expected).abs() < 0.02 * n as f64,
            "{marked} vs {expected}"
        );
    }
}
