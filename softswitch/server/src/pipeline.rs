//! A forwarding pipeline as P4Runtime sees it: the device config (the P4 source, or BMv2's JSON
//! as p4c-bm2-ss writes it), compiled or loaded, its
//! P4Info checked against the one the controller sent, and, once committed, the switch running
//! it with the P4Runtime-side state that belongs to it (replication entries as written, digest
//! settings; the metadata of table entries is kept with them, in the switch).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use p4runtime::p4::config::v1::{P4Info, Preamble};
use p4runtime::p4::tmp::P4DeviceConfig;
use p4runtime::p4::v1 as p4v1;
use p4runtime::p4info::{self, preambles_of};

use super::digests::Digests;
use super::idle::IdleSweep;
use softswitch_core::ir::Program;
use softswitch_core::switch::Switch;
use softswitch_frontend::ast::AggregateKind;
use softswitch_frontend::cpinfo::{CpInfo, DigestCp};
use softswitch_frontend::limits::MAX_SOURCE_BYTES;
use softswitch_frontend::preprocessor::{inline_includes, Includes};
use softswitch_frontend::source::{self, SourceMap};
use softswitch_frontend::types::{Type, Types};

/// The name the device config's source gets in diagnostics.
pub const DEVICE_CONFIG_NAME: &str = "device_config.p4";

/// A program compiled from a device config, with its P4Info (built on any thread, committed on
/// the engine thread).
pub struct Compiled {
    /// The lowered program.
    pub program: Program,
    /// What the control plane sees of it (digest names and types).
    pub control_plane: CpInfo,
    /// Its P4Info, as `softswitch p4info` writes it.
    pub info: P4Info,
    /// The P4Info the controller sent (else `info`), which GetForwardingPipelineConfig returns
    /// as it was set.
    pub given_info: P4Info,
    /// The device config as received (P4 source, BMv2 JSON, or JSON in PI's wrapper).
    pub device_config: Vec<u8>,
    /// The controller's cookie.
    pub cookie: u64,
}

