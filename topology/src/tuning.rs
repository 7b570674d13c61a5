//! How the computed entries tune lossless.p4: the load-balancing policy of every ECMP group and
//! its timeouts, RED marking, PFC thresholds and pause times, the switch CNP fast path, and which
//! DSCPs map to which priorities and which priorities are lossless. Read from TOML (or any serde
//! format) with these field names; [`Tuning::check`] holds the limits. The defaults are the ones
//! `lossless net` has always used (dataplane-p4's leaf/spine example).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The priority of RoCEv2 data by default (DSCP 26): lossless, ECN-marked, CNP-generating.
pub const PRIORITY_DATA: u8 = 3;
/// The priority CNPs (DSCP 48) travel in by default: above [`PRIORITY_DATA`], so the strict
/// priority every switch queue has by default serves them before the data they signal about.
pub const PRIORITY_CNP: u8 = 6;
/// The DSCP of RoCEv2 data by default.
pub const DSCP_DATA: u8 = 26;
/// The DSCP of CNPs by default.
pub const DSCP_CNP: u8 = 48;
/// The longest flowlet timeout and DLB load age: 10 s.
pub const MAX_TIMEOUT_US: u64 = 10_000_000;
/// The deepest queue threshold lossless.p4 takes (its `bit<19>` depths).
pub const MAX_QUEUE_PACKETS: u32 = (1 << 19) - 1;
/// The longest pause time asked for: 1 s.
pub const MAX_PAUSE_US: u32 = 1_000_000;
/// The longest CNP interval and hold stall: 60 s.
pub const MAX_INTERVAL_US: u32 = 60_000_000;

/// The load-balancing policy of lossless.p4's ECMP groups: the workspace's one policy enum,
/// of which lossless.p4 runs [`Policy::P4`] (every one but wcmp).
pub use dataplane_common::lb::Policy;

/// The policy lossless.p4 runs named `text`: one of [`Policy::P4`].
pub fn parse_policy(text: &str) -> Result<Policy, Error> {
    Policy::from_name(text)
        .filter(|p| p.p4_code().is_some())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "policy '{}': ecmp, flowlet, dlb, spray or e-ecmp",
                text.escape_debug()
            ))
        })
}

/// Reads a policy lossless.p4 runs by its name, as [`parse_policy`] (the policy field of
/// [`Tuning`]).
fn deserialize_policy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Policy, D::Error> {
    let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    parse_policy(&name).map_err(serde::de::Error::custom)
}

/// RED marking of the lossless priorities' egress queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Red {
    /// No mark at or below this depth, packets.
    pub kmin_packets: u32,
    /// Every packet marked from this depth, packets.
    pub kmax_packets: u32,
    /// The marking probability just below Kmax, in (0, 1].
    pub pmax: f64,
}

impl Default for Red {
    fn default() -> Red {
        Red {
            kmin_packets: 5,
            kmax_packets: 20,
            pmax: 0.2,
        }
    }
}

impl Red {
    /// Pmax as lossless.p4 takes it, in 1/65536.
    pub fn pmax_q16(&self) -> u32 {
        (self.pmax * 65536.0).round() as u32
    }
}

/// PFC of the lossless priorities.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Pfc {
    /// PAUSE the upstream when a packet finds this many ahead of it in its queue, packets.
    pub xoff_packets: u32,
    /// Resume it when its packets still in the switch fall to this many.
    pub xon_packets: u32,
    /// The pause time a PAUSE asks for, µs: each switch writes the quanta that last at least
    /// this long on its fastest port, at most 65535.
    pub pause_us: u32,
    /// How often a PAUSE is sent again while the queue stays above XOFF, µs; by default a
    /// fifth of the pause time on the switch's fastest port.
    pub refresh_us: Option<u32>,
    /// Passes a held packet makes before it goes while still paused.
    pub hold_limit: u16,
    /// How long a line of held packets may stand still while not paused before a lost ticket
    /// is skipped, µs.
    pub stall_us: u32,
}

impl Default for Pfc {
    fn default() -> Pfc {
        Pfc {
            xoff_packets: 16,
            xon_packets: 4,
            pause_us: 500,
            refresh_us: None,
            hold_limit: 500,
            stall_us: 2000,
        }
    }
}

