//! The switch's runtime interface: every control operation on a running [`Switch`], as BMv2's
//! `RuntimeInterface` (`SwitchWContexts`) has them — table entries (`mt_add_entry`,
//! `mt_modify_entry`, `mt_delete_entry`, `mt_get_entries`, `mt_set_default_action`), entries'
//! idle timeouts and the ageing sweep (`mt_set_entry_ttl`, `sweep_entries`), action
//! profiles and selectors (`mt_act_prof_*`), direct and indirect counters (`mt_read_counters`,
//! `read_counters`, `write_counters`), registers (`register_read`, `register_write`), meters
//! (`meter_set_rates`), parser value sets, multicast groups and nodes (`mc_*`), clone sessions
//! (`mirroring_add`), queue depths and rates (`set_egress_queue_depth`,
//! `set_egress_queue_rate`), and what the switch counts. The P4Runtime and Queues services, the
//! STF runner and the simulator all use it and nothing else of the switch, so that one more front
//! door (BMv2's Thrift runtime) is an adapter of the same calls.
//!
//! Tables, actions and extern instances are named by their program index; [`Switch::table_id`],
//! [`Switch::action_id`] and [`Switch::instance_id`] find them by name (full, or a unique
//! suffix). Keys are typed values ([`FieldMatch`]), actions with their data [`ActionCall`]s.
//! Every refusal is a [`RuntimeError`]; no index a client sends can panic the switch.
//!
//! The writes to tables are traced here, in BMv2's words ("Entry 0 added to table 'T'", the
//! entry's dump, "Error when trying to add entry ..."), so that every front door's writes show
//! in `--log-console` alike.

use super::Switch;
use crate::budget::{self, Budget, BudgetExceeded};
use crate::externs::{Cell, CellAt, Object};
use crate::ir::{ActionCall, Entry, FieldMatch, InstanceKind, Program};
use crate::table::{ControllerData, CounterCell, EntryChange, Installed, TableError, TableState};
use crate::tm::{self, QueueSettingError};
use crate::trace::{self, Level};
use std::time::Duration;
use thiserror::Error;

/// Why the switch refused a control operation.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RuntimeError {
    /// No table has this index.
    #[error("the program has no table {0}")]
    NoTable(usize),
    /// No extern instance has this index.
    #[error("the program has no extern instance {0}")]
    NoInstance(usize),
    /// The instance is not of the kind the operation works on.
    #[error("{name} is not a {want}")]
    WrongKind {
        /// The instance's name.
        name: String,
        /// What the operation needs (`counter`, `register`, `meter`, `value set`).
        want: &'static str,
    },
    /// A cell index past the instance's size.
    #[error("{kind} index out of range: {index} is not below {size}")]
    Index {
        /// What the instance is (`counter`, `register`, `meter`).
        kind: &'static str,
        /// The index asked for (as given: a client's number may be past any `usize`).
        index: u128,
        /// The instance's size.
        size: usize,
    },
    /// A refused table or action profile operation.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The parser value set holds as many members as its size.
    #[error("the value set {0} is full")]
    ValueSetFull(String),
    /// No multicast group with this id, or no replication node with this handle.
    #[error("no multicast group {group} or no replication node {node}")]
    NoGroupOrNode {
        /// The group asked for.
        group: u16,
        /// The node asked for.
        node: usize,
    },
    /// No multicast group with this id.
    #[error("no multicast group {0}")]
    NoGroup(u16),
    /// No replication node with this handle.
    #[error("no replication node {0}")]
    NoNode(usize),
    /// A queue setting out of its range.
    #[error(transparent)]
    Queue(#[from] QueueSettingError),
    /// The write does not fit the switch's state budget.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
}

/// A control-plane write of a table entry as a front door hands it over whole
/// ([`Switch::write_entry`]): the switch finds the entry by its key and the table checks and
/// applies the write, so that a write goes down once, front door → runtime interface → table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryWrite {
    /// Installs `entry`, with what the controller keeps with it, its direct counter's value
    /// and its idle timeout.
    Insert {
        /// The entry.
        entry: Entry,
        /// What the controller keeps with it.
        data: Option<ControllerData>,
        /// Its direct counter's first value (zero if `None`).
        counter: Option<CounterCell>,
        /// Its idle timeout, if any.
        idle_timeout: Option<Duration>,
    },
    /// Changes the entry with key `matches` (and `priority`, in a table whose entries have
    /// one).
    Modify {
        /// The entry's key.
        matches: Vec<FieldMatch>,
        /// The entry's priority (not looked at in a table whose entries have none).
        priority: i64,
        /// What changes.
        change: EntryChange,
    },
    /// Removes the entry with key `matches` (and `priority`, as for `Modify`).
    Delete {
        /// The entry's key.
        matches: Vec<FieldMatch>,
        /// The entry's priority (as for `Modify`).
        priority: i64,
    },
}

/// Which cell of a stateful extern instance: an indexed instance's (a counter's, register's,
/// meter's) cell at an index, or a direct instance's cell of a table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellIndex {
    /// The cell at this index.
    Index(usize),
    /// The cell of the entry with this handle (of the table the instance is attached to).
    Entry(usize),
}

impl Switch {
    // ---- names ----

    /// The index of the table named `name` (full name, or a unique suffix after a dot).
    pub fn table_id(&self, name: &str) -> Option<usize> {
        table_id(&self.program, name)
    }

