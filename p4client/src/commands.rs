//! simple_switch_CLI's words over P4Runtime: one table entry as `table_add` writes it
//! (`TABLE ACTION KEY... => PARAM... [PRIORITY]`), and a commands.txt parsed into commands.
//!
//! Keys and parameters are positional, in P4Info's order (the order of the program's `key`
//! and the action's parameters), as simple_switch_CLI takes them: exact `10.0.0.1`, lpm
//! `10.0.0.0/24`, ternary `0x0a000000&&&0xff000000`, range `1->5`, optional as exact.
//! P4Runtime has no entry handles: where simple_switch_CLI takes a handle (`table_modify`,
//! `table_delete`), the entry is named by its key (and priority) instead.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _};
use p4runtime::p4::config::v1::{match_field::MatchType, Action, P4Info, Table};
use p4values::{runtime_json::TableEntrySpec, value};
use serde_json::Value;

use crate::{
    entries::needs_priority_kind,
    p4info::{self, by_name, Named as _},
};

/// The largest commands file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// The longest line of a commands file, in bytes.
pub const MAX_LINE_BYTES: usize = 16 << 10;
/// The most lines a commands file may have.
pub const MAX_LINES: usize = 100_000;

/// A table entry in simple_switch_CLI's `table_add` words: `TABLE ACTION KEY... [=> PARAM...]
/// [PRIORITY]`. A leading `table_add` is skipped, so a line of a commands.txt can be pasted.
pub fn entry(words: &[String], p4info: &P4Info) -> anyhow::Result<TableEntrySpec> {
    let words = match words.first().map(String::as_str) {
        Some("table_add" | "table_modify") => &words[1..],
        _ => words,
    };
    let [table_name, action_name, rest @ ..] = words else {
        bail!("expected TABLE ACTION KEY... => PARAM... [PRIORITY]");
    };
    let table = by_name("table", &p4info.tables, table_name)?;
    let action = by_name("action", &p4info.actions, action_name)?;
    let (keys, params) = match rest.iter().position(|w| w == "=>") {
        Some(arrow) => (&rest[..arrow], &rest[arrow + 1..]),
        None => (rest, &[][..]),
    };
    let needs_priority = table_needs_priority(table);
    let (matches, mut priority) = key(table, keys, needs_priority && params.is_empty())?;
    let wanted = action.params.len();
    let params = if params.len() == wanted + 1 && needs_priority && priority.is_none() {
        priority = Some(parse_priority(&params[wanted])?);
        &params[..wanted]
    } else {
        params
    };
    let action_params = action_params(action, params)?;
    if priority.is_none() && needs_priority {
        bail!(
            "{} has a ternary, range or optional key: give a priority after the parameters",
            table_name
        );
    }
    Ok(TableEntrySpec {
        table: table_name.clone(),
        matches,
        default_action: false,
        action_name: action_name.clone(),
        action_params,
        priority,
    })
}

/// A table's default action in simple_switch_CLI's `table_set_default` words: `TABLE ACTION
/// PARAM...`.
pub fn default_entry(words: &[String], p4info: &P4Info) -> anyhow::Result<TableEntrySpec> {
    let [table_name, action_name, params @ ..] = words else {
        bail!("expected TABLE ACTION PARAM...");
    };
    by_name("table", &p4info.tables, table_name)?;
    let action = by_name("action", &p4info.actions, action_name)?;
    Ok(TableEntrySpec {
        table: table_name.clone(),
        matches: BTreeMap::new(),
        default_action: true,
        action_name: action_name.clone(),
        action_params: action_params(action, params)?,
        priority: None,
    })
}

/// An action's parameters from their words, in P4Info's order; every one must be there.
fn action_params(action: &Action, words: &[String]) -> anyhow::Result<BTreeMap<String, Value>> {
    if words.len() != action.params.len() {
        bail!(
            "{} takes {} parameter(s) ({}), not {}",
            action.name(),
            action.params.len(),
            action
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            words.len()
        );
    }
    let mut params = BTreeMap::new();
    for (param, text) in action.params.iter().zip(words) {
        let bitwidth = u32::try_from(param.bitwidth).unwrap_or(0);
        value::encode_text(text, bitwidth).with_context(|| format!("parameter {}", param.name))?;
        params.insert(param.name.clone(), Value::from(text.as_str()));
    }
    Ok(params)
}

