//! softswitch-stf, the STF runner: runs a p4c-style `.stf` test against a [`Target`] — softswitch's
//! [`Switch`] on a virtual clock, or BMv2 ([`crate::bmv2`]) — and reports every mismatch with a
//! diff of the packet.
//!
//! Commands: `packet`, `expect` (`*` nibble wildcards, `$` for an exact length), `no_packet`
//! (the last packet sent produced nothing),
//! `add` (priority, `0x**` ternary, `v&&&m`, `/len` lpm, `lo..hi` range, `= ID`), `setdefault`,
//! `remove all` / `remove TABLE ID`, `wait`, `advance US` (softswitch's own: virtual time
//! passes), `check_counter`, `mirroring_add`,
//! `mc_mgrp_create`, `mc_node_create`, `mc_node_associate`, `register_read`, `register_write`,
//! `counter_read`, `meter_set_rates`, `pvs_add`, `member_add`, `group_create`, `group_add_member`, `set_queue_depth` and `set_queue_rate` (BMv2 CLI argument
//! order).
#![forbid(unsafe_code)]

pub mod bmv2;
mod target;

pub use softswitch_core::runtime::CellIndex;
pub use target::{Indirect, IndirectEntry, Queues, Sent, Target, TargetResult};

use softswitch_core::ir::{mask, ActionCall, Entry, FieldMatch, MatchKind};
use softswitch_core::meter::MeterConfig;
use softswitch_core::runtime::find_by_name;
use softswitch_core::switch::Switch;
use softswitch_core::tm;
use softswitch_frontend::diagnostic::{fail, Diagnostic, Result};
use softswitch_frontend::source::{SourceMap, Span};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::io::Read as _;
use std::path::Path;

/// The largest STF test the runner reads, in bytes (p4c's own tests are a few kilobytes).
pub const MAX_STF_BYTES: usize = 16 << 20;
/// The longest packet a `packet` line may send, in bytes.
pub const MAX_PACKET_BYTES: usize = 64 << 10;
/// Bytes of packets the switch may send during one test; past it the run stops with an error
/// (multicast and clones multiply what a test sends).
pub const MAX_OUTPUT_BYTES: usize = 256 << 20;

/// Reads the STF test at `path`, refusing one longer than [`MAX_STF_BYTES`] without reading
/// past the limit (so `/dev/zero` is refused, not read forever).
pub fn read(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_STF_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > MAX_STF_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {MAX_STF_BYTES} bytes, the most an STF test may be"),
        ));
    }
    Ok(text)
}

/// What a multicast group id is (`standard_metadata.mcast_grp` is 16 bits), for range errors.
const MULTICAST_GROUP: &str = "a multicast group id (mcast_grp is 16 bits)";
/// What a replication id is (`standard_metadata.egress_rid` is 16 bits), for range errors.
const REPLICATION_ID: &str = "a replication id (egress_rid is 16 bits)";

/// The outcome of an STF run.
#[derive(Debug, Default)]
pub struct Report {
    /// Every failed expectation, rendered with its STF position.
    pub failures: Vec<String>,
    /// Packets sent by the test.
    pub packets_in: usize,
    /// Packets the switch sent.
    pub packets_out: usize,
    /// Those packets, in the order they were collected.
    pub outputs: Vec<Sent>,
}

impl Report {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// An expected packet: nibbles (`None` is `*`), whether the length must be exact, and where.
#[derive(Debug)]
struct Expect {
    nibbles: Vec<Option<u8>>,
    exact: bool,
    span: Span,
}

/// One word of a line and where it is.
#[derive(Clone, Debug)]
struct Word<'t> {
    text: &'t str,
    span: Span,
}

/// Runs STF file `file` of `map` against softswitch's `switch`. Malformed commands are
/// errors; failed expectations are in the report.
pub fn run(map: &SourceMap, file: u32, switch: &mut Switch) -> Result<Report> {
    run_on(map, file, switch)
}

/// Runs STF file `file` of `map` against `target`, as [`run`] does.
pub fn run_on(map: &SourceMap, file: u32, target: &mut dyn Target) -> Result<Report> {
    let text = &map.file(file).text;
    if text.len() > MAX_STF_BYTES {
        return fail(
            Span { file, lo: 0, hi: 0 },
            format!("the test is longer than {MAX_STF_BYTES} bytes, the most an STF test may be"),
        );
    }
    let mut runner = Runner {
        map,
        target,
        expects: HashMap::new(),
        ids: HashMap::new(),
        report: Report::default(),
        ports: HashMap::new(),
        any_ports: HashSet::new(),
        file,
        outputs: Vec::new(),
        output_bytes: 0,
    };
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or("");
        let words = split_words(code, file, offset);
        offset += line.len();
        if let Some(first) = words.first() {
            runner.command(first, &words[1..])?;
        }
    }
    let end = Span {
        file,
        lo: text.len() as u32,
        hi: text.len() as u32,
    };
    runner.wait(end)?;
    runner.finish();
    runner.report.outputs = runner.outputs;
    Ok(runner.report)
}

