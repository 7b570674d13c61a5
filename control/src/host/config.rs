//! The host data plane's configuration: the keys `lossless host set` and config files speak,
//! their validation, and the records they become in the maps.
//!
//! A config file is TOML whose dotted paths are the same keys `set` takes, e.g.
//! `[ecn.prio3]` / `kmin_bytes = 20000` is `ecn.prio3.kmin_bytes=20000`. One parser serves
//! both, so an unknown or bad key gets the same message wherever it comes from.

use std::{fs::File, io::Read as _, ops::RangeInclusive, path::Path, time::Duration};

use anyhow::{anyhow, bail, Context as _};
use dataplane_common::{
    config::{default_dscp_priority, EcnProfile, Settings},
    pfc::PfcProfile,
    red::PMAX_ONE,
    DSCP_VALUES, PRIORITIES,
};
use serde::Serialize;

use super::lb::config::{LbConfig, LbView};
use crate::units::{parse_duration, parse_rate_bps, DurationLimits, ONE_DAY};

/// Largest drain rate the phantom queue arithmetic supports: 2^39 bytes/s (about 4.4 Tb/s).
const MAX_RATE_BPS: u64 = (1 << 39) * 8;

/// Longest config file read: 1 MiB (a file that sets every key is about 10 KB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `pfc.watchdog_ms`: 1 ms to one day.
const WATCHDOG: DurationLimits = DurationLimits::millis(Duration::from_millis(1), ONE_DAY);

/// The least time between two CNPs of one QP (`cnp.interval_us`, `traffic recv
/// --cnp-interval-us`, `lab incast --cnp-interval-us`): 0 (answer every CE mark) to 60 s.
pub const CNP_INTERVAL: DurationLimits =
    DurationLimits::micros(Duration::ZERO, Duration::from_secs(60));

/// The whole configuration of one interface.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// ECN profile per priority.
    pub profiles: [EcnProfile; PRIORITIES],
    /// PFC generation profile per priority.
    pub pfc_profiles: [PfcProfile; PRIORITIES],
    /// DSCP → priority.
    pub dscp_priority: [u32; DSCP_VALUES],
    /// Interface-wide settings.
    pub settings: Settings,
    /// The load balancer (`lb.*`).
    pub lb: LbConfig,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            profiles: [EcnProfile::DEFAULT; PRIORITIES],
            pfc_profiles: [PfcProfile::DEFAULT; PRIORITIES],
            dscp_priority: std::array::from_fn(|d| default_dscp_priority(d as u8)),
            settings: Settings::DEFAULT,
            lb: LbConfig::default(),
        }
    }
}

/// What a key names.
enum Key {
    EcnEnabled(usize),
    EcnKmin(usize),
    EcnKmax(usize),
    EcnPmax(usize),
    EcnRate(usize),
    PfcEnabled(usize),
    PfcXoff(usize),
    PfcXon(usize),
    PfcQuanta(usize),
    PfcDrain(usize),
    DscpPriority(usize),
    RoceOnly,
    LinkSpeed,
    WatchdogMs,
    WatchdogIgnore,
    CnpEnabled,
    CnpIntervalUs,
    CnpDscp,
    LogMarks,
    LogErrors,
}

/// Every key pattern, for error messages and docs.
pub const KEYS: &str =
    "ecn.prioN.enabled, ecn.prioN.kmin_bytes, ecn.prioN.kmax_bytes, ecn.prioN.pmax, \
ecn.prioN.rate_bps, pfc.prioN.enabled, pfc.prioN.xoff_bytes, pfc.prioN.xon_bytes, pfc.prioN.quanta, \
pfc.prioN.drain_bps (N = 0..7), ecn.roce_only, dscp.D.prio (D = 0..63), pfc.link_speed_bps, pfc.watchdog_ms, pfc.watchdog_ignore, cnp.enabled, cnp.interval_us, cnp.dscp, log.marks, log.errors";

