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
    pfc::{PfcProfile, MAX_RELAY_PORTS},
    red::PMAX_ONE,
    DSCP_VALUES, PRIORITIES,
};
use serde::Serialize;

use crate::lb::{LbConfig, LbSetting, LbView};
use units::{self, parse_duration, parse_rate_bps, DurationLimits, ONE_DAY};

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
    /// `pfc.relay`: the interfaces a PAUSE received here is passed on to, in order.
    pub pfc_relay: Vec<String>,
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
            pfc_relay: Vec::new(),
            lb: LbConfig::default(),
        }
    }
}

/// One setting of the host data plane, typed: what a `set` key with its value becomes
/// ([`Setting::parse`], the one parser of user text, for `set` and config files alike), and
/// what code that configures a host (the labs) builds directly. [`HostConfig::set`] checks the
/// value and applies it. Priorities are 0..7, DSCP values 0..63.
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    /// `ecn.prioN.enabled`.
    EcnEnabled(usize, bool),
    /// `ecn.prioN.kmin_bytes`.
    EcnKminBytes(usize, u32),
    /// `ecn.prioN.kmax_bytes`.
    EcnKmaxBytes(usize, u32),
    /// `ecn.prioN.pmax`, in (0, 1].
    EcnPmax(usize, f64),
    /// `ecn.prioN.rate_bps`: the phantom queue's drain rate.
    EcnRateBps(usize, u64),
    /// `pfc.prioN.enabled`.
    PfcEnabled(usize, bool),
    /// `pfc.prioN.xoff_bytes`.
    PfcXoffBytes(usize, u32),
    /// `pfc.prioN.xon_bytes`.
    PfcXonBytes(usize, u32),
    /// `pfc.prioN.quanta`: the pause time asked for, 1..65535.
    PfcQuanta(usize, u32),
    /// `pfc.prioN.drain_bps`: the ingress buffer's drain rate.
    PfcDrainBps(usize, u64),
    /// `dscp.D.prio`: the priority of DSCP D.
    DscpPriority(usize, u32),
    /// `ecn.roce_only`.
    RoceOnly(bool),
    /// `pfc.link_speed_bps`.
    LinkSpeedBps(u64),
    /// `pfc.watchdog_ms`.
    PfcWatchdog(Duration),
    /// `pfc.watchdog_ignore`.
    PfcWatchdogIgnore(bool),
    /// `pfc.relay`: interface names (at most [`MAX_RELAY_PORTS`]); empty turns relaying off.
    PfcRelay(Vec<String>),
    /// `cnp.enabled`.
    CnpEnabled(bool),
    /// `cnp.interval_us`.
    CnpInterval(Duration),
    /// `cnp.dscp`.
    CnpDscp(u32),
    /// `log.marks`.
    LogMarks(bool),
    /// `log.errors`.
    LogErrors(bool),
    /// An `lb.*` key.
    Lb(LbSetting),
}

/// Every key pattern, for error messages and docs.
pub const KEYS: &str =
    "ecn.prioN.enabled, ecn.prioN.kmin_bytes, ecn.prioN.kmax_bytes, ecn.prioN.pmax, \
ecn.prioN.rate_bps, pfc.prioN.enabled, pfc.prioN.xoff_bytes, pfc.prioN.xon_bytes, pfc.prioN.quanta, \
pfc.prioN.drain_bps (N = 0..7), ecn.roce_only, dscp.D.prio (D = 0..63), pfc.link_speed_bps, pfc.watchdog_ms, pfc.watchdog_ignore, pfc.relay, cnp.enabled, cnp.interval_us, cnp.dscp, log.marks, log.errors";

/// What a whole-number key holds and its range: the parser names them when the text is no
/// such number, the setter when the number is out of range, in the same words.
struct Whole {
    what: &'static str,
    range: RangeInclusive<u32>,
}

