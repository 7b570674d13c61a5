//! Where each header, header stack and metadata field of a BMv2 JSON lives in the packet's
//! slots, in the IR's storage layout: a header is its validity slot then its fields, a stack its
//! `nextIndex` slot then its elements, metadata (`scalars`, user metadata, `standard_metadata`)
//! its fields alone.

use std::collections::HashMap;

use serde_json::Value;
use softswitch_core::ir::{slot_widths, FieldLayout, Slot, StandardMetadata, MAX_WIDTH, SLOT_BITS};

use crate::json::{array, array_member, flag, member, name, str_member, uint, uint_member};
use crate::{fail, limits, Result};

/// One field of a header.
#[derive(Clone, Debug)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its first slot.
    pub slot: Slot,
    /// How it is stored.
    pub store: FieldStore,
    /// Whether it is signed (`int<W>`).
    pub signed: bool,
}

impl Field {
    /// Its width, for a fixed-width field of one slot.
    pub fn width(&self) -> Option<u16> {
        match self.store {
            FieldStore::One(FieldLayout::Fixed(w)) => Some(w),
            FieldStore::One(FieldLayout::VarBit { .. }) | FieldStore::Wide(_) => None,
        }
    }
}

/// How a header field is stored: in one IR field, or, a field wider than one slot holds, in
/// several (the IR's [`slot_widths`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldStore {
    /// One field of the IR.
    One(FieldLayout),
    /// A fixed-width field of this many bits, more than [`SLOT_BITS`].
    Wide(u16),
}

impl FieldStore {
    /// The IR fields it takes, in wire order.
    pub fn layouts(self) -> Vec<FieldLayout> {
        match self {
            FieldStore::One(l) => vec![l],
            FieldStore::Wide(w) => slot_widths(w).map(FieldLayout::Fixed).collect(),
        }
    }

    /// The slots it takes.
    pub fn slots(self) -> u32 {
        self.layouts().iter().map(FieldLayout::slots).sum()
    }
}

/// One header instance (or metadata instance).
#[derive(Clone, Debug)]
pub struct Header {
    /// Its name in the JSON.
    pub name: String,
    /// Its validity slot (`None` for metadata, which is always valid).
    pub valid: Option<Slot>,
    /// Its header type (an index into `header_layouts`).
    pub layout: usize,
    /// Its fields.
    pub fields: Vec<Field>,
}

impl Header {
    /// The field `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Slots from the validity slot (or first field) to the last field.
    pub fn len(&self) -> u32 {
        u32::from(self.valid.is_some()) + self.fields.iter().map(|f| f.store.slots()).sum::<u32>()
    }

    /// Whether it has no slots at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its first slot.
    pub fn base(&self) -> Option<Slot> {
        self.valid.or_else(|| self.fields.first().map(|f| f.slot))
    }
}

/// A header stack.
#[derive(Clone, Debug)]
pub struct Stack {
    /// Its `nextIndex` slot, followed by its elements.
    pub base: Slot,
    /// Its elements (indices into [`Layout::headers`]).
    pub elements: Vec<usize>,
    /// The elements' header type.
    pub layout: usize,
    /// Slots per element.
    pub stride: u32,
}

/// A stack of header unions: its `nextIndex` slot, then its elements, each the union's member
/// headers in order (`stride` slots per element).
#[derive(Clone, Debug)]
pub struct UnionStack {
    /// Its `nextIndex` slot, followed by its elements.
    pub base: Slot,
    /// Its elements.
    pub count: u32,
    /// Slots per element.
    pub stride: u32,
    /// Each member: its name in the union type, its validity slot's offset into an element and
    /// its header type.
    pub members: Vec<(String, u32, usize)>,
}

impl UnionStack {
    /// The validity offsets of every member.
    pub fn valids(&self) -> Vec<u32> {
        self.members.iter().map(|m| m.1).collect()
    }
}