/// The switch CNP fast path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cnp {
    /// At most one CNP per flow per this interval, µs.
    pub interval_us: u32,
    /// The DSCP CNPs are sent with (a class maps it to their priority).
    pub dscp: u8,
    /// The priorities whose marked packets the switch answers with a CNP.
    pub priorities: Vec<u8>,
}

impl Default for Cnp {
    fn default() -> Cnp {
        Cnp {
            interval_us: 50,
            dscp: DSCP_CNP,
            priorities: vec![PRIORITY_DATA],
        }
    }
}

/// A DSCP and the priority (egress queue) it maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    /// The DSCP.
    pub dscp: u8,
    /// Its priority, 0..=7.
    pub priority: u8,
}

/// The tuning of every switch's entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tuning {
    /// The policy of every ECMP group (one lossless.p4 runs).
    #[serde(deserialize_with = "deserialize_policy")]
    pub policy: Policy,
    /// Flowlet idle gap (flowlet and dlb policies), µs.
    pub flowlet_timeout_us: u64,
    /// DLB: a port load estimate older than this counts as idle, µs.
    pub dlb_load_age_us: u64,
    /// RED marking of the lossless priorities.
    pub ecn: Red,
    /// PFC of the lossless priorities.
    pub pfc: Pfc,
    /// The switch CNP fast path.
    pub cnp: Cnp,
    /// DSCP to priority; other DSCPs go to priority 0.
    pub classes: Vec<Class>,
    /// The lossless priorities: PFC and RED on every port.
    pub lossless: Vec<u8>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            policy: Policy::Ecmp,
            flowlet_timeout_us: 100,
            dlb_load_age_us: 500,
            ecn: Red::default(),
            pfc: Pfc::default(),
            cnp: Cnp::default(),
            classes: vec![
                Class {
                    dscp: DSCP_DATA,
                    priority: PRIORITY_DATA,
                },
                Class {
                    dscp: DSCP_CNP,
                    priority: PRIORITY_CNP,
                },
            ],
            lossless: vec![PRIORITY_DATA],
        }
    }
}

/// What a switch's PFC entries say, from its ports' rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchPause {
    /// Quanta in its PAUSE frames.
    pub quanta: u16,
    /// Its refresh interval, µs.
    pub refresh_us: u32,
}

