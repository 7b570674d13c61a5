//! P4 types as P4Info's `P4DataTypeSpec`, with the named types they use added to `type_info`
//! (structs, headers, unions, enums, serializable enums, errors), as p4c's type-spec converter
//! writes them for digests.

use p4runtime::p4::config::v1::{
    p4_bitstring_like_type_spec as bitstring, p4_data_type_spec::TypeSpec, p4_enum_type_spec,
    p4_header_type_spec, p4_header_union_type_spec, p4_serializable_enum_type_spec,
    p4_struct_type_spec, P4BitTypeSpec, P4BitstringLikeTypeSpec, P4BoolType, P4DataTypeSpec,
    P4EnumTypeSpec, P4ErrorType, P4ErrorTypeSpec, P4HeaderStackTypeSpec, P4HeaderTypeSpec,
    P4HeaderUnionTypeSpec, P4IntTypeSpec, P4NamedType, P4SerializableEnumTypeSpec,
    P4StructTypeSpec, P4TupleTypeSpec, P4TypeInfo, P4VarbitTypeSpec,
};

use softswitch_frontend::ast::AggregateKind;
use softswitch_frontend::types::{Type, Types};

/// Converts types, collecting the named ones into a `P4TypeInfo`.
pub struct TypeSpecs<'a> {
    types: &'a Types,
    errors: &'a [String],
    /// The named types seen so far.
    pub info: P4TypeInfo,
}

impl<'a> TypeSpecs<'a> {
    /// A converter over the program's `types` and error names.
    pub fn new(types: &'a Types, errors: &'a [String]) -> Self {
        TypeSpecs {
            types,
            errors,
            info: P4TypeInfo::default(),
        }
    }

    /// The spec of `ty`.
    pub fn spec(&mut self, ty: &Type) -> P4DataTypeSpec {
        let spec = match ty {
            Type::Bits { .. } | Type::VarBit(_) => TypeSpec::Bitstring(bitstring_like(ty)),
            Type::Bool => TypeSpec::Bool(P4BoolType {}),
            Type::Error => {
                if self.info.error.is_none() {
                    self.info.error = Some(P4ErrorTypeSpec {
                        members: self.errors.to_vec(),
                    });
                }
                TypeSpec::Error(P4ErrorType {})
            }
            Type::Tuple(elems) => TypeSpec::Tuple(P4TupleTypeSpec {
                members: elems.iter().map(|t| self.spec(t)).collect(),
            }),
            Type::Enum(i) => self.enumeration(*i),
            Type::Aggregate(i) => self.aggregate(*i),
            Type::Stack(i, n) => {
                self.aggregate(*i);
                TypeSpec::HeaderStack(P4HeaderStackTypeSpec {
                    header: Some(named(&self.types.aggregates[*i].name)),
                    size: *n as i32,
                })
            }
            Type::Int | Type::String | Type::MatchKind | Type::Void | Type::Var => {
                unreachable!(
                    "no data of type {} reaches the control plane",
                    self.types.show(ty)
                )
            }
        };
        P4DataTypeSpec {
            type_spec: Some(spec),
        }
    }

    fn enumeration(&mut self, i: usize) -> TypeSpec {
        let e = &self.types.enums[i];
        let name = e.name.clone();
        match e.repr {
            Some((width, _)) => {
                let members = e
                    .members
                    .iter()
                    .map(|(n, v)| p4_serializable_enum_type_spec::Member {
                        name: n.clone(),
                        value: p4values::bytestring::padded(*v, u32::from(width)),
                        ..Default::default()
                    })
                    .collect();
                self.info.serializable_enums.insert(
                    name.clone(),
                    P4SerializableEnumTypeSpec {
                        underlying_type: Some(P4BitTypeSpec {
                            bitwidth: i32::from(width),
                        }),
                        members,
                        ..Default::default()
                    },
                );
                TypeSpec::SerializableEnum(named(&name))
            }
            None => {
                let members = e
                    .members
                    .iter()
                    .map(|(n, _)| p4_enum_type_spec::Member {
                        name: n.clone(),
                        ..Default::default()
                    })
                    .collect();
                self.info.enums.insert(
                    name.clone(),
                    P4EnumTypeSpec {
                        members,
                        ..Default::default()
                    },
                );
                TypeSpec::Enum(named(&name))
            }
        }
    }