/// Every instance's place.
#[derive(Debug, Default)]
pub struct Layout {
    /// Header and metadata instances.
    pub headers: Vec<Header>,
    by_name: HashMap<String, usize>,
    /// Header stacks by name.
    pub stacks: HashMap<String, Stack>,
    /// Header unions by name: their member headers.
    pub unions: HashMap<String, Vec<usize>>,
    /// The union each union member header is in.
    pub union_of: HashMap<usize, String>,
    /// Stacks of header unions by name.
    pub union_stacks: HashMap<String, UnionStack>,
    /// The fields of each header type.
    pub header_layouts: Vec<Vec<FieldLayout>>,
    /// The fixed-width bits of each header type.
    pub header_bits: Vec<u32>,
    /// Slots allocated so far.
    pub slots: u32,
    /// `standard_metadata`.
    pub std_meta: StandardMetadata,
    /// User metadata (every metadata instance but `standard_metadata`).
    pub user_meta: (Slot, u32),
}

/// A header type as declared.
struct HeaderType {
    name: String,
    fields: Vec<(String, FieldStore, bool)>,
}

impl Layout {
    /// The layout of the program `root`'s headers.
    pub fn new(root: &Value) -> Result<Layout> {
        let types = header_types(root)?;
        let mut layout = Layout {
            header_layouts: types
                .iter()
                .map(|t| t.fields.iter().flat_map(|f| f.1.layouts()).collect())
                .collect(),
            header_bits: types
                .iter()
                .map(|t| {
                    t.fields
                        .iter()
                        .flat_map(|f| f.1.layouts())
                        .map(|l| match l {
                            FieldLayout::Fixed(w) => u32::from(w),
                            FieldLayout::VarBit { .. } => 0,
                        })
                        .sum()
                })
                .collect(),
            ..Layout::default()
        };
        let headers = array(member(root, "headers", "the program")?, "\"headers\"")?;
        let mut decls = Vec::new();
        for h in headers {
            let hname = name(h, "a header")?;
            let what = format!("header {hname}");
            let tname = str_member(h, "header_type", &what)?;
            let Some(ty) = types.iter().position(|t| t.name == tname) else {
                return fail(format!("{what} has an unknown header type {tname}"));
            };
            decls.push((hname.to_string(), ty, flag(h, "metadata", &what)?));
        }
        // User metadata first, in one range, then standard_metadata, stacks, other headers.
        let start = layout.slots;
        for (hname, ty, meta) in &decls {
            if *meta && hname != "standard_metadata" {
                layout.place(hname, *ty, &types, false)?;
            }
        }
        layout.user_meta = (start, layout.slots - start);
        if let Some((hname, ty, _)) = decls.iter().find(|d| d.0 == "standard_metadata") {
            layout.place(hname, *ty, &types, false)?;
        }
        layout.std_meta = layout.standard_metadata()?;
        for s in array_member(root, "header_stacks", "the program")? {
            let sname = name(s, "a header stack")?;
            let what = format!("header stack {sname}");
            let ids = array(member(s, "header_ids", &what)?, &what)?;
            let base = layout.alloc(1)?;
            let mut elements = Vec::new();
            for id in ids {
                let id = uint(id, &what)? as usize;
                let Some((hname, ty, _)) = decls.get(id) else {
                    return fail(format!("{what} names header id {id}, which does not exist"));
                };
                if layout.by_name.contains_key(hname) {
                    return fail(format!("{what}: header {hname} is in two places"));
                }
                elements.push(layout.place(hname, *ty, &types, true)?);
            }
            let Some(&first) = elements.first() else {
                return fail(format!("{what} has no elements"));
            };
            let element_layout = layout.headers[first].layout;
            if elements
                .iter()
                .any(|&e| layout.headers[e].layout != element_layout)
            {
                return fail(format!("{what} mixes header types"));
            }
            let stride = layout.headers[first].len();
            layout.stacks.insert(
                sname.to_string(),
                Stack {
                    base,
                    elements,
                    layout: element_layout,
                    stride,
                },
            );
        }
        layout.union_stacks(root, &decls, &types)?;
        for (hname, ty, meta) in &decls {
            if !*meta && !layout.by_name.contains_key(hname) {
                layout.place(hname, *ty, &types, true)?;
            }
        }
        for u in array_member(root, "header_unions", "the program")? {
            let uname = name(u, "a header union")?;
            let what = format!("header union {uname}");
            let mut members = Vec::new();
            for id in array_member(u, "header_ids", &what)? {
                let id = uint(id, &what)? as usize;
                let Some(h) = decls.get(id).and_then(|d| layout.by_name.get(&d.0)) else {
                    return fail(format!("{what} names header id {id}, which does not exist"));
                };
                members.push(*h);
                layout.union_of.insert(*h, uname.to_string());
            }
            layout.unions.insert(uname.to_string(), members);
        }
        Ok(layout)
    }

