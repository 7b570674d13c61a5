//! The checker's types: what a P4 type is after typedefs are resolved, how many slots it takes
//! and how deep it nests (an aggregate keeps both, computed once when it is declared).

use crate::ast::{AggregateKind, Annotation};
use std::collections::HashMap;
use std::fmt;

/// A resolved P4 type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `bit<W>` or `int<W>`.
    Bits {
        /// W, in bits.
        width: u16,
        /// `int<W>` (two's complement) rather than `bit<W>`.
        signed: bool,
    },
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
    /// The slots a value of it takes (see [`Types::size`]).
    pub size: u32,
    /// How deep it nests (see [`Types::depth`]).
    pub depth: usize,
    /// How many parts it has (see [`Types::parts`]).
    pub parts: u32,
    /// Each field's slot offset (after a header's validity slot), in order.
    offsets: Vec<u32>,
    /// Each field's index, by name.
    index: HashMap<String, usize>,
}

impl Aggregate {
    /// The fields with their slot offsets: name, offset, type.
    pub fn fields_at(&self) -> impl Iterator<Item = (&str, u32, &Type)> {
        self.fields
            .iter()
            .zip(&self.offsets)
            .map(|((name, ty, _), off)| (name.as_str(), *off, ty))
    }
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
    /// Each member's index, by name.
    index: HashMap<String, usize>,
}

impl EnumDef {
    /// An enum of these members, in order (a name given twice names its first member).
    pub fn new(name: String, repr: Option<(u16, bool)>, members: Vec<(String, u128)>) -> Self {
        let mut index = HashMap::new();
        for (i, (m, _)) in members.iter().enumerate() {
            index.entry(m.clone()).or_insert(i);
        }
        EnumDef {
            name,
            repr,
            members,
            index,
        }
    }

    /// The value of member `name`.
    pub fn member(&self, name: &str) -> Option<u128> {
        self.index.get(name).map(|&i| self.members[i].1)
    }
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
    /// The number of slots a value of `ty` takes (saturating at `u32::MAX`: the checker
    /// refuses types larger than [`MAX_SLOTS`](crate::limits::MAX_SLOTS) where they are made).
    pub fn size(&self, ty: &Type) -> u32 {
        match ty {
            Type::Aggregate(i) => self.aggregates[*i].size,
            Type::Stack(i, n) => n.saturating_mul(self.aggregates[*i].size).saturating_add(1),
            Type::Tuple(elems) => elems
                .iter()
                .fold(0u32, |sum, t| sum.saturating_add(self.size(t))),
            Type::VarBit(max) => softswitch_core::ir::FieldLayout::VarBit { max: *max }.slots(),
            Type::Bits { width, .. } => softswitch_core::ir::slot_widths(*width).count() as u32,
            _ => 1,
        }
    }

    /// An aggregate of these types (not added to `self`), its size, depth, parts (saturating)
    /// and offsets computed once; `layout` is the header layout index.
    pub fn aggregate(
        &self,
        name: String,
        kind: AggregateKind,
        fields: Vec<(String, Type, Vec<Annotation>)>,
        layout: usize,
    ) -> Aggregate {
        let mut size = u32::from(kind == AggregateKind::Header);
        let mut offsets = Vec::with_capacity(fields.len());
        for (_, t, _) in &fields {
            offsets.push(size);
            size = size.saturating_add(self.size(t));
        }
        let depth = 1 + fields
            .iter()
            .map(|(_, t, _)| self.depth(t))
            .max()
            .unwrap_or(0);
        let parts = fields
            .iter()
            .fold(1u32, |sum, (_, t, _)| sum.saturating_add(self.parts(t)));
        let index = fields
            .iter()
            .enumerate()
            .map(|(i, (n, _, _))| (n.clone(), i))
            .collect();
        Aggregate {
            name,
            kind,
            fields,
            layout,
            size,
            depth,
            parts,
            offsets,
            index,
        }
    }

    /// How many parts a value of `ty` has: scalars, aggregates, stacks and stack elements,
    /// counted along every path (a struct with two fields of one type counts its parts twice).
    /// A traversal of the value (a comparison, an emit, a field list) visits as many.
    /// Saturating at `u32::MAX`.
    pub fn parts(&self, ty: &Type) -> u32 {
        match ty {
            Type::Aggregate(i) => self.aggregates[*i].parts,
            Type::Stack(i, n) => n
                .saturating_mul(self.aggregates[*i].parts)
                .saturating_add(1),
            Type::Tuple(elems) => elems
                .iter()
                .fold(1u32, |sum, t| sum.saturating_add(self.parts(t))),
            _ => 1,
        }
    }

