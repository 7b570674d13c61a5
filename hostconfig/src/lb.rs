//! The `lb.*` keys: what the balancer should do, in user terms (interface names, MACs,
//! prefixes), before it is resolved against the machine and written to the maps.

use std::{collections::BTreeMap, fmt, net::IpAddr, str::FromStr, time::Duration};

use anyhow::{bail, Context as _};
use dataplane_common::lb::{LbSettings, Policy, MAX_UPLINKS};
use serde::Serialize;

use units::{parse_duration, parse_rate_bps, DurationLimits};
use wire::ethernet::Address;

/// `lb.flowlet_timeout_us` (and `lab lb --flowlet-timeout-us`): 1 µs to 10 s.
pub const FLOWLET_TIMEOUT: DurationLimits =
    DurationLimits::micros(Duration::from_micros(1), Duration::from_secs(10));

/// Every `lb` key pattern, for error messages and docs.
pub const KEYS: &str = "lb.policy, lb.seed, lb.flowlet_timeout_us, lb.uplinks, lb.weights, \
lb.prefixes, lb.nexthop.IFACE, lb.rate.IFACE";

/// A destination prefix the balancer owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Prefix {
    /// The network address (host bits zero).
    pub addr: IpAddr,
    /// Its length in bits.
    pub len: u8,
}

