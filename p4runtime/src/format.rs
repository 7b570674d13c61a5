//! Protobuf text format and JSON mapping of any message defined here, through the descriptors
//! ([`crate::FILE_DESCRIPTOR_SET`]): P4Info's `.p4info.txtpb` / `.p4info.json` files as p4c
//! writes them (`--p4runtime-files`) and controllers read them.

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, MessageDescriptor, Value};
use serde::Serialize as _;

/// A file that is not a valid encoding of the message it should hold.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not protobuf text format for the message: the parser's message, which quotes the
    /// offending token, escaped and cut to [`MAX_TEXT_ERROR_CHARS`] characters.
    #[error("{0}")]
    Text(String),
    /// Not the JSON mapping of the message.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Not the binary encoding of the message.
    #[error("{0}")]
    Binary(#[from] prost::DecodeError),
}

/// The most characters of a text-format error kept. The parser quotes the token it stopped at;
/// a file that is not P4Info at all (a password file, say) is shown back no further than that.
pub const MAX_TEXT_ERROR_CHARS: usize = 200;

impl From<prost_reflect::text_format::ParseError> for FormatError {
    fn from(error: prost_reflect::text_format::ParseError) -> FormatError {
        let mut escaped = String::new();
        for c in error.to_string().chars() {
            if c.is_control() {
                escaped.extend(c.escape_debug());
            } else {
                escaped.push(c);
            }
        }
        FormatError::Text(match escaped.char_indices().nth(MAX_TEXT_ERROR_CHARS) {
            Some((cut, _)) => format!("{}...", &escaped[..cut]),
            None => escaped,
        })
    }
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET)
            .expect("the descriptor set built into this crate decodes")
    })
}

fn descriptor<M: Name>() -> MessageDescriptor {
    pool()
        .get_message_by_name(&M::full_name())
        .expect("every generated message is in the descriptor set")
}

fn dynamic<M: Message + Name>(message: &M) -> DynamicMessage {
    DynamicMessage::decode(descriptor::<M>(), message.encode_to_vec().as_slice())
        .expect("a message decodes as its own descriptor")
}

fn from_dynamic<M: Message + Name + Default>(message: DynamicMessage) -> Result<M, FormatError> {
    Ok(M::decode(message.encode_to_vec().as_slice())?)
}

/// The message in protobuf text format as protobuf's C++ `TextFormat` prints it, which is what
/// p4c writes to `.p4info.txtpb` files: one field per line in field-number order, a repeated
/// field as one line (or block) per element, two spaces per level, default values left out,
/// strings C-escaped.
pub fn to_text<M: Message + Name>(message: &M) -> String {
    let mut out = String::new();
    write_fields(&mut out, &dynamic(message), 0);
    out
}

fn write_fields(out: &mut String, message: &DynamicMessage, indent: usize) {
    let mut fields: Vec<_> = message.fields().collect();
    fields.sort_by_key(|(field, _)| field.number());
    for (field, value) in fields {
        match value {
            Value::List(items) => {
                for item in items {
                    write_field(out, &field, item, indent);
                }
            }
            Value::Map(map) => {
                // One `name { key: ... value ... }` block per entry, sorted by key.
                let entry = field.kind();
                let entry = entry
                    .as_message()
                    .expect("a map field's kind is its entry message");
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut message = DynamicMessage::new(entry.clone());
                    message.set_field(&entry.map_entry_key_field(), key.clone().into());
                    message.set_field(&entry.map_entry_value_field(), map[key].clone());
                    write_field(out, &field, &Value::Message(message), indent);
                }
            }
            value => write_field(out, &field, value, indent),
        }
    }
}

fn write_field(out: &mut String, field: &FieldDescriptor, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Message(inner) => {
            out.push_str(&format!("{pad}{} {{\n", field.name()));
            write_fields(out, inner, indent + 2);
            out.push_str(&format!("{pad}}}\n"));
        }
        scalar => out.push_str(&format!(
            "{pad}{}: {}\n",
            field.name(),
            scalar_text(field, scalar)
        )),
    }
}

fn scalar_text(field: &FieldDescriptor, value: &Value) -> String {
    match value {
        Value::String(s) => c_escaped(s.as_bytes()),
        Value::Bytes(b) => c_escaped(b),
        Value::EnumNumber(n) => field
            .kind()
            .as_enum()
            .and_then(|e| e.get_value(*n))
            .map(|v| v.name().to_string())
            .unwrap_or_else(|| n.to_string()),
        Value::Bool(b) => b.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::List(_) | Value::Map(_) | Value::Message(_) => {
            unreachable!("lists and messages are written by write_fields")
        }
    }
}

