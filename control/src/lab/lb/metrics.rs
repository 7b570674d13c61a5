//! What the load-balancing lab measures of one run: how evenly the uplinks carried the bytes,
//! how much the receiver saw out of order, and how long flows took.

use serde::Serialize;

use crate::lab::harness::jain_index;

/// How evenly a set of uplinks carried the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Balance {
    /// The busiest uplink's bytes over the mean: 1 when even, the number of uplinks when one
    /// carried everything.
    pub imbalance: f64,
    /// Jain's fairness index of the uplinks' bytes: 1 when even, 1/n when one carried
    /// everything.
    pub jain: f64,
}

impl Balance {
    /// The balance of `bytes`, one entry per uplink (0 for no traffic at all).
    pub fn of(bytes: &[u64]) -> Balance {
        let xs: Vec<f64> = bytes.iter().map(|&b| b as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        let max = xs.iter().copied().fold(0.0, f64::max);
        Balance {
            imbalance: if mean > 0.0 { max / mean } else { 0.0 },
            jain: jain_index(&xs),
        }
    }
}

/// Flow completion times, milliseconds; no figure (`None`, null in JSON) when no flow arrived
/// whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Completion {
    /// Flows that arrived whole.
    pub flows: usize,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Mean.
    pub mean_ms: Option<f64>,
}

impl Completion {
    /// The completion times of the flows that arrived whole, in milliseconds.
    pub fn of(mut ms: Vec<f64>) -> Completion {
        if ms.is_empty() {
            return Completion::default();
        }
        ms.sort_by(f64::total_cmp);
        Completion {
            flows: ms.len(),
            p50_ms: Some(percentile(&ms, 50.0)),
            p99_ms: Some(percentile(&ms, 99.0)),
            mean_ms: Some(ms.iter().sum::<f64>() / ms.len() as f64),
        }
    }
}

/// The `p`th percentile of sorted `xs` by the nearest-rank method (an observed value).
fn percentile(xs: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0 * xs.len() as f64).ceil() as usize;
    xs[rank.clamp(1, xs.len()) - 1]
}

/// The fraction of `packets` that arrived after a later one of their flow.
pub fn reordered_fraction(reordered: u64, packets: u64) -> f64 {
    if packets == 0 {
        0.0
    } else {
        reordered as f64 / packets as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_of_even_and_skewed_uplinks() {
        assert_eq!(
            Balance::of(&[10, 10, 10, 10]),
            Balance {
                imbalance: 1.0,
                jain: 1.0
            }
        );
        let skewed = Balance::of(&[40, 0, 0, 0]);
        assert_eq!((skewed.imbalance, skewed.jain), (4.0, 0.25));
        // 3 elephants on one of 4 uplinks, 1 on two others: 3 / 1.25.
        assert_eq!(Balance::of(&[3, 1, 1, 0]).imbalance, 2.4);
        assert_eq!(Balance::of(&[0, 0]).imbalance, 0.0);
    }

    #[test]
    fn percentiles_are_observed_values() {
        let c = Completion::of((1..=100).rev().map(f64::from).collect());
        assert_eq!(
            (c.flows, c.p50_ms, c.p99_ms, c.mean_ms),
            (100, Some(50.0), Some(99.0), Some(50.5))
        );
        let one = Completion::of(vec![7.0]);
        assert_eq!((one.p50_ms, one.p99_ms), (Some(7.0), Some(7.0)));
        let none = Completion::of(vec![]);
        assert_eq!((none.flows, none.p50_ms, none.mean_ms), (0, None, None));
        assert_eq!(
            serde_json::to_value(none).unwrap(),
            serde_json::json!({"flows": 0, "p50_ms": null, "p99_ms": null, "mean_ms": null})
        );
    }

    #[test]
    fn reordered_fraction_over_nothing_is_zero() {
        assert_eq!(reordered_fraction(0, 0), 0.0);
        assert_eq!(reordered_fraction(5, 20), 0.25);
    }
}
