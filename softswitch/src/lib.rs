//! softswitch: a P4_16 v1model software switch (front end, interpreter, traffic manager, STF runner).
//!
//! The front end runs in phases, one module each: [`preprocessor`] (which drives the
//! [`lexer`]), [`parser`] (to the [`ast`]). Every phase reports a [`diagnostic::Diagnostic`].

pub mod ast;
pub mod diagnostic;
pub mod lexer;
pub mod parser;
pub mod preprocessor;
pub mod source;

/// Compiles file `file` of `map` (includes are added to `map`) as far as the front end goes.
pub fn compile(map: &mut source::SourceMap, file: u32) -> diagnostic::Result<Vec<ast::Decl>> {
    let tokens = preprocessor::preprocess(map, file)?;
    parser::parse(tokens)
}
