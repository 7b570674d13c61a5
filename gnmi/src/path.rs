//! gNMI paths: the typed form the server matches, converted from and to the protobuf `Path`,
//! written as the text form of the gNMI path conventions
//! (`origin:/interfaces/interface[name=eth0]/state/counters/in-pkts`), and matched with the
//! wildcards `*` (any one element, or any value of a key) and `...` (any number of elements).

use std::{collections::BTreeMap, fmt};

use crate::proto::gnmi;

/// The origin of OpenConfig paths. An empty origin means it too (gNMI specification 2.2.2.1).
pub const OPENCONFIG: &str = "openconfig";

/// The element that matches any number of elements, itself included none.
pub const ANY_ELEMENTS: &str = "...";

/// The element name, or key value, that matches any one.
pub const ANY: &str = "*";

/// Bounds on a path a client sends.
#[derive(Clone, Copy, Debug)]
pub struct PathLimits {
    /// Elements in one path (prefix and path together).
    pub max_elements: usize,
    /// Keys on one element.
    pub max_keys: usize,
    /// Bytes of an origin, element name, key name or key value.
    pub max_name_bytes: usize,
}

impl Default for PathLimits {
    fn default() -> Self {
        Self {
            max_elements: 32,
            max_keys: 8,
            max_name_bytes: 256,
        }
    }
}

/// Why a path is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    /// More elements than [`PathLimits::max_elements`].
    #[error("a path has {0} elements, more than the {1} allowed")]
    TooManyElements(usize, usize),
    /// More keys on one element than [`PathLimits::max_keys`].
    #[error("element {0:?} has {1} keys, more than the {2} allowed")]
    TooManyKeys(String, usize, usize),
    /// A name longer than [`PathLimits::max_name_bytes`].
    #[error("a name of {0} bytes, longer than the {1} allowed")]
    NameTooLong(usize, usize),
    /// An empty element name.
    #[error("a path element has an empty name")]
    EmptyName,
    /// The prefix and the path each name an origin, different ones.
    #[error("the prefix's origin {0:?} and the path's {1:?} differ")]
    ConflictingOrigins(String, String),
    /// The pre-0.4 `element` field (strings), which gNMI 0.10 clients no longer send.
    #[error("the deprecated Path.element field is not supported: send Path.elem")]
    DeprecatedElement,
}

/// One element: a name and its keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Elem {
    /// The node's name, or [`ANY`] or [`ANY_ELEMENTS`] in a query.
    pub name: String,
    /// Key name to value (a value of [`ANY`] in a query matches any).
    pub keys: BTreeMap<String, String>,
}

impl Elem {
    /// An element without keys.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            keys: BTreeMap::new(),
        }
    }

    /// An element with one key.
    pub fn keyed(name: &str, key: &str, value: &str) -> Self {
        Self {
            name: name.to_owned(),
            keys: BTreeMap::from([(key.to_owned(), value.to_owned())]),
        }
    }

    /// Whether this query element matches the data tree's element `node`.
    fn matches(&self, node: &Elem) -> bool {
        (self.name == ANY || self.name == node.name)
            && self
                .keys
                .iter()
                .all(|(k, v)| node.keys.get(k).is_some_and(|nv| v == ANY || v == nv))
    }
}

/// A path: an origin ("" for OpenConfig) and its elements.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DataPath {
    /// The schema the path is in: "" (OpenConfig) or a named origin such as `lossless`.
    pub origin: String,
    /// Its elements, from the root.
    pub elems: Vec<Elem>,
}

impl DataPath {
    /// The root of `origin` ("" or [`OPENCONFIG`] for OpenConfig).
    pub fn root(origin: &str) -> Self {
        Self {
            origin: normal_origin(origin).to_owned(),
            elems: Vec::new(),
        }
    }

    /// This path with `elem` appended.
    pub fn child(&self, elem: Elem) -> Self {
        let mut child = self.clone();
        child.elems.push(elem);
        child
    }

    /// This path with an element `name` without keys appended.
    pub fn join(&self, name: &str) -> Self {
        self.child(Elem::new(name))
    }

