//! Compiling a P4_16 v1model program with p4c's BMv2 back end: the BMv2 JSON and the P4Info
//! (text and binary), as the P4 tutorials' build does (`p4c-bm2-ss --p4v 16
//! --p4runtime-files ...`), with p4c's warnings kept.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::Toolchain;

/// What p4c wrote for a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// The BMv2 JSON (`NAME.json`).
    pub json: PathBuf,
    /// The P4Info in protobuf text format (`NAME.p4info.txtpb`).
    pub p4info_text: PathBuf,
    /// The P4Info, binary (`NAME.p4info.bin`).
    pub p4info_binary: PathBuf,
    /// Every warning p4c printed, each with its source lines.
    pub warnings: Vec<String>,
}

/// A program p4c did not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// The program.
    pub program: PathBuf,
    /// What went wrong: p4c's diagnostics, or why it did not run.
    pub message: String,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p4c-bm2-ss did not compile {}:\n{}",
            self.program.display(),
            self.message
        )
    }
}

impl std::error::Error for CompileError {}

impl Toolchain {
    /// Compiles `program` into `out_dir` (created if missing), naming the outputs after the
    /// program's file stem.
    pub fn compile(&self, program: &Path, out_dir: &Path) -> Result<Compiled, CompileError> {
        let fail = |message: String| CompileError {
            program: program.to_path_buf(),
            message,
        };
        let stem = program
            .file_stem()
            .ok_or_else(|| fail("the program's path has no file name".into()))?
            .to_string_lossy()
            .into_owned();
        std::fs::create_dir_all(out_dir)
            .map_err(|e| fail(format!("creating {}: {e}", out_dir.display())))?;
        let out = |ext: &str| out_dir.join(format!("{stem}.{ext}"));
        let compiled = Compiled {
            json: out("json"),
            p4info_text: out("p4info.txtpb"),
            p4info_binary: out("p4info.bin"),
            warnings: Vec::new(),
        };
        let mut runtime_files = compiled.p4info_text.clone().into_os_string();
        runtime_files.push(",");
        runtime_files.push(&compiled.p4info_binary);
        let output = self
            .p4c
            .command()
            .args(["--p4v", "16", "--p4runtime-files"])
            .arg(runtime_files)
            .arg("-o")
            .arg(&compiled.json)
            .arg(program)
            .output()
            .map_err(|e| fail(format!("running {}: {e}", self.p4c.program.display())))?;
        let diagnostics = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(fail(format!(
                "{}\n{}",
                output.status,
                diagnostics.trim_end()
            )));
        }
        Ok(Compiled {
            warnings: warnings(&diagnostics),
            ..compiled
        })
    }
}

impl Toolchain {
    /// Compiles `program` into a directory of its own under the system's temporary directory,
    /// gives the outputs to `consume`, and removes the directory again.
    pub fn compile_scratch<T, E: From<CompileError>>(
        &self,
        program: &Path,
        consume: impl FnOnce(Compiled) -> Result<T, E>,
    ) -> Result<T, E> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "p4c-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let outcome = self
            .compile(program, &dir)
            .map_err(E::from)
            .and_then(consume);
        let _ = std::fs::remove_dir_all(&dir);
        outcome
    }
}

/// p4c's warnings in its diagnostics: each starts on a line that says `warning:` and goes on
/// with the source lines p4c quotes, up to the next diagnostic.
fn warnings(diagnostics: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_warning = false;
    for line in diagnostics.lines() {
        let starts_diagnostic = line.contains("warning:") || line.contains("error:");
        if starts_diagnostic {
            in_warning = line.contains("warning:");
            if in_warning {
                out.push(line.to_owned());
            }
        } else if in_warning {
            let last = out.last_mut().expect("a warning is open");
            last.push('\n');
            last.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_keep_their_source_lines() {
        let text = "a.p4(44): [--Wwarn=unused] warning: 'X' is unused\n\
                    const bit<32> X = 4;\n              ^\n\
                    a.p4(50): [--Wwarn=invalid-header] warning: accessing a field\n  hdr.f\n";
        let found = warnings(text);
        assert_eq!(found.len(), 2);
        assert!(found[0].ends_with("^"), "{found:?}");
        assert!(found[1].starts_with("a.p4(50)"), "{found:?}");
        assert!(warnings("").is_empty());
    }
}