impl Tuning {
    /// Checks every value against its limit; the error names the key.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |key: &str, value: &dyn fmt::Display, rule: &str| {
            Err(Error::Invalid(format!("{key} {value}: {rule}")))
        };
        if self.policy.p4_code().is_none() {
            return bad(
                "policy",
                &self.policy,
                "ecmp, flowlet, dlb, spray or e-ecmp",
            );
        }
        let (e, p) = (&self.ecn, &self.pfc);
        for (key, v, max) in [
            (
                "flowlet_timeout_us",
                self.flowlet_timeout_us,
                MAX_TIMEOUT_US,
            ),
            ("dlb_load_age_us", self.dlb_load_age_us, MAX_TIMEOUT_US),
            ("pfc.pause_us", p.pause_us.into(), MAX_PAUSE_US.into()),
            ("pfc.stall_us", p.stall_us.into(), MAX_INTERVAL_US.into()),
        ] {
            if !(1..=max).contains(&v) {
                return bad(key, &v, &format!("1..={max} µs"));
            }
        }
        // A queue threshold of 1..=MAX_QUEUE_PACKETS packets with a lower one below it.
        for ((high_key, high), (low_key, low)) in [
            (
                ("ecn.kmax_packets", e.kmax_packets),
                ("ecn.kmin_packets", e.kmin_packets),
            ),
            (
                ("pfc.xoff_packets", p.xoff_packets),
                ("pfc.xon_packets", p.xon_packets),
            ),
        ] {
            if !(1..=MAX_QUEUE_PACKETS).contains(&high) {
                return bad(high_key, &high, &format!("1..={MAX_QUEUE_PACKETS}"));
            }
            if low >= high {
                return bad(low_key, &low, &format!("below {high_key}"));
            }
        }
        if !(e.pmax > 0.0 && e.pmax <= 1.0) {
            return bad("ecn.pmax", &e.pmax, "in (0, 1]");
        }
        if let Some(r) = p.refresh_us {
            if r == 0 || r >= p.pause_us {
                return bad("pfc.refresh_us", &r, "1 µs to below pfc.pause_us");
            }
        }
        if p.hold_limit == 0 {
            return bad("pfc.hold_limit", &p.hold_limit, "1..=65535 passes");
        }
        if self.cnp.interval_us > MAX_INTERVAL_US {
            return bad(
                "cnp.interval_us",
                &self.cnp.interval_us,
                &format!("0..={MAX_INTERVAL_US} µs"),
            );
        }
        if self.cnp.dscp > 63 {
            return bad("cnp.dscp", &self.cnp.dscp, "0..=63");
        }
        check_priorities("cnp.priorities", &self.cnp.priorities)?;
        check_priorities("lossless", &self.lossless)?;
        if self.classes.len() > 64 {
            return bad("classes", &self.classes.len(), "at most 64");
        }
        for (i, c) in self.classes.iter().enumerate() {
            if c.dscp > 63 {
                return bad(&format!("classes[{i}].dscp"), &c.dscp, "0..=63");
            }
            if c.priority > 7 {
                return bad(&format!("classes[{i}].priority"), &c.priority, "0..=7");
            }
            if self.classes[..i].iter().any(|o| o.dscp == c.dscp) {
                return bad(&format!("classes[{i}].dscp"), &c.dscp, "given twice");
            }
        }
        Ok(())
    }

    /// The PAUSE quanta and refresh interval of a switch whose fastest port runs at
    /// `fastest_bps` and whose shortest recorded quantum (see [`quantum_q10`]) is
    /// `shortest_q10`: quanta that last at least [`Pfc::pause_us`] on the fastest port (at most
    /// 65535), and the refresh, which must come before the pause runs out as the upstream
    /// records it.
    pub fn switch_pause(
        &self,
        name: &str,
        fastest_bps: u64,
        shortest_q10: u32,
    ) -> Result<SwitchPause, Error> {
        let p = &self.pfc;
        let quanta = (u128::from(p.pause_us) * u128::from(fastest_bps)).div_ceil(512 * 1_000_000);
        let quanta = quanta.clamp(1, 65535) as u16;
        // The pause on the fastest link, µs, as 802.1Qbb counts it: quanta × 512 bit times.
        let exact_us = u64::from(quanta) * 512 * 1_000_000 / fastest_bps;
        // The pause as lossless.p4 records it: quanta × the rounded-down quantum.
        let recorded_us = u64::from(quanta) * u64::from(shortest_q10) / 1024;
        let refresh_us = match p.refresh_us {
            Some(r) => r,
            None => (exact_us.min(u64::from(p.pause_us)) / 5).max(1) as u32,
        };
        if u64::from(refresh_us) >= recorded_us {
            return Err(Error::Invalid(format!(
                "pfc.refresh_us {refresh_us}: {name}'s PAUSE of {quanta} quanta lasts {recorded_us} \
                 µs on its {} ports, so the refresh must be shorter",
                crate::quantity::format_rate(fastest_bps)
            )));
        }
        Ok(SwitchPause { quanta, refresh_us })
    }
}

fn check_priorities(key: &str, priorities: &[u8]) -> Result<(), Error> {
    for (i, p) in priorities.iter().enumerate() {
        if *p > 7 || priorities[..i].contains(p) {
            return Err(Error::Invalid(format!(
                "{key}: {p}: priorities are 0..=7, each once"
            )));
        }
    }
    Ok(())
}

