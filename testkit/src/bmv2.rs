//! p4c and BMv2 for the tests: the toolchain (or the skip rule when it is absent), the programs
//! the project says BMv2 runs, and their p4c outputs, compiled once per program text and shared
//! by every test and test binary (under `target/p4c/`).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use p4toolchain::{CompileError, Compiled, Toolchain};

use crate::{skip, workspace_root};

/// Corpus programs that run on softswitch only, each with the reason. Every other program of
/// [`bmv2_programs`]' folders is claimed to run on BMv2 unchanged.
pub const SOFTSWITCH_ONLY: &[(&str, &str)] = &[
    (
        "softswitch/tests/corpus/flow.p4",
        "it tests the deprecated resubmit(data) and clone3(), which p4c's BMv2 back end refuses \
         today (\"unknown extern function\")",
    ),
    (
        "softswitch/tests/corpus/forin.p4",
        "p4c's BMv2 back end refuses for-in loops (\"BMV2 does not support for-in loops\") and \
         compiles a loop in an apply block as its body run once (BMv2 JSON has loops only in \
         actions)",
    ),
    (
        "softswitch/tests/corpus/headers.p4",
        "it copies a header that is never valid on purpose, which p4c warns about \
         (uninitialized-use, invalid-header)",
    ),
    (
        "softswitch/tests/corpus/header_union_stacks.p4",
        "p4c cannot compile what it tests: its front end crashes on a run-time index into a \
         stack of header unions, and its BMv2 back end writes a JSON simple_switch refuses for \
         isValid() of such an element; and simple_switch's pop_front of a union stack rotates \
         the popped unions to the end still valid, where the specification invalidates them",
    ),
    (
        "softswitch/tests/corpus/stack_bounds.p4",
        "simple_switch cannot run what it tests: it aborts on a stack index out of range or \
         negative (an uncaught std::out_of_range), and refuses the JSON p4c writes for a copy \
         into an element picked at run time (\"Invalid 'type' in expression\": the destination \
         of assign_header) and for isValid() of one; softswitch-bmv2json loads that JSON \
         (softswitch/tests/bmv2_json.rs)",
    ),
    (
        "softswitch/tests/corpus/list_types.p4",
        "p4c's BMv2 back end refuses for-in loops, the one use of a list<T> variable (p4test \
         accepts the program)",
    ),
    (
        "softswitch/tests/corpus/parsing.p4",
        "it uses what softswitch accepts and p4c refuses (declarations between parser states, \
         `lastIndex` of a header stack in a control) and the deprecated Checksum16",
    ),
    (
        "softswitch/tests/corpus/priority_annotations.p4",
        "p4c warns about what it tests: `largest_priority_wins` and `priority_delta` (\"Unknown \
         table property\" from the BMv2 back end, though the front end honours them) and \
         `@priority` on an entry (ignored by the P4Runtime serializer, kept in the BMv2 JSON); \
         its STF passes on BMv2 (`softswitch stf --target bmv2`)",
    ),
    (
        "softswitch/tests/corpus/selector.p4",
        "its action selector is written in place (`implementation = action_selector(...)`), \
         which p4c cannot name in a P4Info (\"anonymous table property ... not supported by \
         P4Runtime\")",
    ),
];

/// The programs the project says run on BMv2 unchanged, sorted: dataplane-p4's, the P4
/// programs of the integration tests (`tests/p4`), and softswitch's corpus except
/// [`SOFTSWITCH_ONLY`].
pub fn bmv2_programs() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut programs: Vec<PathBuf> = ["dataplane-p4", "tests/p4", "softswitch/tests/corpus"]
        .iter()
        .flat_map(|dir| crate::files_with_extension(&root.join(dir), "p4"))
        .filter(|p| {
            !SOFTSWITCH_ONLY
                .iter()
                .any(|(only, _)| p.ends_with(Path::new(only)))
        })
        .collect();
    programs.sort();
    programs
}

