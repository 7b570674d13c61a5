//! BMv2's `simple_switch` as a target of STF tests ([`Bmv2Target`]), so that a test runs on
//! softswitch and on BMv2 alike (`softswitch stf --target bmv2`) and the two can be compared
//! packet for packet.
//!
//! The switch runs the BMv2 JSON p4c made of the program, with 8 priority queues per port (as
//! softswitch has), in a directory of its own. Packets go in and come out through its
//! packet-in socket ([`packet_in`]); table entries, sessions, groups, queues, counters and
//! registers go through `simple_switch_CLI` ([`cli`]), with the names the test uses resolved
//! by softswitch's front end. Its debug log says when every packet is done and which packet
//! each frame came from ([`progress`]).
//!
//! BMv2 runs in real time on threads of its own, so this target differs from softswitch's
//! virtual clock in what the STF commands mean: `packet` lines in a row form a burst (none
//! waits for the one before), every other command first waits until the switch has finished
//! with every packet and emptied its queues, and `advance US` sleeps US microseconds.

mod cli;
mod packet_in;
mod progress;

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead as _, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use p4toolchain::Tool;

use crate::{CellIndex, Indirect, IndirectEntry, Queues, Sent, Target, TargetResult};
use softswitch_core::ir::{ActionCall, Entry, FieldMatch, InstanceKind, MatchKind, Program};
use softswitch_core::meter::MeterConfig;
use softswitch_core::table::CounterCell;

use cli::RuntimeCli;

/// How long the switch may take to start, and to finish with the packets it was given.
const TIMEOUT: Duration = Duration::from_secs(20);
/// After a multicast discarded its original, how long to wait for its replicas' log lines
/// before calling the switch idle (they follow within microseconds, on the same thread).
const MULTICAST_GRACE: Duration = Duration::from_millis(50);
/// Priority queues per port, as softswitch has.
const PRIORITY_QUEUES: u8 = 8;
/// BMv2 picks the ternary or range entry with the smallest priority value; STF and softswitch
/// the largest. An STF priority `p` is BMv2's `PRIORITY_BASE - p` (p4c's runner uses 10000).
const PRIORITY_BASE: i64 = i32::MAX as i64;
/// Log lines kept to explain a failure.
const RECENT_LINES: usize = 40;

/// The programs a [`Bmv2Target`] runs.
#[derive(Clone, Debug)]
pub struct Bmv2Tools {
    /// `simple_switch` (the logging build: the target reads its debug log).
    pub switch: Tool,
    /// `simple_switch_CLI`.
    pub cli: Tool,
}

impl From<&p4toolchain::Toolchain> for Bmv2Tools {
    fn from(toolchain: &p4toolchain::Toolchain) -> Self {
        Bmv2Tools {
            switch: toolchain.simple_switch.clone(),
            cli: toolchain.simple_switch_cli.clone(),
        }
    }
}

/// A running `simple_switch` driven as an STF [`Target`].
pub struct Bmv2Target {
    program: Program,
    child: Child,
    shared: Arc<Shared>,
    socket: packet_in::PacketSocket,
    cli: RuntimeCli,
    dir: PathBuf,
    /// BMv2's id of the next packet sent (BMv2 numbers the packets it receives from 0).
    next_id: u64,
    /// BMv2's id of the current test's first packet.
    first_id: u64,
    /// What the current test made, for [`Bmv2Target::reset`] to undo.
    made: Made,
}

/// What a test made on the switch, with BMv2's handles.
#[derive(Debug, Default)]
struct Made {
    /// Entries added and not removed: (table, handle).
    entries: Vec<(usize, i32)>,
    /// Tables whose default action the test set.
    defaults: Vec<usize>,
    /// Action profile members and selector groups, by (profile instance, the test's id).
    members: HashMap<(usize, u32), i32>,
    groups: HashMap<(usize, u32), i32>,
    /// Multicast groups, and nodes (in creation order: the test's node numbers) with the
    /// groups they joined.
    mc_groups: Vec<u16>,
    nodes: Vec<i32>,
    associations: Vec<(u16, i32)>,
    /// Clone sessions.
    sessions: Vec<u32>,
    /// Parser value sets given members.
    value_sets: Vec<usize>,
}

/// What the reader threads learn, shared with the target.
#[derive(Default)]
struct Shared {
    state: Mutex<Progress>,
    changed: Condvar,
}