    /// How deep `ty` nests: 0 for a scalar, one more than its deepest element for an aggregate,
    /// a stack or a tuple.
    pub fn depth(&self, ty: &Type) -> usize {
        match ty {
            Type::Aggregate(i) | Type::Stack(i, _) => {
                self.aggregates[*i].depth + usize::from(matches!(ty, Type::Stack(..)))
            }
            Type::Tuple(elems) => 1 + elems.iter().map(|t| self.depth(t)).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// The elements of a tuple with their slot offsets.
    pub fn tuple_elements<'a>(
        &'a self,
        elems: &'a [Type],
    ) -> impl Iterator<Item = (u32, &'a Type)> {
        elems.iter().scan(0u32, |offset, t| {
            let at = *offset;
            *offset = offset.saturating_add(self.size(t));
            Some((at, t))
        })
    }

    /// The slot offset and type of element `i` of a tuple.
    pub fn tuple_element(&self, elems: &[Type], i: usize) -> Option<(u32, Type)> {
        let ty = elems.get(i)?.clone();
        Some((elems[..i].iter().map(|t| self.size(t)).sum(), ty))
    }

    /// The slot offset and type of field `name` of aggregate `agg` (after a header's validity slot).
    pub fn field(&self, agg: usize, name: &str) -> Option<(u32, Type)> {
        let a = &self.aggregates[agg];
        let &i = a.index.get(name)?;
        Some((a.offsets[i], a.fields[i].1.clone()))
    }

    /// Whether `ty` is a header.
    pub fn is_header(&self, ty: &Type) -> bool {
        matches!(ty, Type::Aggregate(i) if self.aggregates[*i].kind == AggregateKind::Header)
    }

    /// Whether `ty` is a header union.
    pub fn is_union(&self, ty: &Type) -> bool {
        matches!(ty, Type::Aggregate(i) if self.aggregates[*i].kind == AggregateKind::HeaderUnion)
    }

    /// The validity slots of a header (its first slot) or of each member of a header union,
    /// as offsets into a value of `ty`; none for other types.
    pub fn validity_offsets(&self, ty: &Type) -> Vec<u32> {
        match ty {
            Type::Aggregate(_) if self.is_header(ty) => vec![0],
            Type::Aggregate(i) if self.is_union(ty) => self.aggregates[*i]
                .fields_at()
                .map(|(_, off, _)| off)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The width of a scalar type stored in one slot (`bool` is 1 bit, `error` and plain enums 32;
    /// none for a [wide](Self::is_wide) `bit<W>`).
    pub fn scalar_width(&self, ty: &Type) -> Option<u16> {
        match ty {
            Type::Bits { width, .. } if !Self::is_wide(ty) => Some(*width),
            Type::Bool => Some(1),
            Type::Error => Some(32),
            Type::Enum(i) => Some(self.enums[*i].repr.map_or(32, |(w, _)| w)),
            _ => None,
        }
    }

    /// The size in bits of a value of `ty` on the wire (varbit fields counted at 0, or at
    /// their maximum with `max`), saturating.
    pub fn size_in_bits(&self, ty: &Type, max: bool) -> u32 {
        match ty {
            Type::Aggregate(a) => self.aggregates[*a]
                .fields
                .iter()
                .fold(0u32, |sum, (_, t, _)| {
                    sum.saturating_add(self.size_in_bits(t, max))
                }),
            Type::Stack(a, n) => n.saturating_mul(self.size_in_bits(&Type::Aggregate(*a), max)),
            Type::Tuple(elems) => elems
                .iter()
                .fold(0u32, |sum, t| sum.saturating_add(self.size_in_bits(t, max))),
            Type::VarBit(m) => {
                if max {
                    *m
                } else {
                    0
                }
            }
            Type::Bits { width, .. } => u32::from(*width),
            t => u32::from(self.scalar_width(t).unwrap_or(0)),
        }
    }

    /// Whether `ty` is a `bit<W>`/`int<W>` wider than one slot holds (see
    /// [`slot_widths`](softswitch_core::ir::slot_widths)): stored like an aggregate, in several
    /// slots, and not a scalar.
    pub fn is_wide(ty: &Type) -> bool {
        matches!(ty, Type::Bits { width, .. } if *width > softswitch_core::ir::SLOT_BITS)
    }

    /// Whether a value of `ty` holds a [wide](Self::is_wide) `bit<W>` anywhere.
    pub fn holds_wide(&self, ty: &Type) -> bool {
        match ty {
            Type::Aggregate(i) | Type::Stack(i, _) => self.aggregates[*i]
                .fields
                .iter()
                .any(|(_, t, _)| self.holds_wide(t)),
            Type::Tuple(elems) => elems.iter().any(|t| self.holds_wide(t)),
            t => Self::is_wide(t),
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