fn parse_key(key: &str) -> anyhow::Result<Key> {
    let parts: Vec<&str> = key.split('.').collect();
    let index = |text: &str, prefix: &str, count: usize| -> Option<usize> {
        let n: usize = text.strip_prefix(prefix)?.parse().ok()?;
        (n < count).then_some(n)
    };
    let parsed = match parts.as_slice() {
        ["ecn", "roce_only"] => Some(Key::RoceOnly),
        ["pfc", "link_speed_bps"] => Some(Key::LinkSpeed),
        ["pfc", "watchdog_ms"] => Some(Key::WatchdogMs),
        ["pfc", "watchdog_ignore"] => Some(Key::WatchdogIgnore),
        ["cnp", "enabled"] => Some(Key::CnpEnabled),
        ["cnp", "interval_us"] => Some(Key::CnpIntervalUs),
        ["cnp", "dscp"] => Some(Key::CnpDscp),
        ["log", "marks"] => Some(Key::LogMarks),
        ["log", "errors"] => Some(Key::LogErrors),
        ["ecn", prio, field] => index(prio, "prio", PRIORITIES).and_then(|p| match *field {
            "enabled" => Some(Key::EcnEnabled(p)),
            "kmin_bytes" => Some(Key::EcnKmin(p)),
            "kmax_bytes" => Some(Key::EcnKmax(p)),
            "pmax" => Some(Key::EcnPmax(p)),
            "rate_bps" => Some(Key::EcnRate(p)),
            _ => None,
        }),
        ["pfc", prio, field] if prio.starts_with("prio") => index(prio, "prio", PRIORITIES)
            .and_then(|p| match *field {
                "enabled" => Some(Key::PfcEnabled(p)),
                "xoff_bytes" => Some(Key::PfcXoff(p)),
                "xon_bytes" => Some(Key::PfcXon(p)),
                "quanta" => Some(Key::PfcQuanta(p)),
                "drain_bps" => Some(Key::PfcDrain(p)),
                _ => None,
            }),
        ["dscp", dscp, "prio"] => index(dscp, "", DSCP_VALUES).map(Key::DscpPriority),
        _ => None,
    };
    parsed.with_context(|| format!("unknown key '{key}' (known keys: {KEYS})"))
}

fn parse_bool(key: &str, value: &str) -> anyhow::Result<u32> {
    match value {
        "true" | "1" | "on" => Ok(1),
        "false" | "0" | "off" => Ok(0),
        _ => bail!("{key}: '{value}' is not a boolean (true/false)"),
    }
}

/// Parses a whole number in `range`; `what` says what the key holds, for the message.
fn parse_whole(
    key: &str,
    value: &str,
    range: RangeInclusive<u32>,
    what: &str,
) -> anyhow::Result<u32> {
    value
        .parse()
        .ok()
        .filter(|n| range.contains(n))
        .with_context(|| {
            format!(
                "{key}: '{value}' is not {what} (a whole number {}..{})",
                range.start(),
                range.end()
            )
        })
}

/// A byte count.
fn parse_bytes(key: &str, value: &str) -> anyhow::Result<u32> {
    parse_whole(key, value, 0..=u32::MAX, "a number of bytes")
}

/// A duration within `limits` (a bare number in the key's unit).
fn parse_key_duration(key: &str, value: &str, limits: &DurationLimits) -> anyhow::Result<Duration> {
    parse_duration(value, limits).map_err(|e| anyhow!("{key}: {e}"))
}