#[derive(Default)]
struct Progress {
    ready: bool,
    flight: progress::InFlight,
    last_multicast: Option<Instant>,
    /// Frames the log says left, not yet matched with one from the socket: (id, port, size).
    transmitted: VecDeque<(u64, u16, usize)>,
    /// Frames from the socket, not yet matched with a log line.
    received: VecDeque<(u16, Vec<u8>)>,
    /// Matched frames not yet taken, with BMv2's packet id.
    outputs: Vec<(u64, u16, Vec<u8>)>,
    /// Why the switch cannot be trusted any more (it exited, or its log and socket disagree).
    failure: Option<String>,
    recent: VecDeque<String>,
}

impl Progress {
    /// Pairs frames from the log and the socket, which BMv2's one transmit thread emits in the
    /// same order.
    fn match_frames(&mut self) {
        while !self.transmitted.is_empty() && !self.received.is_empty() {
            let (id, port, size) = self.transmitted.pop_front().expect("not empty");
            let (got_port, data) = self.received.pop_front().expect("not empty");
            if got_port != port || data.len() != size {
                self.fail(format!(
                    "BMv2's log says packet {id} left port {port} with {size} bytes, its socket \
                     gave {} bytes on port {got_port}",
                    data.len()
                ));
                return;
            }
            self.outputs.push((id, port, data));
        }
    }

    fn fail(&mut self, why: String) {
        self.failure.get_or_insert(why);
    }

    fn idle(&self) -> bool {
        self.flight.idle()
            && self.transmitted.is_empty()
            && self.received.is_empty()
            && self
                .last_multicast
                .is_none_or(|t| t.elapsed() >= MULTICAST_GRACE)
    }
}

/// Numbers this process's switch directories.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

