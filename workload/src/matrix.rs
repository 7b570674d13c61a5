//! htsim's connection-matrix files, read unchanged (htsim's `ConnectionMatrix::load`, its
//! generators `gen_*.py`): a header of `Nodes N`, `Connections C` and optionally `Triggers T`
//! and `Failures F`, then one line per flow, trigger or failed link:
//!
//! ```text
//! SRC->DST [id ID] (start PS | trigger TID) size BYTES [send_done_trigger TID]
//!          [recv_done_trigger TID] [prio P] [addon]
//! trigger id TID (oneshot | multishot | barrier count N)
//! failure switch_type (TOR | AGG | CORE) switch_id S link_id L
//! ```
//!
//! `start` is in picoseconds (htsim reads it so since its commit 8f63513, "tm file starttime is
//! in picoseconds"; the generators write microseconds × 10^6). A flow's sender activates its
//! `send_done_trigger` when it is done (its last byte acknowledged) and its receiver the
//! `recv_done_trigger` when it holds the last byte; a trigger fires on its activations and
//! starts the flows that name it with `trigger`: `oneshot` all of them on its one activation,
//! `barrier` all of them on its `count`-th, `multishot` the next of them (in file order) on
//! each. These become [`After`] starts: the k-th flow of a multishot trigger needs k of its
//! setters, a barrier's flows `count` of them, a oneshot's flows its one setter. `prio` (a
//! priority for htsim's EQDS and NDP receivers) and `addon` are read and not used, as
//! htsim_roce does. Anything htsim would refuse or abort on is refused here, with the line.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{token, within, Origin, Result, WorkloadError};
use crate::flows::{
    check_plan, After, Dependency, FlowId, LinkFailure, On, PlanError, Start, Tier,
};
use crate::limits::{
    MAX_BYTES, MAX_DEPENDENCIES, MAX_ENDPOINTS, MAX_FAILURES, MAX_FLOWS, MAX_MATRIX_FILE_BYTES,
    MAX_TIME, MAX_TRIGGERS,
};
use crate::text::{for_each_line, open};

/// What this kind of file is called in messages.
const WHAT: &str = "an htsim connection matrix";

/// An htsim connection matrix, read and checked: its flows' starts are resolved from its
/// triggers into dependencies between its own flows (numbered from 0 in file order).
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// The file it was read from.
    pub(crate) path: PathBuf,
    /// `Nodes N`: the endpoints it is written for.
    pub(crate) nodes: u32,
    /// The flows, in file order.
    pub(crate) flows: Vec<MatrixFlow>,
    /// The `failure` lines.
    pub(crate) failures: Vec<LinkFailure>,
}

/// One flow line of a matrix.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MatrixFlow {
    /// The sending node.
    pub(crate) src: u32,
    /// The receiving node.
    pub(crate) dst: u32,
    /// `size`.
    pub(crate) bytes: u64,
    /// `start` (picoseconds from the part's start), or what it waits for among the matrix's
    /// flows.
    pub(crate) start: Start,
}

/// The header lines, with the line each was on.
#[derive(Default)]
struct Header {
    nodes: Option<(u32, usize)>,
    connections: Option<(u64, usize)>,
    triggers: Option<(u64, usize)>,
    failures: Option<(u64, usize)>,
}

/// A trigger line.
struct TriggerLine {
    kind: TriggerKind,
    line: usize,
}

/// How a trigger fires.
enum TriggerKind {
    /// Once, on its one activation: starts all its flows.
    Oneshot,
    /// On each activation: starts its next flow.
    Multishot,
    /// On its `count`-th activation: starts all its flows.
    Barrier { count: u32 },
}

/// A flow line's trigger fields, resolved after the whole file is read.
struct FlowTriggers {
    line: usize,
    waits_for: Option<u32>,
}

/// Everything read so far.
#[derive(Default)]
struct Reader {
    header: Header,
    flows: Vec<MatrixFlow>,
    flow_lines: Vec<FlowTriggers>,
    ids: HashMap<u32, usize>,
    triggers: HashMap<u32, TriggerLine>,
    trigger_lines: u64,
    /// Per trigger id: the flows that activate it, in file order, with the line of each.
    setters: HashMap<u32, Vec<(Dependency, usize)>>,
    failures: Vec<LinkFailure>,
    /// The number of the line being read.
    line: usize,
}

impl Matrix {
    /// Reads and checks the connection matrix `path`. A file whose first line is not one of
    /// the header's is refused without quoting it.
    pub fn read(path: &Path) -> Result<Matrix> {
        Matrix::from_reader(open(path)?, path)
    }

    /// Reads and checks a connection matrix from `input`, read from `path` (named in messages).
    pub fn from_reader(input: impl Read, path: &Path) -> Result<Matrix> {
        let mut reader = Reader::default();
        for_each_line(input, path, MAX_MATRIX_FILE_BYTES, WHAT, |number, line| {
            reader.line = number;
            reader.read_line(&Origin::line(path, number), line)
        })?;
        reader.finish(path)
    }

