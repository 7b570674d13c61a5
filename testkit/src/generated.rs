//! Committed STF files against their generators. An STF test's expected packets come from an
//! independent Python generator (`generators/NAME.py` prints `NAME.stf`); the test run reads
//! the committed output, and this check proves that output is still what the generator prints.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{venv_python_or_skip, workspace_root};

/// Runs every generator of `dir/generators` with the venv's Python, all at once, and asserts
/// that what each prints equals the committed `dir/NAME.stf` byte for byte; a mismatch names
/// the file and its first differing line. A generator is `generators/NAME.py` with a
/// `NAME.stf` in `dir`; any other `.py` there must be a module a generator imports. Skips by
/// the [`crate::skip`] rule when the venv is missing.
pub fn assert_stfs_match_generators(test: &str, dir: &Path) {
    let Some(python) = venv_python_or_skip(test) else {
        return;
    };
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let generators = generators(&dir);
    assert!(
        !generators.is_empty(),
        "no generators in {}",
        shown(&dir.join("generators"))
    );
    let running: Vec<(&PathBuf, Child)> =
        generators.iter().map(|g| (g, spawn(&python, g))).collect();
    let mut mismatches = Vec::new();
    for (generator, child) in running {
        let output = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", shown(generator)));
        let stf = stf_of(&dir, generator);
        if !output.status.success() {
            mismatches.push(format!(
                "{} failed ({}):\n{}",
                shown(generator),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            ));
            continue;
        }
        let committed =
            std::fs::read(&stf).unwrap_or_else(|e| panic!("reading {}: {e}", shown(&stf)));
        if let Some(difference) = first_difference(&committed, &output.stdout) {
            mismatches.push(format!(
                "{} is not what {} prints: {difference}\nregenerate it: .venv/bin/python {} > {}",
                shown(&stf),
                shown(generator),
                shown(generator),
                shown(&stf)
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

/// The generators of `dir`, sorted: `generators/NAME.py` with `NAME.stf` in `dir`. Panics on a
/// `.py` that is neither a generator nor imported by one (a generator whose output was never
/// committed).
fn generators(dir: &Path) -> Vec<PathBuf> {
    let scripts = dir.join("generators");
    let python = crate::files_with_extension(&scripts, "py");
    let (generators, modules): (Vec<PathBuf>, Vec<PathBuf>) =
        python.into_iter().partition(|p| stf_of(dir, p).exists());
    let sources: Vec<String> = generators
        .iter()
        .map(|g| std::fs::read_to_string(g).unwrap_or_else(|e| panic!("{}: {e}", shown(g))))
        .collect();
    for module in modules {
        let name = module.file_stem().unwrap().to_string_lossy();
        let imported = sources.iter().any(|s| {
            s.lines().any(|l| {
                l.starts_with(&format!("from {name} import")) || l == format!("import {name}")
            })
        });
        assert!(
            imported,
            "{} has no {name}.stf in {} and no generator imports it",
            shown(&module),
            shown(dir)
        );
    }
    generators
}

/// `dir/NAME.stf` for `generators/NAME.py`.
fn stf_of(dir: &Path, generator: &Path) -> PathBuf {
    dir.join(generator.file_stem().expect("a file name"))
        .with_extension("stf")
}

/// Starts `generator`, its output piped. No bytecode is written into the source tree.
fn spawn(python: &Path, generator: &Path) -> Child {
    Command::new(python)
        .arg(generator)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {} {}: {e}", python.display(), shown(generator)))
}

/// Where `committed` and `generated` first differ, by line (1-based), or `None` if they are
/// the same bytes.
fn first_difference(committed: &[u8], generated: &[u8]) -> Option<String> {
    if committed == generated {
        return None;
    }
    let mut old = committed.split_inclusive(|&b| b == b'\n');
    let mut new = generated.split_inclusive(|&b| b == b'\n');
    let mut line = 1;
    loop {
        match (old.next(), new.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (a, b) => {
                return Some(format!(
                    "line {line} differs\n  committed: {}\n  generated: {}",
                    text(a),
                    text(b)
                ))
            }
        }
    }
}

/// A line as the mismatch report shows it: quoted, so a missing final newline shows.
fn text(line: Option<&[u8]>) -> String {
    match line {
        Some(l) => format!("{:?}", String::from_utf8_lossy(l)),
        None => "(end of file)".to_string(),
    }
}

/// `path` relative to the workspace root when it is inside it.
fn shown(path: &Path) -> String {
    let root = workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_have_no_difference() {
        assert_eq!(first_difference(b"a\nb\n", b"a\nb\n"), None);
    }

    #[test]
    fn the_first_differing_line_is_named() {
        let d = first_difference(b"a\nb\nc\n", b"a\nB\nc\n").unwrap();
        assert_eq!(
            d,
            "line 2 differs\n  committed: \"b\\n\"\n  generated: \"B\\n\""
        );
    }

    #[test]
    fn a_longer_or_shorter_output_and_a_missing_newline_are_differences() {
        let d = first_difference(b"a\n", b"a\nb\n").unwrap();
        assert_eq!(
            d,
            "line 2 differs\n  committed: (end of file)\n  generated: \"b\\n\""
        );
        let d = first_difference(b"a\nb\n", b"a\n").unwrap();
        assert_eq!(
            d,
            "line 2 differs\n  committed: \"b\\n\"\n  generated: (end of file)"
        );
        let d = first_difference(b"a\n", b"a").unwrap();
        assert_eq!(
            d,
            "line 1 differs\n  committed: \"a\\n\"\n  generated: \"a\""
        );
    }

    /// A scratch directory with a `generators` folder.
    fn scratch(name: &str) -> crate::TempDir {
        let dir = crate::TempDir::new("testkit", name);
        std::fs::create_dir_all(dir.0.join("generators")).unwrap();
        dir
    }

    #[test]
    fn generators_are_the_scripts_with_an_stf_and_modules_must_be_imported() {
        let s = scratch("pairing");
        s.file("one.stf", "");
        s.file("generators/one.py", "from shared import *\n");
        s.file("generators/shared.py", "");
        s.file("two.stf", "");
        s.file("generators/two.py", "import shared\n");
        let names: Vec<String> = generators(&s.0)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["one.py", "two.py"]);
    }

    #[test]
    #[should_panic(expected = "no generator imports it")]
    fn a_generator_without_its_stf_is_refused() {
        let s = scratch("orphan");
        s.file("one.stf", "");
        s.file("generators/one.py", "");
        s.file("generators/forgotten.py", "print('x')\n");
        generators(&s.0);
    }
}
