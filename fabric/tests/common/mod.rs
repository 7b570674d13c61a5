//! Shared by the fabric's tests: where dataplane-p4 is, and compiling its programs.

use softswitch_core::ir::Program;
use softswitch_frontend::source::SourceMap;
use std::path::{Path, PathBuf};

/// The dataplane-p4 folder.
pub fn dataplane_p4() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataplane-p4")
}

/// Compiles a program as `softswitch check` does; the rendered diagnostic on error.
pub fn compile(path: &Path) -> Result<(Program, SourceMap), String> {
    let mut map = SourceMap::new();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = map.add(path.display().to_string(), text);
    let program = softswitch_frontend::compile(&mut map, file).map_err(|d| d.render(&map))?;
    Ok((program.program, map))
}

/// lossless.p4, compiled.
pub fn lossless() -> Program {
    compile(&dataplane_p4().join("lossless.p4"))
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}