const BYTES: Whole = Whole {
    what: "a number of bytes",
    range: 0..=u32::MAX,
};
const PRIORITY: Whole = Whole {
    what: "a priority",
    range: 0..=PRIORITIES as u32 - 1,
};
const DSCP: Whole = Whole {
    what: "a DSCP value",
    range: 0..=DSCP_VALUES as u32 - 1,
};
const QUANTA: Whole = Whole {
    what: "a pause time in quanta",
    range: 1..=0xffff,
};

impl Whole {
    fn error(&self, key: &str, value: &dyn std::fmt::Display) -> anyhow::Error {
        anyhow!(
            "{key}: '{value}' is not {} (a whole number {}..{})",
            self.what,
            self.range.start(),
            self.range.end()
        )
    }

    /// The number `text` says (its range is checked by [`Whole::check`]).
    fn parse(&self, key: &str, text: &str) -> anyhow::Result<u32> {
        text.parse().map_err(|_| self.error(key, &text))
    }

    fn check(&self, key: &str, value: u32) -> anyhow::Result<u32> {
        if self.range.contains(&value) {
            Ok(value)
        } else {
            Err(self.error(key, &value))
        }
    }
}

fn parse_bool(key: &str, value: &str) -> anyhow::Result<bool> {
    match value {
        "true" | "1" | "on" => Ok(true),
        "false" | "0" | "off" => Ok(false),
        _ => bail!("{key}: '{value}' is not a boolean (true/false)"),
    }
}

/// A duration within `limits` (a bare number in the key's unit).
fn parse_key_duration(key: &str, value: &str, limits: &DurationLimits) -> anyhow::Result<Duration> {
    parse_duration(value, limits).map_err(|e| anyhow!("{key}: {e}"))
}

/// `duration` in nanoseconds if it is within `limits`.
fn duration_ns(key: &str, duration: Duration, limits: &DurationLimits) -> anyhow::Result<u64> {
    let duration = limits
        .check(duration, &limits.show(duration))
        .map_err(|e| anyhow!("{key}: {e}"))?;
    Ok(duration.as_nanos() as u64)
}

/// A rate of a drain key: 1 b/s to the phantom queue arithmetic's [`MAX_RATE_BPS`].
fn check_drain(key: &str, bps: u64) -> anyhow::Result<u64> {
    if bps == 0 {
        bail!("{key}: the rate must be positive");
    }
    if bps > MAX_RATE_BPS {
        bail!("{key}: rate {bps} b/s is above the supported {MAX_RATE_BPS} b/s");
    }
    Ok(bps)
}