    /// The index of action `name` among those of table `table`.
    pub fn action_id(&self, table: usize, name: &str) -> Option<usize> {
        self.program
            .tables
            .get(table)
            .and_then(|_| action_id(&self.program, table, name))
    }

    /// The index of the extern instance named `name`.
    pub fn instance_id(&self, name: &str) -> Option<usize> {
        instance_id(&self.program, name)
    }

    fn table(&self, table: usize) -> Result<&crate::ir::Table, RuntimeError> {
        self.program
            .tables
            .get(table)
            .ok_or(RuntimeError::NoTable(table))
    }

    /// The run-time state of table `table`, which checks the writes to it.
    fn table_state(&self, table: usize) -> Result<&TableState, RuntimeError> {
        self.state
            .tables
            .get(table)
            .ok_or(RuntimeError::NoTable(table))
    }

    fn instance(&self, instance: usize) -> Result<&crate::ir::Instance, RuntimeError> {
        self.program
            .instances
            .get(instance)
            .ok_or(RuntimeError::NoInstance(instance))
    }

    // ---- table entries ----

    /// Sends the line `line` makes of the switch to the trace, if it takes lines at `level`
    /// (`line` runs only then).
    fn trace_write(&mut self, level: Level, line: impl FnOnce(&Self) -> String) {
        if self.traces(level) {
            let line = line(self);
            self.trace_switch(level, format_args!("{line}"));
        }
    }

    /// The name of table `table`, for the trace (its control characters escaped).
    fn table_name(&self, table: usize) -> String {
        let name = self.program.tables.get(table).map_or("?", |t| &t.name);
        trace::Printable(name).to_string()
    }

    /// BMv2's dump of entry `handle` of table `table` ("Dumping entry N ...").
    fn entry_dump(&self, table: usize, handle: usize) -> String {
        match (self.program.tables.get(table), self.entry(table, handle)) {
            (Some(t), Ok(installed)) => {
                let e = &installed.entry;
                trace::dump_entry(&self.program, t, handle, &e.matches, &e.action)
            }
            _ => String::new(),
        }
    }

    /// Traces a table write: `done` and the entry's dump on success, BMv2's error line for
    /// `what` ("add entry to table 'T'") on failure.
    fn trace_entry_write<T>(
        &mut self,
        table: usize,
        result: &Result<T, RuntimeError>,
        handle: Option<usize>,
        done: impl FnOnce(&str) -> String,
        what: impl FnOnce(&str) -> String,
    ) {
        match result {
            Ok(_) => {
                self.trace_write(Level::Debug, |s| done(&s.table_name(table)));
                if let Some(h) = handle {
                    self.trace_write(Level::Debug, |s| s.entry_dump(table, h));
                }
            }
            Err(e) => self.trace_write(Level::Error, |s| {
                let e = trace::Printable(&e.to_string()).to_string();
                format!("Error when trying to {}: {e}", what(&s.table_name(table)))
            }),
        }
    }

    /// Installs an entry (`mt_add_entry`); returns its handle.
    pub fn add_entry(&mut self, table: usize, entry: Entry) -> Result<usize, RuntimeError> {
        self.add_entry_with_data(table, entry, None)
    }

    /// Installs an entry with the data its controller keeps with it ([`ControllerData`]);
    /// returns its handle.
    pub fn add_entry_with_data(
        &mut self,
        table: usize,
        entry: Entry,
        data: Option<ControllerData>,
    ) -> Result<usize, RuntimeError> {
        let result = self.insert_entry(table, entry, data);
        let handle = result.as_ref().ok().copied();
        self.trace_entry_write(
            table,
            &result,
            handle,
            |t| format!("Entry {} added to table '{t}'", handle.unwrap_or_default()),
            |t| format!("add entry to table '{t}'"),
        );
        result
    }

    fn insert_entry(
        &mut self,
        table: usize,
        entry: Entry,
        data: Option<ControllerData>,
    ) -> Result<usize, RuntimeError> {
        self.table_state(table)?.check_entry(&entry)?;
        let now_us = self.now_us();
        let cost = Installed::footprint_of(&entry, data.as_ref());
        self.budget.check(cost)?;
        let handle = self.state.tables[table].place(entry, data, now_us)?;
        self.budget.adjust(0, cost);
        Ok(handle)
    }

    /// Applies a front door's write of an entry of `table` ([`EntryWrite`]), traced as
    /// [`Switch::add_entry`], [`Switch::change_entry`] and [`Switch::remove_entry`] trace
    /// theirs; returns the entry's handle.
    pub fn write_entry(&mut self, table: usize, write: EntryWrite) -> Result<usize, RuntimeError> {
        match write {
            EntryWrite::Insert {
                entry,
                data,
                counter,
                idle_timeout,
            } => {
                let handle = self.add_entry_with_data(table, entry, data)?;
                // Cannot fail: the entry was just installed, and its table's rules are not
                // about these.
                let change = EntryChange {
                    counter,
                    idle_timeout: Some(idle_timeout),
                    ..EntryChange::default()
                };
                let now_us = self.now_us();
                self.state.tables[table].apply_change(handle, change, now_us)?;
                Ok(handle)
            }
            EntryWrite::Modify {
                matches,
                priority,
                change,
            } => {
                // A const table refuses before its key is looked for, whatever the key.
                self.table_state(table)?.check_entries_change()?;
                let handle = self.entry_with_key(table, &matches, priority)?;
                self.change_entry(table, handle, change)?;
                Ok(handle)
            }
            EntryWrite::Delete { matches, priority } => {
                self.table_state(table)?.check_entries_change()?;
                let handle = self.entry_with_key(table, &matches, priority)?;
                self.remove_entry(table, handle)?;
                Ok(handle)
            }
        }
    }

