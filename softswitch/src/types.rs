//! The checker's types: what a P4 type is after typedefs are resolved, and how many slots it takes.

use crate::ast::{AggregateKind, Annotation};
use std::fmt;

/// A resolved P4 type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `bit<W>` or `int<W>`.
    Bits { width: u16, signed: bool },
    /// `int`: an arbitrary-precision compile-time integer.
    Int,
    /// `bool`.
    Bool,
    /// `error`.
    Error,
    /// `string`.
    String,
    /// `match_kind`.
    MatchKind,
    /// `void`.
    Void,
    /// An enum (index into [`Types::enums`]).
    Enum(usize),
    /// A header, header union or struct (index into [`Types::aggregates`]).
    Aggregate(usize),
    /// A header stack: element aggregate and size.
    Stack(usize, u32),
    /// A type variable of a generic extern (accepts anything).
    Var,
    /// `varbit<max>` (a header field).
    VarBit(u32),
    /// `tuple<...>`: its elements stored one after the other.
    Tuple(Vec<Type>),
}

/// A header, header union or struct declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    /// Name.
    pub name: String,
    /// Which kind.
    pub kind: AggregateKind,
    /// Fields: name, type, annotations.
    pub fields: Vec<(String, Type, Vec<Annotation>)>,
    /// For a header: its layout index in the program.
    pub layout: usize,
}

/// An enum declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumDef {
    /// Name.
    pub name: String,
    /// The underlying type of a serializable enum.
    pub repr: Option<(u16, bool)>,
    /// Members and their values.
    pub members: Vec<(String, u128)>,
}

/// All declared aggregates and enums.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Types {
    /// Headers, unions, structs.
    pub aggregates: Vec<Aggregate>,
    /// Enums.
    pub enums: Vec<EnumDef>,
}

impl Types {
    /// The number of slots a value of `ty` takes.
    pub fn size(&self, ty: &Type) -> u32 {
        match ty {
            Type::Aggregate(i) => {
                let a = &self.aggregates[*i];
                let fields: u32 = a.fields.iter().map(|(_, t, _)| self.size(t)).sum();
                fields + u32::from(a.kind == AggregateKind::Header)
            }
            Type::Stack(i, n) => 1 + n * self.size(&Type::Aggregate(*i)),
            Type::Tuple(elems) => elems.iter().map(|t| self.size(t)).sum(),
            Type::VarBit(max) => crate::ir::FieldLayout::VarBit { max: *max }.slots(),
            _ => 1,
        }
    }

    /// The slot offset and type of element `i` of a tuple.
    pub fn tuple_element(&self, elems: &[Type], i: usize) -> Option<(u32, Type)> {
        let ty = elems.get(i)?.clone();
        Some((elems[..i].iter().map(|t| self.size(t)).sum(), ty))
    }

    /// The slot offset and type of field `name` of aggregate `agg` (after a header's validity slot).
    pub fn field(&self, agg: usize, name: &str) -> Option<(u32, Type)> {
        let a = &self.aggregates[agg];
        let mut offset = u32::from(a.kind == AggregateKind::Header);
        for (n, t, _) in &a.fields {
            if n == name {
                return Some((offset, t.clone()));
            }
            offset += self.size(t);
        }
        None
    }

    /// Whether `ty` is a header.
    pub fn is_header(&self, ty: &Type) -> bool {
        matches!(ty, Type::Aggregate(i) if self.aggregates[*i].kind == AggregateKind::Header)
    }

    /// The width of a scalar type stored in one slot (`bool` is 1 bit, `error` and plain enums 32).
    pub fn scalar_width(&self, ty: &Type) -> Option<u16> {
        match ty {
            Type::Bits { width, .. } => Some(*width),
            Type::Bool => Some(1),
            Type::Error => Some(32),
            Type::Enum(i) => Some(self.enums[*i].repr.map_or(32, |(w, _)| w)),
            _ => None,
        }
    }

    /// A displayable form of `ty`.
    pub fn show<'a>(&'a self, ty: &'a Type) -> impl fmt::Display + 'a {
        ShowType { types: self, ty }
    }
}

struct ShowType<'a> {
    types: &'a Types,
    ty: &'a Type,
}

impl fmt::Display for ShowType<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            Type::Bits {
                width,
                signed: false,
            } => write!(f, "bit<{width}>"),
            Type::Bits {
                width,
                signed: true,
            } => write!(f, "int<{width}>"),
            Type::Int => write!(f, "int"),
            Type::Bool => write!(f, "bool"),
            Type::Error => write!(f, "error"),
            Type::String => write!(f, "string"),
            Type::MatchKind => write!(f, "match_kind"),
            Type::Void => write!(f, "void"),
            Type::Enum(i) => write!(f, "{}", self.types.enums[*i].name),
            Type::Aggregate(i) => write!(f, "{}", self.types.aggregates[*i].name),
            Type::Stack(i, n) => write!(f, "{}[{n}]", self.types.aggregates[*i].name),
            Type::Var => write!(f, "_"),
            Type::VarBit(max) => write!(f, "varbit<{max}>"),
            Type::Tuple(elems) => {
                write!(f, "tuple<")?;
                for (i, e) in elems.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(
                        f,
                        "{sep}{}",
                        ShowType {
                            types: self.types,
                            ty: e
                        }
                    )?;
                }
                write!(f, ">")
            }
        }
    }
}