impl HostConfig {
    /// Sets one key from its textual value. Checks the value itself; relations between values
    /// (Kmin < Kmax) are checked by [`HostConfig::validate`].
    pub fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        let value = value.trim();
        if LbConfig::owns(key) {
            return self.lb.apply(key, value);
        }
        match parse_key(key)? {
            Key::EcnEnabled(p) => self.profiles[p].enabled = parse_bool(key, value)?,
            Key::EcnKmin(p) => self.profiles[p].kmin_bytes = parse_bytes(key, value)?,
            Key::EcnKmax(p) => self.profiles[p].kmax_bytes = parse_bytes(key, value)?,
            Key::EcnPmax(p) => {
                let pmax: f64 = value
                    .parse()
                    .with_context(|| format!("{key}: '{value}' is not a number"))?;
                if !(pmax > 0.0 && pmax <= 1.0) {
                    bail!("{key}: Pmax must be in (0, 1], got {value}");
                }
                self.profiles[p].pmax_fixed = (pmax * PMAX_ONE as f64).round().max(1.0) as u32;
            }
            Key::EcnRate(p) => {
                let bps = parse_rate_bps(value).with_context(|| format!("{key}: bad rate"))?;
                if bps > MAX_RATE_BPS {
                    bail!("{key}: rate {bps} b/s is above the supported {MAX_RATE_BPS} b/s");
                }
                self.profiles[p].rate_bytes_per_sec = (bps / 8).max(1);
            }
            Key::PfcEnabled(p) => self.pfc_profiles[p].enabled = parse_bool(key, value)?,
            Key::PfcXoff(p) => self.pfc_profiles[p].xoff_bytes = parse_bytes(key, value)?,
            Key::PfcXon(p) => self.pfc_profiles[p].xon_bytes = parse_bytes(key, value)?,
            Key::PfcQuanta(p) => {
                self.pfc_profiles[p].quanta =
                    parse_whole(key, value, 1..=0xffff, "a pause time in quanta")?;
            }
            Key::PfcDrain(p) => {
                let bps = parse_rate_bps(value).with_context(|| format!("{key}: bad rate"))?;
                if bps > MAX_RATE_BPS {
                    bail!("{key}: rate {bps} b/s is above the supported {MAX_RATE_BPS} b/s");
                }
                self.pfc_profiles[p].drain_bytes_per_sec = (bps / 8).max(1);
            }
            Key::DscpPriority(d) => {
                let last = PRIORITIES as u32 - 1;
                self.dscp_priority[d] = parse_whole(key, value, 0..=last, "a priority")?;
            }
            Key::RoceOnly => self.set_flag(Settings::ROCE_ONLY, parse_bool(key, value)?),
            Key::LinkSpeed => {
                self.settings.link_speed_bps =
                    parse_rate_bps(value).with_context(|| format!("{key}: bad rate"))?;
            }
            Key::WatchdogMs => {
                let limit = parse_key_duration(key, value, &WATCHDOG)?;
                self.settings.pfc_watchdog_ns = limit.as_nanos() as u64;
            }
            Key::WatchdogIgnore => {
                self.set_flag(Settings::PFC_WATCHDOG_IGNORE, parse_bool(key, value)?)
            }
            Key::CnpEnabled => self.set_flag(Settings::CNP_ENABLED, parse_bool(key, value)?),
            Key::CnpIntervalUs => {
                let interval = parse_key_duration(key, value, &CNP_INTERVAL)?;
                self.settings.cnp_interval_ns = interval.as_nanos() as u64;
            }
            Key::CnpDscp => {
                let last = DSCP_VALUES as u32 - 1;
                self.settings.cnp_dscp = parse_whole(key, value, 0..=last, "a DSCP value")?;
            }
            Key::LogMarks => self.set_flag(Settings::LOG_MARKS, parse_bool(key, value)?),
            Key::LogErrors => self.set_flag(Settings::LOG_ERRORS, parse_bool(key, value)?),
        }
        Ok(())
    }

    fn set_flag(&mut self, flag: u32, on: u32) {
        if on != 0 {
            self.settings.flags |= flag;
        } else {
            self.settings.flags &= !flag;
        }
    }

    /// Applies `KEY=VALUE` assignments in order, then validates the result as a whole.
    pub fn apply_assignments<S: AsRef<str>>(&mut self, assignments: &[S]) -> anyhow::Result<()> {
        for assignment in assignments {
            let assignment = assignment.as_ref();
            let (key, value) = assignment
                .split_once('=')
                .with_context(|| format!("'{assignment}' is not KEY=VALUE"))?;
            self.apply(key.trim(), value)?;
        }
        self.validate()
    }

    /// Checks the relations between values: Kmin < Kmax and a non-zero rate for every priority.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.lb.validate()?;
        for (p, profile) in self.profiles.iter().enumerate() {
            if profile.kmin_bytes >= profile.kmax_bytes {
                bail!(
                    "ecn.prio{p}: kmin_bytes ({}) must be below kmax_bytes ({})",
                    profile.kmin_bytes,
                    profile.kmax_bytes
                );
            }
            if profile.rate_bytes_per_sec == 0 {
                bail!("ecn.prio{p}.rate_bps must be positive");
            }
        }
        for (p, pfc) in self.pfc_profiles.iter().enumerate() {
            if pfc.xon_bytes >= pfc.xoff_bytes {
                bail!(
                    "pfc.prio{p}: xon_bytes ({}) must be below xoff_bytes ({})",
                    pfc.xon_bytes,
                    pfc.xoff_bytes
                );
            }
        }
        Ok(())
    }

    /// Reads a TOML config file (at most [`MAX_CONFIG_BYTES`]) on top of the defaults.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("reading {}", path.display()))?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            bail!(
                "config file {} is longer than {MAX_CONFIG_BYTES} bytes (1 MiB); a whole \
                 configuration takes a few KB",
                path.display()
            );
        }
        Self::from_toml(&text).with_context(|| format!("in config file {}", path.display()))
    }

    /// Parses TOML text on top of the defaults.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        let table: toml::Table = toml::from_str(text)?;
        let mut assignments = Vec::new();
        flatten("", &toml::Value::Table(table), &mut assignments)?;
        let mut config = HostConfig::default();
        config.apply_assignments(&assignments)?;
        Ok(config)
    }

    /// The configuration as the `set` keys would write it, for `status` and docs.
    pub fn view(&self) -> ConfigView {
        ConfigView {
            roce_only: self.settings.flags & Settings::ROCE_ONLY != 0,
            link_speed_bps: self.settings.link_speed_bps,
            pfc_watchdog_ms: self.settings.pfc_watchdog_ns / 1_000_000,
            pfc_watchdog_ignore: self.settings.flags & Settings::PFC_WATCHDOG_IGNORE != 0,
            cnp_enabled: self.settings.flags & Settings::CNP_ENABLED != 0,
            cnp_interval_us: self.settings.cnp_interval_ns / 1000,
            cnp_dscp: self.settings.cnp_dscp,
            log_marks: self.settings.flags & Settings::LOG_MARKS != 0,
            log_errors: self.settings.flags & Settings::LOG_ERRORS != 0,
            ecn: self
                .profiles
                .iter()
                .enumerate()
                .map(|(priority, p)| ProfileView {
                    priority,
                    enabled: p.enabled != 0,
                    kmin_bytes: p.kmin_bytes,
                    kmax_bytes: p.kmax_bytes,
                    pmax: p.pmax_fixed as f64 / PMAX_ONE as f64,
                    rate_bps: p.rate_bytes_per_sec * 8,
                })
                .collect(),
            dscp_priority: self.dscp_priority.to_vec(),
            lb: self.lb.view(),
        }
    }
}