    /// The handle of the entry of `table` with key `matches` and, in a table whose entries
    /// have a priority, `priority` (P4Runtime's way of naming an entry).
    pub fn entry_with_key(
        &self,
        table: usize,
        matches: &[FieldMatch],
        priority: i64,
    ) -> Result<usize, RuntimeError> {
        let t = self.table_state(table)?;
        let priority = t.has_priority().then_some(priority);
        self.entry_by_key(table, matches, priority)?
            .ok_or_else(|| TableError::NoKey(self.table_name(table)).into())
    }

    /// Changes the action of entry `handle` (`mt_modify_entry`).
    pub fn modify_entry(
        &mut self,
        table: usize,
        handle: usize,
        call: ActionCall,
    ) -> Result<(), RuntimeError> {
        let change = EntryChange {
            action: Some(call),
            ..EntryChange::default()
        };
        self.change_entry(table, handle, change)
    }

    /// Changes entry `handle` as `change` says, whole or not at all (P4Runtime's MODIFY).
    pub fn change_entry(
        &mut self,
        table: usize,
        handle: usize,
        change: EntryChange,
    ) -> Result<(), RuntimeError> {
        let result = self.apply_change(table, handle, change);
        self.trace_entry_write(
            table,
            &result,
            Some(handle),
            |t| format!("Modified entry {handle} in table '{t}'"),
            |t| format!("modify entry {handle} in table '{t}'"),
        );
        result
    }

    /// Applies `change` to entry `handle` of `table` if the table's rules and the budget allow.
    fn apply_change(
        &mut self,
        table: usize,
        handle: usize,
        change: EntryChange,
    ) -> Result<(), RuntimeError> {
        self.table_state(table)?.check_change(&change)?;
        let installed = self.entry(table, handle)?;
        let before = installed.footprint();
        let args = change
            .action
            .as_ref()
            .map_or(&installed.entry.action.args, |call| &call.args);
        let data = match &change.data {
            Some(data) => data.as_ref(),
            None => installed.data.as_deref(),
        };
        let after = budget::ENTRY_BYTES
            + installed.entry.matches.len() * budget::MATCH_BYTES
            + args.len() * budget::ARG_BYTES
            + ControllerData::footprint(data);
        self.budget.replace(before, after)?;
        let now_us = self.now_us();
        Ok(self.state.tables[table].apply_change(handle, change, now_us)?)
    }

    /// Gives entry `handle` an idle timeout of `ttl`, counted from now, or takes it away
    /// (`mt_set_entry_ttl`). A packet matching the entry restarts its count.
    pub fn set_idle_timeout(
        &mut self,
        table: usize,
        handle: usize,
        ttl: Option<Duration>,
    ) -> Result<(), RuntimeError> {
        self.table(table)?;
        let now_us = self.now_us();
        Ok(self.state.tables[table].set_idle_timeout(handle, ttl, now_us)?)
    }

    /// Whether an entry of table `table` has an idle timeout.
    pub fn has_idle_timeouts(&self, table: usize) -> Result<bool, RuntimeError> {
        self.table(table)?;
        Ok(self.state.tables[table].has_idle_timeouts())
    }

    /// The entries of table `table` that have gone their idle timeout without a hit, since
    /// their last hit or their last report, whichever is later (the ageing monitor's sweep,
    /// `sweep_entries`); each one's count starts again now.
    pub fn sweep_idle(&mut self, table: usize) -> Result<Vec<usize>, RuntimeError> {
        self.table(table)?;
        let now_us = self.now_us();
        Ok(self.state.tables[table].sweep_idle(now_us))
    }

    /// Removes entry `handle` (`mt_delete_entry`).
    pub fn remove_entry(&mut self, table: usize, handle: usize) -> Result<(), RuntimeError> {
        let result = self.table_state(table).map(|_| ()).and_then(|()| {
            let removed = self.state.tables[table].remove(handle)?;
            self.forget_entries(table, &[(handle, removed)]);
            Ok(())
        });
        self.trace_entry_write(
            table,
            &result,
            None,
            |t| format!("Removed entry {handle} from table '{t}'"),
            |t| format!("remove entry {handle} from table '{t}'"),
        );
        result
    }

    /// Removes every entry of table `table` (`mt_clear_entries`), unless its entries are const.
    pub fn clear_table(&mut self, table: usize) -> Result<(), RuntimeError> {
        self.table_state(table)?;
        let removed = self.state.tables[table].clear()?;
        self.forget_entries(table, &removed);
        Ok(())
    }

    /// Removes every entry of every table that is not const.
    pub fn clear_tables(&mut self) {
        for table in 0..self.program.tables.len() {
            let _ = self.clear_table(table);
        }
    }

    /// Refunds entries removed from `table` (with their handles) and forgets their direct
    /// meters.
    fn forget_entries(&mut self, table: usize, removed: &[(usize, Installed)]) {
        let meter = self.program.tables[table].direct_meter;
        for (handle, installed) in removed {
            self.budget.adjust(installed.footprint(), 0);
            if let Some(instance) = meter {
                self.state.meters.forget_direct(instance, *handle);
            }
        }
    }

