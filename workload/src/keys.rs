//! The keys of one workload part, read with their types and limits. A part's keys come from a
//! `[[part]]` table of a TOML file or from a short form on the command line, whose values are
//! all text; each reader accepts both, so the two forms share every rule and message.

use std::ops::RangeInclusive;
use std::time::Duration;

use toml::{Table, Value};
use units::{parse_bytes, parse_duration, ByteLimits, DurationLimits, TimeUnit};

use crate::error::{token, Origin, Result, WorkloadError};
use crate::limits::MAX_TIME;
use crate::Ps;

/// The keys of one part, taken one by one; what is left at the end is unknown to its kind.
pub(crate) struct Keys<'a> {
    table: Table,
    at: &'a Origin,
    kind: &'static str,
    asked: Vec<&'static str>,
}

impl<'a> Keys<'a> {
    /// The keys of `table`, a part of kind `kind` read at `at`.
    pub(crate) fn new(table: Table, at: &'a Origin, kind: &'static str) -> Self {
        Keys {
            table,
            at,
            kind,
            asked: Vec::new(),
        }
    }

    /// Where the part was read.
    pub(crate) fn at(&self) -> &'a Origin {
        self.at
    }

    /// An error about `key`.
    pub(crate) fn error(&self, key: &str, message: impl std::fmt::Display) -> WorkloadError {
        WorkloadError::input(self.at, format!("{} {key}: {message}", self.kind))
    }

    /// The value of `key`, if given.
    fn take(&mut self, key: &'static str) -> Option<Value> {
        self.asked.push(key);
        self.table.remove(key)
    }

    /// `key`, which must be given.
    pub(crate) fn required<T>(&self, key: &str, value: Option<T>) -> Result<T> {
        value.ok_or_else(|| self.error(key, "missing"))
    }

    /// A whole number within `range`: an integer, or its digits as text.
    pub(crate) fn count(
        &mut self,
        key: &'static str,
        range: RangeInclusive<u64>,
    ) -> Result<Option<u64>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let n = match &value {
            Value::Integer(i) => u64::try_from(*i).ok(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n {
            Some(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(self.error(
                key,
                format!(
                    "{} is not a whole number from {} to {}",
                    shown(&value),
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    /// A size in bytes within `min..=max`: an integer, or text with a unit (`64KB`, `2MiB`).
    pub(crate) fn size(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let text = match &value {
            Value::Integer(i) => i.to_string(),
            Value::String(s) => s.clone(),
            _ => return Err(self.error(key, format!("{} is not a size in bytes", shown(&value)))),
        };
        parse_bytes(&text, &ByteLimits { min, max })
            .map(Some)
            .map_err(|e| self.error(key, e))
    }

    /// A time with its unit (`ns`, `us`, `ms`, `s`, `m`, `h`), as text, from 0 (or, if
    /// `positive`, above 0) to [`MAX_TIME`]; resolution one nanosecond.
    pub(crate) fn time(&mut self, key: &'static str, positive: bool) -> Result<Option<Ps>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let Value::String(text) = &value else {
            return Err(self.error(
                key,
                format!(
                    "{} is not a time with a unit (e.g. \"100us\")",
                    shown(&value)
                ),
            ));
        };
        if !text.trim_end().ends_with(char::is_alphabetic) {
            return Err(self.error(key, format!("{} needs a unit (ns, us, ms, s)", token(text))));
        }
        let limits = DurationLimits {
            unit: TimeUnit::Seconds,
            min: Duration::ZERO,
            max: Duration::from_nanos(MAX_TIME / 1000),
        };
        let duration = parse_duration(text, &limits).map_err(|e| self.error(key, e))?;
        if positive && duration.is_zero() {
            return Err(self.error(key, format!("{} is not above zero", token(text))));
        }
        // At most MAX_TIME, so within u64 picoseconds.
        Ok(Some(duration.as_nanos() as u64 * 1000))
    }

    /// A number in `(0, 1]`: a float, an integer (1), or its digits as text.
    pub(crate) fn fraction(&mut self, key: &'static str) -> Result<Option<f64>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let x = match &value {
            Value::Float(x) => Some(*x),
            Value::Integer(i) => Some(*i as f64),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match x {
            Some(x) if x > 0.0 && x <= 1.0 => Ok(Some(x)),
            _ => Err(self.error(key, format!("{} is not a number in (0, 1]", shown(&value)))),
        }
    }

    /// A boolean: `true` or `false`, or their text; a bare word in a short form is `true`.
    pub(crate) fn flag(&mut self, key: &'static str) -> Result<Option<bool>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        match &value {
            Value::Boolean(b) => Ok(Some(*b)),
            Value::String(s) if s == "true" => Ok(Some(true)),
            Value::String(s) if s == "false" => Ok(Some(false)),
            _ => Err(self.error(key, format!("{} is not true or false", shown(&value)))),
        }
    }

    /// Text.
    pub(crate) fn text(&mut self, key: &'static str) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(key, format!("{} is not text", shown(&other)))),
        }
    }

    /// A list of whole numbers each within `range` (a TOML array; the short form has none).
    pub(crate) fn list(
        &mut self,
        key: &'static str,
        range: RangeInclusive<u64>,
    ) -> Result<Option<Vec<u64>>> {
        let Some(value) = self.take(key) else {
            return Ok(None);
        };
        let Value::Array(items) = &value else {
            return Err(self.error(
                key,
                "a list, given in a workload file (`hosts = [0, 4, 8]`); on the command line use `first` and `stride`",
            ));
        };
        items
            .iter()
            .map(|item| {
                match item {
                    Value::Integer(i) => u64::try_from(*i).ok().filter(|n| range.contains(n)),
                    _ => None,
                }
                .ok_or_else(|| {
                    self.error(
                        key,
                        format!(
                            "{} is not a whole number from {} to {}",
                            shown(item),
                            range.start(),
                            range.end()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<u64>>>()
            .map(Some)
    }

    /// Refuses the keys no reader took: they are unknown to this kind.
    pub(crate) fn finish(self) -> Result<()> {
        match self.table.keys().next() {
            None => Ok(()),
            Some(key) => Err(WorkloadError::input(
                self.at,
                format!(
                    "{}: unknown key {} (its keys: kind, {})",
                    self.kind,
                    token(key),
                    self.asked.join(", ")
                ),
            )),
        }
    }
}

/// A value as a message quotes it.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => token(s),
        other => token(&other.to_string()),
    }
}