    /// The path a client names by `prefix` and `path` (either may be absent), within `limits`.
    /// The origin is the one the prefix or the path names (gNMI specification 2.2.2.1); both
    /// may name it, but not two different ones.
    pub fn from_proto(
        prefix: Option<&gnmi::Path>,
        path: Option<&gnmi::Path>,
        limits: &PathLimits,
    ) -> Result<Self, PathError> {
        let mut out = DataPath::default();
        let mut named: Option<&str> = None;
        for part in [prefix, path].into_iter().flatten() {
            #[allow(deprecated)] // read only to refuse it
            if !part.element.is_empty() {
                return Err(PathError::DeprecatedElement);
            }
            check_name(&part.origin, limits)?;
            if !part.origin.is_empty() {
                let origin = normal_origin(&part.origin);
                match named {
                    Some(first) if normal_origin(first) != origin => {
                        return Err(PathError::ConflictingOrigins(
                            first.to_owned(),
                            part.origin.clone(),
                        ))
                    }
                    _ => named = Some(&part.origin),
                }
                out.origin = origin.to_owned();
            }
            for elem in &part.elem {
                if elem.name.is_empty() {
                    return Err(PathError::EmptyName);
                }
                check_name(&elem.name, limits)?;
                if elem.key.len() > limits.max_keys {
                    return Err(PathError::TooManyKeys(
                        elem.name.clone(),
                        elem.key.len(),
                        limits.max_keys,
                    ));
                }
                for (k, v) in &elem.key {
                    check_name(k, limits)?;
                    check_name(v, limits)?;
                }
                out.elems.push(Elem {
                    name: elem.name.clone(),
                    keys: elem
                        .key
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                });
                if out.elems.len() > limits.max_elements {
                    return Err(PathError::TooManyElements(
                        out.elems.len(),
                        limits.max_elements,
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The protobuf form.
    pub fn to_proto(&self) -> gnmi::Path {
        gnmi::Path {
            origin: self.origin.clone(),
            elem: self
                .elems
                .iter()
                .map(|e| gnmi::PathElem {
                    name: e.name.clone(),
                    key: e.keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Whether this query path names `node` or one of its ancestors: the same origin, and its
    /// elements match the first ones of `node`'s, `*` matching any one element and `...` any
    /// number of them.
    pub fn matches(&self, node: &DataPath) -> bool {
        if self.origin != node.origin {
            return false;
        }
        // prefix[j]: whether the query's first i elements match node's first j (dynamic
        // programming over i, so that `...` costs no backtracking).
        let query = &self.elems;
        let node = &node.elems;
        let mut prefix = vec![false; node.len() + 1];
        prefix[0] = true;
        for q in query {
            let mut next = vec![false; node.len() + 1];
            if q.name == ANY_ELEMENTS {
                let mut reached = false;
                for j in 0..=node.len() {
                    reached |= prefix[j];
                    next[j] = reached;
                }
            } else {
                for j in 0..node.len() {
                    next[j + 1] = prefix[j] && q.matches(&node[j]);
                }
            }
            prefix = next;
        }
        prefix.into_iter().any(|m| m)
    }
}

impl fmt::Display for DataPath {
    /// The text form of the gNMI path conventions, `\` escaping `/`, `[`, `]`, `=` and `\`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.origin.is_empty() {
            write!(f, "{}:", self.origin)?;
        }
        if self.elems.is_empty() {
            return f.write_str("/");
        }
        for elem in &self.elems {
            write!(f, "/{}", escape(&elem.name))?;
            for (k, v) in &elem.keys {
                write!(f, "[{}={}]", escape(k), escape(v))?;
            }
        }
        Ok(())
    }
}

/// "" for OpenConfig, whichever way it is named.
fn normal_origin(origin: &str) -> &str {
    if origin == OPENCONFIG {
        ""
    } else {
        origin
    }
}

fn check_name(name: &str, limits: &PathLimits) -> Result<(), PathError> {
    if name.len() > limits.max_name_bytes {
        return Err(PathError::NameTooLong(name.len(), limits.max_name_bytes));
    }
    Ok(())
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '/' | '[' | ']' | '=' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses the text form the tests write paths in: `[origin:]/elem[key=value]/...`, with
    /// `\` escaping `/`, `[`, `]`, `=` and `\` inside names and values; the error's text.
    fn parse(text: &str, limits: &PathLimits) -> Result<DataPath, String> {
        let syntax = || format!("not a gNMI path: {text}");
        let (origin, rest) = match text.find(":/") {
            Some(i) if !text[..i].contains(['/', '[']) => (&text[..i], &text[i + 1..]),
            _ => ("", text),
        };
        let rest = rest.strip_prefix('/').ok_or_else(syntax)?;
        let mut path = gnmi::Path {
            origin: origin.to_owned(),
            ..Default::default()
        };
        let mut chars = rest.chars().peekable();
        while chars.peek().is_some() {
            let mut elem = gnmi::PathElem {
                name: read_token(&mut chars, &['/', '['])?,
                ..Default::default()
            };
            while chars.peek() == Some(&'[') {
                chars.next();
                let key = read_token(&mut chars, &['='])?;
                chars.next().filter(|c| *c == '=').ok_or_else(syntax)?;
                let value = read_token(&mut chars, &[']'])?;
                chars.next().filter(|c| *c == ']').ok_or_else(syntax)?;
                if key.is_empty() || elem.key.insert(key, value).is_some() {
                    return Err(syntax());
                }
            }
            match chars.next() {
                None | Some('/') => {}
                Some(_) => return Err(syntax()),
            }
            if elem.name.is_empty() {
                // `/` alone is the root; an empty element anywhere else is not a path.
                if path.elem.is_empty() && chars.peek().is_none() {
                    break;
                }
                return Err(PathError::EmptyName.to_string());
            }
            path.elem.push(elem);
        }
        DataPath::from_proto(None, Some(&path), limits).map_err(|e| e.to_string())
    }

    /// Reads up to (not including) an unescaped character of `stop`, undoing `\` escapes.
    fn read_token(
        chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
        stop: &[char],
    ) -> Result<String, String> {
        let mut token = String::new();
        while let Some(&c) = chars.peek() {
            if stop.contains(&c) || (c == '/' && !stop.contains(&']')) {
                break;
            }
            chars.next();
            if c == '\\' {
                token.push(chars.next().ok_or_else(|| "a path ends in \\".to_owned())?);
            } else {
                token.push(c);
            }
        }
        Ok(token)
    }

    fn p(text: &str) -> DataPath {
        parse(text, &PathLimits::default()).unwrap()
    }

    const LEAF: &str = "/interfaces/interface[name=eth0]/state/counters/in-pkts";

    #[test]
    fn text_round_trips_with_origin_keys_and_escapes() {
        for text in [
            "/",
            LEAF,
            "lossless:/interfaces/interface[name=eth0]/pfc/priority[priority=3]/state",
            "/a[k1=v1][k2=v\\]2]/b\\/c",
        ] {
            assert_eq!(p(text).to_string(), text);
        }
        assert_eq!(p("openconfig:/interfaces"), p("/interfaces"));
        let leaf = p(LEAF);
        assert_eq!(leaf.elems.len(), 5);
        assert_eq!(leaf.elems[1].keys["name"], "eth0");
    }

    #[test]
    fn malformed_text_is_refused() {
        for text in [
            "",
            "interfaces",
            "/a//b",
            "/a[k]",
            "/a[=v]",
            "/a[k=v",
            "/a[k=1][k=2]",
            "/a\\",
        ] {
            assert!(parse(text, &PathLimits::default()).is_err(), "{text:?}");
        }
    }

    #[test]
    fn wildcards_match_elements_keys_and_depths() {
        let leaf = p(LEAF);
        for query in [
            "/",
            "/interfaces",
            LEAF,
            "/interfaces/interface",
            "/interfaces/interface[name=*]/state",
            "/interfaces/*/state/counters",
            "/.../in-pkts",
            "/interfaces/.../counters/in-pkts",
            "/.../.../state/...",
            "/interfaces/interface[name=eth0]/state/counters/in-pkts/...",
        ] {
            assert!(p(query).matches(&leaf), "{query} should match");
        }
        for query in [
            "/interfaces/interface[name=eth1]",
            "/interfaces/interface[ifindex=*]",
            "/interfaces/*/counters",
            "/.../out-pkts",
            "/interfaces/interface/state/counters/in-pkts/x",
            "lossless:/interfaces",
        ] {
            assert!(!p(query).matches(&leaf), "{query} should not match");
        }
        let ours = p("lossless:/interfaces/interface[name=eth0]/x");
        assert!(p("lossless:/").matches(&ours));
        assert!(!p("/").matches(&ours));
    }

    #[test]
    fn the_prefix_joins_the_path_and_lends_its_origin() {
        let prefix = p("lossless:/interfaces").to_proto();
        let path = p("/interface[name=eth0]").to_proto();
        let joined = DataPath::from_proto(Some(&prefix), Some(&path), &PathLimits::default());
        assert_eq!(
            joined.unwrap(),
            p("lossless:/interfaces/interface[name=eth0]")
        );
        let limits = PathLimits::default();
        let named = p("lossless:/interface").to_proto();
        assert!(DataPath::from_proto(Some(&prefix), Some(&named), &limits).is_ok());
        let openconfig = gnmi::Path {
            origin: OPENCONFIG.into(),
            ..p("/interface").to_proto()
        };
        assert_eq!(
            DataPath::from_proto(Some(&prefix), Some(&openconfig), &limits),
            Err(PathError::ConflictingOrigins(
                "lossless".into(),
                "openconfig".into()
            ))
        );
        let path_names_it = DataPath::from_proto(Some(&path), Some(&named), &limits);
        assert_eq!(path_names_it.unwrap().origin, "lossless");
    }

    #[test]
    fn paths_past_the_limits_are_refused() {
        let limits = PathLimits::default();
        let deep = "/a".repeat(limits.max_elements + 1);
        assert_eq!(
            parse(&deep, &limits),
            Err(PathError::TooManyElements(33, 32).to_string())
        );
        let keys: String = (0..9).map(|i| format!("[k{i}=v]")).collect();
        assert!(parse(&format!("/a{keys}"), &limits)
            .unwrap_err()
            .contains("9 keys"));
        let long = format!("/{}", "n".repeat(257));
        assert_eq!(
            parse(&long, &limits),
            Err(PathError::NameTooLong(257, 256).to_string())
        );
        #[allow(deprecated)]
        let old = gnmi::Path {
            element: vec!["interfaces".into()],
            ..Default::default()
        };
        assert_eq!(
            DataPath::from_proto(None, Some(&old), &limits),
            Err(PathError::DeprecatedElement)
        );
    }

    #[test]
    fn many_any_elements_cost_no_backtracking() {
        let query = format!("/{}", vec!["..."; 31].join("/")) + "/z";
        let node = p(&format!("{}/y", "/a".repeat(31)));
        assert!(!p(&query).matches(&node));
    }
}