    /// Entry `handle` of table `table`, with its direct counter.
    pub fn entry(&self, table: usize, handle: usize) -> Result<&Installed, RuntimeError> {
        let name = &self.table(table)?.name;
        self.state.tables[table]
            .entry(handle)
            .ok_or_else(|| TableError::NoEntry(name.clone(), handle).into())
    }

    /// When a packet last matched entry `handle` of table `table` or, until one does, when it
    /// was installed (µs of the switch's clock).
    pub fn last_hit_us(&self, table: usize, handle: usize) -> Result<u64, RuntimeError> {
        let name = &self.table(table)?.name;
        self.state.tables[table]
            .last_hit_us(handle)
            .ok_or_else(|| TableError::NoEntry(name.clone(), handle).into())
    }

    /// Every entry of table `table` with its handle, in the order of their handles' slots
    /// (`mt_get_entries`).
    pub fn entries(
        &self,
        table: usize,
    ) -> Result<impl Iterator<Item = (usize, &Installed)>, RuntimeError> {
        self.table(table)?;
        Ok(self.state.tables[table].installed())
    }

    /// The handle of the entry of table `table` with key `matches` and, if given, `priority`
    /// (`mt_get_entry_from_key`).
    pub fn entry_by_key(
        &self,
        table: usize,
        matches: &[FieldMatch],
        priority: Option<i64>,
    ) -> Result<Option<usize>, RuntimeError> {
        Ok(self.table_state(table)?.find(matches, priority))
    }

    /// Sets the default action (`mt_set_default_action`).
    pub fn set_default(&mut self, table: usize, call: ActionCall) -> Result<(), RuntimeError> {
        self.table_state(table)?.check_default(&call)?;
        self.trace_write(Level::Debug, |s| {
            let entry = trace::action_entry(&s.program, (&call).into());
            format!(
                "Set default entry for table '{}': {entry}",
                s.table_name(table)
            )
        });
        self.state.tables[table].default_action = call;
        Ok(())
    }

    /// The default action of table `table` (`mt_get_default_entry`).
    pub fn default_action(&self, table: usize) -> Result<&ActionCall, RuntimeError> {
        self.table(table)?;
        Ok(&self.state.tables[table].default_action)
    }

    /// What the controller keeps with entry `handle` of `table` (with the default entry, for
    /// `None`).
    pub fn entry_data(
        &self,
        table: usize,
        handle: Option<usize>,
    ) -> Result<Option<&ControllerData>, RuntimeError> {
        Ok(match handle {
            Some(h) => self.entry(table, h)?.data.as_deref(),
            None => {
                self.table(table)?;
                self.state.tables[table].default_data.as_deref()
            }
        })
    }

    /// Sets the default entry of `table` (P4Runtime's MODIFY of it): its action `call` (the
    /// program's default action for `None`) and what the controller keeps with it, whole or
    /// not at all.
    pub fn set_default_entry(
        &mut self,
        table: usize,
        call: Option<ActionCall>,
        data: Option<ControllerData>,
    ) -> Result<(), RuntimeError> {
        let call = match call {
            Some(call) => call,
            None => self.table(table)?.default_action.clone(),
        };
        self.table_state(table)?.check_default(&call)?;
        let before = ControllerData::footprint(self.entry_data(table, None)?);
        self.budget
            .replace(before, ControllerData::footprint(data.as_ref()))?;
        self.state.tables[table].default_data = data.map(Box::new);
        self.set_default(table, call)
    }

    // ---- action profiles and selectors ----

    /// The action profile or selector of `table`.
    fn profile_of(&self, table: usize) -> Result<usize, RuntimeError> {
        let t = self.table(table)?;
        t.profile
            .ok_or_else(|| TableError::NoProfile(t.name.clone()).into())
    }

    /// Adds (or replaces) member `member` of the action profile of `table`: an action of the
    /// table with its data (`mt_act_prof_add_member`).
    pub fn add_member(
        &mut self,
        table: usize,
        member: u32,
        call: ActionCall,
    ) -> Result<(), RuntimeError> {
        let profile = self.profile_of(table)?;
        self.table_state(table)?.check_action(&call)?;
        let members = &mut self.state.profiles[profile].members;
        let before = members.get(&member).map_or(0, member_footprint);
        self.budget.replace(before, member_footprint(&call))?;
        members.insert(member, call);
        Ok(())
    }

    /// Creates (or empties) group `group` of the action selector of `table`
    /// (`mt_act_prof_create_group`).
    pub fn create_selector_group(&mut self, table: usize, group: u32) -> Result<(), RuntimeError> {
        let profile = self.profile_of(table)?;
        let groups = &mut self.state.profiles[profile].groups;
        let before = groups.get(&group).map_or(0, |g| group_footprint(g.len()));
        self.budget.replace(before, group_footprint(0))?;
        groups.insert(group, Vec::new());
        Ok(())
    }

    /// Adds member `member` to group `group` of the action selector of `table`
    /// (`mt_act_prof_add_member_to_group`).
    pub fn add_to_group(
        &mut self,
        table: usize,
        group: u32,
        member: u32,
    ) -> Result<(), RuntimeError> {
        let index = self.profile_of(table)?;
        let profile = &mut self.state.profiles[index];
        if !profile.members.contains_key(&member) {
            return Err(TableError::NoMember("member", member).into());
        }
        let members = profile
            .groups
            .get_mut(&group)
            .ok_or(TableError::NoMember("group", group))?;
        self.budget.replace(0, budget::GROUP_MEMBER_BYTES)?;
        members.push(member);
        Ok(())
    }

