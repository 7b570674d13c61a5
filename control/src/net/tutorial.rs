//! The P4 tutorials' `topology.json`, parsed by [`netfiles::tutorial`]. Relative files are
//! found as the tutorials find them (from the current directory, where `make run` runs, then
//! beside the topology file: [`resolve`](super::model::resolve)). A switch's `program` is P4
//! source or p4c's BMv2 JSON ([`program::file`]).

use std::path::Path;

use anyhow::Context as _;

use super::{
    model::{refuse_unemulable, Network},
    program,
};

/// Reads a tutorials' topology file.
pub fn read(path: &Path) -> anyhow::Result<Network> {
    let text = super::state::read_bounded(path, netfiles::MAX_BYTES as u64)?;
    let topology = netfiles::tutorial::parse(&text)
        .and_then(|topology| refuse_unemulable(&topology).map(|()| topology))
        .with_context(|| format!("in {}", path.display()))?;
    program::network(topology, path, "switches").with_context(|| format!("in {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with `topology.json` (TEXT) and the files it names, removed on drop.
    struct Files(std::path::PathBuf);

    impl Files {
        fn new(tag: &str, text: &str) -> Files {
            let dir =
                std::env::temp_dir().join(format!("lossless-tut-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(dir.join("build")).unwrap();
            std::fs::write(dir.join("topology.json"), text).unwrap();
            for file in [
                "s1-runtime.json",
                "s1-commands.txt",
                "build/fw.p4.p4info.txtpb",
            ] {
                std::fs::write(dir.join(file), "{}").unwrap();
            }
            std::fs::write(dir.join("build/fw.json"), "\n {\"header_types\": []}").unwrap();
            Files(dir)
        }

        fn parse(&self) -> anyhow::Result<Network> {
            read(&self.0.join("topology.json"))
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn finds_the_files_a_switch_names_and_reads_its_program() {
        let files = Files::new(
            "shape",
            r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}},
                "switches": {"s1": {"runtime_json": "s1-runtime.json", "cpu_port": 9,
                                    "cli_input": "s1-commands.txt", "program": "build/fw.json"}},
                "links": [["h1", "s1-p1"]]}"#,
        );
        let net = files.parse().unwrap();
        let dir = &files.0;
        let s1 = &net.switches[0];
        assert_eq!(
            s1.entries.runtime_json(),
            Some(dir.join("s1-runtime.json").as_path())
        );
        assert_eq!(
            s1.entries.cli_input(),
            Some(dir.join("s1-commands.txt").as_path())
        );
        // The program is BMv2 JSON, with the P4Info make writes beside it.
        assert_eq!(
            s1.program,
            Some(super::super::model::Program::Bmv2Json {
                json: dir.join("build/fw.json"),
                p4info: dir.join("build/fw.p4.p4info.txtpb"),
            })
        );
        assert_eq!(net.cpu_ports["s1"], 9);
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let base = r#"{"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}},
                       "switches": {"s1": {}}, "links": [LINK]}"#;
        let chain = |link: &str| {
            format!(
                "{:#}",
                Files::new("refuse", &base.replace("LINK", link))
                    .parse()
                    .unwrap_err()
            )
        };
        // netfiles reads the delay, lossless net refuses it; on a kernel without netem the
        // message says why.
        let delay = chain(r#"["h1", "s1-p1", "5ms"]"#);
        assert!(
            delay.contains("links[0]: delay 5ms: lossless net emulates rates only"),
            "{delay}"
        );
        if !std::path::Path::new("/sys/module/sch_netem").exists() {
            assert!(delay.contains("no netem"), "{delay}");
        }
        assert!(chain(r#"["h1", "s9-p1"]"#).contains("no node called s9"));
        Files::new("refuse", &base.replace("LINK", r#"["h1", "s1-p1", "0ms"]"#))
            .parse()
            .unwrap();
        let missing = base.replace(
            r#""s1": {}"#,
            r#""s1": {"runtime_json": "pod-topo/s1.json"}"#,
        );
        let err = format!(
            "{:#}",
            Files::new("refuse", &missing.replace("LINK", r#"["h1", "s1-p1"]"#))
                .parse()
                .unwrap_err()
        );
        assert!(
            err.contains("switches.s1.runtime_json") && err.contains("current directory"),
            "{err}"
        );
    }
}
