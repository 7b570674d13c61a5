//! Name resolution against P4Info, as the P4 tutorials' helper does it and a little kinder:
//! a name is found by its fully qualified name (`MyIngress.ipv4_lpm`), its P4Info alias (p4c's
//! shortest unique suffix), or any dotted suffix that only one entity of its kind has
//! (`ipv4_lpm`).

/// A name that resolves to no entity, or to several.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// No entity of this kind has the name.
    #[error("unknown {kind} '{name}' (known: {})", known_list(.known))]
    Unknown {
        /// `table`, `action`, `counter`, `match field of MyIngress.t`, ...
        kind: String,
        /// The name asked for.
        name: String,
        /// The names there are.
        known: Vec<String>,
    },
    /// The suffix fits several entities.
    #[error("{kind} '{name}' is ambiguous: {}", .matches.join(", "))]
    Ambiguous {
        /// The kind of entity.
        kind: String,
        /// The name asked for.
        name: String,
        /// The fully qualified names it fits.
        matches: Vec<String>,
    },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}

/// One entity a name may resolve to: its fully qualified name, its alias, and what to return.
pub struct Candidate<'a, T> {
    /// The fully qualified name.
    pub name: &'a str,
    /// The P4Info alias (may be empty).
    pub alias: &'a str,
    /// What the caller wants back.
    pub item: T,
}

/// Finds `wanted` among `candidates` of `kind`.
pub fn resolve<'a, T>(
    kind: &str,
    wanted: &str,
    candidates: impl IntoIterator<Item = Candidate<'a, T>>,
) -> Result<T, NameError> {
    let candidates: Vec<Candidate<'a, T>> = candidates.into_iter().collect();
    let exact = candidates
        .iter()
        .position(|c| c.name == wanted)
        .or_else(|| candidates.iter().position(|c| c.alias == wanted));
    if let Some(i) = exact {
        return Ok(candidates.into_iter().nth(i).expect("index in range").item);
    }
    let suffix = format!(".{wanted}");
    let mut fitting: Vec<Candidate<'a, T>> = Vec::new();
    let mut known = Vec::new();
    for candidate in candidates {
        known.push(candidate.name.to_owned());
        if candidate.name.ends_with(&suffix) {
            fitting.push(candidate);
        }
    }
    match fitting.len() {
        1 => Ok(fitting.pop().expect("one").item),
        0 => Err(NameError::Unknown {
            kind: kind.to_owned(),
            name: wanted.to_owned(),
            known,
        }),
        _ => Err(NameError::Ambiguous {
            kind: kind.to_owned(),
            name: wanted.to_owned(),
            matches: fitting.iter().map(|c| c.name.to_owned()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES: [(&str, &str); 4] = [
        ("MyIngress.ipv4_lpm", "ipv4_lpm"),
        ("MyIngress.acl", "MyIngress.acl"),
        ("MyEgress.acl", "MyEgress.acl"),
        ("MyIngress.inner.ecmp", "ecmp"),
    ];

    fn find(wanted: &str) -> Result<usize, NameError> {
        resolve(
            "table",
            wanted,
            TABLES
                .iter()
                .enumerate()
                .map(|(item, (name, alias))| Candidate { name, alias, item }),
        )
    }

    #[test]
    fn full_names_aliases_and_unique_suffixes() {
        assert_eq!(find("MyIngress.ipv4_lpm"), Ok(0));
        assert_eq!(find("ipv4_lpm"), Ok(0));
        assert_eq!(find("MyEgress.acl"), Ok(2));
        assert_eq!(find("ecmp"), Ok(3));
        assert_eq!(find("inner.ecmp"), Ok(3));
    }

    #[test]
    fn a_suffix_must_end_at_a_dot() {
        assert!(matches!(find("lpm"), Err(NameError::Unknown { .. })));
        assert!(matches!(
            find("Ingress.acl"),
            Err(NameError::Unknown { .. })
        ));
    }

    #[test]
    fn an_ambiguous_suffix_lists_its_matches() {
        let error = find("acl").unwrap_err();
        assert_eq!(
            error.to_string(),
            "table 'acl' is ambiguous: MyIngress.acl, MyEgress.acl"
        );
    }

    #[test]
    fn an_unknown_name_is_named_with_the_known_ones() {
        let error = find("ipv4_lmp").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown table 'ipv4_lmp' (known: MyIngress.ipv4_lpm, MyIngress.acl, MyEgress.acl, MyIngress.inner.ecmp)"
        );
        let none = resolve::<()>("counter", "c", std::iter::empty()).unwrap_err();
        assert_eq!(none.to_string(), "unknown counter 'c' (known: none)");
    }
}
