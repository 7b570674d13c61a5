//! softswitch: a P4_16 v1model software switch (front end, interpreter, traffic manager, STF runner).
//!
//! The front end runs in phases, one module each, all reporting one [`diagnostic::Diagnostic`]:
//! [`preprocessor`] (which drives the [`lexer`]), [`parser`] (to the [`ast`]), [`check`] (types
//! and names, lowered to the [`ir`]), all within the [`limits`]. [`compile`] runs them all. The [`switch::Switch`] runs a
//! program: [`interp`] executes one packet's blocks over its slots, [`table`] holds the match
//! structures, [`tm`] the queues; [`stf`] drives a switch from a p4c STF test, and [`bmv2`]
//! lets the same test drive BMv2's `simple_switch`.

pub mod ast;
pub mod bits;
pub mod bmv2;
pub mod check;
pub mod cpinfo;
pub mod diagnostic;
pub mod hash;
pub mod interp;
pub mod ir;
pub mod lexer;
pub mod limits;
pub mod meter;
pub mod ops;
pub mod p4info;
pub mod parser;
pub mod ports;
pub mod preprocessor;
pub mod run;
pub mod server;
pub mod source;
pub mod stf;
pub mod switch;
pub mod table;
pub mod tm;
pub mod types;

/// Compiles file `file` of `map` to the lowered program. `#include` finds only the built-in
/// headers: the program must be self-contained, as a device config received over P4Runtime is.
pub fn compile(map: &mut source::SourceMap, file: u32) -> diagnostic::Result<Compiled> {
    compile_with(map, file, preprocessor::Includes::BuiltinOnly)
}

/// Compiles file `file` of `map` (files it includes, as `includes` allows, are added to `map`)
/// to the lowered program.
///
/// The phases recurse over the program's nesting, which the [`limits`] bound, on a thread of
/// their own with a stack large enough for the deepest nesting they accept.
pub fn compile_with(
    map: &mut source::SourceMap,
    file: u32,
    includes: preprocessor::Includes,
) -> diagnostic::Result<Compiled> {
    fn phases(
        map: &mut source::SourceMap,
        file: u32,
        includes: preprocessor::Includes,
    ) -> diagnostic::Result<Compiled> {
        let tokens = preprocessor::preprocess(map, file, includes)?;
        let decls = parser::parse(tokens)?;
        check::check(&decls)
    }
    let compiled = std::thread::scope(|scope| {
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
    })?;
    // The program runs only if the switch can hold its state.
    switch::check_state_size(&compiled.program)
        .map_err(|m| diagnostic::Diagnostic::new(source::Span { file, lo: 0, hi: 0 }, m))?;
    Ok(compiled)
}

/// A program as the front end lowers it: what the switch runs, and beside it what the control
/// plane sees of it (names and annotations for P4Info), which the switch does not need.
#[derive(Clone, Debug, PartialEq)]
pub struct Compiled {
    /// The lowered program.
    pub program: ir::Program,
    /// Its control-plane metadata, parallel to the program's tables, actions and instances.
    pub control_plane: cpinfo::CpInfo,
}

/// The compiler thread's stack: ample for the deepest nesting the [`limits`] accept.
const COMPILE_STACK_BYTES: usize = 64 << 20;