    /// Installs an entry of a table with an action profile that runs member `member`
    /// (`mt_indirect_add_entry`).
    pub fn add_member_entry(
        &mut self,
        table: usize,
        matches: Vec<FieldMatch>,
        priority: i64,
        member: u32,
    ) -> Result<usize, RuntimeError> {
        let profile = self.profile_of(table)?;
        let call = self.state.profiles[profile]
            .members
            .get(&member)
            .cloned()
            .ok_or(TableError::NoMember("member", member))?;
        self.add_entry(
            table,
            Entry {
                matches,
                priority,
                action: call,
            },
        )
    }

    /// Installs an entry of a table with an action selector that runs a member of group
    /// `group`, picked by the hash of the selector keys (the default action while the group is
    /// empty) (`mt_indirect_ws_add_entry`).
    pub fn add_group_entry(
        &mut self,
        table: usize,
        matches: Vec<FieldMatch>,
        priority: i64,
        group: u32,
    ) -> Result<usize, RuntimeError> {
        let profile = self.profile_of(table)?;
        if !self.state.profiles[profile].groups.contains_key(&group) {
            return Err(TableError::NoMember("group", group).into());
        }
        let placeholder = self.state.tables[table].default_action.clone();
        let handle = self.add_entry(
            table,
            Entry {
                matches,
                priority,
                action: placeholder,
            },
        )?;
        self.state.tables[table].set_group(handle, group);
        Ok(handle)
    }

    // ---- parser value sets ----

    /// Adds a member to parser value set `instance` (`parse_vset_add`).
    pub fn value_set_add(
        &mut self,
        instance: usize,
        member: FieldMatch,
    ) -> Result<(), RuntimeError> {
        let i = self.instance(instance)?;
        match i.kind {
            InstanceKind::ValueSet { size, .. } => {
                if self.state.value_sets[instance].len() >= size as usize {
                    return Err(RuntimeError::ValueSetFull(i.name.clone()));
                }
                self.budget.replace(0, budget::VALUE_SET_MEMBER_BYTES)?;
                self.state.value_sets[instance].push(member);
                Ok(())
            }
            _ => Err(RuntimeError::WrongKind {
                name: i.name.clone(),
                want: "value set",
            }),
        }
    }

    // ---- the cells of stateful externs ----

    /// Cell `at` of instance `instance` of a stateful extern type whose cells hold `C` (a
    /// counter's or direct counter's [`CounterCell`], a register's `u128`, a meter's or
    /// direct meter's `Option<MeterConfig>`): `read_counters`, `mt_read_counters`,
    /// `register_read`, the P4Runtime cell entities.
    pub fn read_cell<C: Cell>(&self, instance: usize, at: CellIndex) -> Result<C, RuntimeError> {
        let at = self.cell_at::<C>(instance, at)?;
        (C::store().read)(&self.state, instance, at).ok_or(RuntimeError::NoInstance(instance))
    }

    /// Sets cell `at` of instance `instance` (as [`Switch::read_cell`]): `write_counters`,
    /// `mt_write_counters`, `register_write`, `meter_set_rates`, `mt_set_meter_rates`. A
    /// register's value is kept as given: whether it fits the register's width is the caller's
    /// check, which knows its syntax.
    pub fn write_cell<C: Cell>(
        &mut self,
        instance: usize,
        at: CellIndex,
        value: C,
    ) -> Result<(), RuntimeError> {
        let at = self.cell_at::<C>(instance, at)?;
        let now = self.now_us();
        (C::store().write)(&mut self.state, instance, at, value, now)
            .ok_or(RuntimeError::NoInstance(instance))
    }

    /// The number of cells of instance `instance` whose cells the program indexes.
    pub fn cell_count(&self, instance: usize) -> Result<usize, RuntimeError> {
        let i = self
            .program
            .instances
            .get(instance)
            .ok_or(RuntimeError::NoInstance(instance))?;
        i.kind
            .cells()
            .map(|n| n as usize)
            .ok_or_else(|| RuntimeError::WrongKind {
                name: i.name.clone(),
                want: "indexed extern",
            })
    }

    /// Checks that `instance` is of the extern type holding `C` that `at` addresses (indexed
    /// or direct), and that the cell is there: an index below its size, an installed entry of
    /// the table it is attached to.
    fn cell_at<C: Cell>(&self, instance: usize, at: CellIndex) -> Result<CellAt, RuntimeError> {
        let direct = matches!(at, CellIndex::Entry(_));
        let Some(object) = C::store().objects.iter().find(|o| o.direct == direct) else {
            return Err(RuntimeError::NoInstance(instance));
        };
        instance_of(&self.program, instance, object)?;
        match at {
            CellIndex::Index(index) => {
                let size = self.cell_count(instance)?;
                if index < size {
                    Ok(CellAt::Index(index))
                } else {
                    Err(past(object, index, size))
                }
            }
            CellIndex::Entry(handle) => {
                let table = self
                    .program
                    .tables
                    .iter()
                    .position(|t| {
                        t.direct_counter == Some(instance) || t.direct_meter == Some(instance)
                    })
                    .ok_or(RuntimeError::NoInstance(instance))?;
                self.entry(table, handle)?;
                Ok(CellAt::Entry { table, handle })
            }
        }
    }

