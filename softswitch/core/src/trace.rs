//! The switch's trace: what BMv2's `simple_switch --log-console` prints, per packet (parser
//! states, tables with hit or miss and the action, conditions, egress port, drops, clones,
//! recirculations, transmissions) and per control-plane write, in BMv2's wording, handed to a
//! [`TraceSink`] the switch's owner installs. Without a sink the switch pays one predictable
//! branch per event and formats nothing.

use crate::ir::{ActionCall, FieldMatch, Key, MatchKind, Program, Slot, Table};
use crate::table::ActionRef;
use std::fmt::{self, Write as _};

/// How verbose a line is, BMv2's levels (`--log-level`), least verbose first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Refused operations.
    Error,
    /// Warnings.
    Warn,
    /// Notable events.
    Info,
    /// The per-packet events and control-plane writes.
    Debug,
    /// Details: conditions, tables applied, actions run, bytes parsed.
    Trace,
}

/// Which packet a line is about, as BMv2 numbers them: the `id` of the packet received from a
/// port (0, 1, ... per switch) and the `copy` of it (0 for the packet itself; clones, replicas,
/// resubmissions and recirculations take the next copy number of their packet). Displayed as
/// BMv2 does, `[id.copy] [cxt 0]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketId {
    /// The received packet's number.
    pub id: u64,
    /// The copy's number.
    pub copy: u64,
}

impl fmt::Display for PacketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}.{}] [cxt 0]", self.id, self.copy)
    }
}

/// Where trace lines go. A line may hold several lines of text (BMv2's key and entry dumps do).
pub trait TraceSink {
    /// A line about packet `packet`.
    fn packet(&mut self, level: Level, packet: PacketId, line: fmt::Arguments<'_>);
    /// A line about the switch as a whole (control-plane writes).
    fn switch(&mut self, level: Level, line: fmt::Arguments<'_>);
}

/// A sink and the most verbose level it takes.
pub(crate) struct Tracer {
    pub(crate) sink: Box<dyn TraceSink>,
    pub(crate) level: Level,
}

impl Tracer {
    /// Whether lines at `level` are wanted.
    pub(crate) fn wants(&self, level: Level) -> bool {
        level <= self.level
    }

    /// Sends a line about `packet` at `level` if wanted (out of the packet path's way).
    #[cold]
    #[inline(never)]
    pub(crate) fn packet(&mut self, level: Level, packet: PacketId, line: fmt::Arguments<'_>) {
        if self.wants(level) {
            self.sink.packet(level, packet, line);
        }
    }
}

/// Sends a line to an optional trace (an `Option` of [`PacketTrace`] or [`Tracer`], with the
/// packet's id for the latter), formatting it only when there is one: without a trace, an
/// event costs the test of that `Option`.
macro_rules! trace_line {
    ($trace:expr, $level:expr, $($fmt:tt)+) => {
        if let Some(t) = &mut $trace {
            t.line($level, format_args!($($fmt)+));
        }
    };
}
pub(crate) use trace_line;

/// A sink of one packet's run through a block: its tracer (only when it takes per-packet
/// lines) and the packet's id.
pub(crate) struct PacketTrace<'a> {
    pub(crate) tracer: &'a mut Tracer,
    pub(crate) packet: PacketId,
}

impl PacketTrace<'_> {
    /// Sends `line` at `level` if wanted (out of the packet path's way).
    #[cold]
    #[inline(never)]
    pub(crate) fn line(&mut self, level: Level, line: fmt::Arguments<'_>) {
        if self.tracer.wants(level) {
            self.tracer.sink.packet(level, self.packet, line);
        }
    }
}

/// A name or text from the program (a BMv2 JSON's names, a P4 source's `#line` file names and
/// `log_msg` formats) as the trace prints it: control characters escaped (`\n`, `\u{1b}`), so
/// that no program can write a line of its own into the log.
pub struct Printable<'a>(pub &'a str);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// A value as BMv2 prints a key or a select key: `bytes` bytes of hex, zero-padded.
pub(crate) fn hex_bytes(out: &mut String, value: u128, width: u16) {
    let digits = usize::from(width.div_ceil(8)) * 2;
    let _ = write!(out, "{value:0digits$x}");
}