/// The key of an entry of `table` from its words, and a trailing priority if one is there
/// (allowed only when `priority_may_trail`, that is, when no parameters follow).
pub fn key(
    table: &Table,
    words: &[String],
    priority_may_trail: bool,
) -> anyhow::Result<(BTreeMap<String, Value>, Option<i32>)> {
    let fields = &table.match_fields;
    let (keys, priority) = match words.len() {
        n if n == fields.len() => (words, None),
        n if n == fields.len() + 1 && priority_may_trail => (
            &words[..fields.len()],
            Some(parse_priority(&words[fields.len()])?),
        ),
        n => bail!(
            "{} has {} key field(s) ({}), not {n}",
            table.name(),
            fields.len(),
            fields
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut matches = BTreeMap::new();
    for (field, text) in fields.iter().zip(keys) {
        let kind = p4info::match_kind(field)
            .with_context(|| format!("match field {}: kind not supported", field.name))?;
        let bitwidth = u32::try_from(field.bitwidth).unwrap_or(0);
        let value = key_value(kind, text, bitwidth)
            .with_context(|| format!("match field {} ({text:?})", field.name))?;
        matches.insert(field.name.clone(), value);
    }
    Ok((matches, priority))
}

/// Whether entries of `table` need a priority.
fn table_needs_priority(table: &Table) -> bool {
    table
        .match_fields
        .iter()
        .filter_map(p4info::match_kind)
        .any(needs_priority_kind)
}

/// One key word in runtime JSON's form for a field of `kind`.
fn key_value(kind: MatchType, text: &str, bitwidth: u32) -> anyhow::Result<Value> {
    let checked = |t: &str| -> anyhow::Result<Value> {
        value::encode_text(t, bitwidth)?;
        Ok(Value::from(t))
    };
    let split = |separator: &str, form: &str| {
        text.split_once(separator)
            .with_context(|| format!("expected {form}"))
    };
    Ok(match kind {
        MatchType::Exact | MatchType::Optional => checked(text)?,
        MatchType::Lpm => {
            let (prefix, length) = split("/", "VALUE/PREFIX_LENGTH")?;
            let length: u32 = length
                .parse()
                .ok()
                .filter(|l| *l <= bitwidth)
                .with_context(|| format!("prefix length {length:?} is not in 0..={bitwidth}"))?;
            Value::from(vec![checked(prefix)?, Value::from(length)])
        }
        MatchType::Ternary => {
            let (v, mask) = split("&&&", "VALUE&&&MASK")?;
            Value::from(vec![checked(v)?, checked(mask)?])
        }
        MatchType::Range => {
            let (low, high) = split("->", "LOW->HIGH")?;
            Value::from(vec![checked(low)?, checked(high)?])
        }
        MatchType::Unspecified => bail!("the match kind is unspecified in P4Info"),
    })
}

/// A priority: a positive integer (P4Runtime's: the larger wins).
fn parse_priority(text: &str) -> anyhow::Result<i32> {
    text.parse::<i32>()
        .ok()
        .filter(|p| *p > 0)
        .with_context(|| format!("priority {text:?} is not a positive integer"))
}

/// One command of a commands.txt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its line number, from 1.
    pub number: usize,
    /// The command (`table_add`, ...).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// The commands of a commands.txt: one per line, words split on white space; blank lines and
/// `#` comments (whole lines or ends of lines) skipped. Refuses a file past the written limits.
pub fn parse_file(text: &str) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if number > MAX_LINES {
            bail!("more than {MAX_LINES} lines");
        }
        if line.len() > MAX_LINE_BYTES {
            bail!("line {number}: longer than {MAX_LINE_BYTES} bytes");
        }
        let line = line.split_once('#').map_or(line, |(before, _)| before);
        let mut words = line.split_whitespace().map(str::to_owned);
        if let Some(command) = words.next() {
            lines.push(Line {
                number,
                command,
                args: words.collect(),
            });
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{entries, p4info::tests::sample};

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn table_add_words_are_the_runtime_json_entry() {
        let p4info = sample();
        let spec = entry(
            &words("table_add ipv4_lpm ipv4_forward 10.0.2.0/24 => 08:00:00:00:02:22 2"),
            &p4info,
        )
        .unwrap();
        assert_eq!(
            spec.matches["hdr.ipv4.dstAddr"],
            serde_json::json!(["10.0.2.0", 24])
        );
        assert_eq!(spec.action_params["port"], "2");
        assert_eq!(spec.priority, None);
        entries::table_entry(&spec, &p4info).unwrap();
    }

    #[test]
    fn wrong_counts_and_bad_words_say_what_was_expected() {
        let p4info = sample();
        let error = entry(&words("ipv4_lpm ipv4_forward => 1"), &p4info).unwrap_err();
        assert!(format!("{error:#}").contains("key field(s)"), "{error:#}");
        let error = entry(&words("ipv4_lpm ipv4_forward 10.0.0.0/24 => 1"), &p4info).unwrap_err();
        assert!(format!("{error:#}").contains("parameter(s)"), "{error:#}");
        let error = entry(&words("ipv4_lpm ipv4_forward 10.0.0.0/40 => a 1"), &p4info).unwrap_err();
        assert!(format!("{error:#}").contains("prefix length"), "{error:#}");
        let error = entry(&words("ipv4_lpm ipv4_forward 10.0.0.0 => a 1"), &p4info).unwrap_err();
        assert!(
            format!("{error:#}").contains("VALUE/PREFIX_LENGTH"),
            "{error:#}"
        );
    }

    #[test]
    fn comments_blanks_and_limits() {
        let lines =
            parse_file("# a comment\n\ntable_clear t # the end\n  mc_mgrp_create 1\n").unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[0].number, lines[0].command.as_str()),
            (3, "table_clear")
        );
        assert_eq!(lines[0].args, vec!["t"]);
        assert_eq!(lines[1].number, 4);
        let long = "x".repeat(MAX_LINE_BYTES + 1);
        assert!(parse_file(&long)
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }
}
