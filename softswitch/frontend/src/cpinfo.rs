//! What the control plane sees of a program beyond what the interpreter runs: the annotations of
//! tables, actions and extern instances (for `@id`, `@hidden` and P4Info's `annotations`), the
//! annotations on each table's action references (`@tableonly`, `@defaultonly`), the digests the
//! program sends and the type of their data, the `@controller_header` headers, and the types
//! those refer to. The checker records it beside the IR; [`softswitch_server::p4info`] turns it into P4Info.

use crate::ast::Annotation;
use crate::types::{Type, Types};

/// The control-plane view of a program. Vectors named like [`softswitch_core::ir::Program`]'s are
/// parallel to them (same index, same length).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpInfo {
    /// Per table.
    pub tables: Vec<TableCp>,
    /// Annotations of each action's declaration.
    pub actions: Vec<Vec<Annotation>>,
    /// Annotations of each action's action-data parameters (for `@id`), parallel to `actions`.
    pub action_params: Vec<Vec<Vec<Annotation>>>,
    /// The type of each action's action-data parameters, parallel to `action_params` (P4Info
    /// lists the serializable enums among them in `type_info`, as p4c does).
    pub action_param_types: Vec<Vec<Type>>,
    /// Annotations of each extern instance's declaration.
    pub instances: Vec<Vec<Annotation>>,
    /// Every digest type the program sends, in the order of first use.
    pub digests: Vec<DigestCp>,
    /// Headers annotated `@controller_header("packet_in" | "packet_out" | ...)`.
    pub controller_headers: Vec<ControllerHeader>,
    /// The aggregates and enums [`DigestCp::ty`] and [`ControllerHeader::aggregate`] refer to.
    pub types: Types,
}

/// What P4Info needs of a table that the IR does not keep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableCp {
    /// Annotations of the table's declaration.
    pub annotations: Vec<Annotation>,
    /// Annotations of each key that is matched (not `selector`), parallel to `ir::Table::keys`.
    pub keys: Vec<Vec<Annotation>>,
    /// Annotations of each entry of its `actions` list, parallel to `ir::Table::actions`.
    pub action_refs: Vec<Vec<Annotation>>,
    /// Whether the program gives a `default_action` (else it is an implicit `NoAction`).
    pub default_written: bool,
    /// Whether the program gives `entries`.
    pub has_entries: bool,
    /// Whether its `support_timeout` property is true.
    pub supports_timeout: bool,
}

/// One digest: the control-plane name of its data type (or a generated `digest_N` for an
/// unnamed list) and the type.
#[derive(Clone, Debug, PartialEq)]
pub struct DigestCp {
    /// Its name in P4Info.
    pub name: String,
    /// The type of the data sent.
    pub ty: Type,
}

/// A header type annotated `@controller_header`: the metadata of PacketIn/PacketOut messages.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerHeader {
    /// The header type's control-plane name (what its P4Info id is hashed from).
    pub type_name: String,
    /// The annotation's argument (`packet_in`): the name in P4Info.
    pub controller_name: String,
    /// Annotations of the header declaration (including `@controller_header`).
    pub annotations: Vec<Annotation>,
    /// The header type (index into [`Types::aggregates`]).
    pub aggregate: usize,
}

/// The string argument of annotation `name`, if present (`@name("x")` → `x`).
pub fn string_arg(annotations: &[Annotation], name: &str) -> Option<String> {
    use crate::lexer::Tok;
    let a = annotations.iter().find(|a| a.name.name == name)?;
    match a.body.first().map(|t| &t.tok) {
        Some(Tok::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Whether annotation `name` is present.
pub fn has(annotations: &[Annotation], name: &str) -> bool {
    annotations.iter().any(|a| a.name.name == name)
}
