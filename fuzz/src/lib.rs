//! The fuzz targets: one function per parser that reads untrusted bytes, each taking any bytes
//! and answering with a result or an error, never a panic, a hang or unbounded memory. `cargo
//! fuzz` drives them through the binaries in `fuzz_targets/` (feature `libfuzzer`); `cargo test`
//! replays their committed corpus (`corpus/TARGET/`) through the same functions
//! (`tests/corpus.rs`). docs/ARCHITECTURE.md, "Limits and untrusted input", says how to run them.
//!
//! The workload targets read workloads, htsim connection matrices and size CDFs with the
//! `workload` crate, and expand what they read.
//!
//! The programs the targets run against are test programs of softswitch: `switch.p4` (every
//! match kind, counters, a register, a digest, multicast, packet I/O), the P4Runtime server
//! tests' program, and `stateful.p4` (register, counters, clones, multicast), an STF corpus
//! program.
#![forbid(unsafe_code)]

use std::cell::OnceCell;

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1 as p4v1;
use prost::Message as _;
use softswitch_core::switch::{Clock, Switch};
use softswitch_frontend::source::SourceMap;
use softswitch_frontend::Compiled;
use softswitch_server::{entities, pipeline, thrift, Device};

/// A fuzz target: takes any bytes.
pub type Target = fn(&[u8]);

/// Every target, by the name of its binary and corpus directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("frontend", frontend),
    ("bmv2_json", bmv2_json),
    ("stf", stf),
    ("p4rt_write", p4rt_write),
    ("p4rt_set_pipeline", p4rt_set_pipeline),
    ("sim_runtime_json", sim_runtime_json),
    ("thrift_calls", thrift_calls),
    ("workload", workload),
    ("htsim_matrix", htsim_matrix),
    ("size_cdf", size_cdf),
    ("runtime_json", runtime_json),
    ("host_config", host_config),
    ("agent_config", agent_config),
    ("topology_json", topology_json),
    ("p4app_json", p4app_json),
];

const SWITCH_P4: &str = include_str!("../../softswitch/tests/server/switch.p4");
const STATEFUL_P4: &str = include_str!("../../softswitch/tests/corpus/stateful.p4");

thread_local! {
    // The test programs, compiled once per thread (the targets run on one thread; a `Switch`
    // is not `Send`).
    static SWITCH: OnceCell<(Compiled, P4Info)> = const { OnceCell::new() };
    static STATEFUL: OnceCell<(Compiled, P4Info)> = const { OnceCell::new() };
    // A device running `switch.p4` and BMv2's Thrift services over it, started once per
    // thread (its engine is a thread of its own).
    static THRIFT: OnceCell<(Device, thrift::Services)> = const { OnceCell::new() };
}

/// `source` compiled, with its P4Info.
fn compile(source: &str) -> (Compiled, P4Info) {
    let mut map = SourceMap::new();
    let file = map.add("fuzz.p4", source);
    let compiled = softswitch_frontend::compile(&mut map, file).expect("the test program compiles");
    let info = softswitch_server::p4info::p4info(&compiled, &map).expect("it has a P4Info");
    (compiled, info)
}

/// `switch.p4`, compiled, with its P4Info.
fn switch_p4() -> (Compiled, P4Info) {
    SWITCH.with(|c| c.get_or_init(|| compile(SWITCH_P4)).clone())
}

/// `stateful.p4`, compiled.
fn stateful_p4() -> softswitch_core::ir::Program {
    STATEFUL.with(|c| c.get_or_init(|| compile(STATEFUL_P4)).0.program.clone())
}

/// A P4Runtime pipeline of `switch.p4`, as the server holds after SetForwardingPipelineConfig.
fn switch_pipeline() -> pipeline::Pipeline {
    let (
        Compiled {
            program,
            control_plane,
            ..
        },
        info,
    ) = switch_p4();
    let compiled = pipeline::Compiled {
        program,
        control_plane,
        given_info: info.clone(),
        info,
        device_config: SWITCH_P4.as_bytes().to_vec(),
        cookie: 0,
    };
    pipeline::Pipeline::new(compiled, Clock::Virtual(0))
}

/// P4 source (a file, or a device config's text): compiles to a program or a diagnostic that
/// renders.
pub fn frontend(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let mut map = SourceMap::new();
        let file = map.add("fuzz.p4", text);
        if let Err(d) = softswitch_frontend::compile(&mut map, file) {
            let _ = d.render(&map);
        }
    }
}

/// A BMv2 JSON program (a device config): loads to a program or an error; a program loaded
/// runs packets (the IR of untrusted JSON must not make the interpreter panic either).
pub fn bmv2_json(data: &[u8]) {
    let Ok(loaded) = softswitch_bmv2json::load(data) else {
        return;
    };
    let mut switch = Switch::new(loaded.program, Clock::Virtual(0));
    for (port, len) in [(1u16, 14usize), (2, 64), (0, 0)] {
        switch.receive(port, (0..len).map(|i| i as u8).collect());
    }
    switch.drain();
    switch.drain_outputs().for_each(drop);
}

/// An STF test against `stateful.p4`: runs to a report or a diagnostic that renders.
pub fn stf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut switch = Switch::new(stateful_p4(), Clock::Virtual(0));
    let mut map = SourceMap::new();
    let file = map.add("fuzz.stf", text);
    if let Err(d) = softswitch_stf::run(&map, file, &mut switch) {
        let _ = d.render(&map);
    }
}