impl Compiled {
    /// Compiles `device_config` (UTF-8 P4 source, as a P4Runtime client sends it; or BMv2's
    /// JSON, bare or wrapped in PI's `p4.tmp.P4DeviceConfig`, as simple_switch_grpc takes it)
    /// and checks that `p4info`, if given, describes it. The source must be self-contained: it may include
    /// the built-in headers only, never a file of this machine.
    pub fn new(
        device_config: Vec<u8>,
        p4info: Option<&P4Info>,
        cookie: u64,
    ) -> Result<Self, String> {
        if device_config.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "p4_device_config has {} bytes, more than the {MAX_SOURCE_BYTES} of a program \
                 (limits::MAX_SOURCE_BYTES)",
                device_config.len()
            ));
        }
        if softswitch_bmv2json::looks_like_bmv2_json(&device_config) {
            // What a controller written for simple_switch_grpc sends.
            return Self::from_bmv2_json(device_config, p4info, cookie);
        }
        if let Some(wrapped) = P4DeviceConfig::unwrap_from(&device_config) {
            // What PI's clients (the P4 tutorials' p4runtime_lib) send simple_switch_grpc.
            if !softswitch_bmv2json::looks_like_bmv2_json(&wrapped.device_data) {
                return Err(
                    "p4_device_config is a p4.tmp.P4DeviceConfig whose device_data is not \
                     BMv2's JSON"
                        .into(),
                );
            }
            let mut compiled = Self::from_bmv2_json(wrapped.device_data, p4info, cookie)?;
            // GetForwardingPipelineConfig returns the config as it was sent.
            compiled.device_config = device_config;
            return Ok(compiled);
        }
        let source = std::str::from_utf8(&device_config).map_err(|e| {
            format!(
                "p4_device_config must be the P4 source as UTF-8 text, BMv2's JSON, or a \
                 p4.tmp.P4DeviceConfig holding BMv2's JSON: {e}"
            )
        })?;
        let mut map = SourceMap::new();
        let file = map.add(DEVICE_CONFIG_NAME, source);
        Self::compile(
            map,
            file,
            Includes::BuiltinOnly,
            device_config,
            p4info,
            cookie,
        )
    }

    /// Compiles the program in file `path` (`softswitch run PROGRAM`), reading the files it
    /// includes; its device config, as GetForwardingPipelineConfig returns it, is the program
    /// with those files inlined.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let json = softswitch_bmv2json::limits::MAX_JSON_BYTES;
        let bytes = source::read_file(path, MAX_SOURCE_BYTES.max(json))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if softswitch_bmv2json::looks_like_bmv2_json(bytes.as_bytes()) {
            return Self::from_bmv2_json(bytes.into_bytes(), None, 0)
                .map_err(|e| format!("{}: {e}", path.display()));
        }
        if bytes.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "{}: {} bytes, more than the {MAX_SOURCE_BYTES} of a program \
                 (limits::MAX_SOURCE_BYTES)",
                path.display(),
                bytes.len()
            ));
        }
        let text = bytes;
        let mut map = SourceMap::new();
        let file = map.add(path.display().to_string(), text);
        let inlined = inline_includes(&mut map, file).map_err(|d| d.render(&map))?;
        // Compiled from the files rather than the inlined text, so diagnostics name them.
        Self::compile(map, file, Includes::Files, inlined.into_bytes(), None, 0)
    }

    /// Loads a BMv2 JSON device config (p4c-bm2-ss's output). With the controller's P4Info,
    /// that P4Info names the program's objects (each of its tables, actions and externs must
    /// be one of the JSON's, by name); without one, the P4Info is derived from the JSON's
    /// names as p4c derives ids from them.
    pub fn from_bmv2_json(
        device_config: Vec<u8>,
        p4info: Option<&P4Info>,
        cookie: u64,
    ) -> Result<Self, String> {
        let loaded = softswitch_bmv2json::load(&device_config).map_err(|e| e.to_string())?;
        let control_plane = bmv2_control_plane(&loaded);
        let compiled = softswitch_frontend::Compiled {
            program: loaded.program,
            control_plane,
            warnings: Vec::new(),
        };
        let info = match p4info {
            Some(theirs) => {
                names_in_program(&compiled.program, theirs)?;
                theirs.clone()
            }
            None => crate::p4info::p4info(&compiled, &SourceMap::new())
                .map_err(|d| d.render(&SourceMap::new()))?,
        };
        Ok(Compiled {
            program: compiled.program,
            control_plane: compiled.control_plane,
            given_info: info.clone(),
            info,
            device_config,
            cookie,
        })
    }

    fn compile(
        mut map: SourceMap,
        file: u32,
        includes: Includes,
        device_config: Vec<u8>,
        p4info: Option<&P4Info>,
        cookie: u64,
    ) -> Result<Self, String> {
        let compiled = softswitch_frontend::compile_with(&mut map, file, includes)
            .map_err(|d| d.render(&map))?;
        let info = crate::p4info::p4info(&compiled, &map).map_err(|d| d.render(&map))?;
        if let Some(theirs) = p4info {
            same_program(&info, theirs)?;
        }
        Ok(Compiled {
            program: compiled.program,
            control_plane: compiled.control_plane,
            given_info: p4info.unwrap_or(&info).clone(),
            info,
            device_config,
            cookie,
        })
    }
}

/// What the control plane sees of a program loaded from BMv2 JSON: its names only (the JSON
/// keeps no annotations, digest types or controller headers).
fn bmv2_control_plane(loaded: &softswitch_bmv2json::Loaded) -> CpInfo {
    let p = &loaded.program;
    // Each learn list's data is a struct of its fields, named as p4c names the digest.
    let mut types = Types::default();
    let mut digests = Vec::new();
    for d in &loaded.digests {
        let fields = d
            .fields
            .iter()
            .map(|(name, width)| {
                let ty = Type::Bits {
                    width: *width,
                    signed: false,
                };
                (name.clone(), ty, Vec::new())
            })
            .collect();
        let data = types.aggregate(d.name.clone(), AggregateKind::Struct, fields, 0);
        types.aggregates.push(data);
        digests.push(DigestCp {
            name: d.name.clone(),
            ty: Type::Aggregate(types.aggregates.len() - 1),
        });
    }
    CpInfo {
        tables: p
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| softswitch_frontend::cpinfo::TableCp {
                annotations: Vec::new(),
                keys: vec![Vec::new(); t.keys.len()],
                action_refs: vec![Vec::new(); t.actions.len()],
                default_written: true,
                has_entries: loaded.tables_with_entries.get(i).copied().unwrap_or(false),
                supports_timeout: loaded.tables_with_timeout.get(i).copied().unwrap_or(false),
            })
            .collect(),
        actions: vec![Vec::new(); p.actions.len()],
        action_params: p
            .actions
            .iter()
            .map(|a| {
                let params = p.bodies[a.body].params.iter().filter(|x| x.action_data);
                vec![Vec::new(); params.count()]
            })
            .collect(),
        action_param_types: p
            .actions
            .iter()
            .map(|a| {
                let params = p.bodies[a.body].params.iter().filter(|x| x.action_data);
                params
                    .map(|x| softswitch_frontend::types::Type::Bits {
                        width: x.width,
                        signed: false,
                    })
                    .collect()
            })
            .collect(),
        instances: vec![Vec::new(); p.instances.len()],
        digests,
        types,
        ..CpInfo::default()
    }
}