    /// The number of flows.
    pub(crate) fn flow_count(&self) -> u64 {
        self.flows.len() as u64
    }

    /// The number of dependencies of all its flows.
    pub(crate) fn dependency_count(&self) -> u64 {
        self.flows
            .iter()
            .map(|f| match &f.start {
                Start::At(_) => 0,
                Start::After(a) => a.deps.len() as u64,
            })
            .sum()
    }
}

/// Refuses one more line of what the header counts as `header` when `found` of them were read
/// and the header said `declared` (none: 0).
fn room(at: &Origin, found: u64, declared: Option<(u64, usize)>, header: &str) -> Result<()> {
    let declared = declared.map_or(0, |(count, _)| count);
    if found == declared {
        let what = header.to_lowercase();
        return Err(WorkloadError::input(
            at,
            format!("more {what} than the header's `{header} {declared}`"),
        ));
    }
    Ok(())
}

/// `text` as a number of type `T`, or an error naming `what` and quoting it.
fn number<T: std::str::FromStr>(at: &Origin, what: &str, text: &str) -> Result<T> {
    text.parse().map_err(|_| {
        WorkloadError::input(at, format!("{what} {} is not a whole number", token(text)))
    })
}

/// A trigger id: a whole number from 1 (htsim refuses 0).
fn trigger_id(at: &Origin, text: &str) -> Result<u32> {
    match number::<u32>(at, "trigger id", text)? {
        0 => Err(WorkloadError::input(
            at,
            "trigger id 0 is not allowed (ids start at 1)",
        )),
        id => Ok(id),
    }
}

impl Reader {
    /// Reads one line.
    fn read_line(&mut self, at: &Origin, line: &str) -> Result<()> {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(&first) = tokens.first() else {
            return Ok(());
        };
        if first.starts_with('#') {
            return Ok(());
        }
        let in_body = !self.flows.is_empty() || self.trigger_lines > 0 || !self.failures.is_empty();
        match first {
            "Nodes" | "Connections" | "Triggers" | "Failures" if in_body => {
                Err(WorkloadError::input(
                    at,
                    format!(
                        "header {} after the first flow, trigger or failure",
                        token(first)
                    ),
                ))
            }
            "Nodes" | "Connections" | "Triggers" | "Failures" => self.header(at, &tokens),
            // Until the file has shown itself a matrix, nothing of it is quoted.
            _ if self.header.nodes.is_none() => Err(WorkloadError::input(
                at,
                format!("not {WHAT}: it begins with `Nodes N`"),
            )),
            "trigger" => self.trigger(at, &tokens[1..]),
            "failure" => self.failure(at, &tokens[1..]),
            _ if first.contains("->") => self.flow(at, &tokens),
            _ => Err(WorkloadError::input(
                at,
                format!(
                    "unknown line {} (a flow `SRC->DST ...`, `trigger ...` or `failure ...`)",
                    token(first)
                ),
            )),
        }
    }

    /// A header line: `Nodes N`, `Connections C`, `Triggers T` or `Failures F`.
    fn header(&mut self, at: &Origin, tokens: &[&str]) -> Result<()> {
        let line = self.line;
        let [name, value] = tokens else {
            return Err(WorkloadError::input(
                at,
                format!("header {} takes one number", token(tokens[0])),
            ));
        };
        let count: u64 = number(at, name, value)?;
        let (slot, limit, what) = match *name {
            "Nodes" => {
                within(at, "nodes", count, MAX_ENDPOINTS.into())?;
                if self.header.nodes.replace((count as u32, line)).is_some() {
                    return Err(WorkloadError::input(at, "header `Nodes` given twice"));
                }
                return Ok(());
            }
            "Connections" => (&mut self.header.connections, MAX_FLOWS, "flows"),
            "Triggers" => (&mut self.header.triggers, MAX_TRIGGERS, "triggers"),
            _ => (&mut self.header.failures, MAX_FAILURES, "failures"),
        };
        within(at, what, count, limit)?;
        if slot.replace((count, line)).is_some() {
            return Err(WorkloadError::input(
                at,
                format!("header {} given twice", token(name)),
            ));
        }
        Ok(())
    }