impl FromStr for Prefix {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Prefix> {
        let (addr, len) = text.split_once('/').unwrap_or((text, ""));
        let addr: IpAddr = addr
            .parse()
            .with_context(|| format!("'{text}' is not an IP prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = if len.is_empty() {
            max
        } else {
            len.parse()
                .ok()
                .filter(|&l| l <= max)
                .with_context(|| format!("'{text}': prefix length must be 0..{max}"))?
        };
        Ok(Prefix {
            addr: masked(addr, len),
            len,
        })
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// `addr` with the bits after the first `len` cleared.
fn masked(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::from(std::net::Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::from(std::net::Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

/// Where an uplink's frames are addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// This MAC address.
    Mac(Address),
    /// The MAC the kernel's neighbour table has (or resolves) for this address.
    Ip(IpAddr),
}

impl FromStr for NextHop {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<NextHop> {
        if let Ok(ip) = text.parse() {
            return Ok(NextHop::Ip(ip));
        }
        let mac = text
            .parse()
            .ok()
            .with_context(|| format!("'{text}' is neither a MAC address nor an IP address"))?;
        Ok(NextHop::Mac(mac))
    }
}

/// One `lb.*` setting, typed: what an `lb.*` key with its value becomes
/// ([`LbSetting::parse`]), or what code that configures a balancer builds directly;
/// [`LbConfig::set`] checks and applies it.
#[derive(Clone, Debug, PartialEq)]
pub enum LbSetting {
    /// `lb.policy`.
    Policy(Policy),
    /// `lb.seed`.
    Seed(u32),
    /// `lb.flowlet_timeout_us`, 1 µs to 10 s.
    FlowletTimeout(Duration),
    /// `lb.uplinks`, in order: at most [`MAX_UPLINKS`] interface names.
    Uplinks(Vec<String>),
    /// `lb.weights`: uplink → weight, 1..256 (uplinks not named weigh 1).
    Weights(BTreeMap<String, u32>),
    /// `lb.prefixes`.
    Prefixes(Vec<Prefix>),
    /// `lb.nexthop.IFACE`: where the uplink's frames are addressed.
    NextHop(String, NextHop),
    /// `lb.rate.IFACE`: the capacity of the uplink's path, b/s.
    Rate(String, u64),
}

impl LbSetting {
    /// The setting an `lb.*` key with the textual `value` names (checks the text;
    /// [`LbConfig::set`] checks the value).
    pub fn parse(key: &str, value: &str) -> anyhow::Result<LbSetting> {
        let parts: Vec<&str> = key.split('.').collect();
        let setting = match parts.as_slice() {
            ["lb", "policy"] => {
                LbSetting::Policy(parse_policy(value).with_context(|| key.to_string())?)
            }
            ["lb", "seed"] => LbSetting::Seed(
                value
                    .parse()
                    .with_context(|| format!("{key}: '{value}' is not a 32-bit number"))?,
            ),
            ["lb", "flowlet_timeout_us"] => LbSetting::FlowletTimeout(
                parse_duration(value, &FLOWLET_TIMEOUT)
                    .map_err(|e| anyhow::anyhow!("{key}: {e}"))?,
            ),
            ["lb", "uplinks"] => LbSetting::Uplinks(list(value).map(str::to_owned).collect()),
            ["lb", "weights"] => {
                let mut weights = BTreeMap::new();
                for item in list(value) {
                    let (name, weight) = item
                        .split_once(':')
                        .with_context(|| format!("{key}: '{item}' is not IFACE:WEIGHT"))?;
                    let weight: u32 = weight.parse().with_context(|| {
                        format!("{key}: weight of {name} must be 1..{BUCKETS_PER_WEIGHT_LIMIT}")
                    })?;
                    weights.insert(name.to_owned(), weight);
                }
                LbSetting::Weights(weights)
            }
            ["lb", "prefixes"] => LbSetting::Prefixes(
                list(value)
                    .map(|p| p.parse().with_context(|| key.to_string()))
                    .collect::<anyhow::Result<_>>()?,
            ),
            ["lb", "nexthop", iface] => LbSetting::NextHop(
                (*iface).to_owned(),
                value.parse().with_context(|| key.to_string())?,
            ),
            ["lb", "rate", iface] => LbSetting::Rate(
                (*iface).to_owned(),
                parse_rate_bps(value).with_context(|| format!("{key}: bad rate"))?,
            ),
            _ => bail!("unknown key '{key}' (known lb keys: {KEYS})"),
        };
        Ok(setting)
    }

    /// Its key, as `set` takes it.
    pub fn key(&self) -> String {
        match self {
            LbSetting::Policy(_) => "lb.policy".into(),
            LbSetting::Seed(_) => "lb.seed".into(),
            LbSetting::FlowletTimeout(_) => "lb.flowlet_timeout_us".into(),
            LbSetting::Uplinks(_) => "lb.uplinks".into(),
            LbSetting::Weights(_) => "lb.weights".into(),
            LbSetting::Prefixes(_) => "lb.prefixes".into(),
            LbSetting::NextHop(uplink, _) => format!("lb.nexthop.{uplink}"),
            LbSetting::Rate(uplink, _) => format!("lb.rate.{uplink}"),
        }
    }
}

/// The balancer's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct LbConfig {
    /// `lb.policy`.
    pub policy: Policy,
    /// `lb.seed`.
    pub seed: u32,
    /// `lb.flowlet_timeout_us`.
    pub flowlet_timeout_us: u64,
    /// `lb.uplinks`, in order.
    pub uplinks: Vec<String>,
    /// `lb.weights` (uplinks not named weigh 1).
    pub weights: BTreeMap<String, u32>,
    /// `lb.nexthop.IFACE`.
    pub nexthops: BTreeMap<String, NextHop>,
    /// `lb.rate.IFACE`, in bits per second (others: the link speed).
    pub rates_bps: BTreeMap<String, u64>,
    /// `lb.prefixes`.
    pub prefixes: Vec<Prefix>,
}

impl Default for LbConfig {
    fn default() -> Self {
        LbConfig {
            policy: Policy::Ecmp,
            seed: LbSettings::DEFAULT.seed,
            flowlet_timeout_us: LbSettings::DEFAULT.flowlet_timeout_ns / 1000,
            uplinks: Vec::new(),
            weights: BTreeMap::new(),
            nexthops: BTreeMap::new(),
            rates_bps: BTreeMap::new(),
            prefixes: Vec::new(),
        }
    }
}

/// The policy named `text` (as `lb.policy` and `lab lb --policies` take it).
pub fn parse_policy(text: &str) -> anyhow::Result<Policy> {
    Policy::from_name(text).with_context(|| {
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        format!("'{text}' is not a policy ({})", names.join(", "))
    })
}

/// Splits a comma list, dropping blanks.
fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

impl LbConfig {
    /// Whether `key` is one of the balancer's.
    pub fn owns(key: &str) -> bool {
        key.starts_with("lb.")
    }

    /// Sets one `lb.*` key from its textual value: [`LbSetting::parse`], then
    /// [`LbConfig::set`].
    pub fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        self.set(LbSetting::parse(key, value)?)
    }

    /// Checks the value of one setting and applies it; relations (every per-uplink setting
    /// names an uplink) are checked by [`LbConfig::validate`].
    pub fn set(&mut self, setting: LbSetting) -> anyhow::Result<()> {
        let key = setting.key();
        match setting {
            LbSetting::Policy(policy) => self.policy = policy,
            LbSetting::Seed(seed) => self.seed = seed,
            LbSetting::FlowletTimeout(timeout) => {
                let timeout = FLOWLET_TIMEOUT
                    .check(timeout, &FLOWLET_TIMEOUT.show(timeout))
                    .map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
                self.flowlet_timeout_us = timeout.as_micros() as u64;
            }
            LbSetting::Uplinks(names) => {
                if names.len() > MAX_UPLINKS {
                    bail!("{key}: at most {MAX_UPLINKS} uplinks, got {}", names.len());
                }
                if let Some(long) = names.iter().find(|n| n.len() >= 16) {
                    bail!("{key}: '{long}' is longer than an interface name can be");
                }
                // Per-uplink settings of uplinks no longer listed go with them.
                self.weights.retain(|name, _| names.contains(name));
                self.nexthops.retain(|name, _| names.contains(name));
                self.rates_bps.retain(|name, _| names.contains(name));
                self.uplinks = names;
            }
            LbSetting::Weights(weights) => {
                if let Some((name, _)) = weights
                    .iter()
                    .find(|(_, w)| !(1..=BUCKETS_PER_WEIGHT_LIMIT).contains(*w))
                {
                    bail!("{key}: weight of {name} must be 1..{BUCKETS_PER_WEIGHT_LIMIT}");
                }
                self.weights = weights;
            }
            LbSetting::Prefixes(prefixes) => self.prefixes = prefixes,
            LbSetting::NextHop(uplink, hop) => {
                self.nexthops.insert(uplink, hop);
            }
            LbSetting::Rate(uplink, bps) => {
                if bps == 0 {
                    bail!("{key}: the rate must be positive");
                }
                self.rates_bps.insert(uplink, bps);
            }
        }
        Ok(())
    }

    /// Checks relations: per-uplink keys name an uplink, no uplink twice.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (i, name) in self.uplinks.iter().enumerate() {
            if self.uplinks[..i].contains(name) {
                bail!("lb.uplinks: {name} is listed twice");
            }
        }
        let known = |key: &str, name: &String| -> anyhow::Result<()> {
            if !self.uplinks.contains(name) {
                bail!(
                    "{key}: {name} is not one of lb.uplinks ({})",
                    self.uplinks.join(",")
                );
            }
            Ok(())
        };
        self.weights
            .keys()
            .try_for_each(|n| known("lb.weights", n))?;
        for name in self.nexthops.keys() {
            known(&format!("lb.nexthop.{name}"), name)?;
        }
        for name in self.rates_bps.keys() {
            known(&format!("lb.rate.{name}"), name)?;
        }
        Ok(())
    }