/// A quoted string escaped as protobuf's `CEscape` does: `\n \r \t \" \' \\` by name, other
/// bytes outside printable ASCII as three octal digits.
fn c_escaped(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// Parses protobuf text format.
pub fn from_text<M: Message + Name + Default>(text: &str) -> Result<M, FormatError> {
    from_dynamic(DynamicMessage::parse_text_format(descriptor::<M>(), text)?)
}

/// The message in protobuf's JSON mapping (lowerCamelCase names, 64-bit integers and bytes as
/// strings, enums by name), indented, as p4c writes `.p4info.json` files.
pub fn to_json<M: Message + Name>(message: &M) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::pretty(&mut out);
    dynamic(message)
        .serialize(&mut serializer)
        .expect("serializing to memory cannot fail");
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

/// Parses protobuf's JSON mapping (both lowerCamelCase and original field names are accepted).
pub fn from_json<M: Message + Name + Default>(json: &str) -> Result<M, FormatError> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let message = DynamicMessage::deserialize(descriptor::<M>(), &mut deserializer)?;
    deserializer.end()?;
    from_dynamic(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p4::config::v1::{MatchField, P4Info, Preamble, Table};

    /// A file that is not P4Info: the error names the token the parser stopped at, escaped and
    /// cut, and nothing else of the file.
    #[test]
    fn a_file_that_is_not_p4info_is_quoted_no_further_than_its_first_token() {
        let long = "x".repeat(5000);
        let shadow = format!("root:$6${long}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n");
        let error = from_text::<P4Info>(&shadow).unwrap_err().to_string();
        assert!(error.contains("'root'"), "{error}");
        assert!(
            !error.contains("daemon") && !error.contains("19000"),
            "{error}"
        );
        let quoted = format!("\"\u{1b}[31m{long}\"");
        let error = from_text::<P4Info>(&quoted).unwrap_err().to_string();
        assert!(
            error.chars().count() <= MAX_TEXT_ERROR_CHARS + 3,
            "{} characters: {error}",
            error.len()
        );
        assert!(!error.contains('\u{1b}'), "{error}");
    }

    fn sample() -> P4Info {
        P4Info {
            tables: vec![Table {
                preamble: Some(Preamble {
                    id: 37375156,
                    name: "MyIngress.ipv4_lpm".into(),
                    alias: "ipv4_lpm".into(),
                    ..Default::default()
                }),
                match_fields: vec![MatchField {
                    id: 1,
                    name: "hdr.ipv4.dstAddr".into(),
                    bitwidth: 32,
                    r#match: Some(crate::p4::config::v1::match_field::Match::MatchType(
                        crate::p4::config::v1::match_field::MatchType::Lpm as i32,
                    )),
                    ..Default::default()
                }],
                size: 1024,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn text_format_is_p4c_layout_and_round_trips() {
        let text = to_text(&sample());
        assert_eq!(
            text,
            "tables {\n  preamble {\n    id: 37375156\n    name: \"MyIngress.ipv4_lpm\"\n    alias: \"ipv4_lpm\"\n  }\n  match_fields {\n    id: 1\n    name: \"hdr.ipv4.dstAddr\"\n    bitwidth: 32\n    match_type: LPM\n  }\n  size: 1024\n}\n"
        );
        assert_eq!(from_text::<P4Info>(&text).unwrap(), sample());
    }

    #[test]
    fn strings_are_c_escaped() {
        assert_eq!(
            c_escaped(b"a\"b'c\\\n\x01\xc3\xa9"),
            r#""a\"b\'c\\\n\001\303\251""#
        );
    }

    #[test]
    fn json_uses_the_protobuf_mapping_and_round_trips() {
        let json = to_json(&sample());
        assert!(json.contains("\"matchFields\""), "{json}");
        assert!(json.contains("\"matchType\": \"LPM\""), "{json}");
        assert_eq!(from_json::<P4Info>(&json).unwrap(), sample());
    }

    #[test]
    fn bad_text_says_where() {
        let err = from_text::<P4Info>("tables {\n  preamble { idd: 1 }\n}\n").unwrap_err();
        assert!(err.to_string().contains("idd"), "{err}");
    }
}
