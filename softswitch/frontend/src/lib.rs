//! softswitch-frontend: the P4_16 front end of softswitch, from source text to the IR that
//! softswitch-core runs (as p4c's front and mid ends are to BMv2's JSON).
//!
//! It runs in phases, one module each, all reporting one [`diagnostic::Diagnostic`]:
//! [`preprocessor`] (which drives the [`lexer`]), [`parser`] (to the [`ast`]), [`check`] (types
//! and names, lowered to `softswitch_core::ir`, with the control plane's view of the program in
//! [`cpinfo`] beside it), all within the [`limits`]. [`compile`] runs them all. Nothing here
//! runs a packet: the front end knows the IR, never the switch's runtime state.
// Its unit tests make a FIFO with libc, the one unsafe call of the crate.
#![cfg_attr(not(test), forbid(unsafe_code))]

pub mod ast;
pub mod check;
pub mod cpinfo;
pub mod diagnostic;
pub mod lexer;
pub mod limits;
pub mod parser;
pub mod preprocessor;
pub mod source;
pub mod types;

use softswitch_core::ir;

/// Compiles file `file` of `map` to the lowered program. `#include` finds only the built-in
/// headers: the program must be self-contained, as a device config received over P4Runtime is.
pub fn compile(map: &mut source::SourceMap, file: u32) -> diagnostic::Result<Compiled> {
    compile_with(map, file, preprocessor::Includes::BuiltinOnly)
}

/// Reads the P4 file at `path` and compiles it as [`compile`] does; a failure is the read error,
/// or the diagnostic rendered against the source.
pub fn compile_file(path: &std::path::Path) -> Result<Compiled, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut map, file) = source::SourceMap::of(path.display().to_string(), text);
    compile(&mut map, file).map_err(|d| d.render(&map))
}

/// Compiles file `file` of `map` (files it includes, as `includes` allows, are added to `map`)
/// to the lowered program, ready to run: a program that calls an extern function it declares
/// itself is refused, naming the extern (softswitch runs the externs of core.p4 and v1model.p4,
/// as BMv2's simple_switch refuses a program with an extern it lacks).
pub fn compile_with(
    map: &mut source::SourceMap,
    file: u32,
    includes: preprocessor::Includes,
) -> diagnostic::Result<Compiled> {
    let (compiled, user_externs) = check_with(map, file, includes)?;
    match user_externs.first() {
        None => Ok(compiled),
        Some(e) => Err(diagnostic::Diagnostic::new(
            e.span,
            format!(
                "extern function '{}' has no implementation: softswitch runs the externs of \
                 core.p4 and v1model.p4 only (BMv2's simple_switch refuses it too)",
                e.name
            ),
        )),
    }
}

/// Checks file `file` of `map` as [`compile_with`] does, but accepts calls of extern functions
/// the program declares itself (checked against their declarations), which it gives beside the
/// program: `softswitch check` passes such a program, nothing can run it.
///
/// The phases recurse over the program's nesting, which the [`limits`] bound, on a thread of
/// their own with a stack large enough for the deepest nesting they accept.
pub fn check_with(
    map: &mut source::SourceMap,
    file: u32,
    includes: preprocessor::Includes,
) -> diagnostic::Result<(Compiled, Vec<check::UserExtern>)> {
    fn phases(
        map: &mut source::SourceMap,
        file: u32,
        includes: preprocessor::Includes,
    ) -> diagnostic::Result<(Compiled, Vec<check::UserExtern>)> {
        let mut diags = diagnostic::Diagnostics::default();
        let mut run = || {
            let tokens = preprocessor::preprocess_reporting(map, file, includes, &mut diags)?;
            let decls = parser::parse(tokens)?;
            check::check(&decls, map, &mut diags)
        };
        let r = run();
        let ((compiled, user_externs), warnings) = diags.conclude(r)?;
        Ok((
            Compiled {
                warnings,
                ..compiled
            },
            user_externs,
        ))
    }
    std::thread::scope(|scope| {
        let big_stack = std::thread::Builder::new().stack_size(COMPILE_STACK_BYTES);
        match big_stack.spawn_scoped(scope, || phases(map, file, includes)) {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // The system refused a thread: an error rather than a risk of overflowing a small stack.
            Err(_) => Err(diagnostic::Diagnostic::new(
                source::Span { file, lo: 0, hi: 0 },
                "cannot start the compiler thread",
            )),
        }
    })
}

/// A program as the front end lowers it: what the switch runs, and beside it what the control
/// plane sees of it (names and annotations for P4Info), which the switch does not need.
#[derive(Clone, Debug, PartialEq)]
pub struct Compiled {
    /// The lowered program.
    pub program: ir::Program,
    /// Its control-plane metadata, parallel to the program's tables, actions and instances.
    pub control_plane: cpinfo::CpInfo,
    /// The warnings compiling it gave (`#warning`).
    pub warnings: Vec<diagnostic::Diagnostic>,
}

/// The compiler thread's stack: ample for the deepest nesting the [`limits`] accept.
const COMPILE_STACK_BYTES: usize = 64 << 20;