/// Turns a TOML tree into `dotted.key=value` assignments.
fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<String>) -> anyhow::Result<()> {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, value, out)?;
            }
        }
        toml::Value::String(s) => out.push(format!("{prefix}={s}")),
        toml::Value::Integer(i) => out.push(format!("{prefix}={i}")),
        toml::Value::Float(f) => out.push(format!("{prefix}={f}")),
        toml::Value::Boolean(b) => out.push(format!("{prefix}={b}")),
        other => bail!("{prefix}: unsupported value {other} (use a number, string or boolean)"),
    }
    Ok(())
}

/// The configuration in user units, as `status --json` prints it.
#[derive(Debug, Serialize)]
pub struct ConfigView {
    /// `ecn.roce_only`.
    pub roce_only: bool,
    /// `pfc.link_speed_bps`.
    pub link_speed_bps: u64,
    /// `pfc.watchdog_ms`.
    pub pfc_watchdog_ms: u64,
    /// `pfc.watchdog_ignore`.
    pub pfc_watchdog_ignore: bool,
    /// `cnp.enabled`.
    pub cnp_enabled: bool,
    /// `cnp.interval_us`.
    pub cnp_interval_us: u64,
    /// `cnp.dscp`.
    pub cnp_dscp: u32,
    /// `log.marks`.
    pub log_marks: bool,
    /// `log.errors`.
    pub log_errors: bool,
    /// One entry per priority.
    pub ecn: Vec<ProfileView>,
    /// DSCP → priority, indexed by DSCP.
    pub dscp_priority: Vec<u32>,
    /// The load balancer.
    pub lb: LbView,
}