/// The length of one pause quantum (512 bit times) of a port running at `rate_bps`, in the
/// 1/1024 µs lossless.p4's `set_pause_quantum` takes, rounded down (524 at 1 Gb/s, 52 at 10,
/// 5 at 100, 1 at 400): so a pause as the program records it never outlasts what its sender
/// asked for, and a rounded pause that ends early is covered by the sender's refresh, which
/// [`Tuning::switch_pause`] keeps shorter than the recorded pause. At 800 Gb/s a quantum (0.64
/// ns) is shorter than the program's unit and rounds to 0, which would make pauses last
/// nothing: it is recorded as 1, the one case that rounds up (pauses last 1.5 times what was
/// asked; a resume still ends them at once).
pub fn quantum_q10(rate_bps: u64) -> u32 {
    let q10 = 512 * 1024 * 1_000_000 / u128::from(rate_bps.max(1));
    q10.clamp(1, u128::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_of_every_rate() {
        assert_eq!(quantum_q10(1_000_000_000), 524);
        assert_eq!(quantum_q10(10_000_000_000), 52);
        assert_eq!(quantum_q10(25_000_000_000), 20);
        assert_eq!(quantum_q10(100_000_000_000), 5);
        assert_eq!(quantum_q10(200_000_000_000), 2);
        assert_eq!(quantum_q10(400_000_000_000), 1);
        assert_eq!(quantum_q10(800_000_000_000), 1);
    }

    #[test]
    fn pause_times_follow_the_fastest_port() {
        let t = Tuning::default();
        // 500 µs at 1 Gb/s is 976.6 quanta: 977, refreshed every 100 µs (the example's).
        let p = t.switch_pause("leaf1", 1_000_000_000, 524).unwrap();
        assert_eq!(
            p,
            SwitchPause {
                quanta: 977,
                refresh_us: 100
            }
        );
        // At 100 Gb/s 500 µs is past 65535 quanta (335 µs): the most, refreshed every 67 µs.
        let p = t.switch_pause("leaf1", 100_000_000_000, 5).unwrap();
        assert_eq!(
            p,
            SwitchPause {
                quanta: 65535,
                refresh_us: 67
            }
        );
        let p = t.switch_pause("leaf1", 400_000_000_000, 1).unwrap();
        assert_eq!(
            p,
            SwitchPause {
                quanta: 65535,
                refresh_us: 16
            }
        );
        let fixed = Tuning {
            pfc: Pfc {
                refresh_us: Some(100),
                ..Pfc::default()
            },
            ..Tuning::default()
        };
        let err = fixed
            .switch_pause("c0_0", 400_000_000_000, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("lasts 63 µs on its 400G ports"), "{err}");
    }

    #[test]
    fn cnps_travel_in_a_priority_above_every_lossless_one() {
        // Every queue is strict by default (BMv2's discipline, softswitch's default): so CNPs
        // are served before the lossless class they signal congestion of.
        let t = Tuning::default();
        let cnp = t.classes.iter().find(|c| c.dscp == t.cnp.dscp).unwrap();
        assert_eq!(cnp.priority, PRIORITY_CNP);
        assert!(t.lossless.iter().all(|&p| p < cnp.priority));
    }

    /// Asserts that `t` is refused with an error that contains `needle`.
    fn assert_refused(t: &Tuning, needle: &str) {
        let err = t.check().unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }

    #[test]
    fn values_out_of_range_are_named() {
        let mut t = Tuning::default();
        t.check().unwrap();
        t.ecn.kmin_packets = 20;
        assert_refused(&t, "ecn.kmin_packets 20: below ecn.kmax_packets");
        t = Tuning::default();
        t.classes.push(Class {
            dscp: 26,
            priority: 1,
        });
        assert_refused(&t, "classes[2].dscp 26: given twice");
        t = Tuning::default();
        t.lossless = vec![3, 8];
        assert_refused(&t, "lossless: 8");
        let parsed: Tuning = toml::from_str(
            "policy = \"e-ecmp\"\n[pfc]\nxoff_packets = 64\nrefresh_us = 20\n[ecn]\npmax = 0.5\n",
        )
        .unwrap();
        assert_eq!(parsed.policy, Policy::EEcmp);
        assert_eq!(parsed.pfc.xoff_packets, 64);
        assert_eq!(parsed.pfc.xon_packets, 4);
        assert_eq!(parsed.ecn.pmax_q16(), 32768);
        assert!(toml::from_str::<Tuning>("[pfc]\nxof = 1\n").is_err());
        assert_eq!(parse_policy("e-ecmp").unwrap(), Policy::EEcmp);
        assert!(parse_policy("ECMP").is_err());
        // lossless.p4 has no WCMP: refused by name, in a file and built by hand.
        let wcmp = parse_policy("wcmp").unwrap_err().to_string();
        assert!(
            wcmp.contains("policy 'wcmp': ecmp, flowlet, dlb, spray or e-ecmp"),
            "{wcmp}"
        );
        let wcmp = toml::from_str::<Tuning>("policy = \"wcmp\"\n").unwrap_err();
        assert!(wcmp.to_string().contains("policy 'wcmp'"), "{wcmp}");
        t = Tuning::default();
        t.policy = Policy::Wcmp;
        assert_refused(&t, "policy wcmp");
    }
}