/// Checks that every table, action and extern the controller's P4Info names is the program's.
fn names_in_program(program: &Program, info: &P4Info) -> Result<(), String> {
    let missing = |what: &str, names: Vec<&str>, ours: Vec<&str>| -> Result<(), String> {
        let lacking: Vec<&str> = names.into_iter().filter(|n| !ours.contains(n)).collect();
        if lacking.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the P4Info does not describe the BMv2 JSON in p4_device_config: its {what} \
                 {lacking:?} are not the program's"
            ))
        }
    };
    // An entity without a preamble has no name to check (nor an id to be named by).
    fn names<'a>(preambles: impl Iterator<Item = &'a Preamble>) -> Vec<&'a str> {
        preambles.map(|p| p.name.as_str()).collect()
    }
    let [tables, actions, instances] = program_names(program);
    missing("tables", names(preambles_of(&info.tables)), tables)?;
    missing("actions", names(preambles_of(&info.actions)), actions)?;
    missing(
        "externs",
        names(p4info::instance_preambles(info)),
        instances,
    )
}

/// The names of the program's tables, actions and extern instances, each in index order.
fn program_names(program: &Program) -> [Vec<&str>; 3] {
    [
        program.tables.iter().map(|t| t.name.as_str()).collect(),
        program.actions.iter().map(|a| a.name.as_str()).collect(),
        program.instances.iter().map(|i| i.name.as_str()).collect(),
    ]
}

/// The running pipeline.
pub struct Pipeline {
    /// The switch running the program.
    pub switch: Switch,
    /// What the control plane sees of the program.
    pub control_plane: CpInfo,
    /// The program's P4Info.
    pub info: P4Info,
    /// The P4Info as the controller sent it.
    pub given_info: P4Info,
    /// P4Info ids to program indices.
    pub index: Index,
    /// The device config (P4 source).
    pub device_config: Vec<u8>,
    /// The controller's cookie.
    pub cookie: u64,
    /// Multicast groups as written, by group id.
    pub multicast_groups: BTreeMap<u32, p4v1::MulticastGroupEntry>,
    /// Clone sessions as written, by session id.
    pub clone_sessions: BTreeMap<u32, p4v1::CloneSessionEntry>,
    /// Digest settings, buffered digest messages and the cache of those sent.
    pub digests: Digests,
    /// The tables swept for idle entries, and when next.
    pub idle: IdleSweep,
}

impl Pipeline {
    /// The pipeline of `compiled`, on a new switch reading `clock`.
    pub fn new(compiled: Compiled, clock: softswitch_core::switch::Clock) -> Self {
        let switch = Switch::new(compiled.program, clock);
        let index = Index::new(switch.program(), &compiled.control_plane, &compiled.info);
        let idle = IdleSweep::new(&compiled.info, &index, std::time::Instant::now());
        Pipeline {
            switch,
            control_plane: compiled.control_plane,
            info: compiled.info,
            given_info: compiled.given_info,
            index,
            device_config: compiled.device_config,
            cookie: compiled.cookie,
            multicast_groups: BTreeMap::new(),
            clone_sessions: BTreeMap::new(),
            digests: Digests::default(),
            idle,
        }
    }
}

impl softswitch_device::engine::Pipeline for Pipeline {
    fn switch(&self) -> &Switch {
        &self.switch
    }

    fn switch_mut(&mut self) -> &mut Switch {
        &mut self.switch
    }

    fn next_deadline(&self) -> Option<std::time::Instant> {
        let idle = self.idle.next_deadline(&self.switch);
        self.digests.next_deadline().into_iter().chain(idle).min()
    }
}

/// P4Info ids to the program's tables, actions, extern instances and digests.
#[derive(Debug, Default)]
pub struct Index {
    /// Table id → table index.
    pub tables: HashMap<u32, usize>,
    /// Action id → action index.
    pub actions: HashMap<u32, usize>,
    /// Counter, direct counter, meter, register or action profile id → instance index.
    pub instances: HashMap<u32, usize>,
    /// Digest index → digest id.
    pub digests: Vec<u32>,
}

