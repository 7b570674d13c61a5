//! Controller packet I/O and digests in P4Runtime form: the `@controller_header("packet_in")`
//! header at the front of a frame the pipeline sent to the CPU port becomes PacketIn metadata;
//! PacketOut metadata becomes the `packet_out` header in front of the payload; the flattened
//! fields of a digest become P4Data shaped by the digest's type.

use p4runtime::p4::config::v1 as p4i;
use p4runtime::p4::v1 as p4v1;
use tonic::Status;

use super::bytes::{decode, encode};
use softswitch_core::bits::{read_bits, BitWriter};
use softswitch_frontend::types::{Type, Types};

/// The controller packet metadata named `name` ("packet_in" or "packet_out"), if declared.
fn header<'a>(info: &'a p4i::P4Info, name: &str) -> Option<&'a p4i::ControllerPacketMetadata> {
    info.controller_packet_metadata
        .iter()
        .find(|c| c.preamble.as_ref().is_some_and(|p| p.name == name))
}

/// A frame sent to the CPU port as a PacketIn: the packet_in header's fields as metadata, the
/// rest as payload. Without a packet_in header, the whole frame is the payload.
pub fn packet_in(info: &p4i::P4Info, frame: Vec<u8>) -> p4v1::PacketIn {
    let Some(h) = header(info, "packet_in") else {
        return p4v1::PacketIn {
            payload: frame,
            metadata: Vec::new(),
        };
    };
    let bits: usize = h.metadata.iter().map(|m| m.bitwidth as usize).sum();
    let len = bits.div_ceil(8);
    if frame.len() < len {
        return p4v1::PacketIn {
            payload: frame,
            metadata: Vec::new(),
        };
    }
    let mut offset = 0;
    let metadata = h
        .metadata
        .iter()
        .map(|m| {
            let value = read_bits(&frame, offset, m.bitwidth as u16);
            offset += m.bitwidth as usize;
            p4v1::PacketMetadata {
                metadata_id: m.id,
                value: encode(value),
            }
        })
        .collect();
    p4v1::PacketIn {
        payload: frame[len..].to_vec(),
        metadata,
    }
}

/// The frame a PacketOut injects: the packet_out header built from its metadata (every field
/// required), then the payload. Without a packet_out header, metadata must be empty.
pub fn packet_out(info: &p4i::P4Info, out: &p4v1::PacketOut) -> Result<Vec<u8>, Status> {
    let Some(h) = header(info, "packet_out") else {
        if out.metadata.is_empty() {
            return Ok(out.payload.clone());
        }
        return Err(Status::invalid_argument(
            "the program declares no @controller_header(\"packet_out\") header: PacketOut takes no metadata",
        ));
    };
    let mut w = BitWriter::new();
    for m in &h.metadata {
        let given: Vec<&p4v1::PacketMetadata> = out
            .metadata
            .iter()
            .filter(|x| x.metadata_id == m.id)
            .collect();
        let [given] = given.as_slice() else {
            return Err(Status::invalid_argument(format!(
                "PacketOut needs metadata {} ({}) exactly once",
                m.id, m.name
            )));
        };
        w.write(
            decode(&given.value, m.bitwidth as u16, &m.name)?,
            m.bitwidth as u16,
        );
    }
    if let Some(unknown) = out
        .metadata
        .iter()
        .find(|x| !h.metadata.iter().any(|m| m.id == x.metadata_id))
    {
        return Err(Status::invalid_argument(format!(
            "packet_out has no metadata with id {}",
            unknown.metadata_id
        )));
    }
    w.extend(&out.payload);
    Ok(w.into_bytes())
}

/// A digest's flattened field values as P4Data of type `ty` (`errors`: the program's error
/// names by code).
pub fn digest_data(types: &Types, errors: &[String], ty: &Type, values: &[u128]) -> p4v1::P4Data {
    let mut values = values.iter().copied();
    Shaper { types, errors }.data(ty, &mut values)
}

struct Shaper<'a> {
    types: &'a Types,
    errors: &'a [String],
}

impl Shaper<'_> {
    fn data(&self, ty: &Type, values: &mut impl Iterator<Item = u128>) -> p4v1::P4Data {
        let types = self.types;
        use p4v1::p4_data::Data;
        let mut next = || values.next().unwrap_or(0);
        let d = match ty {
            Type::Bool => Data::Bool(next() != 0),
            Type::Error => Data::Error(
                self.errors
                    .get(next() as usize)
                    .cloned()
                    .unwrap_or_default(),
            ),
            Type::Tuple(elems) => Data::Tuple(p4v1::P4StructLike {
                members: elems.iter().map(|t| self.data(t, values)).collect(),
            }),
            Type::Aggregate(i) => {
                let a = &types.aggregates[*i];
                let members: Vec<p4v1::P4Data> = a
                    .fields
                    .iter()
                    .map(|(_, t, _)| self.data(t, values))
                    .collect();
                match a.kind {
                    softswitch_frontend::ast::AggregateKind::Header => {
                        Data::Header(p4v1::P4Header {
                            is_valid: true,
                            bitstrings: members
                                .into_iter()
                                .filter_map(|m| match m.data {
                                    Some(Data::Bitstring(b)) => Some(b),
                                    _ => None,
                                })
                                .collect(),
                        })
                    }
                    _ => Data::Struct(p4v1::P4StructLike { members }),
                }
            }
            Type::Enum(i) => {
                let e = &types.enums[*i];
                let v = next();
                match e.repr {
                    Some(_) => Data::EnumValue(encode(v)),
                    None => Data::Enum(
                        e.members
                            .iter()
                            .find(|(_, x)| *x == v)
                            .map(|(n, _)| n.clone())
                            .unwrap_or_default(),
                    ),
                }
            }
            _ => Data::Bitstring(encode(next())),
        };
        p4v1::P4Data { data: Some(d) }
    }
}
