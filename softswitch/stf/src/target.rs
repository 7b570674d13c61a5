//! What the STF runner drives: a switch that takes packets and control-plane operations and
//! gives back the packets it sent. softswitch's [`Switch`] is one, on its virtual clock; BMv2's
//! `simple_switch` is another ([`crate::bmv2::Bmv2Target`]). Names in a test are resolved
//! against the target's [`Program`] (softswitch's front end), so both targets read a test alike.

use softswitch_core::ir::{ActionCall, Entry, FieldMatch, Program};
use softswitch_core::meter::MeterConfig;
use softswitch_core::runtime::{self, CellIndex, RuntimeError};
use softswitch_core::switch::Switch;
use softswitch_core::table::CounterCell;

/// A target's refusal or failure, in words.
pub type TargetResult<T> = Result<T, String>;

/// The words of a refusal of softswitch's runtime interface.
fn refusal(e: RuntimeError) -> String {
    e.to_string()
}

/// An entry of a table with an action profile or selector, as [`Entry`] is of a direct table:
/// what it matches, its priority, and what it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndirectEntry {
    /// One match per key.
    pub matches: Vec<FieldMatch>,
    /// Priority (higher wins).
    pub priority: i64,
    /// The member or group it runs.
    pub runs: Indirect,
}

/// What an entry of a table with an action profile or selector runs: the test's id of a
/// member, or of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indirect {
    /// A member of the table's action profile.
    Member(u32),
    /// A group of the table's action selector.
    Group(u32),
}

/// A packet a target sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Egress port.
    pub port: u16,
    /// Bytes.
    pub data: Vec<u8>,
    /// Which of the test's packets (counted from 0) caused it, when the target knows; else it
    /// is taken to come from the last packet sent before it was collected.
    pub packet: Option<usize>,
}

/// The queues a setting applies to: every queue without a port, every priority of the port
/// without a priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queues {
    /// The egress port, if one.
    pub port: Option<u16>,
    /// The priority of that port, if one.
    pub priority: Option<u8>,
}

/// A switch an STF test runs against.
pub trait Target {
    /// The program, as softswitch's front end lowered it: names, keys, widths, parameters.
    fn program(&self) -> &Program;
    /// Sends `data` into `port`.
    fn send(&mut self, port: u16, data: Vec<u8>) -> TargetResult<()>;
    /// Returns once every packet sent has been processed and every queue is empty.
    fn wait(&mut self) -> TargetResult<()>;
    /// Lets `us` microseconds pass.
    fn advance(&mut self, us: u64) -> TargetResult<()>;
    /// The packets sent since the last call, in the order they left.
    fn take_outputs(&mut self) -> TargetResult<Vec<Sent>>;
    /// Installs an entry; returns its handle.
    fn add_entry(&mut self, table: usize, entry: Entry) -> TargetResult<usize>;
    /// Installs an entry that runs a member of the table's action profile, or a member of a
    /// group of its action selector; returns its handle.
    fn add_indirect_entry(&mut self, table: usize, entry: IndirectEntry) -> TargetResult<usize>;
    /// Removes entry `handle`.
    fn remove_entry(&mut self, table: usize, handle: usize) -> TargetResult<()>;
    /// Removes every entry of every table the control plane may change.
    fn clear_tables(&mut self) -> TargetResult<()>;
    /// Sets a table's default action.
    fn set_default(&mut self, table: usize, call: ActionCall) -> TargetResult<()>;
    /// Adds member `member` (an action with its data) to the table's action profile.
    fn add_member(&mut self, table: usize, member: u32, call: ActionCall) -> TargetResult<()>;
    /// Creates group `group` of the table's action selector.
    fn create_selector_group(&mut self, table: usize, group: u32) -> TargetResult<()>;
    /// Adds member `member` to group `group`.
    fn add_to_group(&mut self, table: usize, group: u32, member: u32) -> TargetResult<()>;
    /// Adds a member to parser value set `instance`.
    fn value_set_add(&mut self, instance: usize, member: FieldMatch) -> TargetResult<()>;
    /// Makes clone session `session` send to `port`.
    fn set_clone_session(&mut self, session: u32, port: u16) -> TargetResult<()>;
    /// Creates multicast group `group`.
    fn create_multicast_group(&mut self, group: u16) -> TargetResult<()>;
    /// Creates a replication node (`rid`, ports); returns its handle (0, 1, ... in creation
    /// order).
    fn create_multicast_node(&mut self, rid: u16, ports: Vec<u16>) -> TargetResult<usize>;
    /// Adds node `node` to group `group`.
    fn associate_node(&mut self, group: u16, node: usize) -> TargetResult<()>;
    /// Sets the depth in packets of queues.
    fn set_queue_depth(&mut self, queues: Queues, packets: usize) -> TargetResult<()>;
    /// Sets the rate in packets per second of queues; `None` is unlimited.
    fn set_queue_rate(&mut self, queues: Queues, pps: Option<u64>) -> TargetResult<()>;
    /// A cell of counter or direct counter `instance`.
    fn counter(&mut self, instance: usize, cell: CellIndex) -> TargetResult<CounterCell>;
    /// Cell `index` of register `instance`.
    fn register(&mut self, instance: usize, index: usize) -> TargetResult<u128>;
    /// Every cell of register `instance`, in index order.
    fn register_cells(&mut self, instance: usize) -> TargetResult<Vec<u128>> {
        // A register is the indexed type whose cells hold a P4 value.
        let kind = &self.program().instances[instance].kind;
        let Some(size) = kind.cells().filter(|_| kind.cell_width().is_some()) else {
            return Err("not a register".into());
        };
        (0..size as usize)
            .map(|i| self.register(instance, i))
            .collect()
    }