/// An action with its data as BMv2 prints an action entry: `NAME - d1,d2,` (each datum in hex
/// without leading zeros).
pub(crate) fn action_entry(program: &Program, call: ActionRef<'_>) -> String {
    let name = program
        .actions
        .get(call.action)
        .map_or("?", |a| a.name.as_str());
    let mut out = format!("{} - ", Printable(name));
    for a in call.args {
        let _ = write!(out, "{a:x},");
    }
    out
}

/// The name BMv2 pads a key's name to in its dumps.
const KEY_NAME_WIDTH: usize = 20;

/// A key's name as BMv2's dumps start its line: `* NAME: `, the name padded.
fn key_name(out: &mut String, name: &str) {
    let printable = Printable(name).to_string();
    let _ = write!(out, "* {printable:<KEY_NAME_WIDTH$}: ");
}

/// The key values of a lookup as BMv2's "Looking up key:" prints them, one line per key.
pub(crate) fn lookup_key(table: &Table, values: &[u128]) -> String {
    let mut out = String::from("Looking up key:\n");
    for (k, v) in table.keys.iter().zip(values) {
        key_name(&mut out, &k.name);
        hex_bytes(&mut out, *v, k.width);
        out.push('\n');
    }
    out
}

/// An entry as BMv2's "Dumping entry N" prints it: its match key, then its action entry.
pub(crate) fn dump_entry(
    program: &Program,
    table: &Table,
    handle: usize,
    matches: &[FieldMatch],
    call: &ActionCall,
) -> String {
    let mut out = format!("Dumping entry {handle}\nMatch key:\n");
    for (k, m) in table.keys.iter().zip(matches) {
        key_name(&mut out, &k.name);
        match_text(&mut out, k, m);
        out.push('\n');
    }
    let _ = writeln!(out, "Action entry: {}", action_entry(program, call.into()));
    out
}

/// One key's match as BMv2 dumps it: `EXACT     0a000202`, `LPM       0a000000/8`,
/// `TERNARY   0a000000 &&& ff000000`, `RANGE     0010 -> 0020`.
fn match_text(out: &mut String, key: &Key, m: &FieldMatch) {
    let full = crate::ir::mask(key.width);
    match (*m, key.kind) {
        (FieldMatch::Range { lo, hi }, _) => {
            out.push_str("RANGE     ");
            hex_bytes(out, lo, key.width);
            out.push_str(" -> ");
            hex_bytes(out, hi, key.width);
        }
        (FieldMatch::Masked { value, .. }, MatchKind::Exact) => {
            out.push_str("EXACT     ");
            hex_bytes(out, value, key.width);
        }
        (FieldMatch::Masked { value, mask }, MatchKind::Lpm) => {
            out.push_str("LPM       ");
            hex_bytes(out, value, key.width);
            let _ = write!(out, "/{}", (mask & full).count_ones());
        }
        (FieldMatch::Masked { value, mask }, MatchKind::Optional) if mask & full == full => {
            out.push_str("OPTIONAL  ");
            hex_bytes(out, value, key.width);
        }
        (FieldMatch::Masked { value, mask }, _) => {
            out.push_str("TERNARY   ");
            hex_bytes(out, value, key.width);
            out.push_str(" &&& ");
            hex_bytes(out, mask, key.width);
        }
    }
}

/// The name of the header whose validity slot is `valid` (`ethernet`, `vlan[1]`), as p4c names
/// header instances.
pub(crate) fn header_name(program: &Program, valid: Slot) -> &str {
    let names = &program.trace_names.headers;
    names
        .binary_search_by_key(&valid, |(slot, _)| *slot)
        .map_or("?", |i| names[i].1.as_str())
}

/// BMv2's name of the v1model parser, pipelines and deparser (p4c-bm2-ss always names them so).
pub(crate) mod block_name {
    /// The parser.
    pub const PARSER: &str = "parser";
    /// The ingress pipeline.
    pub const INGRESS: &str = "ingress";
    /// The egress pipeline.
    pub const EGRESS: &str = "egress";
    /// The deparser.
    pub const DEPARSER: &str = "deparser";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_only() {
        let text =
            Printable("ingress.t\n[12:00:00.000] [bmv2] [E] forged\r\u{1b}[2J é").to_string();
        assert_eq!(
            text,
            "ingress.t\\n[12:00:00.000] [bmv2] [E] forged\\r\\u{1b}[2J é"
        );
    }
}