impl Bmv2Target {
    /// Starts `simple_switch` on BMv2 JSON `json` and the CLI; `program` is softswitch's
    /// lowering of the same source, which resolves the names a test uses.
    pub fn start(tools: &Bmv2Tools, json: &Path, program: Program) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!(
            "softswitch-bmv2-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let thrift_port = free_tcp_port()?;
        let packets = dir.join("packets.ipc");
        let mut child = tools
            .switch
            .command()
            .arg("--packet-in")
            .arg(format!("ipc://{}", packets.display()))
            .args([
                "--thrift-port",
                &thrift_port.to_string(),
                "--device-id",
                "0",
            ])
            .arg("--notifications-addr")
            .arg(format!("ipc://{}", dir.join("notifications.ipc").display()))
            .args(["--log-console", "-L", "debug"])
            .arg(json)
            .args(["--", "--priority-queues", &PRIORITY_QUEUES.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", tools.switch.program.display()))?;
        let shared = Arc::new(Shared::default());
        let log = child.stdout.take().expect("piped");
        let errors = child.stderr.take().expect("piped");
        spawn_log_reader(log, Arc::clone(&shared));
        spawn_log_reader(errors, Arc::clone(&shared));
        let started = wait_until(&shared, TIMEOUT, |p| p.ready);
        if let Err(why) = started {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("simple_switch did not start: {why}"));
        }
        let (socket, mut reader) = packet_in::connect(&packets)
            .map_err(|e| format!("connecting to {}: {e}", packets.display()))?;
        let socket_shared = Arc::clone(&shared);
        std::thread::spawn(move || loop {
            let next = reader.next_packet();
            let mut state = socket_shared.state.lock().expect("not poisoned");
            match next {
                Ok(Some(frame)) => {
                    state.received.push_back(frame);
                    state.match_frames();
                }
                Ok(None) => state.fail("BMv2 closed its packet socket".into()),
                Err(e) => state.fail(format!("BMv2's packet socket: {e}")),
            }
            let done = state.failure.is_some();
            drop(state);
            socket_shared.changed.notify_all();
            if done {
                return;
            }
        });
        let cli = RuntimeCli::start(&tools.cli, thrift_port)?;
        Ok(Bmv2Target {
            program,
            child,
            shared,
            socket,
            cli,
            dir,
            next_id: 0,
            first_id: 0,
            made: Made::default(),
        })
    }

    /// Makes the switch as it started, for the next test: once it is idle, undoes what the
    /// test made (entries, default actions, profile members and groups, multicast groups and
    /// nodes, clone sessions, value sets) and zeroes every register and counter; packets are
    /// counted from 0 again. Meter rates a test set stay (BMv2 has no command to unset one).
    /// BMv2's own `reset_state` would be shorter, but it also drops the const entries p4c
    /// gives the tables it makes of `switch` statements.
    pub fn reset(&mut self) -> Result<(), String> {
        let made = std::mem::take(&mut self.made);
        let mut commands = Vec::new();
        for &(table, handle) in made.entries.iter().rev() {
            commands.push(format!("table_delete {} {handle}", self.table_name(table)));
        }
        for &table in &made.defaults {
            commands.push(format!("table_reset_default {}", self.table_name(table)));
        }
        for (&(profile, _), group) in &made.groups {
            let name = self.instance_name(profile);
            commands.push(format!("act_prof_delete_group {name} {group}"));
        }
        for (&(profile, _), member) in &made.members {
            let name = self.instance_name(profile);
            commands.push(format!("act_prof_delete_member {name} {member}"));
        }
        for (group, node) in &made.associations {
            commands.push(format!("mc_node_dissociate {group} {node}"));
        }
        commands.extend(made.nodes.iter().map(|n| format!("mc_node_destroy {n}")));
        commands.extend(
            made.mc_groups
                .iter()
                .map(|g| format!("mc_mgrp_destroy {g}")),
        );
        commands.extend(
            made.sessions
                .iter()
                .map(|s| format!("mirroring_delete {s}")),
        );
        for &set in &made.value_sets {
            commands.push(format!("pvs_clear {}", self.instance_name(set)));
        }
        for instance in &self.program.instances {
            match instance.kind.type_name() {
                "register" => commands.push(format!("register_reset {}", instance.name)),
                "counter" => commands.push(format!("counter_reset {}", instance.name)),
                _ => {}
            }
        }
        for command in commands {
            self.cli(&command)?;
        }
        self.first_id = self.next_id;
        Ok(())
    }

    /// Runs a CLI command once every packet is done.
    fn cli(&mut self, command: &str) -> Result<String, String> {
        self.wait()?;
        self.cli.run(command)
    }

    /// The name of a table, action or instance as the CLI knows it.
    fn table_name(&self, table: usize) -> &str {
        &self.program.tables[table].name
    }

    fn instance_name(&self, instance: usize) -> &str {
        &self.program.instances[instance].name
    }

    /// The action data of `call` as the CLI takes it.
    fn arg_words(call: &ActionCall) -> String {
        let args: Vec<String> = call.args.iter().map(|a| format!("{a:#x}")).collect();
        args.join(" ")
    }

    /// `ACTION ARG...` as the CLI takes an action with its data.
    fn action_words(&self, call: &ActionCall) -> String {
        let name = &self.program.actions[call.action].name;
        format!("{name} {}", Self::arg_words(call))
            .trim_end()
            .to_owned()
    }

    /// An entry-adding command, `VERB TABLE [ACTION] KEYS => RESULT [PRIORITY]`: the match
    /// fields in key order, and BMv2's priority if a key is ternary, range or optional.
    fn add_command(
        &self,
        verb: &str,
        table: usize,
        action: Option<&str>,
        matches: &[FieldMatch],
        priority: i64,
        result: &str,
    ) -> Result<String, String> {
        let keys = &self.program.tables[table].keys;
        let mut words = vec![verb.to_owned(), self.table_name(table).to_owned()];
        words.extend(action.map(str::to_owned));
        let mut prioritized = false;
        for (key, m) in keys.iter().zip(matches) {
            let word = match (key.kind, *m) {
                (MatchKind::Exact, FieldMatch::Masked { value, .. }) => format!("{value:#x}"),
                (MatchKind::Lpm, FieldMatch::Masked { value, mask }) => {
                    format!("{value:#x}/{}", mask.count_ones())
                }
                (MatchKind::Ternary | MatchKind::Optional, FieldMatch::Masked { value, mask }) => {
                    prioritized = true;
                    format!("{value:#x}&&&{mask:#x}")
                }
                (MatchKind::Range, FieldMatch::Range { lo, hi }) => {
                    prioritized = true;
                    format!("{lo:#x}->{hi:#x}")
                }
                (kind, m) => return Err(format!("key {} ({kind:?}) cannot match {m:?}", key.name)),
            };
            words.push(word);
        }
        words.push("=>".into());
        words.extend((!result.is_empty()).then(|| result.to_owned()));
        if prioritized {
            if !(0..PRIORITY_BASE).contains(&priority) {
                return Err(format!("priority {priority} is outside 0..{PRIORITY_BASE}"));
            }
            words.push((PRIORITY_BASE - priority).to_string());
        }
        Ok(words.join(" "))
    }

    /// Runs an entry-adding command; the entry's handle, kept for [`Bmv2Target::reset`].
    fn added(&mut self, table: usize, command: &str) -> Result<usize, String> {
        let handle = handle(&self.cli(command)?)?;
        self.made.entries.push((table, handle));
        Ok(stf_handle(handle))
    }

    fn profile(&self, table: usize) -> Result<usize, String> {
        self.program.tables[table]
            .profile
            .ok_or_else(|| format!("table {} has no action profile", self.table_name(table)))
    }
}

/// Runs STF test `test` of `program` (its source) on BMv2, `json` being p4c's output for the
/// program: the report, or why the test could not run (a rendered diagnostic, or what went
/// wrong with BMv2).
pub fn run_stf_file(
    tools: &Bmv2Tools,
    program: &Path,
    json: &Path,
    test: &Path,
) -> Result<crate::Report, String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let (mut map, file) =
        softswitch_frontend::source::SourceMap::of(program.display().to_string(), read(program)?);
    let compiled = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    let stf = map.add(test.display().to_string(), read(test)?);
    let mut target = Bmv2Target::start(tools, json, compiled.program)?;
    crate::run_on(&map, stf, &mut target).map_err(|d| d.render(&map))
}