    /// Writes cell `index` of register `instance`.
    fn set_register(&mut self, instance: usize, index: usize, value: u128) -> TargetResult<()>;
    /// Configures a cell of meter `instance`.
    fn configure_meter(
        &mut self,
        instance: usize,
        cell: CellIndex,
        config: MeterConfig,
    ) -> TargetResult<()>;
    /// How many `assert`/`assume` calls failed.
    fn assertion_failures(&self) -> u64;

    /// The index of the table named `name` (full name, or a unique suffix after a dot).
    fn table_id(&self, name: &str) -> Option<usize> {
        runtime::table_id(self.program(), name)
    }

    /// The index of action `name` among those of table `table`.
    fn action_id(&self, table: usize, name: &str) -> Option<usize> {
        runtime::action_id(self.program(), table, name)
    }

    /// The index of the extern instance named `name`.
    fn instance_id(&self, name: &str) -> Option<usize> {
        runtime::instance_id(self.program(), name)
    }
}

impl Target for Switch {
    fn program(&self) -> &Program {
        Switch::program(self)
    }

    fn send(&mut self, port: u16, data: Vec<u8>) -> TargetResult<()> {
        self.receive(port, data);
        Ok(())
    }

    fn wait(&mut self) -> TargetResult<()> {
        self.drain();
        Ok(())
    }

    fn advance(&mut self, us: u64) -> TargetResult<()> {
        Switch::advance(self, us);
        Ok(())
    }

    fn take_outputs(&mut self) -> TargetResult<Vec<Sent>> {
        Ok(self
            .drain_outputs()
            .map(|o| Sent {
                port: o.port,
                data: o.data,
                packet: None,
            })
            .collect())
    }

    fn add_entry(&mut self, table: usize, entry: Entry) -> TargetResult<usize> {
        Switch::add_entry(self, table, entry).map_err(refusal)
    }

    fn add_indirect_entry(&mut self, table: usize, entry: IndirectEntry) -> TargetResult<usize> {
        let IndirectEntry {
            matches,
            priority,
            runs,
        } = entry;
        match runs {
            Indirect::Member(member) => {
                Switch::add_member_entry(self, table, matches, priority, member)
            }
            Indirect::Group(group) => {
                Switch::add_group_entry(self, table, matches, priority, group)
            }
        }
        .map_err(refusal)
    }

    fn remove_entry(&mut self, table: usize, handle: usize) -> TargetResult<()> {
        Switch::remove_entry(self, table, handle).map_err(refusal)
    }

    fn clear_tables(&mut self) -> TargetResult<()> {
        Switch::clear_tables(self);
        Ok(())
    }

    fn set_default(&mut self, table: usize, call: ActionCall) -> TargetResult<()> {
        Switch::set_default(self, table, call).map_err(refusal)
    }

    fn add_member(&mut self, table: usize, member: u32, call: ActionCall) -> TargetResult<()> {
        Switch::add_member(self, table, member, call).map_err(refusal)
    }

    fn create_selector_group(&mut self, table: usize, group: u32) -> TargetResult<()> {
        Switch::create_selector_group(self, table, group).map_err(refusal)
    }

    fn add_to_group(&mut self, table: usize, group: u32, member: u32) -> TargetResult<()> {
        Switch::add_to_group(self, table, group, member).map_err(refusal)
    }

    fn value_set_add(&mut self, instance: usize, member: FieldMatch) -> TargetResult<()> {
        Switch::value_set_add(self, instance, member).map_err(refusal)
    }

    fn set_clone_session(&mut self, session: u32, port: u16) -> TargetResult<()> {
        Switch::set_clone_session(self, session, port).map_err(refusal)
    }

    fn create_multicast_group(&mut self, group: u16) -> TargetResult<()> {
        Switch::create_multicast_group(self, group).map_err(refusal)
    }

    fn create_multicast_node(&mut self, rid: u16, ports: Vec<u16>) -> TargetResult<usize> {
        Switch::create_multicast_node(self, rid, ports).map_err(refusal)
    }

    fn associate_node(&mut self, group: u16, node: usize) -> TargetResult<()> {
        Switch::associate_node(self, group, node).map_err(refusal)
    }

    fn set_queue_depth(&mut self, queues: Queues, packets: usize) -> TargetResult<()> {
        Switch::set_queue_depth(self, queues.port, queues.priority, packets).map_err(refusal)
    }

    fn set_queue_rate(&mut self, queues: Queues, pps: Option<u64>) -> TargetResult<()> {
        Switch::set_queue_rate(self, queues.port, queues.priority, pps).map_err(refusal)
    }

    fn counter(&mut self, instance: usize, cell: CellIndex) -> TargetResult<CounterCell> {
        self.read_cell(instance, cell).map_err(refusal)
    }

    fn register(&mut self, instance: usize, index: usize) -> TargetResult<u128> {
        self.read_cell(instance, CellIndex::Index(index))
            .map_err(refusal)
    }

    fn set_register(&mut self, instance: usize, index: usize, value: u128) -> TargetResult<()> {
        self.write_cell(instance, CellIndex::Index(index), value)
            .map_err(refusal)
    }

    fn configure_meter(
        &mut self,
        instance: usize,
        cell: CellIndex,
        config: MeterConfig,
    ) -> TargetResult<()> {
        self.write_cell(instance, cell, Some(config))
            .map_err(refusal)
    }

    fn assertion_failures(&self) -> u64 {
        Switch::assertion_failures(self)
    }
}
