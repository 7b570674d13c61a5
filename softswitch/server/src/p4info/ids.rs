//! P4Runtime ids and aliases as p4c assigns them (its control-plane symbol table): an entity's id
//! is its type's prefix byte followed by the low 24 bits of the Jenkins one-at-a-time hash of its
//! fully qualified name; names without an `@id` are hashed in sorted order per type and a
//! collision moves to the next hash value (linear probing on the hash, never on the prefix). An
//! alias is the shortest suffix of dot-separated components that no other symbol shares.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use p4runtime::p4::config::v1::p4_ids::Prefix;

/// A problem with an `@id` annotation.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id's top byte is set and is not the entity type's prefix.
    #[error("@id {id:#010x} has the wrong 8-bit prefix for this kind of entity (expected {prefix:#04x})")]
    WrongPrefix {
        /// The id given.
        id: u32,
        /// The prefix of the entity's type.
        prefix: u32,
    },
    /// Two declarations were given the same id.
    #[error("@id {0:#010x} is assigned to more than one declaration")]
    Duplicate(u32),
}

/// The Jenkins one-at-a-time hash.
pub fn jenkins_one_at_a_time(key: &[u8]) -> u32 {
    let mut hash: u32 = 0;
    for &b in key {
        hash = hash.wrapping_add(u32::from(b));
        hash = hash.wrapping_add(hash << 10);
        hash ^= hash >> 6;
    }
    hash = hash.wrapping_add(hash << 3);
    hash ^= hash >> 11;
    hash.wrapping_add(hash << 15)
}

/// The control-plane symbols of a program: collect them all with [`Symbols::add`], then
/// [`Symbols::assign`] ids, then look ids and aliases up.
#[derive(Debug, Default)]
pub struct Symbols {
    /// Per prefix: name → explicit id (from `@id`), if any.
    pending: BTreeMap<u32, BTreeMap<String, Option<u32>>>,
    explicit: BTreeSet<u32>,
    ids: HashMap<(u32, String), u32>,
    suffixes: SuffixCounts,
}

impl Symbols {
    /// Adds a symbol of type `prefix` (again is harmless) with its `@id`, if it has one.
    pub fn add(
        &mut self,
        prefix: Prefix,
        name: &str,
        explicit: Option<u32>,
    ) -> Result<(), IdError> {
        let prefix = prefix as u32;
        let explicit = explicit.map(|id| with_prefix(prefix, id)).transpose()?;
        let names = self.pending.entry(prefix).or_default();
        if names.contains_key(name) {
            return Ok(());
        }
        if let Some(id) = explicit {
            if !self.explicit.insert(id) {
                return Err(IdError::Duplicate(id));
            }
        }
        names.insert(name.to_string(), explicit);
        self.suffixes.add(name);
        Ok(())
    }

    /// Assigns every symbol its id: explicit ones as given, then hashed ones by type and name.
    pub fn assign(&mut self) {
        let mut taken = self.explicit.clone();
        for (prefix, names) in &self.pending {
            for (name, id) in names {
                if let Some(id) = id {
                    self.ids.insert((*prefix, name.clone()), *id);
                }
            }
        }
        for (prefix, names) in &self.pending {
            for (name, _) in names.iter().filter(|(_, id)| id.is_none()) {
                let mut hash = jenkins_one_at_a_time(name.as_bytes());
                let id = loop {
                    let id = (prefix << 24) | (hash & 0x00ff_ffff);
                    if taken.insert(id) {
                        break id;
                    }
                    hash = hash.wrapping_add(1);
                };
                self.ids.insert((*prefix, name.clone()), id);
            }
        }
    }

    /// The id of symbol `name` of type `prefix` (after [`Symbols::assign`]).
    pub fn id(&self, prefix: Prefix, name: &str) -> u32 {
        self.ids
            .get(&(prefix as u32, name.to_string()))
            .copied()
            .unwrap_or_else(|| panic!("symbol {name} of type {prefix:?} was not added"))
    }

    /// The shortest suffix of `name`'s dot-separated components shared by no other symbol.
    pub fn alias(&self, name: &str) -> String {
        self.suffixes.shortest_unique(name)
    }
}

