//! The arrows between the crates point one way (docs/ARCHITECTURE.md, "Dependency direction"),
//! read from `cargo metadata`: each softswitch crate, the simulator and topology depend only on
//! the workspace crates its row of [`ALLOWED`] names (so the core never imports the front end or
//! the server, and the device's port code never imports server code), and what must stay free of
//! the async and gRPC stack has no tonic, tokio or prost anywhere in its dependency tree. Normal and build
//! dependencies are arrows; dev-dependencies are not (a crate's tests may use what sits above
//! it, as the core's benchmark compiles programs with the front end). And no crate outside the
//! core reaches past the switch's runtime interface: `Switch` has no public field, and the
//! types that hold its state are the core's own.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each checked crate, with the workspace crates it may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    ("softswitch-core", &["wire"]),
    ("softswitch-frontend", &["softswitch-core"]),
    ("softswitch-bmv2json", &["softswitch-core"]),
    ("softswitch-device", &["softswitch-core", "afxdp"]),
    (
        "softswitch-stf",
        &["softswitch-core", "softswitch-frontend", "p4toolchain"],
    ),
    (
        "softswitch-server",
        &[
            "softswitch-core",
            "softswitch-frontend",
            "softswitch-bmv2json",
            "softswitch-device",
            "p4runtime",
            "p4values",
            "tlsfiles",
            "gnmi",
            "wire",
        ],
    ),
    (
        "softswitch",
        &[
            "softswitch-core",
            "softswitch-frontend",
            "softswitch-device",
            "softswitch-server",
            "softswitch-stf",
            "p4runtime",
            "p4toolchain",
        ],
    ),
    (
        "sim",
        &[
            "softswitch-core",
            "softswitch-frontend",
            "dcqcn",
            "roce-rc",
            "p4values",
            "wire",
            "topology",
            "workload",
            "units",
            "netfiles",
        ],
    ),
    (
        "topology",
        &["dataplane-common", "p4values", "units", "wire"],
    ),
    // lossless check's rules: pure, over the topology crate, the parsers and the host's
    // configuration.
    ("check", &["hostconfig", "netfiles", "p4values", "topology"]),
    // A TLS server's files and their checks, under softswitch's gRPC server and the agent: on
    // no crate of the workspace.
    ("tlsfiles", &[]),
    // lossless net's and the simulator's file parsers: pure, on no crate of the workspace (the
    // fuzz crate links it).
    ("netfiles", &[]),
    // A Reliable Connection's sequence logic, under the traffic tool and the simulator.
    ("roce-rc", &["wire"]),
    // The control plane's crates: the utilities at the bottom, the host configuration over
    // them, then the host data plane (the only one with the eBPF build), the traffic tool (not
    // the host data plane: it opens the pinned maps through the pin layout) and the P4Runtime
    // client beside it; `lossless` over all of them.
    ("sysutil", &["dataplane-common", "wire"]),
    (
        "hostconfig",
        &["dataplane-common", "sysutil", "units", "wire"],
    ),
    (
        "host",
        &["dataplane-common", "hostconfig", "sysutil", "units", "wire"],
    ),
    (
        "traffic",
        &[
            "afxdp",
            "dataplane-common",
            "dcqcn",
            "hostconfig",
            "roce-rc",
            "sysutil",
            "units",
            "wire",
            "workload",
        ],
    ),
    (
        "p4client",
        &["p4runtime", "p4toolchain", "p4values", "sysutil", "units"],
    ),
];

/// Crates whose whole dependency tree stays free of [`ASYNC_AND_GRPC`].
const WITHOUT_ASYNC: &[&str] = &[
    "softswitch-core",
    "softswitch-frontend",
    "softswitch-bmv2json",
    "softswitch-device",
    "softswitch-stf",
    "sim",
    "topology",
    "netfiles",
    "roce-rc",
    "tlsfiles",
    "check",
];

/// The async runtime and the gRPC stack.
const ASYNC_AND_GRPC: &[&str] = &["tonic", "tokio", "prost"];

/// Package names to the names of their normal and build dependencies, and the workspace's
/// package names.
#[derive(Default)]
struct Graph {
    deps: BTreeMap<String, BTreeSet<String>>,
    workspace: BTreeSet<String>,
}

impl Graph {
    /// The dependency graph of this workspace on this machine's platform.
    fn of_workspace() -> Graph {
        let host = Command::new("rustc")
            .arg("-vV")
            .output()
            .expect("rustc runs");
        let host = String::from_utf8(host.stdout).expect("UTF-8");
        let host = host
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .expect("rustc names its host");
        let out = testkit::output_of(
            Command::new(env!("CARGO"))
                .args(["metadata", "--format-version", "1", "--locked"])
                .args(["--filter-platform", host])
                .current_dir(env!("CARGO_MANIFEST_DIR")),
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let names: BTreeMap<&str, &str> = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
            .collect();
        let mut graph = Graph::default();
        for id in meta["workspace_members"].as_array().expect("members") {
            graph
                .workspace
                .insert(names[id.as_str().unwrap()].to_string());
        }
        for node in meta["resolve"]["nodes"].as_array().expect("a resolve") {
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].as_str() != Some("dev"))
                })
                .map(|d| names[d["pkg"].as_str().unwrap()].to_string())
                .collect();
            graph
                .deps
                .insert(names[node["id"].as_str().unwrap()].to_string(), deps);
        }
        graph
    }

    /// Every package `name` depends on, directly or not.
    fn tree(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name.to_string()];
        while let Some(n) = todo.pop() {
            for d in self.deps.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }

    /// Every arrow that goes the wrong way, as a sentence.
    fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (krate, allowed) in ALLOWED {
            let Some(deps) = self.deps.get(*krate) else {
                found.push(format!("{krate} is not in the workspace"));
                continue;
            };
            for d in deps.iter().filter(|d| self.workspace.contains(*d)) {
                if !allowed.contains(&d.as_str()) {
                    found.push(format!("{krate} depends on {d}"));
                }
            }
        }
        for krate in WITHOUT_ASYNC {
            let tree = self.tree(krate);
            for stack in ASYNC_AND_GRPC {
                if tree.contains(*stack) {
                    found.push(format!("{krate} links {stack}"));
                }
            }
        }
        found
    }
}