impl Setting {
    /// The setting `key` with the textual `value` names: the one parser of `set` assignments
    /// and config-file keys. Checks the text; [`HostConfig::set`] checks the value.
    pub fn parse(key: &str, value: &str) -> anyhow::Result<Setting> {
        let value = value.trim();
        if LbConfig::owns(key) {
            return LbSetting::parse(key, value).map(Setting::Lb);
        }
        let parts: Vec<&str> = key.split('.').collect();
        let index = |text: &str, prefix: &str, count: usize| -> Option<usize> {
            let n: usize = text.strip_prefix(prefix)?.parse().ok()?;
            (n < count).then_some(n)
        };
        let bool_ = || parse_bool(key, value);
        let bytes = || BYTES.parse(key, value);
        let rate = || parse_rate_bps(value).with_context(|| format!("{key}: bad rate"));
        let setting = match parts.as_slice() {
            ["ecn", "roce_only"] => Setting::RoceOnly(bool_()?),
            ["pfc", "link_speed_bps"] => Setting::LinkSpeedBps(rate()?),
            ["pfc", "watchdog_ms"] => {
                Setting::PfcWatchdog(parse_key_duration(key, value, &WATCHDOG)?)
            }
            ["pfc", "watchdog_ignore"] => Setting::PfcWatchdogIgnore(bool_()?),
            ["pfc", "relay"] => Setting::PfcRelay(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ),
            ["cnp", "enabled"] => Setting::CnpEnabled(bool_()?),
            ["cnp", "interval_us"] => {
                Setting::CnpInterval(parse_key_duration(key, value, &CNP_INTERVAL)?)
            }
            ["cnp", "dscp"] => Setting::CnpDscp(DSCP.parse(key, value)?),
            ["log", "marks"] => Setting::LogMarks(bool_()?),
            ["log", "errors"] => Setting::LogErrors(bool_()?),
            [section @ ("ecn" | "pfc"), prio, field] => {
                let p = index(prio, "prio", PRIORITIES).ok_or_else(|| unknown_key(key))?;
                match (*section, *field) {
                    ("ecn", "enabled") => Setting::EcnEnabled(p, bool_()?),
                    ("ecn", "kmin_bytes") => Setting::EcnKminBytes(p, bytes()?),
                    ("ecn", "kmax_bytes") => Setting::EcnKmaxBytes(p, bytes()?),
                    ("ecn", "pmax") => Setting::EcnPmax(
                        p,
                        value
                            .parse()
                            .with_context(|| format!("{key}: '{value}' is not a number"))?,
                    ),
                    ("ecn", "rate_bps") => Setting::EcnRateBps(p, rate()?),
                    ("pfc", "enabled") => Setting::PfcEnabled(p, bool_()?),
                    ("pfc", "xoff_bytes") => Setting::PfcXoffBytes(p, bytes()?),
                    ("pfc", "xon_bytes") => Setting::PfcXonBytes(p, bytes()?),
                    ("pfc", "quanta") => Setting::PfcQuanta(p, QUANTA.parse(key, value)?),
                    ("pfc", "drain_bps") => Setting::PfcDrainBps(p, rate()?),
                    _ => return Err(unknown_key(key)),
                }
            }
            ["dscp", dscp, "prio"] => {
                let d = index(dscp, "", DSCP_VALUES).ok_or_else(|| unknown_key(key))?;
                Setting::DscpPriority(d, PRIORITY.parse(key, value)?)
            }
            _ => return Err(unknown_key(key)),
        };
        Ok(setting)
    }

    /// Its key, as `set` takes it.
    pub fn key(&self) -> String {
        match self {
            Setting::EcnEnabled(p, _) => format!("ecn.prio{p}.enabled"),
            Setting::EcnKminBytes(p, _) => format!("ecn.prio{p}.kmin_bytes"),
            Setting::EcnKmaxBytes(p, _) => format!("ecn.prio{p}.kmax_bytes"),
            Setting::EcnPmax(p, _) => format!("ecn.prio{p}.pmax"),
            Setting::EcnRateBps(p, _) => format!("ecn.prio{p}.rate_bps"),
            Setting::PfcEnabled(p, _) => format!("pfc.prio{p}.enabled"),
            Setting::PfcXoffBytes(p, _) => format!("pfc.prio{p}.xoff_bytes"),
            Setting::PfcXonBytes(p, _) => format!("pfc.prio{p}.xon_bytes"),
            Setting::PfcQuanta(p, _) => format!("pfc.prio{p}.quanta"),
            Setting::PfcDrainBps(p, _) => format!("pfc.prio{p}.drain_bps"),
            Setting::DscpPriority(d, _) => format!("dscp.{d}.prio"),
            Setting::RoceOnly(_) => "ecn.roce_only".into(),
            Setting::LinkSpeedBps(_) => "pfc.link_speed_bps".into(),
            Setting::PfcWatchdog(_) => "pfc.watchdog_ms".into(),
            Setting::PfcWatchdogIgnore(_) => "pfc.watchdog_ignore".into(),
            Setting::PfcRelay(_) => "pfc.relay".into(),
            Setting::CnpEnabled(_) => "cnp.enabled".into(),
            Setting::CnpInterval(_) => "cnp.interval_us".into(),
            Setting::CnpDscp(_) => "cnp.dscp".into(),
            Setting::LogMarks(_) => "log.marks".into(),
            Setting::LogErrors(_) => "log.errors".into(),
            Setting::Lb(lb) => lb.key(),
        }
    }
}

