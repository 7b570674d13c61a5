//! The P4 program the switches run: `dataplane-p4/lossless.p4` by default, carried in the
//! binary, or a file the user names (which must have lossless.p4's tables, since the switches
//! are given the entries the control plane computes for it). Compiled once by softswitch's
//! front end and shared by every switch of a run.

use std::path::Path;

pub use softswitch_core::ir::Program;
use softswitch_frontend::source::SourceMap;

/// The text of `dataplane-p4/lossless.p4`.
pub const LOSSLESS_P4: &str = include_str!("../../dataplane-p4/lossless.p4");

/// Compiles P4 source `text` (named `name` in diagnostics); the rendered diagnostic on error.
pub fn compile(name: &str, text: String) -> Result<Program, String> {
    let (mut map, file) = SourceMap::of(name.to_string(), text);
    softswitch_frontend::compile(&mut map, file)
        .map(|c| c.program)
        .map_err(|d| d.render(&map))
}

/// lossless.p4, compiled.
pub fn lossless() -> Program {
    compile("lossless.p4", LOSSLESS_P4.to_string())
        .expect("lossless.p4 compiles (its tests say so)")
}

/// The program in `path` (at most the front end's file size), compiled.
pub fn compile_file(path: &Path) -> Result<Program, String> {
    softswitch_frontend::compile_file(path).map(|c| c.program)
}