/// p4c and BMv2 as [`toolchain_or_skip`] finds them, and [`bmv2_programs`] (which must be
/// there: at least ten), for a test that runs every program on the toolchain.
pub fn toolchain_and_programs_or_skip(test: &str) -> Option<(&'static Toolchain, Vec<PathBuf>)> {
    let toolchain = toolchain_or_skip(test)?;
    let programs = bmv2_programs();
    assert!(
        programs.len() >= 10,
        "the programs are missing: {programs:?}"
    );
    Some((toolchain, programs))
}

/// p4c and BMv2 (`LOSSLESS_P4REF`, else PATH); when they are not found, applies the
/// [`skip`] rule for `test` and gives `None`.
pub fn toolchain_or_skip(test: &str) -> Option<&'static Toolchain> {
    static FOUND: OnceLock<Result<Toolchain, p4toolchain::NotFound>> = OnceLock::new();
    match FOUND.get_or_init(Toolchain::find) {
        Ok(toolchain) => Some(toolchain),
        Err(not_found) => {
            skip(test, &format!("needs p4c and BMv2: {not_found}"));
            None
        }
    }
}

/// BMv2's `simple_switch_grpc` (P4Runtime) of the toolchain; when the toolchain or that build
/// is not found, applies the [`skip`] rule for `test` and gives `None`.
pub fn simple_switch_grpc_or_skip(test: &str) -> Option<&'static p4toolchain::Tool> {
    let toolchain = toolchain_or_skip(test)?;
    if toolchain.simple_switch_grpc.is_none() {
        skip(
            test,
            &format!(
                "needs simple_switch_grpc, which {} lacks",
                toolchain.describe()
            ),
        );
    }
    toolchain.simple_switch_grpc.as_ref()
}

/// p4c's outputs for `program`: compiled once per program text and p4c binary, kept under
/// `target/p4c/`, and shared by every test (a compile happens in a directory of its own that
/// is renamed into place, so concurrent tests never see half of one).
pub fn compiled(toolchain: &Toolchain, program: &Path) -> Result<Compiled, CompileError> {
    let text = std::fs::read(program).map_err(|e| CompileError {
        program: program.to_path_buf(),
        message: format!("reading it: {e}"),
    })?;
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    toolchain.p4c.program.hash(&mut hasher);
    std::fs::metadata(&toolchain.p4c.program)
        .and_then(|m| m.modified())
        .ok()
        .hash(&mut hasher);
    let stem = program
        .file_stem()
        .map_or("program".into(), |s| s.to_string_lossy());
    let cache = target_dir().join("p4c");
    let home = cache.join(format!("{stem}-{:016x}", hasher.finish()));
    let outputs = |dir: &Path| Compiled {
        json: dir.join(format!("{stem}.json")),
        p4info_text: dir.join(format!("{stem}.p4info.txtpb")),
        p4info_binary: dir.join(format!("{stem}.p4info.bin")),
        warnings: Vec::new(),
    };
    let warnings_file = |dir: &Path| dir.join("warnings.txt");
    if let Ok(warnings) = std::fs::read_to_string(warnings_file(&home)) {
        return Ok(Compiled {
            warnings: split_warnings(&warnings),
            ..outputs(&home)
        });
    }
    let staging = cache.join(format!(
        ".{stem}.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let compiled = toolchain.compile(program, &staging)?;
    let io = |e: std::io::Error| CompileError {
        program: program.to_path_buf(),
        message: format!("keeping p4c's outputs in {}: {e}", home.display()),
    };
    // Written last: its presence says the directory is complete.
    std::fs::write(
        warnings_file(&staging),
        compiled.warnings.join(WARNING_SEPARATOR),
    )
    .map_err(io)?;
    if std::fs::rename(&staging, &home).is_err() {
        // Another test compiled the same text first.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Ok(Compiled {
        warnings: compiled.warnings,
        ..outputs(&home)
    })
}

/// Between two warnings in `warnings.txt` (a warning spans several lines).
const WARNING_SEPARATOR: &str = "\n\u{1e}\n";

fn split_warnings(text: &str) -> Vec<String> {
    text.split(WARNING_SEPARATOR)
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}
