//! softswitch-bmv2json: loads p4c-bm2-ss's output, BMv2's JSON format (BMv2's
//! `docs/JSON_format.md`), into the same `softswitch_core::ir::Program` the P4_16 front end
//! produces, so a program only p4c compiles runs on softswitch too.
//!
//! The JSON is untrusted (a P4Runtime client sends it as a device config): [`limits`] bounds its
//! size, nesting and counts, and everything past them, or not understood, is a [`LoadError`]
//! naming the object, never a panic. [`json`] reads values with their context, [`layout`]
//! places headers in slots, [`expr`] lowers expressions, [`joins`] finds where a pipeline's
//! branches meet, [`lower`] the parser, actions, pipelines, checksums and externs.
#![forbid(unsafe_code)]

pub mod expr;
pub mod joins;
pub mod json;
pub mod layout;
pub mod limits;
pub mod lower;
pub mod wide;

use softswitch_core::ir;

/// Why a BMv2 JSON was not loaded: a message of at most [`limits::MAX_ERROR_CHARS`]
/// characters (what it quotes of the JSON, a million-digit `hexstr` say, is cut), its control
/// characters escaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError(String);

impl LoadError {
    /// The error saying `message`, escaped and cut to [`limits::MAX_ERROR_CHARS`] characters.
    pub fn new(message: impl Into<String>) -> LoadError {
        let mut message = softswitch_core::trace::Printable(&message.into()).to_string();
        if let Some((cut, _)) = message.char_indices().nth(limits::MAX_ERROR_CHARS) {
            let left = message.len() - cut;
            message.truncate(cut);
            message.push_str(&format!("... ({left} bytes more not shown)"));
        }
        LoadError(message)
    }

    /// The message, without the `BMv2 JSON: ` of its display.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BMv2 JSON: {}", self.0)
    }
}

impl std::error::Error for LoadError {}

/// The result of a load step.
pub type Result<T> = std::result::Result<T, LoadError>;

/// Fails with `msg`.
pub(crate) fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(LoadError::new(msg))
}

/// A loaded program with what the control plane sees of it beyond the IR.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The program, as the front end would lower it.
    pub program: ir::Program,
    /// Per table, whether the JSON gives it entries (`entries`).
    pub tables_with_entries: Vec<bool>,
    /// Per table, whether it supports idle timeouts (`support_timeout`).
    pub tables_with_timeout: Vec<bool>,
    /// The digests the program sends (`learn_lists`), indexed as
    /// [`ir::ExternArg::Digest`]'s `digest`.
    pub digests: Vec<Digest>,
}

/// A digest (a learn list): what the control plane needs to name it and shape its data.
#[derive(Clone, Debug, PartialEq)]
pub struct Digest {
    /// The learn list's name: p4c names it after the data's type, as P4Info does.
    pub name: String,
    /// The fields sent, in order: their names (in the JSON's instances) and widths.
    pub fields: Vec<(String, u16)>,
}

/// Whether `bytes` look like a BMv2 JSON program rather than P4 source: a JSON object (after
/// white space) that has a `"header_types"` or `"pipelines"` member near its start or anywhere.
/// P4 source never begins with `{`, so the test is cheap and exact for both inputs softswitch
/// takes.
pub fn looks_like_bmv2_json(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    start.is_some_and(|i| bytes[i] == b'{')
        && [&b"\"header_types\""[..], b"\"pipelines\""]
            .iter()
            .any(|key| bytes.windows(key.len()).any(|w| w == *key))
}

/// Loads a BMv2 JSON program.
pub fn load(bytes: &[u8]) -> Result<Loaded> {
    if bytes.len() > limits::MAX_JSON_BYTES {
        return fail(format!(
            "{} bytes, more than the {} a program may have (limits::MAX_JSON_BYTES)",
            bytes.len(),
            limits::MAX_JSON_BYTES
        ));
    }
    // serde_json refuses nesting deeper than 128 levels with an error (its recursion limit).
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| LoadError::new(format!("not JSON: {e}")))?;
    lower::lower(&value)
}