/// `id` with the type prefix `prefix` in its top byte (`@id(1)` on a table is `0x02000001`).
fn with_prefix(prefix: u32, id: u32) -> Result<u32, IdError> {
    let top = id & 0xff00_0000;
    if top != 0 && top != prefix << 24 {
        return Err(IdError::WrongPrefix { id, prefix });
    }
    Ok(id | (prefix << 24))
}

/// How many distinct symbols end with each suffix of components.
#[derive(Debug, Default)]
struct SuffixCounts {
    symbols: BTreeSet<String>,
    counts: HashMap<String, usize>,
}

impl SuffixCounts {
    fn add(&mut self, symbol: &str) {
        if !self.symbols.insert(symbol.to_string()) {
            return;
        }
        for suffix in suffixes(symbol) {
            *self.counts.entry(suffix.to_string()).or_default() += 1;
        }
    }

    fn shortest_unique(&self, symbol: &str) -> String {
        suffixes(symbol)
            .find(|s| self.counts.get(*s).copied().unwrap_or(0) < 2)
            .unwrap_or(symbol)
            .to_string()
    }
}

/// `a.b.c` → `c`, `b.c`, `a.b.c`.
fn suffixes(symbol: &str) -> impl Iterator<Item = &str> {
    let starts = symbol
        .rmatch_indices('.')
        .map(|(i, _)| i + 1)
        .chain(std::iter::once(0));
    starts.map(move |i| &symbol[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ids from the P4 tutorials' basic.p4 P4Info as p4c writes it (MyIngress.ipv4_lpm,
    // MyIngress.drop, MyIngress.ipv4_forward, NoAction).
    #[test]
    fn ids_are_the_prefix_and_the_hash_as_p4c_computes_them() {
        let mut s = Symbols::default();
        for (prefix, name) in [
            (Prefix::Table, "MyIngress.ipv4_lpm"),
            (Prefix::Action, "MyIngress.drop"),
            (Prefix::Action, "MyIngress.ipv4_forward"),
            (Prefix::Action, "NoAction"),
        ] {
            s.add(prefix, name, None).unwrap();
        }
        s.assign();
        assert_eq!(s.id(Prefix::Table, "MyIngress.ipv4_lpm"), 37375156);
        assert_eq!(s.id(Prefix::Action, "MyIngress.drop"), 25652968);
        assert_eq!(s.id(Prefix::Action, "MyIngress.ipv4_forward"), 28792405);
        assert_eq!(s.id(Prefix::Action, "NoAction"), 21257015);
    }

    #[test]
    fn explicit_ids_get_the_prefix_and_are_avoided_by_hashed_ones() {
        let mut s = Symbols::default();
        let hashed =
            (Prefix::Action as u32) << 24 | (jenkins_one_at_a_time(b"MyIngress.drop") & 0xff_ffff);
        s.add(Prefix::Action, "other", Some(hashed & 0xff_ffff))
            .unwrap();
        s.add(Prefix::Action, "MyIngress.drop", None).unwrap();
        s.assign();
        assert_eq!(s.id(Prefix::Action, "other"), hashed);
        assert_eq!(s.id(Prefix::Action, "MyIngress.drop"), hashed + 1);
    }

    #[test]
    fn bad_explicit_ids_are_refused() {
        let mut s = Symbols::default();
        assert_eq!(
            s.add(Prefix::Table, "t", Some(0x0100_0001)),
            Err(IdError::WrongPrefix {
                id: 0x0100_0001,
                prefix: 2
            })
        );
        s.add(Prefix::Table, "a", Some(5)).unwrap();
        assert_eq!(
            s.add(Prefix::Table, "b", Some(0x0200_0005)),
            Err(IdError::Duplicate(0x0200_0005))
        );
    }

    #[test]
    fn aliases_are_the_shortest_unique_suffix() {
        let mut s = Symbols::default();
        for name in [
            "ingress._drop",
            "egress._drop",
            "ingress.flowlet",
            "NoAction",
        ] {
            s.add(Prefix::Action, name, None).unwrap();
        }
        s.add(Prefix::Table, "ingress.flowlet", None).unwrap();
        assert_eq!(s.alias("ingress._drop"), "ingress._drop");
        assert_eq!(s.alias("ingress.flowlet"), "flowlet");
        assert_eq!(s.alias("NoAction"), "NoAction");
    }
}
