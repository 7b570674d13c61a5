//! What `lossless p4` prints: counter cells, register cells and table entries, as text tables
//! and as JSON, and the refreshing table of `watch`.

use std::{fmt::Write as _, time::Duration};

use serde::Serialize;
use serde_json::Value;

use p4values::runtime_json::{RuntimeConfig, TableEntrySpec};

/// `1 table entry` / `2 table entries`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How many entries of each kind a runtime-JSON file holds, for messages: `3 table entries,
/// 1 multicast group, 0 clone sessions`.
pub fn runtime_summary(config: &RuntimeConfig) -> String {
    format!(
        "{}, {}, {}",
        plural(config.table_entries.len(), "table entry", "table entries"),
        plural(
            config.multicast_group_entries.len(),
            "multicast group",
            "multicast groups"
        ),
        plural(
            config.clone_session_entries.len(),
            "clone session",
            "clone sessions"
        ),
    )
}

/// One cell of a counter: an index of an indirect counter, or an entry of a direct one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterCell {
    /// The counter's fully qualified name.
    pub counter: String,
    /// The index (indirect counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
    /// The table entry the cell belongs to (direct counters), in runtime-JSON form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<TableEntrySpec>,
    /// Packets counted (0 for a bytes-only counter).
    pub packets: i64,
    /// Bytes counted (0 for a packets-only counter).
    pub bytes: i64,
}

impl CounterCell {
    /// The cell's place: `[3]`, or the entry's match.
    fn place(&self) -> String {
        match (&self.index, &self.entry) {
            (Some(index), _) => format!("[{index}]"),
            (None, Some(entry)) => entry_match(entry),
            (None, None) => String::new(),
        }
    }

    /// Whether `other` is the same cell (same counter and place).
    fn same_cell(&self, other: &CounterCell) -> bool {
        self.counter == other.counter && self.index == other.index && self.entry == other.entry
    }
}

/// One cell of a register.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegisterCell {
    /// The register's fully qualified name.
    pub register: String,
    /// The index.
    pub index: i64,
    /// The value, in the forms of [`p4values::value::display`].
    pub value: Value,
    /// Whether the value is zero (every bit clear, or false).
    #[serde(skip)]
    pub zero: bool,
}

/// Counter cells as a table with a header line. Of several cells, those still at zero are left
/// out unless `all` (a 512-port counter shows its live ports), and a last line says how many.
pub fn counter_table(cells: &[CounterCell], all: bool) -> String {
    let mut out = format!(
        "{:<32} {:<24} {:>14} {:>16}\n",
        "counter", "cell", "packets", "bytes"
    );
    let shown = |c: &&CounterCell| all || cells.len() == 1 || c.packets != 0 || c.bytes != 0;
    for cell in cells.iter().filter(shown) {
        let _ = writeln!(
            out,
            "{:<32} {:<24} {:>14} {:>16}",
            cell.counter,
            cell.place(),
            cell.packets,
            cell.bytes
        );
    }
    out + &hidden_zeros(cells.len() - cells.iter().filter(shown).count())
}

/// Register cells, one `name[index] = value` a line. Of several cells, those at zero are left
/// out unless `all`, and a last line says how many.
pub fn register_lines(cells: &[RegisterCell], all: bool) -> String {
    let shown = |c: &&RegisterCell| all || cells.len() == 1 || !c.zero;
    let lines: String = cells
        .iter()
        .filter(shown)
        .map(|c| format!("{}[{}] = {}\n", c.register, c.index, c.value))
        .collect();
    lines + &hidden_zeros(cells.len() - cells.iter().filter(shown).count())
}

/// The line that says how many cells at zero a listing left out (none: nothing).
fn hidden_zeros(zero: usize) -> String {
    if zero == 0 {
        return String::new();
    }
    format!(
        "({} not shown; --all shows them)\n",
        plural(zero, "cell at zero", "cells at zero")
    )
}

/// Table entries, one a line: `MATCH => ACTION(PARAMS)`, with the priority when there is one.
pub fn entry_lines(entries: &[TableEntrySpec]) -> String {
    entries
        .iter()
        .map(|entry| match entry.priority {
            Some(priority) => format!("{} priority {priority}\n", entry.describe()),
            None => format!("{}\n", entry.describe()),
        })
        .collect()
}