    // ---- packet replication engine and mirroring ----

    /// Adds (or replaces) clone session `session` sending to `port` (`mirroring_add`).
    pub fn set_clone_session(&mut self, session: u32, port: u16) -> Result<(), RuntimeError> {
        let before = self.session_footprint(session);
        self.budget.replace(before, budget::SESSION_BYTES)?;
        self.mirroring.set(session, port);
        Ok(())
    }

    /// Removes clone session `session` (`mirroring_delete`).
    pub fn remove_clone_session(&mut self, session: u32) {
        self.budget.adjust(self.session_footprint(session), 0);
        self.mirroring.remove(session);
    }

    /// What clone session `session` is charged (nothing if there is none).
    fn session_footprint(&self, session: u32) -> usize {
        self.mirroring
            .port(session)
            .map_or(0, |_| budget::SESSION_BYTES)
    }

    /// The port clone session `session` sends to, if the session exists (`mirroring_get`).
    pub fn clone_session(&self, session: u32) -> Option<u16> {
        self.mirroring.port(session)
    }

    /// Makes multicast group `group` replicate to `replicas` (egress port, replication id),
    /// creating or replacing it.
    pub fn set_multicast_group(
        &mut self,
        group: u16,
        replicas: &[(u16, u16)],
    ) -> Result<(), RuntimeError> {
        // At most a node per replica, each in the group.
        let growth = budget::REPLICATION_ITEM_BYTES
            + replicas.len() * (budget::REPLICATION_ITEM_BYTES + 2 * budget::REPLICA_BYTES);
        self.on_replication(growth, |pre| {
            pre.set_group(group, replicas);
            Ok(())
        })
    }

    /// Removes multicast group `group` and its nodes (P4Runtime's delete of a group, whose
    /// replicas belong to it).
    pub fn remove_multicast_group(&mut self, group: u16) {
        let _ = self.on_replication(0, |pre| {
            pre.remove_group(group);
            Ok(())
        });
    }

    /// Creates multicast group `group`, empty (`mc_mgrp_create`).
    pub fn create_multicast_group(&mut self, group: u16) -> Result<(), RuntimeError> {
        self.on_replication(budget::REPLICATION_ITEM_BYTES, |pre| {
            pre.create_group(group);
            Ok(())
        })
    }

    /// Creates a replication node (`rid`, ports); returns its handle (`mc_node_create`).
    pub fn create_multicast_node(
        &mut self,
        rid: u16,
        ports: Vec<u16>,
    ) -> Result<usize, RuntimeError> {
        let growth = budget::REPLICATION_ITEM_BYTES + ports.len() * budget::REPLICA_BYTES;
        self.on_replication(growth, |pre| Ok(pre.create_node(rid, ports)))
    }

    /// Adds node `node` to group `group` (`mc_node_associate`).
    pub fn associate_node(&mut self, group: u16, node: usize) -> Result<(), RuntimeError> {
        self.on_replication(budget::REPLICA_BYTES, |pre| {
            pre.associate_node(group, node)
                .then_some(())
                .ok_or(RuntimeError::NoGroupOrNode { group, node })
        })
    }

    /// Removes multicast group `group`, leaving its nodes for other groups (`mc_mgrp_destroy`).
    pub fn destroy_multicast_group(&mut self, group: u16) -> Result<(), RuntimeError> {
        self.on_replication(0, |pre| {
            pre.destroy_group(group)
                .then_some(())
                .ok_or(RuntimeError::NoGroup(group))
        })
    }

    /// Takes node `node` out of group `group` (`mc_node_dissociate`).
    pub fn dissociate_node(&mut self, group: u16, node: usize) -> Result<(), RuntimeError> {
        self.on_replication(0, |pre| {
            pre.dissociate_node(group, node)
                .then_some(())
                .ok_or(RuntimeError::NoGroupOrNode { group, node })
        })
    }

    /// Changes the ports of replication node `node` (`mc_node_update`).
    pub fn update_multicast_node(
        &mut self,
        node: usize,
        ports: Vec<u16>,
    ) -> Result<(), RuntimeError> {
        let growth = ports.len() * budget::REPLICA_BYTES;
        self.on_replication(growth, |pre| {
            pre.update_node(node, ports)
                .then_some(())
                .ok_or(RuntimeError::NoNode(node))
        })
    }

    /// Destroys replication node `node`, taking it out of its groups (`mc_node_destroy`).
    pub fn destroy_multicast_node(&mut self, node: usize) -> Result<(), RuntimeError> {
        self.on_replication(0, |pre| {
            pre.destroy_node(node)
                .then_some(())
                .ok_or(RuntimeError::NoNode(node))
        })
    }

    /// Runs `change` on the replication engine if `growth` bytes (at least what it may add)
    /// fit the budget, and charges or refunds what it really changed.
    fn on_replication<R>(
        &mut self,
        growth: usize,
        change: impl FnOnce(&mut crate::pre::ReplicationEngine) -> Result<R, RuntimeError>,
    ) -> Result<R, RuntimeError> {
        self.budget.check(growth)?;
        let before = self.pre.footprint();
        let result = change(&mut self.pre);
        self.budget.adjust(before, self.pre.footprint());
        result
    }