#[test]
fn the_crates_arrows_point_one_way() {
    let violations = Graph::of_workspace().violations();
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn a_wrong_arrow_is_caught() {
    let mut graph = Graph::default();
    for (krate, allowed) in ALLOWED {
        graph.workspace.insert(krate.to_string());
        let deps = allowed.iter().map(|d| d.to_string()).collect();
        graph.deps.insert(krate.to_string(), deps);
    }
    assert_eq!(graph.violations(), Vec::<String>::new());
    // The core reaching back into the front end, port code into the server, and the
    // simulator linking tokio through a crate of its own.
    let mut add = |from: &str, to: &str| {
        graph.deps.entry(from.into()).or_default().insert(to.into());
    };
    add("softswitch-core", "softswitch-frontend");
    add("softswitch-device", "softswitch-server");
    add("sim", "helper");
    add("helper", "tokio");
    assert_eq!(
        graph.violations(),
        [
            "softswitch-core depends on softswitch-frontend",
            "softswitch-device depends on softswitch-server",
            "sim links tokio",
        ]
    );
}

/// The switch's state and the types that hold it, which only the core may touch: everything
/// outside goes through the switch's runtime interface (`softswitch_core::runtime`).
const CORE_PRIVATE: &[(&str, &str)] = &[
    ("core/src/state.rs", "struct State "),
    ("core/src/externs/mod.rs", "struct CellArrays<"),
    ("core/src/externs/meter.rs", "struct Meters "),
    ("core/src/switch.rs", "struct Queued "),
    ("core/src/tm.rs", "struct TrafficManager<"),
    ("core/src/table.rs", "struct TableState "),
    ("core/src/lib.rs", "mod interp;"),
    ("core/src/lib.rs", "mod state;"),
    ("core/src/lib.rs", "mod pre;"),
    ("core/src/lib.rs", "mod mirroring;"),
];

/// The public fields of `struct Switch` in `source`, and the declarations of [`CORE_PRIVATE`]
/// (in `read`'s files) that are public: what a crate outside the core could reach past the
/// runtime interface.
fn switch_internals_exposed(read: impl Fn(&str) -> String) -> Vec<String> {
    let mut found = Vec::new();
    let switch = read("core/src/switch.rs");
    let body = switch
        .split_once("pub struct Switch {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("core/src/switch.rs declares pub struct Switch");
    for line in body.lines().map(str::trim) {
        if line.starts_with("pub ") {
            found.push(format!("Switch has a public field: {line}"));
        }
    }
    for (file, decl) in CORE_PRIVATE {
        let text = read(file);
        let line = text
            .lines()
            .find(|l| l.contains(decl))
            .unwrap_or_else(|| panic!("{file} declares {decl}"));
        if line.trim_start().starts_with("pub ") {
            found.push(format!("{file}: {} is public", line.trim()));
        }
    }
    found
}

#[test]
fn only_the_core_touches_the_switch_internals() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| std::fs::read_to_string(root.join(file)).expect(file);
    let exposed = switch_internals_exposed(read);
    assert!(exposed.is_empty(), "{}", exposed.join("\n"));
}

#[test]
fn an_exposed_switch_internal_is_caught() {
    let sources = |file: &str| match file {
        "core/src/switch.rs" => "struct Queued {\n}\n\
                                  pub struct Switch {\n    program: Program,\n    pub tm: Tm,\n}\n"
            .to_string(),
        "core/src/state.rs" => "pub(crate) struct State {\n}\n".to_string(),
        "core/src/tm.rs" => "pub struct TrafficManager<T> {".to_string(),
        "core/src/table.rs" => "pub(crate) struct TableState {".to_string(),
        "core/src/externs/mod.rs" => "pub(crate) struct CellArrays<T> {".to_string(),
        "core/src/externs/meter.rs" => "pub(crate) struct Meters {".to_string(),
        _ => "pub(crate) mod interp;\npub(crate) mod state;\nmod pre;\npub mod mirroring;\n"
            .to_string(),
    };
    assert_eq!(
        switch_internals_exposed(sources),
        [
            "Switch has a public field: pub tm: Tm,",
            "core/src/tm.rs: pub struct TrafficManager<T> { is public",
            "core/src/lib.rs: pub mod mirroring; is public",
        ]
    );
}