/// One STF test for [`run_stf_files`]: the program's source, p4c's JSON of it, the test.
#[derive(Clone, Debug)]
pub struct StfRun {
    /// The P4 program.
    pub program: PathBuf,
    /// p4c's BMv2 JSON of it.
    pub json: PathBuf,
    /// The STF test.
    pub test: PathBuf,
}

/// Runs `runs` on BMv2, all at once, each on a switch of its own; what failed, each message
/// naming its test file.
pub fn run_stf_files(tools: &Bmv2Tools, runs: &[StfRun]) -> Vec<String> {
    std::thread::scope(|scope| {
        let running: Vec<_> = runs
            .iter()
            .map(|run| scope.spawn(move || run_stf_file(tools, &run.program, &run.json, &run.test)))
            .collect();
        running
            .into_iter()
            .zip(runs)
            .filter_map(|(thread, run)| {
                let failure = match thread.join() {
                    Ok(Ok(report)) if report.passed() => return None,
                    Ok(Ok(report)) => report.failures.join("\n"),
                    Ok(Err(e)) => e,
                    Err(_) => "the run panicked".into(),
                };
                Some(format!("{} on BMv2:\n{failure}", run.test.display()))
            })
            .collect()
    })
}

/// The number in "... handle N" of a CLI answer. BMv2's handles are 32 bits, printed as
/// Thrift's signed integers (an entry handle's top bits count how often its slot was reused).
fn handle(answer: &str) -> Result<i32, String> {
    answer
        .lines()
        .find_map(|l| l.trim().rsplit_once("handle ")?.1.trim().parse().ok())
        .ok_or_else(|| format!("no handle in the CLI's answer: {}", answer.trim()))
}

/// An entry handle as the STF runner keeps it (a `usize`)...
fn stf_handle(handle: i32) -> usize {
    handle as u32 as usize
}

/// ... and as the CLI takes it back.
fn cli_handle(handle: usize) -> i32 {
    handle as u32 as i32
}

/// A cell as the CLI names it: an indexed instance's index, or a direct one's entry handle.
fn cli_index(cell: CellIndex) -> TargetResult<i64> {
    match cell {
        CellIndex::Index(i) => i64::try_from(i).map_err(|e| e.to_string()),
        CellIndex::Entry(handle) => Ok(i64::from(cli_handle(handle))),
    }
}

/// A TCP port nobody listens on now, for the switch's Thrift server.
fn free_tcp_port() -> Result<u16, String> {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free TCP port: {e}"))
}

/// Reads the switch's log lines into the shared progress until the stream ends.
fn spawn_log_reader(stream: impl Read + Send + 'static, shared: Arc<Shared>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let event = progress::parse(&line);
            let mut state = shared.state.lock().expect("not poisoned");
            match &event {
                progress::Event::Ready => state.ready = true,
                progress::Event::Multicast { .. } => state.last_multicast = Some(Instant::now()),
                progress::Event::Transmitted { id, port, size } => {
                    state.transmitted.push_back((*id, *port, *size));
                    state.match_frames();
                }
                _ => {}
            }
            if let Err(why) = state.flight.apply(&event) {
                state.fail(why);
            }
            if state.recent.len() == RECENT_LINES {
                state.recent.pop_front();
            }
            state.recent.push_back(line);
            drop(state);
            shared.changed.notify_all();
        }
        let mut state = shared.state.lock().expect("not poisoned");
        state.fail("simple_switch exited".into());
        drop(state);
        shared.changed.notify_all();
    });
}