    /// Every multicast group with its nodes' handles, by group id (`mc_get_entries`).
    pub fn multicast_groups(&self) -> Vec<(u16, Vec<usize>)> {
        self.pre.groups()
    }

    /// Every replication node: handle, replication id, ports (`mc_get_entries`).
    pub fn multicast_nodes(&self) -> impl Iterator<Item = (usize, u16, &[u16])> {
        self.pre.nodes()
    }

    // ---- the whole state ----

    /// Forgets everything the control plane set (entries, default actions, profiles, counters,
    /// registers, meters, value sets, multicast groups and nodes, clone sessions, queue
    /// settings) and every packet in flight, keeping the program and the clock
    /// (`reset_state`).
    pub fn reset_state(&mut self) {
        let limit = self.budget.limit();
        let compiled = self.compiled.take();
        *self = Switch::new(self.program.clone(), self.clock);
        self.budget.set_limit(limit);
        self.compiled = compiled;
    }

    // ---- the state budget ----

    /// The state budget: what the control plane's writes take, and the limit past which the
    /// switch refuses them ([`crate::budget`]).
    pub fn state_budget(&self) -> Budget {
        self.budget
    }

    /// Sets the state budget to `limit` bytes (what is in use stays, even above it).
    pub fn set_state_budget(&mut self, limit: usize) {
        self.budget.set_limit(limit);
    }

    /// Charges (or refunds) what the switch's owner keeps for the control plane beside the
    /// switch (a front door's copy of what it wrote): something charged `before` bytes now
    /// takes `after`. Growth that does not fit is refused, changing nothing.
    pub fn charge_owner_state(&mut self, before: usize, after: usize) -> Result<(), RuntimeError> {
        Ok(self.budget.replace(before, after)?)
    }

    // ---- queues ----

    /// Sets the depth (packets, 1..=[`tm::MAX_DEPTH`]) of queue `priority` of `port`; of all
    /// the port's queues when `priority` is `None`; of every port, including ports not seen yet,
    /// when `port` is `None` (`set_egress_queue_depth`, `set_all_egress_queue_depths`).
    pub fn set_queue_depth(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        depth: usize,
    ) -> Result<(), RuntimeError> {
        let depth = tm::depth(depth as u128)?;
        self.check_priority(priority)?;
        self.tm.set_depth(port, priority, depth);
        Ok(())
    }

    /// Sets the rate (packets per second, `None` unlimited) of queues chosen as by
    /// [`Self::set_queue_depth`] (`set_egress_queue_rate`, `set_all_egress_queue_rates`).
    pub fn set_queue_rate(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        rate_pps: Option<u64>,
    ) -> Result<(), RuntimeError> {
        self.check_priority(priority)?;
        self.tm.set_rate(port, priority, rate_pps);
        Ok(())
    }

    /// Sets the rate (packets per second, `None` unlimited) of `port` as a whole, or of every
    /// port, including ports not seen yet, when `port` is `None`: a link's rate, which the
    /// port's queues share as its scheduling says. BMv2 has no such call (its rates are per
    /// queue).
    pub fn set_port_rate(&mut self, port: Option<u16>, rate_pps: Option<u64>) {
        self.tm.set_port_rate(port, rate_pps);
    }

    /// The rate (packets per second, `None` unlimited) of `port` as a whole.
    pub fn port_rate(&self, port: u16) -> Option<u64> {
        self.tm.port_rate(port)
    }

    /// Makes the queues chosen as by [`Self::set_queue_depth`] strict (served before every
    /// other queue of their port, highest priority first) or shared by DWRR with the port's
    /// other non-strict queues. Every queue is strict by default, as in BMv2.
    pub fn set_queue_strict(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        strict: bool,
    ) -> Result<(), RuntimeError> {
        self.check_priority(priority)?;
        self.tm.set_strict(port, priority, strict);
        Ok(())
    }

    /// Sets the DWRR weight (1..=[`tm::MAX_WEIGHT`]) of the queues chosen as by
    /// [`Self::set_queue_depth`]: a non-strict queue is given weight × its port's base quantum
    /// bytes a round.
    pub fn set_queue_weight(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        weight: u32,
    ) -> Result<(), RuntimeError> {
        let weight = tm::weight(weight.into())?;
        self.check_priority(priority)?;
        self.tm.set_weight(port, priority, weight);
        Ok(())
    }

    /// Sets the DWRR base quantum ([`tm::MIN_QUANTUM`]..=[`tm::MAX_QUANTUM`] bytes) of `port`,
    /// or of every port, including ports not seen yet, when `port` is `None`.
    pub fn set_queue_quantum(&mut self, port: Option<u16>, bytes: u32) -> Result<(), RuntimeError> {
        let bytes = tm::quantum(bytes.into())?;
        self.tm.set_quantum(port, bytes);
        Ok(())
    }

    /// How `port`'s queues share it (strict set, weights, base quantum); the default for a
    /// port that has no queues yet.
    pub fn queue_scheduling(&self, port: u16) -> tm::Scheduling {
        self.tm.scheduling(port)
    }

    fn check_priority(&self, priority: Option<u8>) -> Result<(), RuntimeError> {
        if let Some(p) = priority {
            tm::priority(p.into())?;
        }
        Ok(())
    }

