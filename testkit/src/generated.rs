//! Committed files against the Python generators that wrote them: STF files (an STF test's
//! expected packets come from an independent generator, `generators/NAME.py` prints
//! `NAME.stf`) and example fabrics (a folder's `make.py` writes its topology and runtime JSON).
//! The tests read the committed output; these checks prove it is still what the generators
//! write.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::{venv_python_or_skip, workspace_root};

/// Runs every generator of `dir/generators` with the venv's Python, all at once, and asserts
/// that what each prints equals the committed `dir/NAME.stf` byte for byte; a mismatch names
/// the file and its first differing line. A generator is `generators/NAME.py` with a
/// `NAME.stf` in `dir`; any other `.py` there must be a module a generator imports. Skips by
/// the [`crate::skip`] rule when the venv is missing.
pub fn assert_stfs_match_generators(test: &str, dir: &Path) {
    let Some((python, dir)) = python_and_folder(test, dir) else {
        return;
    };
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
            mismatches.push(failure(generator, &output));
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

/// Runs every `make.py` below `root` (its folders and theirs, any depth) in a copy of `root`'s
/// Python files, and asserts that each writes exactly the files committed in its folder (every
/// file there but `.py` ones, subfolders included), byte for byte. A mismatch names the file and
/// its first differing line, a file written but not committed or committed but not written.
/// Skips by the [`crate::skip`] rule when the venv is missing.
pub fn assert_fabrics_match_generators(test: &str, root: &Path) {
    let Some((python, root)) = python_and_folder(test, root) else {
        return;
    };
    let copy = crate::TempDir::new("fabrics", test);
    let mut makers = Vec::new();
    for file in files_below(&root) {
        let relative = file.strip_prefix(&root).expect("below the root");
        if relative.extension().is_some_and(|e| e == "py") {
            let to = copy.0.join(relative);
            std::fs::create_dir_all(to.parent().expect("a folder")).expect("making a folder");
            std::fs::copy(&file, &to).unwrap_or_else(|e| panic!("copying {}: {e}", shown(&file)));
            if relative.file_name().is_some_and(|n| n == "make.py") {
                makers.push(relative.parent().expect("a folder").to_path_buf());
            }
        }
    }
    assert!(!makers.is_empty(), "no make.py below {}", shown(&root));
    let mut mismatches = Vec::new();
    for folder in makers {
        let (committed, scratch) = (root.join(&folder), copy.0.join(&folder));
        let maker = committed.join("make.py");
        let output = Command::new(&python)
            .arg("make.py")
            .current_dir(&scratch)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", shown(&maker)));
        if !output.status.success() {
            mismatches.push(failure(&maker, &output));
            continue;
        }
        let outputs = |dir: &Path| -> Vec<PathBuf> {
            files_below(dir)
                .into_iter()
                .filter(|f| f.extension().is_none_or(|e| e != "py"))
                .map(|f| f.strip_prefix(dir).expect("below the folder").to_path_buf())
                .collect()
        };
        let (kept, written) = (outputs(&committed), outputs(&scratch));
        for file in kept.iter().filter(|f| !written.contains(f)) {
            mismatches.push(format!(
                "{} is committed but {} does not write it",
                shown(&committed.join(file)),
                shown(&maker)
            ));
        }
        for file in &written {
            let ours = committed.join(file);
            let Ok(old) = std::fs::read(&ours) else {
                mismatches.push(format!(
                    "{} writes {}, which is not committed",
                    shown(&maker),
                    shown(&ours)
                ));
                continue;
            };
            let new = std::fs::read(scratch.join(file)).expect("reading what make.py wrote");
            if let Some(difference) = first_difference(&old, &new) {
                mismatches.push(format!(
                    "{} is not what {} writes: {difference}\nregenerate it: cd {} && python3 make.py",
                    shown(&ours),
                    shown(&maker),
                    shown(&committed)
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

/// The venv's Python and `folder` made absolute; `None` by the [`crate::skip`] rule when the
/// venv is missing.
fn python_and_folder(test: &str, folder: &Path) -> Option<(PathBuf, PathBuf)> {
    let python = venv_python_or_skip(test)?;
    let folder = folder
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
    Some((python, folder))
}

/// What the report says of a `script` that failed: its exit status and what it printed on
/// standard error.
fn failure(script: &Path, output: &Output) -> String {
    format!(
        "{} failed ({}):\n{}",
        shown(script),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim_end()
    )
}

/// Every file below `dir`, any depth, sorted; `__pycache__` folders are passed over.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in
            std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", shown(&folder)))
        {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "__pycache__") {
                    folders.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
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