    /// The weight of `uplink` (1 unless `lb.weights` says otherwise).
    pub fn weight(&self, uplink: &str) -> u32 {
        self.weights.get(uplink).copied().unwrap_or(1)
    }

    /// The configuration as `status --json` shows it.
    pub fn view(&self) -> LbView {
        LbView {
            policy: self.policy.name(),
            seed: self.seed,
            flowlet_timeout_us: self.flowlet_timeout_us,
            uplinks: self.uplinks.clone(),
            weights: self
                .uplinks
                .iter()
                .map(|u| (u.clone(), self.weight(u)))
                .collect(),
            prefixes: self.prefixes.iter().map(Prefix::to_string).collect(),
        }
    }
}

/// Largest WCMP weight: a weight is a share of 256 buckets, so larger ratios cannot be told
/// apart anyway.
const BUCKETS_PER_WEIGHT_LIMIT: u32 = 256;

/// The balancer's configuration in user terms, for `status --json`.
#[derive(Debug, Serialize)]
pub struct LbView {
    /// `lb.policy`.
    pub policy: &'static str,
    /// `lb.seed`.
    pub seed: u32,
    /// `lb.flowlet_timeout_us`.
    pub flowlet_timeout_us: u64,
    /// `lb.uplinks`.
    pub uplinks: Vec<String>,
    /// The weight of every uplink.
    pub weights: BTreeMap<String, u32>,
    /// `lb.prefixes`.
    pub prefixes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(c: &mut LbConfig, pairs: &[(&str, &str)]) -> anyhow::Result<()> {
        pairs.iter().try_for_each(|(k, v)| c.apply(k, v))?;
        c.validate()
    }