    fn aggregate(&mut self, i: usize) -> TypeSpec {
        let a = &self.types.aggregates[i];
        let name = a.name.clone();
        // Each named type is described once: a type reached along many paths (a struct with
        // several fields of one struct type) is not walked again.
        match a.kind {
            AggregateKind::Header if self.info.headers.contains_key(&name) => {
                return TypeSpec::Header(named(&name))
            }
            AggregateKind::HeaderUnion if self.info.header_unions.contains_key(&name) => {
                return TypeSpec::HeaderUnion(named(&name))
            }
            AggregateKind::Struct if self.info.structs.contains_key(&name) => {
                return TypeSpec::Struct(named(&name))
            }
            _ => {}
        }
        match a.kind {
            AggregateKind::Header => {
                let members = a
                    .fields
                    .iter()
                    .map(|(n, t, _)| p4_header_type_spec::Member {
                        name: n.clone(),
                        type_spec: Some(bitstring_like(&self.scalar_of(t))),
                    })
                    .collect();
                self.info.headers.insert(
                    name.clone(),
                    P4HeaderTypeSpec {
                        members,
                        ..Default::default()
                    },
                );
                TypeSpec::Header(named(&name))
            }
            AggregateKind::HeaderUnion => {
                let fields = a.fields.clone();
                let members = fields
                    .iter()
                    .map(|(n, t, _)| {
                        let Type::Aggregate(h) = t else {
                            unreachable!("a union's fields are headers")
                        };
                        self.aggregate(*h);
                        p4_header_union_type_spec::Member {
                            name: n.clone(),
                            header: Some(named(&self.types.aggregates[*h].name)),
                        }
                    })
                    .collect();
                self.info.header_unions.insert(
                    name.clone(),
                    P4HeaderUnionTypeSpec {
                        members,
                        ..Default::default()
                    },
                );
                TypeSpec::HeaderUnion(named(&name))
            }
            AggregateKind::Struct => {
                let fields = a.fields.clone();
                let members = fields
                    .iter()
                    .map(|(n, t, _)| p4_struct_type_spec::Member {
                        name: n.clone(),
                        type_spec: Some(self.spec(t)),
                    })
                    .collect();
                self.info.structs.insert(
                    name.clone(),
                    P4StructTypeSpec {
                        members,
                        ..Default::default()
                    },
                );
                TypeSpec::Struct(named(&name))
            }
        }
    }

    /// A header field's type as a bit string (`bool` is `bit<1>`, an enum its representation).
    fn scalar_of(&self, ty: &Type) -> Type {
        match ty {
            Type::Bits { .. } | Type::VarBit(_) => ty.clone(),
            other => Type::Bits {
                width: self.types.scalar_width(other).unwrap_or(1),
                signed: false,
            },
        }
    }
}

/// `bit<W>`, `int<W>` or `varbit<W>` as a bit-string spec.
pub fn bitstring_like(ty: &Type) -> P4BitstringLikeTypeSpec {
    let spec = match ty {
        Type::Bits {
            width,
            signed: false,
        } => bitstring::TypeSpec::Bit(P4BitTypeSpec {
            bitwidth: i32::from(*width),
        }),
        Type::Bits {
            width,
            signed: true,
        } => bitstring::TypeSpec::Int(P4IntTypeSpec {
            bitwidth: i32::from(*width),
        }),
        Type::VarBit(max) => bitstring::TypeSpec::Varbit(P4VarbitTypeSpec {
            max_bitwidth: *max as i32,
        }),
        other => unreachable!("{other:?} is not a bit string"),
    };
    P4BitstringLikeTypeSpec {
        type_spec: Some(spec),
        ..Default::default()
    }
}

fn named(name: &str) -> P4NamedType {
    P4NamedType {
        name: name.to_string(),
    }
}