/// One priority's ECN profile in user units.
#[derive(Debug, Serialize)]
pub struct ProfileView {
    /// The priority.
    pub priority: usize,
    /// `ecn.prioN.enabled`.
    pub enabled: bool,
    /// `ecn.prioN.kmin_bytes`.
    pub kmin_bytes: u32,
    /// `ecn.prioN.kmax_bytes`.
    pub kmax_bytes: u32,
    /// `ecn.prioN.pmax`.
    pub pmax: f64,
    /// `ecn.prioN.rate_bps`.
    pub rate_bps: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_set_the_right_fields() {
        let mut c = HostConfig::default();
        c.apply_assignments(&[
            "ecn.prio3.kmin_bytes=1000",
            "ecn.prio3.kmax_bytes=9000",
            "ecn.prio3.pmax=0.5",
            "ecn.prio3.rate_bps=1g",
            "ecn.prio3.enabled=false",
            "dscp.10.prio=5",
            "ecn.roce_only=false",
        ])
        .unwrap();
        let p = c.profiles[3];
        assert_eq!((p.kmin_bytes, p.kmax_bytes, p.enabled), (1000, 9000, 0));
        assert_eq!(p.pmax_fixed, PMAX_ONE / 2);
        assert_eq!(p.rate_bytes_per_sec, 125_000_000);
        assert_eq!(c.dscp_priority[10], 5);
        assert_eq!(c.settings.flags & Settings::ROCE_ONLY, 0);
    }

    #[test]
    fn bad_values_name_the_key_and_change_nothing() {
        let original = HostConfig::default();
        for (bad, needle) in [
            ("ecn.prio3.kmin_bytes=300000", "kmin_bytes"),
            (
                "ecn.prio9.kmin_bytes=1",
                "unknown key 'ecn.prio9.kmin_bytes'",
            ),
            ("ecn.prio1.pmax=0", "Pmax"),
            ("ecn.prio1.pmax=1.5", "Pmax"),
            ("ecn.prio1.rate_bps=0", "rate"),
            ("dscp.64.prio=1", "unknown key 'dscp.64.prio'"),
            (
                "dscp.3.prio=8",
                "dscp.3.prio: '8' is not a priority (a whole number 0..7)",
            ),
            (
                "dscp.10.prio=-1",
                "dscp.10.prio: '-1' is not a priority (a whole number 0..7)",
            ),
            (
                "cnp.dscp=64",
                "cnp.dscp: '64' is not a DSCP value (a whole number 0..63)",
            ),
            ("pfc.prio3.quanta=0", "is not a pause time in quanta"),
            ("ecn.prio3.kmin_bytes=-5", "is not a number of bytes"),
            ("pfc.watchdog_ms=0", "pfc.watchdog_ms: '0' is too short"),
            (
                "pfc.watchdog_ms=inf",
                "pfc.watchdog_ms: 'inf' is not a duration",
            ),
            (
                "cnp.interval_us=1e300",
                "cnp.interval_us: '1e300' is too long",
            ),
            (
                "cnp.interval_us=61s",
                "durations here are 0 µs to 60000000 µs",
            ),
            ("cnp.interval_us=NaN", "is not a duration"),
            ("ecn.prio1.enabled=maybe", "ecn.prio1.enabled"),
            ("nonsense", "KEY=VALUE"),
        ] {
            let mut c = original.clone();
            let err = format!("{:#}", c.apply_assignments(&[bad]).unwrap_err());
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn config_files_are_bounded() {
        let err = format!(
            "{:#}",
            HostConfig::from_file(Path::new("/dev/zero")).unwrap_err()
        );
        assert!(err.contains("longer than 1048576 bytes"), "{err}");
        let deep = format!("a = {}{}", "[".repeat(5000), "]".repeat(5000));
        assert!(HostConfig::from_toml(&deep).is_err());
    }

    #[test]
    fn toml_paths_are_the_set_keys() {
        let c = HostConfig::from_toml(
            "[ecn]\nroce_only = true\n[ecn.prio3]\nkmin_bytes = 5000\nkmax_bytes = 50000\npmax = 0.1\nrate_bps = \"1g\"\n[dscp.26]\nprio = 2\n",
        )
        .unwrap();
        assert_eq!(c.profiles[3].kmin_bytes, 5000);
        assert_eq!(c.profiles[3].rate_bytes_per_sec, 125_000_000);
        assert_eq!(c.dscp_priority[26], 2);
        let err = format!(
            "{:#}",
            HostConfig::from_toml("[ecn.prio3]\nkmn_bytes = 1\n").unwrap_err()
        );
        assert!(err.contains("ecn.prio3.kmn_bytes"), "{err}");
    }
}
