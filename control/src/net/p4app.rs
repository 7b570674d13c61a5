//! p4-utils' `p4app.json`, parsed by [`netfiles::p4app`]. Relative files are found as the P4
//! tutorials find theirs (from the current directory, where `p4run` runs, then beside the
//! file: [`resolve`](super::model::resolve)).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{
    model::{refuse_unemulable, resolve, Network},
    program,
};

/// A p4app.json read: the network, and the program it names.
pub struct P4App {
    /// The network.
    pub network: Network,
    /// `p4_src` (or `program`): the program of switches that name none.
    pub program: Option<PathBuf>,
}

/// Reads a p4app.json.
pub fn read(path: &Path) -> anyhow::Result<P4App> {
    let text = super::state::read_bounded(path, netfiles::MAX_BYTES as u64)?;
    let app = netfiles::p4app::parse(&text)
        .and_then(|app| refuse_unemulable(&app.topology).map(|()| app))
        .with_context(|| format!("in {}", path.display()))?;
    let program = app
        .program
        .map(|p| resolve(&p, path))
        .transpose()
        .with_context(|| format!("in {}", path.display()))?;
    let network = program::network(app.topology, path, "topology.switches")
        .with_context(|| format!("in {}", path.display()))?;
    Ok(P4App { network, program })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_file_that_is_nowhere_is_refused_by_its_key() {
        let dir = testkit::TempDir::new("lossless", "p4app");
        let file = dir.0.join("p4app.json");
        std::fs::write(
            &file,
            r#"{"topology": {"links": [["h1", "s1"]], "hosts": {"h1": {}},
                "switches": {"s1": {"cli_input": "s1-none.txt"}}}}"#,
        )
        .unwrap();
        let missing = format!("{:#}", read(&file).err().unwrap());
        assert!(
            missing.contains("topology.switches.s1.cli_input: s1-none.txt"),
            "{missing}"
        );
        std::fs::write(
            &file,
            r#"{"topology": {"links": [["h1", "s1", {"delay": "5ms"}]], "hosts": {"h1": {}}}}"#,
        )
        .unwrap();
        let delay = format!("{:#}", read(&file).err().unwrap());
        assert!(delay.contains("topology.links[0]: delay 5ms"), "{delay}");
        std::fs::write(
            &file,
            r#"{"topology": {"links": [["h1", "s1"]], "hosts": {"h1": {}},
                "default": {"loss": 1}}}"#,
        )
        .unwrap();
        let loss = format!("{:#}", read(&file).err().unwrap());
        assert!(loss.contains("topology.links[0]: loss 1%"), "{loss}");
    }
}