/// Waits until `done` holds of the progress, failing on a failure or after `timeout`; the
/// error quotes the switch's last log lines.
fn wait_until(
    shared: &Shared,
    timeout: Duration,
    done: impl Fn(&Progress) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut state = shared.state.lock().expect("not poisoned");
    loop {
        if let Some(why) = &state.failure {
            return Err(explain(why, &state));
        }
        if done(&state) {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            let why = format!(
                "BMv2 did not finish with packets {:?} within {timeout:?} (a packet dropped by \
                 a full queue is not in BMv2's log, and a loop of recirculations never ends)",
                state.flight.busy()
            );
            return Err(explain(&why, &state));
        }
        // Short naps while a multicast's grace runs out, else until a reader says more.
        let nap = (deadline - now).min(MULTICAST_GRACE);
        state = shared
            .changed
            .wait_timeout(state, nap)
            .expect("not poisoned")
            .0;
    }
}

fn explain(why: &str, state: &Progress) -> String {
    let recent: Vec<&str> = state.recent.iter().map(String::as_str).collect();
    format!("{why}; its last log lines:\n{}", recent.join("\n"))
}

impl Drop for Bmv2Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Target for Bmv2Target {
    fn program(&self) -> &Program {
        &self.program
    }

    fn send(&mut self, port: u16, data: Vec<u8>) -> TargetResult<()> {
        {
            let mut state = self.shared.state.lock().expect("not poisoned");
            if let Some(why) = &state.failure {
                return Err(explain(why, &state));
            }
            state.flight.sent(self.next_id);
        }
        self.next_id += 1;
        self.socket
            .send(port, &data)
            .map_err(|e| format!("sending a packet to BMv2: {e}"))
    }

    fn wait(&mut self) -> TargetResult<()> {
        wait_until(&self.shared, TIMEOUT, Progress::idle)
    }

    fn advance(&mut self, us: u64) -> TargetResult<()> {
        // BMv2's clock is the wall clock: the time passes for real.
        std::thread::sleep(Duration::from_micros(us));
        Ok(())
    }

    fn take_outputs(&mut self) -> TargetResult<Vec<Sent>> {
        let mut state = self.shared.state.lock().expect("not poisoned");
        let first = self.first_id;
        Ok(state
            .outputs
            .drain(..)
            .map(|(id, port, data)| Sent {
                port,
                data,
                packet: id.checked_sub(first).map(|n| n as usize),
            })
            .collect())
    }

    fn add_entry(&mut self, table: usize, entry: Entry) -> TargetResult<usize> {
        let action = &self.program.actions[entry.action.action].name;
        let command = self.add_command(
            "table_add",
            table,
            Some(action),
            &entry.matches,
            entry.priority,
            &Self::arg_words(&entry.action),
        )?;
        self.added(table, &command)
    }

    fn add_indirect_entry(&mut self, table: usize, entry: IndirectEntry) -> TargetResult<usize> {
        let profile = self.profile(table)?;
        let (verb, made, id, missing) = match entry.runs {
            Indirect::Member(id) => (
                "table_indirect_add",
                &self.made.members,
                id,
                "no such member",
            ),
            Indirect::Group(id) => (
                "table_indirect_add_with_group",
                &self.made.groups,
                id,
                "no such group",
            ),
        };
        let handle = made
            .get(&(profile, id))
            .copied()
            .ok_or_else(|| missing.to_owned())?;
        let command = self.add_command(
            verb,
            table,
            None,
            &entry.matches,
            entry.priority,
            &handle.to_string(),
        )?;
        self.added(table, &command)
    }

    fn remove_entry(&mut self, table: usize, handle: usize) -> TargetResult<()> {
        let handle = cli_handle(handle);
        let command = format!("table_delete {} {handle}", self.table_name(table));
        self.cli(&command)?;
        self.made.entries.retain(|&e| e != (table, handle));
        Ok(())
    }