    /// Places the stacks of header unions (`header_union_stacks`), each element's members
    /// together.
    fn union_stacks(
        &mut self,
        root: &Value,
        decls: &[(String, usize, bool)],
        types: &[HeaderType],
    ) -> Result<()> {
        let mut unions = HashMap::new();
        for u in array_member(root, "header_unions", "the program")? {
            unions.insert(uint_member(u, "id", "a header union")?, u);
        }
        let union_types = array_member(root, "header_union_types", "the program")?;
        for s in array_member(root, "header_union_stacks", "the program")? {
            let sname = name(s, "a header union stack")?;
            let what = format!("header union stack {sname}");
            let tname = str_member(s, "union_type", &what)?;
            let Some(utype) = union_types
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(tname))
            else {
                return fail(format!("{what} has an unknown union type {tname}"));
            };
            let mut names = Vec::new();
            for m in array_member(utype, "headers", &what)? {
                let parts = array(m, &what)?;
                match parts.first().and_then(Value::as_str) {
                    Some(n) => names.push(n.to_string()),
                    None => return fail(format!("{what}: a member of {tname} has no name")),
                }
            }
            let base = self.alloc(1)?;
            let mut members: Vec<(String, u32, usize)> = Vec::new();
            let mut count = 0u32;
            let mut stride = 0;
            for uid in array_member(s, "header_union_ids", &what)? {
                let uid = uint(uid, &what)?;
                let Some(u) = unions.get(&uid) else {
                    return fail(format!("{what} names union id {uid}, which does not exist"));
                };
                let ids = array_member(u, "header_ids", &what)?;
                if ids.len() != names.len() {
                    return fail(format!(
                        "{what}: union {uid} does not have {tname}'s members"
                    ));
                }
                let start = self.slots;
                for (j, id) in ids.iter().enumerate() {
                    let id = uint(id, &what)? as usize;
                    let Some((hname, ty, meta)) = decls.get(id) else {
                        return fail(format!("{what} names header id {id}, which does not exist"));
                    };
                    if *meta || self.by_name.contains_key(hname) {
                        return fail(format!(
                            "{what}: header {hname} is metadata or in two places"
                        ));
                    }
                    let h = self.place(hname, *ty, types, true)?;
                    let Some(off) = self.headers[h].valid.map(|v| v - start) else {
                        return fail(format!("{what}: header {hname} has no validity"));
                    };
                    match members.get(j) {
                        None if count == 0 => members.push((names[j].clone(), off, *ty)),
                        Some(m) if m.1 == off && m.2 == *ty => {}
                        _ => return fail(format!("{what} mixes header types")),
                    }
                }
                stride = self.slots - start;
                count += 1;
            }
            if count == 0 {
                return fail(format!("{what} has no elements"));
            }
            self.union_stacks.insert(
                sname.to_string(),
                UnionStack {
                    base,
                    count,
                    stride,
                    members,
                },
            );
        }
        Ok(())
    }

    /// The validity slots of the other members of the union header `h` is in (empty when it
    /// is in none): BMv2 invalidates them when `h` becomes valid.
    pub fn union_siblings(&self, h: usize) -> Vec<Slot> {
        let Some(members) = self.union_of.get(&h).and_then(|u| self.unions.get(u)) else {
            return Vec::new();
        };
        members
            .iter()
            .filter(|&&m| m != h)
            .filter_map(|&m| self.headers[m].valid)
            .collect()
    }

    /// The instance `name`.
    pub fn header(&self, name: &str) -> Result<&Header> {
        match self.by_name.get(name) {
            Some(&i) => Ok(&self.headers[i]),
            None => fail(format!("no header or metadata instance is called {name}")),
        }
    }

    /// The index of instance `name`.
    pub fn header_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// A fresh slot range of `n` slots, within [`limits::MAX_SLOTS`].
    pub fn alloc(&mut self, n: u32) -> Result<Slot> {
        let start = self.slots;
        match self
            .slots
            .checked_add(n)
            .filter(|&s| s <= limits::MAX_SLOTS)
        {
            Some(end) => {
                self.slots = end;
                Ok(start)
            }
            None => fail(format!(
                "the program needs more than {} slots of per-packet state (limits::MAX_SLOTS)",
                limits::MAX_SLOTS
            )),
        }
    }

    fn place(
        &mut self,
        hname: &str,
        ty: usize,
        types: &[HeaderType],
        with_validity: bool,
    ) -> Result<usize> {
        if self.by_name.contains_key(hname) {
            return fail(format!("two instances are called {hname}"));
        }
        let valid = if with_validity {
            Some(self.alloc(1)?)
        } else {
            None
        };
        let mut fields = Vec::new();
        for (fname, store, signed) in &types[ty].fields {
            fields.push(Field {
                name: fname.clone(),
                slot: self.alloc(store.slots())?,
                store: *store,
                signed: *signed,
            });
        }
        self.headers.push(Header {
            name: hname.to_string(),
            valid,
            layout: ty,
            fields,
        });
        self.by_name
            .insert(hname.to_string(), self.headers.len() - 1);
        Ok(self.headers.len() - 1)
    }

    fn standard_metadata(&mut self) -> Result<StandardMetadata> {
        let slot = |field: &str| -> Result<Slot> {
            let found = self
                .by_name
                .get("standard_metadata")
                .and_then(|&h| self.headers[h].field(field))
                .map(|f| f.slot);
            match found {
                Some(s) => Ok(s),
                // A program whose standard_metadata lacks a field still needs its slot.
                None => self.alloc(1),
            }
        };
        StandardMetadata::from_fields(slot)
    }
}