    #[test]
    fn keys_set_the_fields() {
        let mut c = LbConfig::default();
        apply_all(
            &mut c,
            &[
                ("lb.uplinks", "up0, up1,up2"),
                ("lb.policy", "dlb"),
                ("lb.weights", "up0:3,up2:1"),
                ("lb.prefixes", "10.0.9.7/24,fd00:9::/64"),
                ("lb.nexthop.up1", "02:00:00:00:00:01"),
                ("lb.nexthop.up2", "10.1.2.1"),
                ("lb.rate.up0", "1gbit"),
                ("lb.flowlet_timeout_us", "200"),
            ],
        )
        .unwrap();
        assert_eq!(c.uplinks, ["up0", "up1", "up2"]);
        assert_eq!(c.policy, Policy::Dlb);
        assert_eq!((c.weight("up0"), c.weight("up1")), (3, 1));
        assert_eq!(c.prefixes[0].to_string(), "10.0.9.0/24");
        assert_eq!(c.prefixes[1].to_string(), "fd00:9::/64");
        assert_eq!(c.nexthops["up1"], NextHop::Mac(Address([2, 0, 0, 0, 0, 1])));
        assert_eq!(c.nexthops["up2"], NextHop::Ip("10.1.2.1".parse().unwrap()));
        assert_eq!(c.rates_bps["up0"], 1_000_000_000);
        assert_eq!(c.flowlet_timeout_us, 200);
    }

    #[test]
    fn typed_settings_are_checked_as_their_text_is() {
        let mut c = LbConfig::default();
        let err = c
            .set(LbSetting::Weights([("up0".to_owned(), 0)].into()))
            .unwrap_err();
        assert!(err
            .to_string()
            .contains("lb.weights: weight of up0 must be 1..256"));
        let err = c
            .set(LbSetting::FlowletTimeout(Duration::ZERO))
            .unwrap_err();
        assert!(err
            .to_string()
            .contains("lb.flowlet_timeout_us: '0 µs' is too short"));
        let err = c.set(LbSetting::Rate("up0".into(), 0)).unwrap_err();
        assert!(err
            .to_string()
            .contains("lb.rate.up0: the rate must be positive"));
        assert_eq!(c, LbConfig::default());
        c.set(LbSetting::Policy(Policy::Dlb)).unwrap();
        let mut text = LbConfig::default();
        text.apply("lb.policy", "dlb").unwrap();
        assert_eq!(c, text);
        text.apply("lb.policy", "e-ecmp").unwrap();
        assert_eq!(text.policy, Policy::EEcmp);
    }

    #[test]
    fn bad_values_name_the_key() {
        for (pairs, needle) in [
            (
                vec![("lb.policy", "random")],
                "lb.policy: 'random' is not a policy (ecmp, flowlet, dlb, spray, wcmp, e-ecmp)",
            ),
            (vec![("lb.prefixes", "10.0.0.0/33")], "lb.prefixes"),
            (vec![("lb.nexthop.up0", "zz:00")], "lb.nexthop.up0"),
            (vec![("lb.weights", "up0:0")], "lb.weights"),
            (vec![("lb.uplinks", "a,a")], "listed twice"),
            (
                vec![("lb.uplinks", "up0"), ("lb.weights", "up1:2")],
                "up1 is not one of lb.uplinks",
            ),
            (
                vec![("lb.flowlet_timeout_us", "0")],
                "lb.flowlet_timeout_us",
            ),
            (vec![("lb.nonsense", "1")], "unknown key 'lb.nonsense'"),
            (
                vec![
                    ("lb.uplinks", "up0,up1"),
                    ("lb.weights", "up1:2"),
                    ("lb.uplinks", "up0"),
                ],
                "OK",
            ),
        ] {
            let result = apply_all(&mut LbConfig::default(), &pairs);
            if needle == "OK" {
                // Removing an uplink drops its settings instead of leaving them dangling.
                assert!(result.is_ok(), "{pairs:?}: {result:?}");
                continue;
            }
            let err = format!("{:#}", result.unwrap_err());
            assert!(err.contains(needle), "{pairs:?}: {err}");
        }
    }
}