    fn clear_tables(&mut self) -> TargetResult<()> {
        let tables: Vec<String> = self
            .program
            .tables
            .iter()
            .filter(|t| !t.const_entries_fixed)
            .map(|t| t.name.clone())
            .collect();
        for table in tables {
            self.cli(&format!("table_clear {table}"))?;
        }
        self.made.entries.clear();
        Ok(())
    }

    fn set_default(&mut self, table: usize, call: ActionCall) -> TargetResult<()> {
        let command = format!(
            "table_set_default {} {}",
            self.table_name(table),
            self.action_words(&call)
        );
        self.cli(&command)?;
        self.made.defaults.push(table);
        Ok(())
    }

    fn add_member(&mut self, table: usize, member: u32, call: ActionCall) -> TargetResult<()> {
        let profile = self.profile(table)?;
        let name = self.instance_name(profile);
        let command = match self.made.members.get(&(profile, member)) {
            Some(h) => format!(
                "act_prof_modify_member {name} {} {h} {}",
                self.program.actions[call.action].name,
                Self::arg_words(&call)
            ),
            None => format!("act_prof_create_member {name} {}", self.action_words(&call)),
        };
        let answer = self.cli(&command)?;
        if let std::collections::hash_map::Entry::Vacant(new) =
            self.made.members.entry((profile, member))
        {
            new.insert(handle(&answer)?);
        }
        Ok(())
    }

    fn create_selector_group(&mut self, table: usize, group: u32) -> TargetResult<()> {
        let profile = self.profile(table)?;
        let command = format!("act_prof_create_group {}", self.instance_name(profile));
        let h = handle(&self.cli(&command)?)?;
        self.made.groups.insert((profile, group), h);
        Ok(())
    }

    fn add_to_group(&mut self, table: usize, group: u32, member: u32) -> TargetResult<()> {
        let profile = self.profile(table)?;
        let m = *self
            .made
            .members
            .get(&(profile, member))
            .ok_or_else(|| format!("no member {member}"))?;
        let g = *self
            .made
            .groups
            .get(&(profile, group))
            .ok_or_else(|| format!("no group {group}"))?;
        let command = format!(
            "act_prof_add_member_to_group {} {m} {g}",
            self.instance_name(profile)
        );
        self.cli(&command).map(drop)
    }

    fn value_set_add(&mut self, instance: usize, member: FieldMatch) -> TargetResult<()> {
        let InstanceKind::ValueSet { width, .. } = self.program.instances[instance].kind else {
            return Err("not a parser value set".into());
        };
        match member {
            FieldMatch::Masked { value, mask } if mask == softswitch_core::ir::mask(width) => {
                let command = format!("pvs_add {} {value:#x}", self.instance_name(instance));
                self.cli(&command)?;
                self.made.value_sets.push(instance);
                Ok(())
            }
            _ => Err("BMv2's CLI adds whole values to a value set, not masks".into()),
        }
    }

    fn set_clone_session(&mut self, session: u32, port: u16) -> TargetResult<()> {
        if self.made.sessions.contains(&session) {
            // BMv2 refuses to add a session twice; softswitch replaces it.
            self.cli(&format!("mirroring_delete {session}"))?;
        } else {
            self.made.sessions.push(session);
        }
        self.cli(&format!("mirroring_add {session} {port}"))
            .map(drop)
    }

    fn create_multicast_group(&mut self, group: u16) -> TargetResult<()> {
        self.cli(&format!("mc_mgrp_create {group}"))?;
        self.made.mc_groups.push(group);
        Ok(())
    }

    fn create_multicast_node(&mut self, rid: u16, ports: Vec<u16>) -> TargetResult<usize> {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let h = handle(&self.cli(&format!("mc_node_create {rid} {}", ports.join(" ")))?)?;
        self.made.nodes.push(h);
        Ok(self.made.nodes.len() - 1)
    }

    fn associate_node(&mut self, group: u16, node: usize) -> TargetResult<()> {
        let h = *self
            .made
            .nodes
            .get(node)
            .ok_or_else(|| format!("no node {node}"))?;
        self.cli(&format!("mc_node_associate {group} {h}"))?;
        self.made.associations.push((group, h));
        Ok(())
    }

    fn set_queue_depth(&mut self, queues: Queues, packets: usize) -> TargetResult<()> {
        self.cli(&queue_command("set_queue_depth", packets as u64, queues))
            .map(drop)
    }