fn header_types(root: &Value) -> Result<Vec<HeaderType>> {
    let mut types = Vec::new();
    for t in array(
        member(root, "header_types", "the program")?,
        "\"header_types\"",
    )? {
        let tname = name(t, "a header type")?;
        let what = format!("header type {tname}");
        let mut fields = Vec::new();
        for f in array(member(t, "fields", &what)?, &what)? {
            let parts = array(f, &format!("a field of {what}"))?;
            let fname = parts
                .first()
                .and_then(Value::as_str)
                .map_or_else(|| fail(format!("a field of {what} has no name")), Ok)?;
            let fwhat = format!("field {tname}.{fname}");
            let layout = match parts.get(1) {
                Some(Value::String(s)) if s == "*" => {
                    let bytes = uint_member(t, "max_length", &what)?;
                    if bytes > 1 << 12 {
                        return fail(format!("{fwhat}: a varbit of {bytes} bytes is too long"));
                    }
                    FieldStore::One(FieldLayout::VarBit {
                        max: bytes as u32 * 8,
                    })
                }
                Some(w) => {
                    let w = uint(w, &format!("the width of {fwhat}"))?;
                    if w > u64::from(MAX_WIDTH) {
                        return fail(format!(
                            "{fwhat} has {w} bits; softswitch supports fields of up to {MAX_WIDTH}, \
                             as p4c does"
                        ));
                    }
                    if w > u64::from(SLOT_BITS) {
                        FieldStore::Wide(w as u16)
                    } else {
                        FieldStore::One(FieldLayout::Fixed(w as u16))
                    }
                }
                None => return fail(format!("{fwhat} has no width")),
            };
            let signed = parts.get(2).and_then(Value::as_bool).unwrap_or(false);
            fields.push((fname.to_string(), layout, signed));
        }
        types.push(HeaderType {
            name: tname.to_string(),
            fields,
        });
    }
    Ok(types)
}