fn split_words(code: &str, file: u32, base: usize) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        // An action call `a(x:1, y:2)` is one word even with spaces inside.
        let mut depth = 0;
        while i < bytes.len() && (depth > 0 || !bytes[i].is_ascii_whitespace()) {
            match bytes[i] {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
            i += 1;
        }
        let span = Span {
            file,
            lo: (base + start) as u32,
            hi: (base + i) as u32,
        };
        out.push(Word {
            text: &code[start..i],
            span,
        });
    }
    out
}

struct Runner<'a> {
    map: &'a SourceMap,
    target: &'a mut dyn Target,
    expects: HashMap<u16, Vec<Expect>>,
    ids: HashMap<String, (usize, usize)>,
    report: Report,
    /// Ports named by `packet` or `expect` lines (the interfaces p4c's runner would open), with
    /// where each was first named.
    ports: HashMap<u16, Span>,
    /// Ports given as `expect PORT` with no data: anything may leave them.
    any_ports: HashSet<u16>,
    /// The STF file.
    file: u32,
    outputs: Vec<Sent>,
    /// Bytes of `outputs`, kept under [`MAX_OUTPUT_BYTES`].
    output_bytes: usize,
}

fn number(w: &Word) -> Result<u128> {
    parse_number(w.text)
        .ok_or_else(|| Diagnostic::new(w.span, format!("expected a number, found '{}'", w.text)))
}

/// A number that fits `T`; past it an error naming `what` and its range (never a silent wrap).
fn number_as<T: TryFrom<u128> + Bounded>(w: &Word, what: &str) -> Result<T> {
    let n = number(w)?;
    T::try_from(n)
        .map_err(|_| Diagnostic::new(w.span, format!("{what} is 0..{}, not {n}", T::MAX_VALUE)))
}

/// A replication node's handle.
fn node(w: &Word) -> Result<usize> {
    number_as::<usize>(w, "a replication node handle")
}

/// The largest value of an integer type, for range errors.
trait Bounded {
    const MAX_VALUE: u128;
}

impl Bounded for u16 {
    const MAX_VALUE: u128 = u16::MAX as u128;
}

impl Bounded for u32 {
    const MAX_VALUE: u128 = u32::MAX as u128;
}

impl Bounded for u64 {
    const MAX_VALUE: u128 = u64::MAX as u128;
}

impl Bounded for usize {
    const MAX_VALUE: u128 = usize::MAX as u128;
}

impl Bounded for i32 {
    const MAX_VALUE: u128 = i32::MAX as u128;
}

/// Parses `123`, `0x1f`, `0b101`, `0o17` (underscores allowed).
fn parse_number(s: &str) -> Option<u128> {
    let s = s.replace('_', "");
    let (radix, digits) = match s.get(..2) {
        Some("0x" | "0X") => (16, &s[2..]),
        Some("0b" | "0B") => (2, &s[2..]),
        Some("0o" | "0O") => (8, &s[2..]),
        _ => (10, s.as_str()),
    };
    u128::from_str_radix(digits, radix).ok()
}

fn hex_nibbles(words: &[Word], wildcards: bool) -> Result<Vec<Option<u8>>> {
    let mut out = Vec::new();
    for w in words {
        for (i, c) in w.text.char_indices() {
            match c {
                '*' if wildcards => out.push(None),
                c if c.is_ascii_hexdigit() => {
                    out.push(Some(c.to_digit(16).expect("hex digit") as u8))
                }
                _ => {
                    let span = Span {
                        lo: w.span.lo + i as u32,
                        hi: w.span.lo + (i + c.len_utf8()) as u32,
                        ..w.span
                    };
                    return fail(span, format!("'{c}' is not a hex digit"));
                }
            }
        }
    }
    Ok(out)
}