fn unknown_key(key: &str) -> anyhow::Error {
    anyhow!("unknown key '{key}' (known keys: {KEYS})")
}

/// Entry `index` of the per-priority or per-DSCP `entries` that `key` names.
fn entry<'a, T>(entries: &'a mut [T], index: usize, key: &str) -> anyhow::Result<&'a mut T> {
    entries.get_mut(index).ok_or_else(|| unknown_key(key))
}

impl HostConfig {
    /// Sets one key from its textual value: [`Setting::parse`], then [`HostConfig::set`].
    pub fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        self.set(Setting::parse(key, value)?)
    }

    /// Checks the value of one setting and applies it. Relations between values (Kmin < Kmax)
    /// are checked by [`HostConfig::validate`].
    pub fn set(&mut self, setting: Setting) -> anyhow::Result<()> {
        let key = setting.key();
        match setting {
            Setting::EcnEnabled(p, on) => entry(&mut self.profiles, p, &key)?.enabled = on.into(),
            Setting::EcnKminBytes(p, bytes) => {
                entry(&mut self.profiles, p, &key)?.kmin_bytes = bytes
            }
            Setting::EcnKmaxBytes(p, bytes) => {
                entry(&mut self.profiles, p, &key)?.kmax_bytes = bytes
            }
            Setting::EcnPmax(p, pmax) => {
                if !(pmax > 0.0 && pmax <= 1.0) {
                    bail!("{key}: Pmax must be in (0, 1], got {pmax}");
                }
                entry(&mut self.profiles, p, &key)?.pmax_fixed =
                    (pmax * PMAX_ONE as f64).round().max(1.0) as u32;
            }
            Setting::EcnRateBps(p, bps) => {
                entry(&mut self.profiles, p, &key)?.rate_bytes_per_sec =
                    (check_drain(&key, bps)? / 8).max(1);
            }
            Setting::PfcEnabled(p, on) => {
                entry(&mut self.pfc_profiles, p, &key)?.enabled = on.into()
            }
            Setting::PfcXoffBytes(p, bytes) => {
                entry(&mut self.pfc_profiles, p, &key)?.xoff_bytes = bytes
            }
            Setting::PfcXonBytes(p, bytes) => {
                entry(&mut self.pfc_profiles, p, &key)?.xon_bytes = bytes
            }
            Setting::PfcQuanta(p, quanta) => {
                entry(&mut self.pfc_profiles, p, &key)?.quanta = QUANTA.check(&key, quanta)?;
            }
            Setting::PfcDrainBps(p, bps) => {
                entry(&mut self.pfc_profiles, p, &key)?.drain_bytes_per_sec =
                    (check_drain(&key, bps)? / 8).max(1);
            }
            Setting::DscpPriority(d, priority) => {
                *entry(&mut self.dscp_priority, d, &key)? = PRIORITY.check(&key, priority)?;
            }
            Setting::RoceOnly(on) => self.set_flag(Settings::ROCE_ONLY, on),
            Setting::LinkSpeedBps(bps) => {
                if bps == 0 || bps > units::MAX_RATE_BPS {
                    bail!(
                        "{key}: a link speed is 1 b/s to {} b/s",
                        units::MAX_RATE_BPS
                    );
                }
                self.settings.link_speed_bps = bps;
            }
            Setting::PfcWatchdog(limit) => {
                self.settings.pfc_watchdog_ns = duration_ns(&key, limit, &WATCHDOG)?;
            }
            Setting::PfcWatchdogIgnore(on) => self.set_flag(Settings::PFC_WATCHDOG_IGNORE, on),
            Setting::PfcRelay(names) => {
                if names.len() > MAX_RELAY_PORTS {
                    bail!(
                        "{key}: at most {MAX_RELAY_PORTS} interfaces, got {}",
                        names.len()
                    );
                }
                if let Some(long) = names.iter().find(|n| n.len() >= 16) {
                    bail!("{key}: '{long}' is longer than an interface name can be");
                }
                if let Some((_, twice)) = names
                    .iter()
                    .enumerate()
                    .find(|(i, n)| names[..*i].contains(n))
                {
                    bail!("{key}: {twice} is listed twice");
                }
                self.set_flag(Settings::PFC_RELAY, !names.is_empty());
                self.pfc_relay = names;
            }
            Setting::CnpEnabled(on) => self.set_flag(Settings::CNP_ENABLED, on),
            Setting::CnpInterval(interval) => {
                self.settings.cnp_interval_ns = duration_ns(&key, interval, &CNP_INTERVAL)?;
            }
            Setting::CnpDscp(dscp) => self.settings.cnp_dscp = DSCP.check(&key, dscp)?,
            Setting::LogMarks(on) => self.set_flag(Settings::LOG_MARKS, on),
            Setting::LogErrors(on) => self.set_flag(Settings::LOG_ERRORS, on),
            Setting::Lb(lb) => self.lb.set(lb)?,
        }
        Ok(())
    }

    /// Applies `settings` in order, then validates the result as a whole.
    pub fn set_all(&mut self, settings: impl IntoIterator<Item = Setting>) -> anyhow::Result<()> {
        for setting in settings {
            self.set(setting)?;
        }
        self.validate()
    }

    fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
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
        let text = read_config_file(path)?;
        Self::from_toml(&text).with_context(|| format!("in config file {}", path.display()))
    }

    /// Parses TOML text on top of the defaults.
    pub fn from_toml(text: &str) -> anyhow::Result<Self> {
        Self::from_table(parse_toml(text)?)
    }

    /// A parsed TOML table of `set` keys (a config file's, or a profile of the agent's) on top
    /// of the defaults.
    pub fn from_table(table: toml::Table) -> anyhow::Result<Self> {
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
            pfc_relay: self.pfc_relay.clone(),
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

/// The text of a config file (the host's or the agent's), refused past [`MAX_CONFIG_BYTES`]
/// without reading further (so `/dev/zero` ends at once).
pub fn read_config_file(path: &Path) -> anyhow::Result<String> {
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
    Ok(text)
}

/// Characters of the TOML parser's message, and of the token it is about, that an error
/// quotes (control characters escaped).
const MAX_QUOTED_CHARS: usize = 120;

/// Parses a config file's TOML `text` (the host's or the agent's) into `T`. An error says
/// where (line and column) and what is wrong, quoting nothing of the file but an escaped
/// excerpt of the token it is about: a file that is not a config at all (`--config
/// /etc/shadow`) is not shown.
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> anyhow::Result<T> {
    toml::from_str(text).map_err(|e| {
        let quoted = |s: &str| {
            let escaped: String = s.escape_debug().collect();
            match escaped.char_indices().nth(MAX_QUOTED_CHARS) {
                Some((cut, _)) => format!("{}...", &escaped[..cut]),
                None => escaped,
            }
        };
        let message = quoted(e.message().trim_end());
        match e.span().filter(|span| span.end <= text.len()) {
            Some(span) => {
                let before = &text[..span.start];
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
                let token = text.get(span).unwrap_or("");
                anyhow!(
                    "TOML, line {line}, column {column}: {message} (at '{}')",
                    quoted(token)
                )
            }
            None => anyhow!("TOML: {message}"),
        }
    })
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
    /// `pfc.relay`.
    pub pfc_relay: Vec<String>,
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

    /// Each per-priority key parses to the setting that names it again, in either section.
    #[test]
    fn per_priority_keys_parse_to_their_own_setting() {
        for (key, value) in [
            ("ecn.prio2.enabled", "true"),
            ("ecn.prio2.kmin_bytes", "1000"),
            ("ecn.prio2.kmax_bytes", "9000"),
            ("ecn.prio2.pmax", "0.5"),
            ("ecn.prio2.rate_bps", "1g"),
            ("pfc.prio2.enabled", "true"),
            ("pfc.prio2.xoff_bytes", "20000"),
            ("pfc.prio2.xon_bytes", "10000"),
            ("pfc.prio2.quanta", "100"),
            ("pfc.prio2.drain_bps", "1g"),
        ] {
            assert_eq!(Setting::parse(key, value).unwrap().key(), key);
        }
        for unknown in [
            "ecn.prio2.xoff_bytes",
            "pfc.prio2.kmin_bytes",
            "pfc.prio8.enabled",
        ] {
            assert!(Setting::parse(unknown, "1").is_err(), "{unknown}");
        }
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
            ("pfc.relay=v0,v1,v0", "pfc.relay: v0 is listed twice"),
            (
                "pfc.relay=a,b,c,d,e,f,g,h,i",
                "pfc.relay: at most 8 interfaces, got 9",
            ),
            (
                "pfc.relay=an-interface-name-too-long",
                "is longer than an interface name can be",
            ),
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
    fn typed_settings_are_what_their_text_parses_to() {
        let mut typed = HostConfig::default();
        typed
            .set_all([
                Setting::EcnRateBps(3, 100_000_000),
                Setting::EcnKminBytes(3, 20_000),
                Setting::EcnPmax(3, 0.2),
                Setting::PfcQuanta(3, 10_000),
                Setting::CnpInterval(Duration::from_micros(50)),
                Setting::DscpPriority(26, 3),
                Setting::RoceOnly(false),
            ])
            .unwrap();
        let mut text = HostConfig::default();
        text.apply_assignments(&[
            "ecn.prio3.rate_bps=100000000",
            "ecn.prio3.kmin_bytes=20000",
            "ecn.prio3.pmax=0.2",
            "pfc.prio3.quanta=10000",
            "cnp.interval_us=50",
            "dscp.26.prio=3",
            "ecn.roce_only=false",
        ])
        .unwrap();
        assert_eq!(typed, text);
        for key in ["ecn.prio3.rate_bps", "cnp.interval_us", "dscp.26.prio"] {
            assert_eq!(Setting::parse(key, "1").unwrap().key(), key);
        }
    }

    #[test]
    fn typed_values_out_of_range_are_refused_as_their_text_is() {
        for (setting, needle) in [
            (
                Setting::DscpPriority(3, 8),
                "dscp.3.prio: '8' is not a priority (a whole number 0..7)",
            ),
            (
                Setting::EcnPmax(1, 1.5),
                "ecn.prio1.pmax: Pmax must be in (0, 1]",
            ),
            (Setting::PfcQuanta(3, 0), "is not a pause time in quanta"),
            (
                Setting::EcnRateBps(0, 0),
                "ecn.prio0.rate_bps: the rate must be positive",
            ),
            (
                Setting::PfcDrainBps(0, u64::MAX),
                "pfc.prio0.drain_bps: rate 18446744073709551615 b/s is above the supported",
            ),
            (
                Setting::CnpInterval(Duration::from_secs(61)),
                "cnp.interval_us: '61000000 µs' is too long",
            ),
            (
                Setting::EcnKminBytes(8, 1),
                "unknown key 'ecn.prio8.kmin_bytes'",
            ),
            (Setting::LinkSpeedBps(0), "pfc.link_speed_bps"),
        ] {
            let mut c = HostConfig::default();
            let err = format!("{:#}", c.set(setting.clone()).unwrap_err());
            assert!(err.contains(needle), "{setting:?}: {err}");
            assert_eq!(c, HostConfig::default(), "{setting:?} changed the config");
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