impl Index {
    fn new(program: &Program, control_plane: &CpInfo, info: &P4Info) -> Self {
        // A controller's P4Info (a BMv2 JSON's is used as sent) may lack a preamble: such an
        // entity has no id to index, so requests cannot name it.
        fn by_name<'a>(preambles: impl Iterator<Item = &'a Preamble>) -> HashMap<&'a str, u32> {
            preambles.map(|p| (p.name.as_str(), p.id)).collect()
        }
        let index = |ids: HashMap<&str, u32>, names: Vec<&str>| -> HashMap<u32, usize> {
            let at = |(i, name): (usize, &str)| ids.get(name).map(|&id| (id, i));
            names.into_iter().enumerate().filter_map(at).collect()
        };
        let [tables, actions, instances] = program_names(program);
        let digests = by_name(preambles_of(&info.digests));
        Index {
            tables: index(by_name(preambles_of(&info.tables)), tables),
            actions: index(by_name(preambles_of(&info.actions)), actions),
            instances: index(by_name(p4info::instance_preambles(info)), instances),
            digests: control_plane
                .digests
                .iter()
                .map(|d| digests.get(d.name.as_str()).copied().unwrap_or(0))
                .collect(),
        }
    }
}

/// Checks that the controller's P4Info describes the program ours was made from: the same
/// tables (match fields, actions), actions (parameters), externs, digests and controller
/// metadata, with the same ids and names. Annotations, documentation and `type_info` may
/// differ (another compiler's version may write them differently).
pub fn same_program(ours: &P4Info, theirs: &P4Info) -> Result<(), String> {
    fn names<T>(
        what: &str,
        ours: &[T],
        theirs: &[T],
        key: impl Fn(&T) -> String,
    ) -> Result<(), String> {
        let mut a: Vec<String> = ours.iter().map(&key).collect();
        let mut b: Vec<String> = theirs.iter().map(&key).collect();
        a.sort();
        b.sort();
        if a == b {
            return Ok(());
        }
        let missing: Vec<&String> = a.iter().filter(|x| !b.contains(x)).collect();
        let extra: Vec<&String> = b.iter().filter(|x| !a.contains(x)).collect();
        Err(format!(
            "the P4Info does not describe the program in p4_device_config: {what} differ \
             (program has, P4Info lacks: {missing:?}; P4Info has, program lacks: {extra:?})"
        ))
    }
    /// Each of `fields` as `id:name:width`.
    fn fields<T: p4info::Field>(of: &[T]) -> Vec<String> {
        let field = |(id, name, width)| format!("{id}:{name}:{width}");
        p4info::fields_of(of).into_iter().map(field).collect()
    }
    let pre = |p: &Option<p4runtime::p4::config::v1::Preamble>| {
        p.as_ref()
            .map(|p| format!("{} (id {})", p.name, p.id))
            .unwrap_or_default()
    };
    names("tables", &ours.tables, &theirs.tables, |t| {
        let fields: Vec<String> = t
            .match_fields
            .iter()
            .map(|f| format!("{}:{}:{}:{:?}", f.id, f.name, f.bitwidth, f.r#match))
            .collect();
        let mut actions: Vec<u32> = t.action_refs.iter().map(|a| a.id).collect();
        actions.sort_unstable();
        format!("{} keys {fields:?} actions {actions:?}", pre(&t.preamble))
    })?;
    names("actions", &ours.actions, &theirs.actions, |a| {
        format!("{} params {:?}", pre(&a.preamble), fields(&a.params))
    })?;
    names("counters", &ours.counters, &theirs.counters, |x| {
        pre(&x.preamble)
    })?;
    names(
        "direct counters",
        &ours.direct_counters,
        &theirs.direct_counters,
        |x| pre(&x.preamble),
    )?;
    names("meters", &ours.meters, &theirs.meters, |x| pre(&x.preamble))?;
    names("registers", &ours.registers, &theirs.registers, |x| {
        format!("{} size {}", pre(&x.preamble), x.size)
    })?;
    names(
        "action profiles",
        &ours.action_profiles,
        &theirs.action_profiles,
        |x| pre(&x.preamble),
    )?;
    names("digests", &ours.digests, &theirs.digests, |x| {
        pre(&x.preamble)
    })?;
    names(
        "controller packet metadata",
        &ours.controller_packet_metadata,
        &theirs.controller_packet_metadata,
        |x| format!("{} {:?}", pre(&x.preamble), fields(&x.metadata)),
    )
}