impl Runner<'_> {
    fn command(&mut self, cmd: &Word, args: &[Word]) -> Result<()> {
        let need = |n: usize| -> Result<()> {
            if args.len() >= n {
                Ok(())
            } else {
                fail(cmd.span, format!("{} needs {n} arguments", cmd.text))
            }
        };
        match cmd.text.to_ascii_lowercase().as_str() {
            "packet" => {
                // `packet PORT` alone sends an empty packet, as p4c's STF runner does.
                need(1)?;
                let port = self.port(&args[0])?;
                self.ports.entry(port).or_insert(args[0].span);
                let nibbles = hex_nibbles(&args[1..], false)?;
                if nibbles.len().div_ceil(2) > MAX_PACKET_BYTES {
                    return fail(
                        args[1].span.to(args[args.len() - 1].span),
                        format!("a packet is at most {MAX_PACKET_BYTES} bytes"),
                    );
                }
                // Two digits a byte; an odd last digit N is the byte 0x0N, as p4c's STF
                // runner reads it.
                let bytes = nibbles
                    .chunks(2)
                    .map(|c| {
                        let digits = c.iter().map(|d| d.unwrap_or(0));
                        digits.fold(0, |byte, digit| (byte << 4) | digit)
                    })
                    .collect();
                self.report.packets_in += 1;
                self.target
                    .send(port, bytes)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
                self.collect(cmd.span)?;
            }
            "expect" => {
                need(1)?;
                let port = self.port(&args[0])?;
                let mut data = args[1..].to_vec();
                let mut exact = false;
                if let Some(last) = data.last_mut() {
                    if let Some(stripped) = last.text.strip_suffix('$') {
                        exact = true;
                        last.text = stripped;
                    }
                }
                self.ports.entry(port).or_insert(args[0].span);
                if data.is_empty() && !exact {
                    // `expect PORT` alone: any number of packets may leave that port.
                    self.any_ports.insert(port);
                    return Ok(());
                }
                let nibbles = hex_nibbles(&data, true)?;
                let span = cmd.span.to(args[args.len() - 1].span);
                self.expects.entry(port).or_default().push(Expect {
                    nibbles,
                    exact,
                    span,
                });
            }
            "no_packet" => {
                self.wait(cmd.span)?;
                let last = self.report.packets_in.checked_sub(1);
                let extra: Vec<String> = self
                    .outputs
                    .iter()
                    .filter(|o| o.packet == last)
                    .map(|o| format!("port {}: {}", o.port, hex(&o.data)))
                    .collect();
                if !extra.is_empty() {
                    self.failure(
                        cmd.span,
                        format!(
                            "expected no packet from the last one sent, got {}",
                            extra.join(", ")
                        ),
                    );
                }
            }
            "wait" => self.wait(cmd.span)?,
            "advance" => {
                // softswitch's own: let `args[0]` µs of virtual time pass, serving the queues.
                need(1)?;
                let us = u64::try_from(number(&args[0])?).map_err(|_| {
                    Diagnostic::new(args[0].span, "a time in microseconds fits in 64 bits")
                })?;
                self.target
                    .advance(us)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
                self.collect(cmd.span)?;
            }
            "add" => self.add(cmd, args)?,
            "setdefault" => {
                need(2)?;
                let table = self.table(&args[0])?;
                let call = self.action(table, &args[1])?;
                self.target
                    .set_default(table, call)
                    .map_err(|e| Diagnostic::new(args[1].span, e))?;
            }
            "remove" => {
                need(1)?;
                if args[0].text == "all" {
                    self.target
                        .clear_tables()
                        .map_err(|e| Diagnostic::new(cmd.span, e))?;
                } else {
                    need(2)?;
                    let table = self.table(&args[0])?;
                    let Some(&(t, handle)) = self.ids.get(args[1].text) else {
                        return fail(
                            args[1].span,
                            format!("no entry was added with id {}", args[1].text),
                        );
                    };
                    if t != table {
                        return fail(args[1].span, "this entry belongs to another table");
                    }
                    self.target
                        .remove_entry(table, handle)
                        .map_err(|e| Diagnostic::new(args[1].span, e))?;
                }
            }
            "check_counter" => self.check_counter(cmd, args)?,
            "counter_read" => {
                need(2)?;
                let instance = self.instance(&args[0])?;
                let index = self.cell_index(instance, &args[1])?;
                let cell = self
                    .target
                    .counter(instance, CellIndex::Index(index))
                    .map_err(|e| Diagnostic::new(args[1].span, e))?;
                self.compare_counter(cmd.span, cell.packets, cell.bytes, &args[2..])?;
            }
            "register_read" => {
                need(3)?;
                let instance = self.instance(&args[0])?;
                let index = self.cell_index(instance, &args[1])?;
                let value_word = if args[2].text == "==" {
                    args.get(3).unwrap_or(&args[2])
                } else {
                    &args[2]
                };
                let want = number(value_word)?;
                let got = self
                    .target
                    .register(instance, index)
                    .map_err(|e| Diagnostic::new(args[1].span, e))?;
                if got != want {
                    self.failure(
                        cmd.span.to(value_word.span),
                        format!(
                            "register {}[{index}] is {got:#x}, expected {want:#x}",
                            args[0].text
                        ),
                    );
                }
            }
            "register_write" => {
                need(3)?;
                let instance = self.instance(&args[0])?;
                let (index, value) = (self.cell_index(instance, &args[1])?, number(&args[2])?);
                if let Some(width) = self.target.program().instances[instance].kind.cell_width() {
                    if value > mask(width) {
                        return fail(
                            args[2].span,
                            format!("{value:#x} does not fit the register's {width} bits"),
                        );
                    }
                }
                self.target
                    .set_register(instance, index, value)
                    .map_err(|e| Diagnostic::new(args[1].span, e))?;
            }
            "meter_set_rates" => {
                need(4)?;
                self.meter_set_rates(&args[0], &args[1], &args[2], &args[3])?;
            }
            "pvs_add" => {
                need(2)?;
                let instance = self.instance(&args[0])?;
                let width = match self.target.program().instances[instance].kind {
                    softswitch_core::ir::InstanceKind::ValueSet { width, .. } => width,
                    _ => {
                        return fail(
                            args[0].span,
                            format!("'{}' is not a parser value set", args[0].text),
                        )
                    }
                };
                let member =
                    key_match(args[1].text, width, MatchKind::Ternary).ok_or_else(|| {
                        Diagnostic::new(
                            args[1].span,
                            format!("cannot read '{}' as a value", args[1].text),
                        )
                    })?;
                self.target
                    .value_set_add(instance, member)
                    .map_err(|e| Diagnostic::new(args[1].span, e))?;
            }
            "member_add" => {
                need(3)?;
                let table = self.table(&args[0])?;
                let member = number_as::<u32>(&args[1], "a member id")?;
                let call = self.action(table, &args[2])?;
                self.target
                    .add_member(table, member, call)
                    .map_err(|e| Diagnostic::new(args[2].span, e))?;
            }
            "group_create" => {
                need(2)?;
                let table = self.table(&args[0])?;
                let group = number_as::<u32>(&args[1], "a group id")?;
                self.target
                    .create_selector_group(table, group)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "group_add_member" => {
                need(3)?;
                let table = self.table(&args[0])?;
                let (group, member) = (
                    number_as::<u32>(&args[1], "a group id")?,
                    number_as::<u32>(&args[2], "a member id")?,
                );
                self.target
                    .add_to_group(table, group, member)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "mirroring_add" => {
                need(2)?;
                let session = number_as::<u32>(&args[0], "a clone session id")?;
                let port = self.port(&args[1])?;
                self.target
                    .set_clone_session(session, port)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "mc_mgrp_create" => {
                need(1)?;
                let group = number_as::<u16>(&args[0], MULTICAST_GROUP)?;
                self.target
                    .create_multicast_group(group)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "mc_node_create" => {
                need(2)?;
                let rid = number_as::<u16>(&args[0], REPLICATION_ID)?;
                let ports = args[1..]
                    .iter()
                    .map(|w| self.port(w))
                    .collect::<Result<Vec<u16>>>()?;
                self.target
                    .create_multicast_node(rid, ports)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "mc_node_associate" => {
                need(2)?;
                let (group, node) = (
                    number_as::<u16>(&args[0], MULTICAST_GROUP)?,
                    node(&args[1])?,
                );
                self.target
                    .associate_node(group, node)
                    .map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            "set_queue_depth" | "set_queue_rate" => {
                need(1)?;
                let value = number(&args[0])?;
                let port = args.get(1).map(|w| self.port(w)).transpose()?;
                let priority = args
                    .get(2)
                    .map(|w| {
                        tm::priority(number(w)?).map_err(|e| Diagnostic::new(w.span, e.to_string()))
                    })
                    .transpose()?;
                let refused =
                    |e: tm::QueueSettingError| Diagnostic::new(args[0].span, e.to_string());
                let set = if cmd.text.ends_with("depth") {
                    let depth = tm::depth(value).map_err(refused)?;
                    self.target
                        .set_queue_depth(Queues { port, priority }, depth)
                } else {
                    let rate = tm::rate(value).map_err(refused)?;
                    self.target.set_queue_rate(Queues { port, priority }, rate)
                };
                set.map_err(|e| Diagnostic::new(cmd.span, e))?;
            }
            other => return fail(cmd.span, format!("unknown STF command '{other}'")),
        }
        Ok(())
    }

    fn port(&self, w: &Word) -> Result<u16> {
        match number(w)? {
            p if p < 512 => Ok(p as u16),
            _ => fail(w.span, "a port is between 0 and 511"),
        }
    }

    fn table(&self, w: &Word) -> Result<usize> {
        self.target
            .table_id(w.text)
            .ok_or_else(|| Diagnostic::new(w.span, format!("unknown table '{}'", w.text)))
    }

    fn instance(&self, w: &Word) -> Result<usize> {
        self.target
            .instance_id(w.text)
            .ok_or_else(|| Diagnostic::new(w.span, format!("unknown extern instance '{}'", w.text)))
    }

    /// The index `w` of a cell of register, counter or meter `instance`: past the instance's
    /// size, the switch's error for it, naming the number as given (a number past every `usize`
    /// too); an instance of another kind is the switch's to refuse.
    fn cell_index(&self, instance: usize, w: &Word) -> Result<usize> {
        let n = number(w)?;
        // The noun and size of an indexed instance of a stateful extern type, from its data.
        let kind = &self.target.program().instances[instance].kind;
        let cells = softswitch_core::externs::object(kind.type_name())
            .map(|o| o.noun)
            .zip(kind.cells());
        match cells {
            Some((noun, size)) if n >= u128::from(size) => {
                let size = size as usize;
                let refused = softswitch_core::runtime::RuntimeError::Index {
                    kind: noun,
                    index: n,
                    size,
                };
                fail(w.span, refused.to_string())
            }
            _ => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }

    /// `name(arg:value, ...)` bound to an action of `table`.
    fn action(&self, table: usize, w: &Word) -> Result<ActionCall> {
        let (name, rest) = w.text.split_once('(').unwrap_or((w.text, ")"));
        let Some(args_text) = rest.strip_suffix(')') else {
            return fail(w.span, "expected action(arg:value, ...)");
        };
        let action = self.target.action_id(table, name).ok_or_else(|| {
            Diagnostic::new(w.span, format!("'{name}' is not an action of this table"))
        })?;
        let prog = self.target.program();
        let params: Vec<(String, u16)> = prog
            .action_data(action)
            .map(|p| (p.name.clone(), p.width))
            .collect();
        let mut given: HashMap<&str, u128> = HashMap::new();
        for a in args_text
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            let Some((k, v)) = a.split_once(':') else {
                return fail(w.span, format!("expected name:value, found '{a}'"));
            };
            let v = parse_number(v.trim()).ok_or_else(|| {
                Diagnostic::new(w.span, format!("'{}' is not a number", v.trim()))
            })?;
            given.insert(k.trim(), v);
        }
        let mut args = Vec::new();
        for (p, width) in &params {
            match given.remove(p.as_str()) {
                Some(v) => args.push(v & mask(*width)),
                None => return fail(w.span, format!("missing action argument '{p}'")),
            }
        }
        if let Some(extra) = given.keys().next() {
            return fail(w.span, format!("'{name}' has no parameter '{extra}'"));
        }
        Ok(ActionCall { action, args })
    }

    fn add(&mut self, cmd: &Word, args: &[Word]) -> Result<()> {
        if args.len() < 2 {
            return fail(cmd.span, "add needs a table and an action");
        }
        let table = self.table(&args[0])?;
        let mut rest = &args[1..];
        let mut id = None;
        if rest.len() >= 2 && rest[rest.len() - 2].text == "=" {
            id = Some(rest[rest.len() - 1].text.to_string());
            rest = &rest[..rest.len() - 2];
        }
        let mut priority = None;
        if let Some(p) = rest
            .first()
            .filter(|w| !w.text.contains(':') && !w.text.contains('('))
        {
            priority = Some(i64::from(number_as::<i32>(p, "a priority")?));
            rest = &rest[1..];
        }
        let Some((action_word, keys)) = rest.split_last() else {
            return fail(cmd.span, "add needs an action");
        };
        // `member(ID)` and `group(ID)` point to an action profile's member or selector's group.
        let indirect = ["member", "group"].into_iter().find_map(|kind| {
            let id = action_word
                .text
                .strip_prefix(kind)?
                .strip_prefix('(')?
                .strip_suffix(')')?;
            Some((kind, id))
        });
        let prog_keys = self.target.program().tables[table].keys.clone();
        let mut matches: Vec<Option<FieldMatch>> = vec![None; prog_keys.len()];
        for k in keys {
            let Some((name, value)) = k.text.rsplit_once(':') else {
                return fail(k.span, format!("expected key:value, found '{}'", k.text));
            };
            let name = stf_key_name(name);
            let names = prog_keys.iter().map(|k| k.name.as_str());
            let i = find_by_name(names.clone(), &name)
                .or_else(|| names.clone().position(|n| name.ends_with(&format!(".{n}"))))
                .ok_or_else(|| {
                    Diagnostic::new(
                        k.span,
                        format!(
                            "table {} has no key '{name}'",
                            self.target.program().tables[table].name
                        ),
                    )
                })?;
            let key = &prog_keys[i];
            matches[i] = Some(key_match(value, key.width, key.kind).ok_or_else(|| {
                Diagnostic::new(
                    k.span,
                    format!("cannot read '{value}' as a {:?} match", key.kind),
                )
            })?);
        }
        let mut full = Vec::new();
        for (m, key) in matches.into_iter().zip(&prog_keys) {
            match (m, key.kind) {
                (Some(m), _) => full.push(m),
                (None, MatchKind::Exact) => full.push(FieldMatch::Masked {
                    value: 0,
                    mask: mask(key.width),
                }),
                (None, MatchKind::Range) => full.push(FieldMatch::Range {
                    lo: 0,
                    hi: mask(key.width),
                }),
                (None, _) => full.push(FieldMatch::Masked { value: 0, mask: 0 }),
            }
        }
        // In STF files the larger priority wins (p4c's runner hands BMv2 10000 - priority).
        let priority = priority.unwrap_or(0);
        let added = match indirect {
            None => {
                let action = self.action(table, action_word)?;
                self.target.add_entry(
                    table,
                    Entry {
                        matches: full,
                        priority,
                        action,
                    },
                )
            }
            Some((kind, id)) => {
                let id = parse_number(id)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        Diagnostic::new(
                            action_word.span,
                            format!("'{id}' is not a member or group id (0..{})", u32::MAX),
                        )
                    })?;
                let runs = if kind == "member" {
                    Indirect::Member(id)
                } else {
                    Indirect::Group(id)
                };
                self.target.add_indirect_entry(
                    table,
                    IndirectEntry {
                        matches: full,
                        priority,
                        runs,
                    },
                )
            }
        };
        let handle = added.map_err(|e| Diagnostic::new(cmd.span, e))?;
        if let Some(id) = id {
            self.ids.insert(id, (table, handle));
        }
        Ok(())
    }

    /// `meter_set_rates METER INDEX|$ID CIR:CBS PIR:PBS`, rates in units per microsecond (BMv2's CLI).
    fn meter_set_rates(
        &mut self,
        name: &Word,
        cell: &Word,
        committed: &Word,
        peak: &Word,
    ) -> Result<()> {
        let instance = self.instance(name)?;
        let rate = |w: &Word| -> Result<(f64, f64)> {
            w.text
                .split_once(':')
                .and_then(|(r, b)| Some((r.parse::<f64>().ok()?, b.parse::<f64>().ok()?)))
                .filter(|(r, b)| r.is_finite() && b.is_finite() && *r >= 0.0 && *b >= 0.0)
                .ok_or_else(|| {
                    Diagnostic::new(w.span, "expected RATE:BURST (units per microsecond, units)")
                })
        };
        let ((cir, cbs), (pir, pbs)) = (rate(committed)?, rate(peak)?);
        let config = MeterConfig { cir, cbs, pir, pbs };
        let which = if let Some(id) = cell.text.strip_prefix('$') {
            self.entry_cell(id, cell.span)?
        } else {
            CellIndex::Index(self.cell_index(instance, cell)?)
        };
        self.target
            .configure_meter(instance, which, config)
            .map_err(|e| Diagnostic::new(cell.span, e))
    }

    /// The cell of a direct counter or meter for the entry added with id `id` (`$id`, at
    /// `span`).
    fn entry_cell(&self, id: &str, span: Span) -> Result<CellIndex> {
        match self.ids.get(id) {
            Some(&(_, handle)) => Ok(CellIndex::Entry(handle)),
            None => fail(span, format!("no entry was added with id {id}")),
        }
    }

    fn check_counter(&mut self, cmd: &Word, args: &[Word]) -> Result<()> {
        let Some(target) = args.first() else {
            return fail(cmd.span, "check_counter needs COUNTER(INDEX)");
        };
        let Some((name, rest)) = target.text.split_once('(') else {
            return fail(target.span, "expected COUNTER(INDEX) or COUNTER($ID)");
        };
        let index = rest.trim_end_matches(')');
        let instance = self
            .target
            .instance_id(name)
            .ok_or_else(|| Diagnostic::new(target.span, format!("unknown counter '{name}'")))?;
        let cell = if let Some(id) = index.strip_prefix('$') {
            self.entry_cell(id, target.span)?
        } else {
            let i = parse_number(index)
                .ok_or_else(|| Diagnostic::new(target.span, "expected a counter index"))?;
            CellIndex::Index(usize::try_from(i).unwrap_or(usize::MAX))
        };
        let cell = self
            .target
            .counter(instance, cell)
            .map_err(|e| Diagnostic::new(target.span, e))?;
        self.compare_counter(
            cmd.span.to(target.span),
            cell.packets,
            cell.bytes,
            &args[1..],
        )
    }

    /// `[packets|bytes] [op] N` against a counter cell (packets by default, `==` by default).
    fn compare_counter(
        &mut self,
        span: Span,
        packets: u64,
        bytes: u64,
        args: &[Word],
    ) -> Result<()> {
        if args.is_empty() {
            return Ok(());
        }
        let mut i = 0;
        let (what, got) = match args[0].text {
            "bytes" => {
                i += 1;
                ("bytes", bytes)
            }
            "packets" => {
                i += 1;
                ("packets", packets)
            }
            _ => ("packets", packets),
        };
        let op = match args.get(i).map(|w| w.text) {
            Some(op @ ("==" | "!=" | "<=" | "<" | ">=" | ">")) => {
                i += 1;
                op
            }
            _ => "==",
        };
        let Some(value_word) = args.get(i) else {
            return fail(args[0].span, "expected a value to compare with");
        };
        let want = number_as::<u64>(value_word, "a counter value")?;
        let ok = match op {
            "==" => got == want,
            "!=" => got != want,
            "<=" => got <= want,
            "<" => got < want,
            ">=" => got >= want,
            _ => got > want,
        };
        if !ok {
            self.failure(
                span.to(value_word.span),
                format!("counter {what} is {got}, expected {op} {want}"),
            );
        }
        Ok(())
    }

    fn failure(&mut self, span: Span, message: String) {
        self.report
            .failures
            .push(Diagnostic::new(span, message).render(self.map));
    }

    /// Takes the target's new outputs; one whose cause the target does not know is put down to
    /// the last packet sent. Fails (at `span`, the command that made them) once the test's
    /// packets add up to more than [`MAX_OUTPUT_BYTES`].
    fn collect(&mut self, span: Span) -> Result<()> {
        let last = self.report.packets_in.checked_sub(1);
        let new = self
            .target
            .take_outputs()
            .map_err(|e| Diagnostic::new(span, e))?;
        self.report.packets_out += new.len();
        self.output_bytes += new.iter().map(|o| o.data.len()).sum::<usize>();
        if self.output_bytes > MAX_OUTPUT_BYTES {
            return fail(
                span,
                format!(
                    "the switch sent more than {MAX_OUTPUT_BYTES} bytes of packets during the test"
                ),
            );
        }
        self.outputs.extend(new.into_iter().map(|o| Sent {
            packet: o.packet.or(last),
            ..o
        }));
        Ok(())
    }

    /// Waits until the target has finished with every packet, and collects what it sent.
    fn wait(&mut self, span: Span) -> Result<()> {
        self.target.wait().map_err(|e| Diagnostic::new(span, e))?;
        self.collect(span)
    }

    /// Compares outputs with expectations, port by port in order, as p4c's runner does: every
    /// port named in the test must emit exactly the packets expected on it (none if none), except
    /// ports given as `expect PORT` alone; ports never named are not looked at.
    fn finish(&mut self) {
        let mut by_port: HashMap<u16, Vec<&Sent>> = HashMap::new();
        for o in &self.outputs {
            by_port.entry(o.port).or_default().push(o);
        }
        let mut failures = Vec::new();
        let mut ports: Vec<(&u16, &Span)> = self.ports.iter().collect();
        ports.sort_by_key(|(p, _)| **p);
        for (port, named_at) in ports {
            if self.any_ports.contains(port) {
                continue;
            }
            let expects = self.expects.get(port).map_or(&[][..], Vec::as_slice);
            let got = by_port.get(port).cloned().unwrap_or_default();
            for (i, e) in expects.iter().enumerate() {
                match got.get(i) {
                    None => failures.push((
                        e.span,
                        format!("expected a packet on port {port}, none came"),
                    )),
                    Some(o) => {
                        if let Some(diff) = compare(e, &o.data) {
                            failures.push((
                                e.span,
                                format!("packet {} on port {port} differs:\n{diff}", i + 1),
                            ));
                        }
                    }
                }
            }
            let at = expects.last().map_or(*named_at, |e| e.span);
            for extra in got.iter().skip(expects.len()) {
                failures.push((
                    at,
                    format!("unexpected packet on port {port}: {}", hex(&extra.data)),
                ));
            }
        }
        let asserts = self.target.assertion_failures();
        if asserts > 0 {
            let start = Span {
                file: self.file,
                lo: 0,
                hi: 0,
            };
            failures.push((
                start,
                format!("assert or assume failed {asserts} times during the test"),
            ));
        }
        for (span, message) in failures {
            self.failure(span, message);
        }
    }
}

/// Reads a key value as p4c's STF runner does: `v/len` (lpm), `v&&&m`, `lo..hi` or `lo->hi`;
/// a hex, binary or octal value on a ternary or lpm key covers only the digits written (`*`
/// digits are wildcards), so `0x0a**` is `0x0a00&&&0xff00` and, on an lpm key, `0x0a00/8`.
fn key_match(text: &str, width: u16, kind: MatchKind) -> Option<FieldMatch> {
    let full = mask(width);
    if let Some((v, len)) = text.split_once('/') {
        let len: u16 = len.parse().ok()?;
        let m = softswitch_core::table::prefix_mask(width, len);
        return Some(FieldMatch::Masked {
            value: parse_number(v)? & m,
            mask: m,
        });
    }
    if let Some((v, m)) = text.split_once("&&&") {
        let (v, m) = (parse_number(v)?, parse_number(m)? & full);
        return Some(FieldMatch::Masked {
            value: v & m,
            mask: m,
        });
    }
    if let Some((lo, hi)) = text.split_once("..").or_else(|| text.split_once("->")) {
        return Some(FieldMatch::Range {
            lo: parse_number(lo)?,
            hi: parse_number(hi)?,
        });
    }
    let radix_bits = match text.get(..2) {
        Some("0x" | "0X") => 4,
        Some("0b" | "0B") => 1,
        Some("0o" | "0O") => 3,
        _ => 0,
    };
    if radix_bits == 0
        || !matches!(
            kind,
            MatchKind::Ternary | MatchKind::Lpm | MatchKind::Optional
        )
    {
        let v = parse_number(text)? & full;
        return Some(match kind {
            MatchKind::Range => FieldMatch::Range { lo: v, hi: v },
            _ => FieldMatch::Masked {
                value: v,
                mask: full,
            },
        });
    }
    let (mut value, mut m, mut written) = (0u128, 0u128, 0u32);
    let digit_mask = (1u128 << radix_bits) - 1;
    for c in text[2..].chars().filter(|&c| c != '_') {
        let (v, mk) = if c == '*' {
            (0, 0)
        } else {
            (u128::from(c.to_digit(1 << radix_bits)?), digit_mask)
        };
        // More digits than 128 bits hold: refused, not cut.
        if value.leading_zeros() < radix_bits || m.leading_zeros() < radix_bits {
            return None;
        }
        value = (value << radix_bits) | v;
        m = (m << radix_bits) | mk;
        written += u32::from(c != '*');
    }
    if kind == MatchKind::Lpm {
        let len = u16::try_from(written * radix_bits).ok()?;
        let pm = softswitch_core::table::prefix_mask(width, len);
        return Some(FieldMatch::Masked {
            value: value & pm,
            mask: pm,
        });
    }
    Some(FieldMatch::Masked {
        value: value & m & full,
        mask: m & full,
    })
}

/// A key name as p4c's STF writes it, in softswitch's form: `extra$0.h` is `extra[0].h`,
/// `$valid$` and a trailing `.valid` are `isValid()`.
fn stf_key_name(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('[');
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                out.push(d);
            }
            out.push(']');
        } else {
            out.push(c);
        }
    }
    let out = out
        .replace("$valid$", "isValid()")
        .replace("$valid", "isValid()");
    match out.strip_suffix(".valid") {
        Some(base) => format!("{base}.isValid()"),
        None => out,
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// `None` if `data` matches `e`, else a two-line diff with a caret under each wrong nibble.
fn compare(e: &Expect, data: &[u8]) -> Option<String> {
    let want = &e.nibbles;
    let got: Vec<u8> = data.iter().flat_map(|b| [b >> 4, b & 0xf]).collect();
    let length_bad = got.len() < want.len() || (e.exact && got.len() != want.len());
    let mut marks = String::new();
    let mut bad = length_bad;
    for i in 0..want.len().max(got.len()) {
        let ok = match (want.get(i), got.get(i)) {
            (Some(None), Some(_)) => true,
            (Some(Some(w)), Some(g)) => w == g,
            (None, Some(_)) => !e.exact,
            _ => false,
        };
        bad |= !ok;
        marks.push(if ok { ' ' } else { '^' });
    }
    if !bad {
        return None;
    }
    let want_text: String = want
        .iter()
        .map(|n| n.map_or('*', |d| char::from_digit(u32::from(d), 16).expect("nibble")))
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  expected {want_text}{}",
        if e.exact { "$" } else { "" }
    );
    let _ = writeln!(out, "  received {}", hex(data));
    let _ = write!(out, "           {}", marks.trim_end());
    if length_bad {
        let _ = write!(
            out,
            "\n  length: expected {} bytes, received {}",
            want.len() / 2,
            data.len()
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_in_every_form() {
        let masked = |value, mask| Some(FieldMatch::Masked { value, mask });
        assert_eq!(
            key_match("0x0a000000/8", 32, MatchKind::Lpm),
            masked(0x0a00_0000, 0xff00_0000)
        );
        assert_eq!(
            key_match("0x0a00****", 32, MatchKind::Lpm),
            masked(0x0a00_0000, 0xffff_0000)
        );
        assert_eq!(key_match("0x1*", 8, MatchKind::Ternary), masked(0x10, 0xf0));
        // Only the digits written are matched: p4c's runner builds the mask from them.
        assert_eq!(
            key_match("0x0101", 32, MatchKind::Ternary),
            masked(0x0101, 0xffff)
        );
        assert_eq!(key_match("5&&&0x4", 8, MatchKind::Ternary), masked(4, 4));
        assert_eq!(
            key_match("1..9", 8, MatchKind::Range),
            Some(FieldMatch::Range { lo: 1, hi: 9 })
        );
        assert_eq!(key_match("300", 8, MatchKind::Exact), masked(44, 0xff));
        assert_eq!(key_match("0x1g", 8, MatchKind::Ternary), None);
        // An optional key is a wildcard (`0x**`) or a whole value.
        assert_eq!(key_match("0x**", 8, MatchKind::Optional), masked(0, 0));
        assert_eq!(
            key_match("0x2a", 8, MatchKind::Optional),
            masked(0x2a, 0xff)
        );
    }

    #[test]
    fn stf_key_names_become_expressions() {
        assert_eq!(stf_key_name("extra$0.h"), "extra[0].h");
        assert_eq!(stf_key_name("hdr.h.$valid$"), "hdr.h.isValid()");
        assert_eq!(stf_key_name("h.valid"), "h.isValid()");
    }

    #[test]
    fn compare_wildcards_and_exact_length() {
        let e = |s: &str, exact| Expect {
            nibbles: s.chars().map(|c| c.to_digit(16).map(|d| d as u8)).collect(),
            exact,
            span: Span::default(),
        };
        assert!(compare(&e("ab*d", false), &[0xab, 0xcd, 0xee]).is_none());
        assert!(compare(&e("ab*d", true), &[0xab, 0xcd, 0xee]).is_some());
        let diff = compare(&e("abcd", false), &[0xab, 0xce]).unwrap();
        assert!(diff.ends_with("      ^"), "{diff}");
    }
}
