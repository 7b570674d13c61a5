//! Which program each switch of a network runs, and the pipelines they become.
//!
//! A switch runs, in this order: the program its topology names for it; the network's
//! (`--program`, else a p4app.json's `p4_src`); the program its runtime JSON was written for,
//! as `make run` builds it (the source `basic.p4` that the JSON's `p4info`,
//! `build/basic.p4.p4info.txtpb`, was compiled from, else the JSON's `bmv2_json` with that
//! P4Info, which is what the tutorials' controller loads); else none, and it starts without a
//! pipeline for a controller to set (the tutorials' p4runtime and flowcache exercises).
//! A program file is P4 source, or p4c's BMv2 JSON, told apart by its content.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{bail, Context as _};
use netfiles::Topology;
use p4values::runtime_json::RuntimeConfig;

use super::model::{resolve, Entries, Network, Program, Switch};
use p4client::cli::{Pipeline, SwitchKind};

/// The P4Info file names p4c is told to write beside a BMv2 JSON `NAME.json`, by the tools
/// whose builds users have: the P4 tutorials' Makefile, p4c's own naming, p4-utils.
const P4INFO_BESIDE_JSON: [&str; 3] = ["{}.p4.p4info.txtpb", "{}.p4info.txtpb", "{}_p4rt.txt"];

/// The suffixes of a P4Info file named after its program (`basic.p4.p4info.txtpb`).
const P4INFO_SUFFIXES: [&str; 4] = [
    ".p4info.txtpb",
    ".p4info.txt",
    ".p4info.json",
    ".p4info.bin",
];

/// The program in file `path`: BMv2 JSON when its first character that is not blank is `{`
/// (no P4 source begins so), with its P4Info from `runtime_json`'s `p4info` (the switch's
/// runtime JSON), else beside it as p4c was told to write it; else P4 source.
pub fn file(path: &Path, runtime_json: Option<&Path>) -> anyhow::Result<Program> {
    if !is_json(path)? {
        return Ok(Program::Source(path.to_path_buf()));
    }
    let named = match runtime_json {
        Some(runtime) => {
            let config = read_runtime(runtime)?;
            match config.p4info {
                Some(p4info) => Some(resolve(&p4info, runtime)?),
                None => None,
            }
        }
        None => None,
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let beside = P4INFO_BESIDE_JSON
        .iter()
        .map(|pattern| path.with_file_name(pattern.replace("{}", stem)));
    let Some(p4info) = named.into_iter().chain(beside).find(|p| p.is_file()) else {
        bail!(
            "{} is BMv2 JSON, and its P4Info is neither named by the switch's runtime JSON \
             nor beside it ({})",
            path.display(),
            P4INFO_BESIDE_JSON.map(|p| p.replace("{}", stem)).join(", ")
        );
    };
    Ok(Program::Bmv2Json {
        json: path.to_path_buf(),
        p4info,
    })
}

/// The network the topology parsed from file `file` describes, with the files it names for
/// its switches found on disk ([`switch`]); an error names a switch's key as
/// `SWITCHES.NAME.KEY`, `switches` saying where the file keeps its switches.
pub fn network(topology: Topology, file: &Path, switches: &str) -> anyhow::Result<Network> {
    let named = topology
        .switches
        .iter()
        .map(|s| switch(s, file, &format!("{switches}.{}", s.name)))
        .collect::<anyhow::Result<_>>()?;
    Ok(Network {
        hosts: topology.hosts,
        switches: named,
        links: topology.links,
        cpu_ports: topology.cpu_ports,
    })
}

/// Switch `named` of the topology in file `topology`, with the files it names found
/// ([`resolve`]) and its program read for what it is ([`file`]); an error names the key as
/// `ORIGIN.KEY`.
fn switch(named: &netfiles::Switch, topology: &Path, origin: &str) -> anyhow::Result<Switch> {
    let found = |key: &str, file: Option<&str>| {
        file.map(|f| resolve(f, topology))
            .transpose()
            .with_context(|| format!("{origin}.{key}"))
    };
    let runtime_json = found("runtime_json", named.runtime_json.as_deref())?;
    let cli_input = found("cli_input", named.cli_input.as_deref())?;
    let program = found("program", named.program.as_deref())?
        .map(|program| file(&program, runtime_json.as_deref()))
        .transpose()
        .with_context(|| format!("{origin}.program"))?;
    Ok(Switch {
        name: named.name.clone(),
        program,
        entries: Entries::files(runtime_json, cli_input),
    })
}

/// Whether `path` holds JSON: its first character that is not blank, in its first 4 KiB.
fn is_json(path: &Path) -> anyhow::Result<bool> {
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'))
}

fn read_runtime(path: &Path) -> anyhow::Result<RuntimeConfig> {
    Ok(RuntimeConfig::from_file(path)?)
}

/// Gives every switch of `network` its program by the order above; `default` is the
/// network's. Says which switches start without one; refuses a switch with entries to write
/// and no program to write them to.
pub fn settle(network: &mut Network, default: Option<&Path>) -> anyhow::Result<()> {
    for switch in &mut network.switches {
        let runtime = switch.entries.runtime_json().map(Path::to_path_buf);
        if switch.program.is_none() {
            switch.program = match default {
                Some(path) => Some(file(path, runtime.as_deref())?),
                None => match &runtime {
                    Some(runtime) => Some(
                        from_runtime(runtime).with_context(|| format!("switch {}", switch.name))?,
                    ),
                    None => None,
                },
            };
        }
        if switch.program.is_none() {
            if let Some(cli) = switch.entries.cli_input() {
                bail!(
                    "switch {}: {} has commands for a program, and the switch has none; give \
                     one with --program",
                    switch.name,
                    cli.display()
                );
            }
            eprintln!(
                "lossless net: {} has no program (none named for it, no runtime JSON, no \
                 --program): it starts without a pipeline, for a controller to set",
                switch.name
            );
        }
    }
    Ok(())
}

/// The program the runtime JSON at `path` was written for (its `p4info`): the source beside
/// the build directory, as the tutorials' Makefile lays them out, else the compiled
/// `bmv2_json` with that P4Info.
fn from_runtime(path: &Path) -> anyhow::Result<Program> {
    let config = read_runtime(path)?;
    let p4info = config.p4info.as_deref().with_context(|| {
        format!(
            "{} names no p4info, so the program is unknown; give one with --program",
            path.display()
        )
    })?;
    let named = Path::new(p4info);
    let name = named
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = P4INFO_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    let source = if stem.ends_with(".p4") {
        stem.to_string()
    } else {
        format!("{stem}.p4")
    };
    // build/basic.p4.p4info.txtpb: basic.p4 is in the folder build/ is in.
    let folder = named
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new(""));
    let source = folder.join(source);
    if let Ok(found) = resolve(&source.to_string_lossy(), path) {
        return Ok(Program::Source(found));
    }
    let compiled = config
        .bmv2_json
        .as_deref()
        .and_then(|json| Some((resolve(json, path).ok()?, resolve(p4info, path).ok()?)));
    match compiled {
        Some((json, p4info)) => Ok(Program::Bmv2Json { json, p4info }),
        None => bail!(
            "{} was written for {} ({p4info}), and neither it nor its compiled JSON is in the \
             current directory (run from the exercise folder, after `make`) or beside the file; \
             give the program with --program",
            path.display(),
            source.display()
        ),
    }
}