    /// The depth (packets) and rate (packets per second, `None` unlimited) of queue `priority`
    /// of `port`; the defaults for a port that has no queues yet.
    pub fn queue_config(&self, port: u16, priority: u8) -> (usize, Option<u64>) {
        self.tm.config(port, priority)
    }

    /// Packets waiting in queue `priority` of `port`.
    pub fn queue_occupancy(&self, port: u16, priority: u8) -> usize {
        self.tm.occupancy(port, priority)
    }

    /// Packets tail-dropped at queue `priority` of `port`.
    pub fn queue_drops(&self, port: u16, priority: u8) -> u64 {
        self.tm.dropped(port, priority)
    }

    /// The ports that have queues: those a packet has been queued for or a setting named.
    pub fn queue_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.tm.ports()
    }

    /// Sets the microburst threshold (packets, 1..=[`tm::MAX_DEPTH`]) and/or window (µs,
    /// 1..=[`tm::measures::MAX_BURST_WINDOW_US`]) of the queues chosen as by
    /// [`Self::set_queue_depth`]; `None` leaves one unchanged.
    pub fn set_queue_burst_rule(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
        threshold_packets: Option<u32>,
        window_us: Option<u64>,
    ) -> Result<(), RuntimeError> {
        let threshold = threshold_packets
            .map(|t| tm::burst_threshold(t.into()))
            .transpose()?;
        let window = window_us.map(|w| tm::burst_window(w.into())).transpose()?;
        self.check_priority(priority)?;
        self.tm.set_burst_rule(port, priority, threshold, window);
        Ok(())
    }

    /// Forgets what the queues chosen as by [`Self::set_queue_depth`] measured (sojourn times,
    /// occupancies, bursts): they measure afresh from now.
    pub fn reset_queue_measures(
        &mut self,
        port: Option<u16>,
        priority: Option<u8>,
    ) -> Result<(), RuntimeError> {
        self.check_priority(priority)?;
        let now = self.now_us();
        self.tm.reset_measures(port, priority, now);
        Ok(())
    }

    /// What queue `priority` of `port` measured (`None`: the port has no queues yet).
    pub fn queue_measures(&self, port: u16, priority: u8) -> Option<&tm::QueueMeasures> {
        self.tm.measures(port, priority)
    }

    /// The microburst rule of queue `priority` of `port`; the default for a port that has no
    /// queues yet.
    pub fn queue_burst_rule(&self, port: u16, priority: u8) -> tm::BurstRule {
        self.tm.burst_rule(port, priority)
    }

    // ---- what the switch counts ----

    /// Packets dropped (by the program, a full queue, a missing session or a loop limit).
    pub fn drops(&self) -> u64 {
        self.drops.total()
    }

    /// Failed `assert`/`assume` calls.
    pub fn assertion_failures(&self) -> u64 {
        self.state.assertion_failures
    }

    /// Blocks (controls, parsers, action and function bodies) the switch has entered in their
    /// compiled form ([`crate::switch::Execution::Compiled`]); 0 while it runs interpreted.
    pub fn compiled_block_runs(&self) -> u64 {
        self.state.compiled_block_runs
    }
}

/// Checks that `instance` of `program` is of the extern type `object`.
fn instance_of(program: &Program, instance: usize, object: &Object) -> Result<(), RuntimeError> {
    let Some(i) = program.instances.get(instance) else {
        return Err(RuntimeError::NoInstance(instance));
    };
    if i.kind.type_name() == object.p4 {
        Ok(())
    } else {
        Err(RuntimeError::WrongKind {
            name: i.name.clone(),
            want: object.noun,
        })
    }
}

/// What an action profile member running `call` is charged.
fn member_footprint(call: &ActionCall) -> usize {
    budget::PROFILE_ITEM_BYTES + call.args.len() * budget::ARG_BYTES
}

/// What an action selector's group of `members` members is charged.
fn group_footprint(members: usize) -> usize {
    budget::PROFILE_ITEM_BYTES + members * budget::GROUP_MEMBER_BYTES
}

/// The error of an index past the `size` cells of an instance of `object`.
fn past(object: &Object, index: usize, size: usize) -> RuntimeError {
    RuntimeError::Index {
        kind: object.noun,
        index: index as u128,
        size,
    }
}

/// The index of the table of `program` named `name` (full name, or a unique suffix after a dot).
pub fn table_id(program: &Program, name: &str) -> Option<usize> {
    find_by_name(program.tables.iter().map(|t| t.name.as_str()), name)
}

/// The index of action `name` among those of table `table` of `program`.
pub fn action_id(program: &Program, table: usize, name: &str) -> Option<usize> {
    let actions = &program.tables[table].actions;
    let names = actions.iter().map(|&a| program.actions[a].name.as_str());
    find_by_name(names, name).map(|i| actions[i])
}

/// The index of the extern instance of `program` named `name`.
pub fn instance_id(program: &Program, name: &str) -> Option<usize> {
    find_by_name(program.instances.iter().map(|i| i.name.as_str()), name)
}

/// The position of `name` in `names`: an exact match, else the only name ending in `.name`.
pub fn find_by_name<'a>(names: impl Iterator<Item = &'a str> + Clone, name: &str) -> Option<usize> {
    if let Some(i) = names.clone().position(|n| n == name) {
        return Some(i);
    }
    let suffix = format!(".{name}");
    let hits: Vec<usize> = names
        .enumerate()
        .filter(|(_, n)| n.ends_with(&suffix))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}