    fn set_queue_rate(&mut self, queues: Queues, pps: Option<u64>) -> TargetResult<()> {
        // BMv2 takes 0 for unlimited, as the STF test and the Queues service do.
        let pps = pps.unwrap_or(0);
        self.cli(&queue_command("set_queue_rate", pps, queues))
            .map(drop)
    }

    fn counter(&mut self, instance: usize, cell: CellIndex) -> TargetResult<CounterCell> {
        let index = cli_index(cell)?;
        let command = format!("counter_read {} {index}", self.instance_name(instance));
        counter_cell(&self.cli(&command)?)
    }

    fn register(&mut self, instance: usize, index: usize) -> TargetResult<u128> {
        let command = format!("register_read {} {index}", self.instance_name(instance));
        let answer = self.cli(&command)?;
        answer
            .lines()
            .find_map(|l| l.split_once("]=")?.1.trim().parse().ok())
            .ok_or_else(|| format!("no register value in the CLI's answer: {}", answer.trim()))
    }

    fn register_cells(&mut self, instance: usize) -> TargetResult<Vec<u128>> {
        let name = self.instance_name(instance).to_owned();
        let answer = self.cli(&format!("register_read {name}"))?;
        let values = answer
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .ok_or_else(|| format!("no register cells in the CLI's answer: {}", answer.trim()))?;
        values
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|e| format!("register cell {v:?}: {e}"))
            })
            .collect()
    }

    fn set_register(&mut self, instance: usize, index: usize, value: u128) -> TargetResult<()> {
        let command = format!(
            "register_write {} {index} {value}",
            self.instance_name(instance)
        );
        self.cli(&command).map(drop)
    }

    fn configure_meter(
        &mut self,
        instance: usize,
        cell: CellIndex,
        config: MeterConfig,
    ) -> TargetResult<()> {
        let index = cli_index(cell)?;
        let burst = |b: f64| {
            (b.fract() == 0.0)
                .then_some(b as u64)
                .ok_or_else(|| format!("BMv2 takes whole bursts, not {b}"))
        };
        let command = format!(
            "meter_set_rates {} {index} {}:{} {}:{}",
            self.instance_name(instance),
            config.cir,
            burst(config.cbs)?,
            config.pir,
            burst(config.pbs)?
        );
        self.cli(&command).map(drop)
    }

    fn assertion_failures(&self) -> u64 {
        // A failed assert stops BMv2: the next wait reports that the switch exited.
        0
    }
}

/// `set_queue_depth`/`set_queue_rate VALUE [PORT [PRIORITY]]`.
fn queue_command(verb: &str, value: u64, queues: Queues) -> String {
    let mut command = format!("{verb} {value}");
    if let Some(port) = queues.port {
        command.push_str(&format!(" {port}"));
        if let Some(priority) = queues.priority {
            command.push_str(&format!(" {priority}"));
        }
    }
    command
}

/// The cell in `counter_read`'s answer, `NAME[I]= (B bytes, P packets)`.
fn counter_cell(answer: &str) -> Result<CounterCell, String> {
    let cell = answer.lines().find_map(|l| {
        let inside = l.split_once("= (")?.1.strip_suffix(')')?;
        let (bytes, packets) = inside.split_once(", ")?;
        Some(CounterCell {
            bytes: bytes.strip_suffix(" bytes")?.parse().ok()?,
            packets: packets.strip_suffix(" packets")?.parse().ok()?,
        })
    });
    cell.ok_or_else(|| format!("no counter cell in the CLI's answer: {}", answer.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_answers_are_read() {
        assert_eq!(
            counter_cell("this is the direct counter\nMyIngress.c[3]= (120 bytes, 2 packets)\n"),
            Ok(CounterCell {
                packets: 2,
                bytes: 120
            })
        );
        assert_eq!(
            handle("Adding entry to lpm match table t\nEntry has been added with handle 7\n"),
            Ok(7)
        );
        assert!(handle("nothing").is_err());
        assert_eq!(
            queue_command(
                "set_queue_rate",
                100,
                Queues {
                    port: Some(4),
                    priority: None
                }
            ),
            "set_queue_rate 100 4"
        );
        assert_eq!(
            queue_command("set_queue_depth", 8, Queues::default()),
            "set_queue_depth 8"
        );
        let (port, priority) = (Some(4), Some(2));
        assert_eq!(
            queue_command("set_queue_depth", 8, Queues { port, priority }),
            "set_queue_depth 8 4 2"
        );
    }
}