/// The pipelines of a network's programs, each read (compiled, for BMv2) once.
#[derive(Default)]
pub struct Pipelines(Vec<((Program, SwitchKind), Arc<Pipeline>)>);

impl Pipelines {
    /// The pipeline `program` becomes on a switch of `kind`: softswitch takes P4 source as it
    /// is, BMv2 gets it compiled by p4c; BMv2 JSON goes to both as it is.
    pub fn get(&mut self, program: &Program, kind: SwitchKind) -> anyhow::Result<Arc<Pipeline>> {
        let key = (program.clone(), kind);
        if let Some((_, pipeline)) = self.0.iter().find(|(k, _)| *k == key) {
            return Ok(pipeline.clone());
        }
        let pipeline = Arc::new(match program {
            Program::Source(source) => Pipeline::read(Some(source.clone()), kind, None, None),
            Program::Bmv2Json { json, p4info } => {
                Pipeline::read(None, kind, Some(p4info.clone()), Some(json.clone()))
            }
        }?);
        self.0.push((key, pipeline.clone()));
        Ok(pipeline)
    }
}

/// Where a program file lives, for messages.
pub fn path(program: &Program) -> &PathBuf {
    match program {
        Program::Source(path) => path,
        Program::Bmv2Json { json, .. } => json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_json_names_its_program_as_make_lays_it_out() {
        let dir = std::env::temp_dir().join(format!("lossless-program-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pod-topo")).unwrap();
        std::fs::create_dir_all(dir.join("build")).unwrap();
        let runtime = dir.join("pod-topo/s1-runtime.json");
        std::fs::write(
            &runtime,
            r#"{"p4info": "build/basic.p4.p4info.txtpb", "bmv2_json": "build/basic.json"}"#,
        )
        .unwrap();
        // Neither source nor build: the message says where it looked.
        let err = format!("{:#}", from_runtime(&runtime).unwrap_err());
        assert!(
            err.contains("basic.p4") && err.contains("--program"),
            "{err}"
        );
        // Only the build (p4c's JSON and P4Info), beside the runtime JSON's folder here: the
        // paths are relative to the exercise folder, so it is not found from the crate's
        // directory nor beside pod-topo/...
        std::fs::write(dir.join("build/basic.json"), "{}").unwrap();
        std::fs::write(dir.join("build/basic.p4.p4info.txtpb"), "").unwrap();
        assert!(from_runtime(&runtime).is_err());
        // ... but it is beside a runtime JSON in the exercise folder itself.
        let top = dir.join("s1-runtime.json");
        std::fs::copy(&runtime, &top).unwrap();
        assert_eq!(
            from_runtime(&top).unwrap(),
            Program::Bmv2Json {
                json: dir.join("build/basic.json"),
                p4info: dir.join("build/basic.p4.p4info.txtpb"),
            }
        );
        // With the source there, the source.
        std::fs::write(dir.join("basic.p4"), "#include <core.p4>\n").unwrap();
        assert_eq!(
            from_runtime(&top).unwrap(),
            Program::Source(dir.join("basic.p4"))
        );
        // A program file is told by its content.
        assert_eq!(
            file(&dir.join("build/basic.json"), Some(&top)).unwrap(),
            Program::Bmv2Json {
                json: dir.join("build/basic.json"),
                p4info: dir.join("build/basic.p4.p4info.txtpb"),
            }
        );
        std::fs::write(dir.join("other.json"), " {}").unwrap();
        let err = format!("{:#}", file(&dir.join("other.json"), None).unwrap_err());
        assert!(err.contains("other.p4.p4info.txtpb"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