    /// A flow line: `SRC->DST` and its keys.
    fn flow(&mut self, at: &Origin, tokens: &[&str]) -> Result<()> {
        room(
            at,
            self.flows.len() as u64,
            self.header.connections,
            "Connections",
        )?;
        let nodes = self.header.nodes.map_or(0, |(n, _)| n);
        let (src, dst) = tokens[0].split_once("->").unwrap_or_default();
        let node = |text: &str| -> Result<u32> {
            let n: u32 = number(at, "node", text)?;
            if n >= nodes {
                return Err(WorkloadError::input(
                    at,
                    format!(
                        "node {} is not below the header's `Nodes {nodes}`",
                        token(text)
                    ),
                ));
            }
            Ok(n)
        };
        let (src, dst) = (node(src)?, node(dst)?);
        if src == dst {
            return Err(WorkloadError::input(
                at,
                format!("a flow from node {src} to itself"),
            ));
        }
        let mut start = None;
        let mut size = None;
        let mut id = None;
        let mut waits_for = None;
        let mut sets = Vec::new();
        let mut rest = tokens[1..].iter();
        while let Some(&key) = rest.next() {
            if key == "addon" {
                continue;
            }
            let value = match key {
                "start" | "size" | "id" | "trigger" | "send_done_trigger" | "recv_done_trigger"
                | "prio" => rest.next().copied().ok_or_else(|| {
                    WorkloadError::input(at, format!("{} needs a value", token(key)))
                })?,
                _ => {
                    return Err(WorkloadError::input(
                        at,
                        format!("unknown token {} in a flow line", token(key)),
                    ))
                }
            };
            let twice = || WorkloadError::input(at, format!("{} given twice", token(key)));
            match key {
                "start" => {
                    let ps: f64 = value
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite() && (0.0..=MAX_TIME as f64).contains(v))
                        .ok_or_else(|| {
                            WorkloadError::input(
                                at,
                                format!(
                                    "start {} is not a time in picoseconds from 0 to {MAX_TIME}",
                                    token(value)
                                ),
                            )
                        })?;
                    if start.replace(ps.round() as u64).is_some() {
                        return Err(twice());
                    }
                }
                "size" => {
                    let bytes: u64 = number(at, "size", value)?;
                    if !(1..=MAX_BYTES).contains(&bytes) {
                        return Err(WorkloadError::input(
                            at,
                            format!("size {} is not from 1 to {MAX_BYTES} bytes", token(value)),
                        ));
                    }
                    if size.replace(bytes).is_some() {
                        return Err(twice());
                    }
                }
                "id" => {
                    let flow_id: u32 = number(at, "id", value)?;
                    if flow_id == 0 {
                        return Err(WorkloadError::input(
                            at,
                            "flow id 0 is not allowed (ids start at 1)",
                        ));
                    }
                    if id.replace(flow_id).is_some() {
                        return Err(twice());
                    }
                }
                "trigger" => {
                    if waits_for.replace(trigger_id(at, value)?).is_some() {
                        return Err(twice());
                    }
                }
                "send_done_trigger" | "recv_done_trigger" => {
                    let on = if key == "send_done_trigger" {
                        On::Sent
                    } else {
                        On::Delivered
                    };
                    if sets.iter().any(|&(_, o)| o == on) {
                        return Err(twice());
                    }
                    sets.push((trigger_id(at, value)?, on));
                }
                _ => {
                    // prio: a whole number, not used.
                    number::<i64>(at, "prio", value)?;
                }
            }
        }
        let start = match (start, waits_for) {
            (Some(_), Some(_)) => {
                return Err(WorkloadError::input(at, "both a start time and a trigger"))
            }
            (None, None) => {
                return Err(WorkloadError::input(
                    at,
                    "no start: give `start PS` or `trigger TID`",
                ))
            }
            (Some(ps), None) => Start::At(ps),
            // Resolved once every line is read.
            (None, Some(_)) => Start::At(0),
        };
        let size = size.ok_or_else(|| WorkloadError::input(at, "no `size BYTES`"))?;
        let index = self.flows.len();
        if let Some(flow_id) = id {
            if self.ids.insert(flow_id, index).is_some() {
                return Err(WorkloadError::input(
                    at,
                    format!("flow id {flow_id} given twice"),
                ));
            }
        }
        let line = self.line;
        for (trigger, on) in sets {
            let dependency = Dependency {
                flow: index as FlowId,
                on,
            };
            self.setters
                .entry(trigger)
                .or_default()
                .push((dependency, line));
        }
        self.flows.push(MatrixFlow {
            src,
            dst,
            bytes: size,
            start,
        });
        self.flow_lines.push(FlowTriggers { line, waits_for });
        Ok(())
    }

    /// A trigger line, after `trigger`.
    fn trigger(&mut self, at: &Origin, tokens: &[&str]) -> Result<()> {
        room(at, self.trigger_lines, self.header.triggers, "Triggers")?;
        self.trigger_lines += 1;
        let mut id = None;
        let mut count = None;
        let mut kind = None;
        let mut rest = tokens.iter();
        while let Some(&key) = rest.next() {
            match key {
                "id" | "count" => {
                    let value = rest.next().copied().ok_or_else(|| {
                        WorkloadError::input(at, format!("{} needs a value", token(key)))
                    })?;
                    let old = if key == "id" {
                        id.replace(trigger_id(at, value)?)
                    } else {
                        count.replace(number::<u32>(at, "count", value)?)
                    };
                    if old.is_some() {
                        return Err(WorkloadError::input(
                            at,
                            format!("{} given twice", token(key)),
                        ));
                    }
                }
                "oneshot" | "multishot" | "barrier" => {
                    if kind.replace(key).is_some() {
                        return Err(WorkloadError::input(at, "a trigger of two types"));
                    }
                }
                _ => {
                    return Err(WorkloadError::input(
                        at,
                        format!("unknown token {} in a trigger line", token(key)),
                    ))
                }
            }
        }
        let id = id.ok_or_else(|| WorkloadError::input(at, "a trigger with no `id TID`"))?;
        let kind = match kind {
            Some("oneshot") => TriggerKind::Oneshot,
            Some("multishot") => TriggerKind::Multishot,
            Some(_) => TriggerKind::Barrier {
                count: count.filter(|&c| c > 0).ok_or_else(|| {
                    WorkloadError::input(at, "a barrier trigger needs `count N`, N from 1")
                })?,
            },
            None => {
                return Err(WorkloadError::input(
                    at,
                    "a trigger with no type (oneshot, multishot or barrier)",
                ))
            }
        };
        let line = self.line;
        if self
            .triggers
            .insert(id, TriggerLine { kind, line })
            .is_some()
        {
            return Err(WorkloadError::input(
                at,
                format!("trigger {id} declared twice"),
            ));
        }
        Ok(())
    }

    /// A failure line, after `failure`.
    fn failure(&mut self, at: &Origin, tokens: &[&str]) -> Result<()> {
        room(
            at,
            self.failures.len() as u64,
            self.header.failures,
            "Failures",
        )?;
        let (mut tier, mut switch, mut link) = (None, None, None);
        let mut rest = tokens.iter();
        while let Some(&key) = rest.next() {
            let value = rest.next().copied();
            let old = match (key, value) {
                ("switch_type", Some(value)) => tier
                    .replace(match value {
                        "TOR" => Tier::Tor,
                        "AGG" => Tier::Agg,
                        "CORE" => Tier::Core,
                        _ => {
                            return Err(WorkloadError::input(
                                at,
                                format!("switch type {} is not TOR, AGG or CORE", token(value)),
                            ))
                        }
                    })
                    .is_some(),
                ("switch_id", Some(value)) => {
                    switch.replace(number(at, "switch_id", value)?).is_some()
                }
                ("link_id", Some(value)) => link.replace(number(at, "link_id", value)?).is_some(),
                ("switch_type" | "switch_id" | "link_id", None) => {
                    return Err(WorkloadError::input(
                        at,
                        format!("{} needs a value", token(key)),
                    ))
                }
                _ => {
                    return Err(WorkloadError::input(
                        at,
                        format!("unknown token {} in a failure line", token(key)),
                    ))
                }
            };
            if old {
                return Err(WorkloadError::input(
                    at,
                    format!("{} given twice", token(key)),
                ));
            }
        }
        match (tier, switch, link) {
            (Some(tier), Some(switch), Some(link)) => {
                self.failures.push(LinkFailure { tier, switch, link });
                Ok(())
            }
            _ => Err(WorkloadError::input(
                at,
                "a failure needs `switch_type`, `switch_id` and `link_id`",
            )),
        }
    }

    /// Checks the counts the header declared and resolves the triggers into starts.
    fn finish(mut self, path: &Path) -> Result<Matrix> {
        let Some((nodes, _)) = self.header.nodes else {
            return Err(WorkloadError::input(
                &Origin::line(path, 1),
                format!("not {WHAT}: it begins with `Nodes N`"),
            ));
        };
        for (declared, found, what) in [
            (
                self.header.connections,
                self.flows.len() as u64,
                "Connections",
            ),
            (self.header.triggers, self.trigger_lines, "Triggers"),
            (self.header.failures, self.failures.len() as u64, "Failures"),
        ] {
            let (count, line) = declared.unwrap_or((0, 1));
            if count != found {
                return Err(WorkloadError::input(
                    &Origin::line(path, line),
                    format!("the header says `{what} {count}`, the file has {found}"),
                ));
            }
        }
        for (trigger, setters) in &self.setters {
            if !self.triggers.contains_key(trigger) {
                return Err(WorkloadError::input(
                    &Origin::line(path, setters[0].1),
                    format!("trigger {trigger} is set here but no `trigger id {trigger}` line declares it"),
                ));
            }
        }
        // The flows each trigger starts, in file order.
        let mut targets = HashMap::<u32, Vec<usize>>::new();
        for (index, flow) in self.flow_lines.iter().enumerate() {
            let Some(trigger) = flow.waits_for else {
                continue;
            };
            if !self.triggers.contains_key(&trigger) {
                return Err(WorkloadError::input(
                    &Origin::line(path, flow.line),
                    format!("trigger {trigger} is waited for but no `trigger id {trigger}` line declares it"),
                ));
            }
            targets.entry(trigger).or_default().push(index);
        }
        self.check_triggers(path, &targets)?;
        self.check_dependency_count(path, &targets)?;
        for (trigger, waiting) in &targets {
            // Declared and set: check_triggers refused the others.
            let (Some(line), Some(setters)) =
                (self.triggers.get(trigger), self.setters.get(trigger))
            else {
                continue;
            };
            let deps: Vec<Dependency> = setters.iter().map(|&(d, _)| d).collect();
            for (nth, &index) in waiting.iter().enumerate() {
                let needed = match line.kind {
                    TriggerKind::Oneshot => 1,
                    TriggerKind::Barrier { count } => count,
                    TriggerKind::Multishot => nth as u32 + 1,
                };
                self.flows[index].start = Start::After(After {
                    deps: deps.clone(),
                    needed,
                    delay: 0,
                });
            }
        }
        let flows = &self.flows;
        check_plan(flows.len(), |i| match &flows[i].start {
            Start::After(a) => Some(a),
            Start::At(_) => None,
        })
        .map_err(|e: PlanError| {
            WorkloadError::input(
                &Origin::line(path, self.flow_lines[e.flow()].line),
                e.to_string(),
            )
        })?;
        Ok(Matrix {
            path: path.to_owned(),
            nodes,
            flows: self.flows,
            failures: self.failures,
        })
    }

    /// Refuses what htsim would refuse or abort on when the triggers fire, trigger by trigger
    /// in file order; `targets` are the flows each starts.
    fn check_triggers(&self, path: &Path, targets: &HashMap<u32, Vec<usize>>) -> Result<()> {
        let mut declared: Vec<(&u32, &TriggerLine)> = self.triggers.iter().collect();
        declared.sort_by_key(|(_, t)| t.line);
        for (&trigger, line) in declared {
            let setters = self.setters.get(&trigger).map_or(0, Vec::len);
            let waiting = targets.get(&trigger).map_or(&[][..], Vec::as_slice);
            if setters == 0 {
                if let Some(&first) = waiting.first() {
                    return Err(WorkloadError::input(
                        &Origin::line(path, self.flow_lines[first].line),
                        format!("trigger {trigger} is set by no flow's send_done_trigger or recv_done_trigger: this flow would never start"),
                    ));
                }
                continue;
            }
            let problem = match line.kind {
                TriggerKind::Oneshot if setters > 1 => format!(
                    "oneshot trigger {trigger} is set by {setters} flows: htsim fires a oneshot trigger once and aborts on its second activation"
                ),
                TriggerKind::Oneshot if waiting.is_empty() => format!(
                    "oneshot trigger {trigger} starts no flow: htsim aborts when such a trigger fires"
                ),
                TriggerKind::Barrier { count } if setters > count as usize => format!(
                    "barrier trigger {trigger} counts {count} activations but {setters} flows set it: htsim aborts on the extra ones"
                ),
                TriggerKind::Barrier { count } if setters < count as usize && !waiting.is_empty() => format!(
                    "barrier trigger {trigger} counts {count} activations but {setters} flows set it: its flows would never start"
                ),
                TriggerKind::Multishot if waiting.len() > setters => format!(
                    "multishot trigger {trigger} starts {} flows but {setters} flows set it: the last would never start",
                    waiting.len()
                ),
                _ => continue,
            };
            return Err(WorkloadError::input(
                &Origin::line(path, line.line),
                problem,
            ));
        }
        Ok(())
    }

    /// Refuses a matrix whose triggers would make more than [`MAX_DEPENDENCIES`] dependencies
    /// (each flow a trigger starts depends on all the trigger's setters) before making them.
    fn check_dependency_count(
        &self,
        path: &Path,
        targets: &HashMap<u32, Vec<usize>>,
    ) -> Result<()> {
        let count: u64 = targets
            .iter()
            .map(|(t, waiting)| {
                let setters = self.setters.get(t).map_or(0, |s| s.len() as u64);
                (waiting.len() as u64).saturating_mul(setters)
            })
            .fold(0, u64::saturating_add);
        within(
            &Origin::line(path, 1),
            "dependencies",
            count,
            MAX_DEPENDENCIES,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read as a matrix named `t.cm`.
    fn matrix(text: &str) -> Result<Matrix> {
        Matrix::from_reader(text.as_bytes(), Path::new("t.cm"))
    }

    /// The error `text` is refused with.
    fn refused(text: &str) -> String {
        matrix(text).unwrap_err().to_string()
    }

    fn waits(flows: &[u32], on: On, needed: u32) -> Start {
        Start::After(After {
            deps: flows.iter().map(|&flow| Dependency { flow, on }).collect(),
            needed,
            delay: 0,
        })
    }

    /// The committed output of one of htsim's generators (testdata/README.md).
    fn generated(name: &str) -> Result<Matrix> {
        Matrix::read(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata")
                .join(name),
        )
    }

    #[test]
    fn the_ring_allreduce_generator_chains_sends() {
        let m = generated("allreduce.cm").unwrap();
        assert_eq!((m.nodes, m.flows.len()), (8, 28));
        // Group 3,6,1,5 (shuffled); each chain of 7 flows starts at 0 and each next flow
        // waits for the previous one's send_done_trigger.
        assert_eq!(
            m.flows[0],
            MatrixFlow {
                src: 3,
                dst: 6,
                bytes: 1000,
                start: Start::At(0)
            }
        );
        assert_eq!(m.flows[1].start, waits(&[0], On::Sent, 1));
        assert_eq!((m.flows[1].src, m.flows[1].dst), (6, 1));
        assert_eq!(m.flows[6].start, waits(&[5], On::Sent, 1));
        assert_eq!(m.flows[7].start, Start::At(0));
        assert_eq!(m.dependency_count(), 24);
    }

    #[test]
    fn the_serial_alltoall_generators_use_oneshot_and_multishot_triggers() {
        let m = generated("serial_alltoall.cm").unwrap();
        assert_eq!(m.flows.len(), 12);
        assert_eq!(m.flows[1].start, waits(&[0], On::Sent, 1));
        assert_eq!(m.flows[2].start, waits(&[1], On::Sent, 1));
        assert_eq!(m.flows[3].start, Start::At(0));
        // Two flows at once set a multishot trigger, whose one flow starts on the first
        // activation: it needs one of the two.
        let m = generated("serialn_alltoall.cm").unwrap();
        assert_eq!(m.flows[0].start, Start::At(0));
        assert_eq!(m.flows[1].start, Start::At(0));
        assert_eq!(m.flows[2].start, waits(&[0, 1], On::Sent, 1));
        // `prio` is read and not used.
        assert_eq!(
            generated("serialn_alltoall_prio.cm").unwrap().flows,
            m.flows
        );
    }

    #[test]
    fn the_other_generators_read_and_the_butterfly_is_refused_as_htsim_refuses_it() {
        for (name, flows) in [
            ("incast.cm", 4),
            ("outcast_incast.cm", 5),
            ("permutation.cm", 8),
        ] {
            let m = generated(name).unwrap();
            assert_eq!(m.flows.len(), flows, "{name}");
            assert!(m
                .flows
                .iter()
                .all(|f| f.start == Start::At(0) && f.bytes == 1000));
        }
        let m = generated("incast.cm").unwrap();
        assert!(m.flows.iter().all(|f| f.dst == 0));
        let error = generated("allreduce_butterfly.cm").unwrap_err().to_string();
        assert!(
            error.ends_with(
                "allreduce_butterfly.cm:3: the header says `Triggers 4`, the file has 3"
            ),
            "{error}"
        );
    }

    #[test]
    fn htsims_sample_matrices_read() {
        let test = "htsims_sample_matrices_read";
        let Some(dir) = testkit::reference_dir_or_skip(test, "LOSSLESS_HTSIM") else {
            return;
        };
        let dir = dir.join("connection_matrices");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "cm") {
                Matrix::read(&path).unwrap_or_else(|e| panic!("{e}"));
                read += 1;
            }
        }
        assert!(read >= 7, "{read} matrices in {}", dir.display());
        let perm = Matrix::read(&dir.join("perm_1024n_1024c_0u_2000000b.cm")).unwrap();
        assert_eq!((perm.nodes, perm.flows.len()), (1024, 1024));
        let mut srcs: Vec<u32> = perm.flows.iter().map(|f| f.src).collect();
        let mut dsts: Vec<u32> = perm.flows.iter().map(|f| f.dst).collect();
        srcs.sort_unstable();
        dsts.sort_unstable();
        assert!(srcs == (0..1024).collect::<Vec<_>>() && srcs == dsts);
        assert!(perm
            .flows
            .iter()
            .all(|f| f.bytes == 2_000_000 && f.start == Start::At(0)));
        let incast = Matrix::read(&dir.join("incast.cm")).unwrap();
        assert_eq!(incast.flows.len(), 15);
        assert!(incast.flows.iter().all(|f| f.dst == 15));
    }

    #[test]
    fn starts_are_picoseconds_and_every_trigger_type_resolves() {
        let m = matrix(
            "# a comment\r\nNodes 4\r\nConnections 7\nTriggers 3\nFailures 1\n\
             0->1 id 1 start 1.5e6 size 100 send_done_trigger 1 recv_done_trigger 2\n\
             1->2 id 2 start 0 size 100 send_done_trigger 1 prio 3 addon\n\
             2->3 id 3 trigger 1 size 100\n\
             3->0 id 4 trigger 3 size 100\n\
             0->2 id 5 trigger 3 size 100\n\
             0->3 id 6 start 7 size 100 send_done_trigger 3\n\
             3->1 id 7 trigger 2 size 100 send_done_trigger 3\n\
             trigger id 1 barrier count 2\n\
             trigger id 2 oneshot\n\
             trigger id 3 multishot\n\
             # comments in the body too\n\
             failure switch_type AGG switch_id 2 link_id 1\n",
        )
        .unwrap();
        assert_eq!(m.flows[0].start, Start::At(1_500_000));
        assert_eq!(m.flows[5].start, Start::At(7));
        // Barrier of 2: both setters.
        assert_eq!(m.flows[2].start, waits(&[0, 1], On::Sent, 2));
        // Multishot: the first flow it starts needs one of its setters, the second two.
        assert_eq!(m.flows[3].start, waits(&[5, 6], On::Sent, 1));
        assert_eq!(m.flows[4].start, waits(&[5, 6], On::Sent, 2));
        // recv_done_trigger: delivered.
        assert_eq!(m.flows[6].start, waits(&[0], On::Delivered, 1));
        assert_eq!(
            m.failures,
            [LinkFailure {
                tier: Tier::Agg,
                switch: 2,
                link: 1
            }]
        );
    }

    #[test]
    fn what_htsim_refuses_or_aborts_on_is_refused_with_the_line() {
        let head = "Nodes 4\nConnections 2\nTriggers 1\n";
        for (text, needle) in [
            ("Nodes 4\nConnections 1\n0->1 start 0\n", "t.cm:3: no `size BYTES`"),
            ("Nodes 4\nConnections 1\n0->1 size 5\n", "t.cm:3: no start: give `start PS` or `trigger TID`"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size 5 speed 7\n", "t.cm:3: unknown token `speed` in a flow line"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size\n", "t.cm:3: `size` needs a value"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size 0\n", "size `0` is not from 1 to"),
            ("Nodes 4\nConnections 1\n0->1 start -1 size 5\n", "start `-1` is not a time in picoseconds"),
            ("Nodes 4\nConnections 1\n0->1 start inf size 5\n", "start `inf`"),
            ("Nodes 4\nConnections 1\n0->1 start 0 start 1 size 5\n", "`start` given twice"),
            ("Nodes 4\nConnections 1\n0->4 start 0 size 5\n", "node `4` is not below the header's `Nodes 4`"),
            ("Nodes 4\nConnections 1\n2->2 start 0 size 5\n", "a flow from node 2 to itself"),
            ("Nodes 4\nConnections 1\nx->2 start 0 size 5\n", "node `x` is not a whole number"),
            ("Nodes 4\nConnections 1\n0->1 id 0 start 0 size 5\n", "flow id 0 is not allowed"),
            ("Nodes 4\nConnections 2\n0->1 id 3 start 0 size 5\n1->0 id 3 start 0 size 5\n", "t.cm:4: flow id 3 given twice"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size 5\n1->0 start 0 size 5\n", "t.cm:4: more connections than the header's `Connections 1`"),
            ("Nodes 4\nConnections 3\n0->1 start 0 size 5\n", "t.cm:2: the header says `Connections 3`, the file has 1"),
            ("Nodes 4\nNodes 5\n", "t.cm:2: header `Nodes` given twice"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size 5\nTriggers 0\n", "t.cm:4: header `Triggers` after the first flow"),
            ("Nodes 4 5\n", "t.cm:1: header `Nodes` takes one number"),
            ("Nodes 4\nWhatever 5\n", "t.cm:2: unknown line `Whatever`"),
            ("Nodes 70000\n", "t.cm:1: this would be 70000 nodes, the limit is 65536"),
            ("Nodes 4\nConnections 5000000\n", "t.cm:2: this would be 5000000 flows, the limit is 4194304"),
            (&format!("{head}0->1 id 1 start 0 size 5 trigger 1\ntrigger id 1 oneshot\n1->0 start 0 size 5\n"), "t.cm:4: both a start time and a trigger"),
            (&format!("{head}0->1 id 1 start 0 size 5\n1->0 id 2 trigger 1 size 5\ntrigger id 1 oneshot\n"), "t.cm:5: trigger 1 is set by no flow's send_done_trigger or recv_done_trigger"),
            (&format!("{head}0->1 id 1 start 0 size 5 send_done_trigger 2\n1->0 id 2 trigger 1 size 5\ntrigger id 1 oneshot\n"), "t.cm:4: trigger 2 is set here but no `trigger id 2` line declares it"),
            (&format!("{head}0->1 id 1 start 0 size 5 send_done_trigger 1\n1->0 id 2 trigger 3 size 5\ntrigger id 1 oneshot\n"), "t.cm:5: trigger 3 is waited for but no `trigger id 3` line declares it"),
            ("Nodes 4\nConnections 3\nTriggers 1\n0->1 id 1 start 0 size 5 send_done_trigger 1\n1->0 id 2 start 0 size 5 send_done_trigger 1\n2->0 id 3 trigger 1 size 5\ntrigger id 1 oneshot\n", "t.cm:7: oneshot trigger 1 is set by 2 flows: htsim fires a oneshot trigger once and aborts on its second activation"),
            ("Nodes 4\nConnections 2\nTriggers 1\n0->1 id 1 start 0 size 5 send_done_trigger 1\n2->0 id 3 trigger 1 size 5\ntrigger id 1 barrier count 2\n", "t.cm:6: barrier trigger 1 counts 2 activations but 1 flows set it: its flows would never start"),
            ("Nodes 4\nConnections 2\nTriggers 1\n0->1 start 0 size 5 send_done_trigger 1\n1->0 start 0 size 5 send_done_trigger 1\ntrigger id 1 barrier count 1\n", "t.cm:6: barrier trigger 1 counts 1 activations but 2 flows set it: htsim aborts on the extra ones"),
            ("Nodes 4\nConnections 1\nTriggers 1\n0->1 start 0 size 5 send_done_trigger 1\ntrigger id 1 oneshot\n", "t.cm:5: oneshot trigger 1 starts no flow: htsim aborts when such a trigger fires"),
            ("Nodes 4\nConnections 3\nTriggers 1\n0->1 id 1 start 0 size 5 send_done_trigger 1\n2->0 id 2 trigger 1 size 5\n2->1 id 3 trigger 1 size 5\ntrigger id 1 multishot\n", "t.cm:7: multishot trigger 1 starts 2 flows but 1 flows set it: the last would never start"),
            ("Nodes 4\nConnections 2\nTriggers 2\n0->1 id 1 trigger 2 size 5 send_done_trigger 1\n1->0 id 2 trigger 1 size 5 send_done_trigger 2\ntrigger id 1 oneshot\ntrigger id 2 oneshot\n", "t.cm:4: this flow waits, through other flows, for itself"),
            ("Nodes 4\nConnections 1\nTriggers 1\n0->1 id 1 trigger 1 size 5 recv_done_trigger 1\ntrigger id 1 oneshot\n", "t.cm:4: this flow waits, through other flows, for itself"),
            ("Nodes 4\nTriggers 2\ntrigger id 1 oneshot\ntrigger id 1 multishot\n", "t.cm:4: trigger 1 declared twice"),
            ("Nodes 4\nTriggers 1\ntrigger oneshot\n", "t.cm:3: a trigger with no `id TID`"),
            ("Nodes 4\nTriggers 1\ntrigger id 1\n", "a trigger with no type"),
            ("Nodes 4\nTriggers 1\ntrigger id 1 oneshot multishot\n", "a trigger of two types"),
            ("Nodes 4\nTriggers 1\ntrigger id 1 barrier\n", "a barrier trigger needs `count N`"),
            ("Nodes 4\nTriggers 1\ntrigger id 0 oneshot\n", "trigger id 0 is not allowed"),
            ("Nodes 4\nTriggers 1\ntrigger id 1 oneshot sometimes\n", "unknown token `sometimes` in a trigger line"),
            ("Nodes 4\ntrigger id 1 oneshot\n", "t.cm:2: more triggers than the header's `Triggers 0`"),
            ("Nodes 4\nFailures 1\nfailure switch_type SPINE switch_id 1 link_id 1\n", "switch type `SPINE` is not TOR, AGG or CORE"),
            ("Nodes 4\nFailures 1\nfailure switch_type TOR switch_id 1\n", "a failure needs `switch_type`, `switch_id` and `link_id`"),
            ("Nodes 4\nFailures 1\nfailure switch_type TOR switch_id\n", "`switch_id` needs a value"),
            ("Nodes 4\nfailure switch_type TOR switch_id 1 link_id 2\n", "more failures than the header's `Failures 0`"),
            ("Nodes 4\nConnections 1\n0->1 start 0 size 5 \u{1b}[31m\n", "unknown token `\\u{1b}[31m` in a flow line"),
        ] {
            let error = refused(text);
            assert!(error.contains(needle), "{text:?}:\n{error}");
        }
    }

    #[test]
    fn triggers_that_start_nothing_or_are_never_used_are_harmless_where_htsim_lets_them_be() {
        // A declared trigger nobody sets or waits for; a multishot and a barrier set and
        // waited for by nobody (htsim's multishot ignores activations past its flows, its
        // barrier counts them down).
        let m = matrix(
            "Nodes 4\nConnections 2\nTriggers 3\n0->1 start 0 size 5 send_done_trigger 2\n\
             1->0 start 0 size 5 send_done_trigger 3\ntrigger id 1 oneshot\n\
             trigger id 2 multishot\ntrigger id 3 barrier count 1\n",
        )
        .unwrap();
        assert!(m.flows.iter().all(|f| f.start == Start::At(0)));
    }

    #[test]
    fn a_file_that_is_not_a_matrix_is_not_quoted() {
        for text in [
            "root:$y$j9T$secret:19000:0:99999:7:::\n",
            "secret word\nNodes 4\n",
            "\n\n# comment\nsecret->word\n",
        ] {
            crate::error::assert_unquoted(
                &refused(text),
                "not an htsim connection matrix: it begins with `Nodes N`",
                &["secret", "root"],
            );
        }
        assert!(refused("")
            .ends_with("t.cm:1: not an htsim connection matrix: it begins with `Nodes N`"));
    }

    #[test]
    fn dependencies_past_the_limit_are_refused_before_they_are_made() {
        // A barrier that 3000 flows set and 6000 wait for: 18 M dependencies.
        let mut text = String::from("Nodes 4\nConnections 9000\nTriggers 1\n");
        for i in 0..3000 {
            text += &format!("0->1 id {} start 0 size 5 send_done_trigger 1\n", i + 1);
        }
        for i in 0..6000 {
            text += &format!("1->0 id {} trigger 1 size 5\n", 3001 + i);
        }
        text += "trigger id 1 barrier count 3000\n";
        assert!(refused(&text)
            .ends_with("t.cm:1: this would be 18000000 dependencies, the limit is 16777216"));
    }
}