/// A P4Runtime WriteRequest (protobuf bytes) applied to a `switch.p4` pipeline as the server
/// applies it, update by update, then read back whole; the batch's error details must stay
/// within what standard gRPC clients accept.
pub fn p4rt_write(data: &[u8]) {
    let Ok(request) = p4v1::WriteRequest::decode(data) else {
        return;
    };
    let mut pipeline = switch_pipeline();
    let results = request
        .updates
        .iter()
        .map(|u| match entities::write(&mut pipeline, u) {
            Ok(()) => p4runtime::status::update_ok(),
            Err(s) => p4runtime::status::update_error(s.code(), s.message()),
        })
        .collect();
    if let Err(status) = p4runtime::status::batch_result("updates", results) {
        assert!(status.details().len() <= p4runtime::status::DETAILS_BUDGET);
    }
    let everything = [
        p4v1::entity::Entity::TableEntry(Default::default()),
        p4v1::entity::Entity::CounterEntry(Default::default()),
        p4v1::entity::Entity::RegisterEntry(Default::default()),
        p4v1::entity::Entity::PacketReplicationEngineEntry(Default::default()),
    ];
    for filter in everything {
        let filter = p4v1::Entity {
            entity: Some(filter),
        };
        let _ = entities::read(&pipeline, &filter, &mut Vec::new());
    }
}

/// A P4Runtime SetForwardingPipelineConfigRequest (protobuf bytes): its config compiled and its
/// P4Info checked as the server does.
pub fn p4rt_set_pipeline(data: &[u8]) {
    let Ok(request) = p4v1::SetForwardingPipelineConfigRequest::decode(data) else {
        return;
    };
    if let Some(config) = request.config {
        let cookie = config.cookie.map_or(0, |c| c.cookie);
        let _ = pipeline::Compiled::new(config.p4_device_config, config.p4info.as_ref(), cookie);
    }
}

/// A workload as `lossless sim --workload` reads it: a short form when the text begins with a
/// kind and a colon, else a TOML workload file; read, shown, and expanded onto 16 endpoints.
pub fn workload(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sources = workload::Sources::default();
    let read = match text.split_once(':') {
        Some((kind, _)) if !kind.contains(['\n', '[', '=']) => {
            workload::Workload::parse_short(text, &sources)
        }
        _ => workload::Workload::parse_toml(text, std::path::Path::new("fuzz.toml"), &sources),
    };
    if let Ok(w) = read {
        w.parts().iter().for_each(|p| drop(p.to_string()));
        let endpoints = workload::Endpoints {
            count: 16,
            rate_bps: 100_000_000_000,
        };
        let _ = workload::expand(&w, &endpoints, 1);
    }
}

/// An htsim connection matrix: read, its triggers resolved into dependencies.
pub fn htsim_matrix(data: &[u8]) {
    let _ = workload::Matrix::from_reader(data, std::path::Path::new("fuzz.cm"));
}

/// A size-CDF file: read, and its mean and sizes at several points computed.
pub fn size_cdf(data: &[u8]) {
    if let Ok(cdf) = workload::cdf::SizeCdf::from_reader(data, std::path::Path::new("fuzz.cdf")) {
        let _ = cdf.mean();
        for u in [0.0, 0.25, 0.5, 0.999_999] {
            let _ = cdf.size_at(u);
        }
    }
}

/// A runtime JSON (p4values' reader) applied by the simulator to a `switch.p4` switch.
pub fn sim_runtime_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = sim::runtime::RuntimeConfig::parse(text) {
        let mut switch = Switch::new(switch_p4().0.program, Clock::Virtual(0));
        let _ = sim::runtime::apply(&config, &mut switch);
    }
}

/// A runtime JSON (p4values' reader) turned by `lossless p4` into P4Runtime updates against the
/// P4Info of `switch.p4`.
pub fn runtime_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = p4values::runtime_json::RuntimeConfig::parse(text) {
        let _ = p4client::render::runtime_summary(&config);
        let _ = p4client::entries::updates(&config, &switch_p4().1);
    }
}

/// A host TOML config, as `lossless host attach --config` reads it: parsed, validated and shown.
pub fn host_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = hostconfig::config::HostConfig::from_toml(text) {
        let _ = config.validate();
        let _ = config.view();
    }
}

/// The agent's TOML file, as `lossless agent --config` reads it: parsed and checked whole.
pub fn agent_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = hostconfig::agent::AgentConfig::from_toml(text) {
        for spec in config.interfaces.values() {
            let _ = spec.config.validate();
        }
    }
}

/// The P4 tutorials' `topology.json`, as `lossless net up` reads it: parsed and checked whole.
pub fn topology_json(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = netfiles::tutorial::parse(text);
    }
}

/// p4-utils' `p4app.json`, as `lossless net up` reads it: parsed, addressed by its strategy
/// and checked whole.
pub fn p4app_json(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = netfiles::p4app::parse(text);
    }
}

/// The bytes a BMv2 Thrift client sends on a connection (calls of `simple_switch_CLI`'s
/// services, multiplexed, in the binary protocol), served by a device running `switch.p4` as
/// softswitch serves a connection: each call answered, a call past the limits or the protocol
/// closing the connection.
pub fn thrift_calls(data: &[u8]) {
    THRIFT.with(|t| {
        let (_, services) = t.get_or_init(|| {
            let compiled = pipeline::Compiled::new(SWITCH_P4.as_bytes().to_vec(), None, 0)
                .expect("the test program compiles");
            let device = Device::start(0, Default::default(), None, Some(compiled));
            let info = thrift::SwitchInfo {
                device_id: 0,
                thrift_port: 9090,
                ports: vec![(1, "fuzz1".into())],
            };
            let services = thrift::Services::new(device.engine.clone(), info);
            (device, services)
        });
        let _ = services.serve_connection(data, std::io::sink());
    });
}