/// `field=value, ...` of an entry, or `(default action)`.
fn entry_match(entry: &TableEntrySpec) -> String {
    if entry.default_action {
        return "(default action)".to_owned();
    }
    entry
        .matches
        .iter()
        .map(|(k, v)| format!("{}={v}", k.rsplit('.').next().unwrap_or(k)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A counter cell with its rates since the previous reading.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterRate {
    /// The cell.
    #[serde(flatten)]
    pub cell: CounterCell,
    /// Packets per second since the previous reading (absent on the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_per_s: Option<f64>,
    /// Bits per second since the previous reading (absent on the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_s: Option<f64>,
}

/// Pairs each cell of `now` with its rates against the same cell in `before`, read `elapsed`
/// earlier. A cell that went down (a counter reset, a new pipeline) has no rate.
pub fn rates(now: &[CounterCell], before: Option<(&[CounterCell], Duration)>) -> Vec<CounterRate> {
    now.iter()
        .map(|cell| {
            let previous = before.and_then(|(cells, elapsed)| {
                cells
                    .iter()
                    .find(|old| old.same_cell(cell))
                    .filter(|old| old.packets <= cell.packets && old.bytes <= cell.bytes)
                    .map(|old| (old, elapsed.as_secs_f64()))
            });
            let per_s = |delta: i64, secs: f64| (secs > 0.0).then(|| delta as f64 / secs);
            CounterRate {
                cell: cell.clone(),
                packets_per_s: previous
                    .and_then(|(old, secs)| per_s(cell.packets - old.packets, secs)),
                bits_per_s: previous
                    .and_then(|(old, secs)| per_s((cell.bytes - old.bytes) * 8, secs)),
            }
        })
        .collect()
}

/// The `watch` screen: cells that counted anything, with their rates, under a title line.
/// Cells still at zero are left out so a 512-entry port counter shows only its live ports.
pub fn watch_table(title: &str, rows: &[CounterRate]) -> String {
    let mut out = format!(
        "{title}\n{:<32} {:<24} {:>14} {:>16} {:>12} {:>14}\n",
        "counter", "cell", "packets", "bytes", "pkt/s", "Mb/s"
    );
    let live: Vec<&CounterRate> = rows
        .iter()
        .filter(|r| r.cell.packets != 0 || r.cell.bytes != 0)
        .collect();
    if live.is_empty() {
        out.push_str("(every cell is zero)\n");
    }
    let rate = |r: Option<f64>, scale: f64| match r {
        Some(r) => format!("{:.1}", r / scale),
        None => "-".to_owned(),
    };
    for row in live {
        let _ = writeln!(
            out,
            "{:<32} {:<24} {:>14} {:>16} {:>12} {:>14}",
            row.cell.counter,
            row.cell.place(),
            row.cell.packets,
            row.cell.bytes,
            rate(row.packets_per_s, 1.0),
            rate(row.bits_per_s, 1e6),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_runtime_file_is_summed_up_by_kind() {
        let config = RuntimeConfig::parse(
            r#"{"table_entries": [{"table": "t", "action_name": "a"},
                                  {"table": "t", "action_name": "b"},
                                  {"table": "t", "action_name": "c"}],
                "multicast_group_entries": [{"multicast_group_id": 1, "replicas": []}],
                "clone_session_entries": [{"clone_session_id": 100, "replicas": []}]}"#,
        )
        .unwrap();
        assert_eq!(
            runtime_summary(&config),
            "3 table entries, 1 multicast group, 1 clone session"
        );
    }

    fn cell(index: i64, packets: i64, bytes: i64) -> CounterCell {
        CounterCell {
            counter: "MyIngress.port_packets".into(),
            index: Some(index),
            entry: None,
            packets,
            bytes,
        }
    }

    #[test]
    fn counter_json_names_counter_index_packets_bytes() {
        let json = serde_json::to_value(vec![cell(1, 10, 980)]).unwrap();
        assert_eq!(
            json,
            json!([{"counter": "MyIngress.port_packets", "index": 1, "packets": 10, "bytes": 980}])
        );
    }

    #[test]
    fn counter_table_has_a_row_per_cell() {
        let table = counter_table(&[cell(1, 10, 980), cell(2, 3, 294)], false);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("counter"));
        let fields: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(fields, ["MyIngress.port_packets", "[2]", "3", "294"]);
    }

    #[test]
    fn zero_cells_are_left_out_of_a_table_of_several() {
        let cells = [cell(0, 0, 0), cell(1, 10, 980), cell(2, 0, 0)];
        let table = counter_table(&cells, false);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[1].contains("[1]"));
        assert_eq!(lines[2], "(2 cells at zero not shown; --all shows them)");
        assert_eq!(counter_table(&cells, true).lines().count(), 4);
        let one = counter_table(&[cell(7, 0, 0)], false);
        assert!(one.lines().nth(1).unwrap().contains("[7]"), "{one}");
    }

    #[test]
    fn direct_cells_show_their_entry() {
        let entry = TableEntrySpec {
            table: "MyIngress.ipv4_lpm".into(),
            matches: [("hdr.ipv4.dstAddr".to_owned(), json!(["10.0.2.2", 32]))].into(),
            default_action: false,
            action_name: "MyIngress.ipv4_forward".into(),
            action_params: Default::default(),
            priority: None,
        };
        let direct = CounterCell {
            counter: "MyIngress.route_hits".into(),
            index: None,
            entry: Some(entry),
            packets: 4,
            bytes: 400,
        };
        let table = counter_table(std::slice::from_ref(&direct), false);
        assert!(table.contains(r#"dstAddr=["10.0.2.2",32]"#), "{table}");
        let json = serde_json::to_value(&direct).unwrap();
        assert_eq!(
            json["entry"]["match"]["hdr.ipv4.dstAddr"],
            json!(["10.0.2.2", 32])
        );
        assert!(json.get("index").is_none());
    }

    #[test]
    fn rates_come_from_the_same_cell_of_the_previous_reading() {
        let before = [cell(1, 10, 1000), cell(2, 5, 500)];
        let now = [cell(2, 25, 2500), cell(1, 10, 1000), cell(3, 1, 100)];
        let rows = rates(&now, Some((&before, Duration::from_secs(2))));
        assert_eq!(rows[0].packets_per_s, Some(10.0));
        assert_eq!(rows[0].bits_per_s, Some(8000.0));
        assert_eq!(rows[1].packets_per_s, Some(0.0));
        assert_eq!(rows[2].packets_per_s, None, "a new cell has no rate yet");
        assert!(rates(&now, None).iter().all(|r| r.bits_per_s.is_none()));
        // A counter that went down (a new pipeline) has no rate, not a negative one.
        let reset = rates(&[cell(1, 2, 200)], Some((&before, Duration::from_secs(1))));
        assert_eq!(reset[0].packets_per_s, None);
    }

    #[test]
    fn watch_shows_live_cells_with_rates() {
        let before = [cell(1, 10, 1000), cell(2, 0, 0)];
        let now = [cell(1, 20, 2000), cell(2, 0, 0)];
        let screen = watch_table(
            "title",
            &rates(&now, Some((&before, Duration::from_secs(1)))),
        );
        let lines: Vec<&str> = screen.lines().collect();
        assert_eq!(lines.len(), 3, "{screen}");
        let fields: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            fields,
            ["MyIngress.port_packets", "[1]", "20", "2000", "10.0", "0.0"]
        );
        let json = serde_json::to_value(&rates(&now, None)[0]).unwrap();
        assert!(json.get("packets_per_s").is_none());
        assert_eq!(json["packets"], 20);
        let idle = watch_table("t", &rates(&[cell(1, 0, 0)], None));
        assert!(idle.contains("(every cell is zero)"));
    }

    #[test]
    fn registers_and_entries_as_lines() {
        let register = |index, value: u64| RegisterCell {
            register: "MyIngress.last_seen".into(),
            index,
            value: json!(value),
            zero: value == 0,
        };
        assert_eq!(
            register_lines(&[register(3, 0)], false),
            "MyIngress.last_seen[3] = 0\n"
        );
        let cells = [register(0, 0), register(1, 42), register(2, 0)];
        assert_eq!(
            register_lines(&cells, false),
            "MyIngress.last_seen[1] = 42\n(2 cells at zero not shown; --all shows them)\n"
        );
        assert_eq!(register_lines(&cells, true).lines().count(), 3);
        let entry = TableEntrySpec {
            table: "MyIngress.acl".into(),
            matches: [(
                "hdr.ipv4.srcAddr".to_owned(),
                json!(["10.0.0.0", "255.0.0.0"]),
            )]
            .into(),
            default_action: false,
            action_name: "MyIngress.deny".into(),
            action_params: Default::default(),
            priority: Some(7),
        };
        assert_eq!(
            entry_lines(&[entry]),
            "MyIngress.acl: hdr.ipv4.srcAddr=[\"10.0.0.0\",\"255.0.0.0\"] => MyIngress.deny() priority 7\n"
        );
    }
}
