//! What a gNMI server serves: a tree of counters it can read now, and how one leaf's value is
//! written in each encoding it offers.

use crate::{
    path::DataPath,
    proto::gnmi::{typed_value::Value, Encoding, ModelData, TypedValue},
};

/// One leaf of the tree: its path and its value now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Where it is.
    pub path: DataPath,
    /// Its value (a counter, or a gauge in whole units).
    pub value: u64,
}

/// Leaves being collected, as a [`CounterTree`] reads them; `.0` is what it returns.
#[derive(Clone, Debug, Default)]
pub struct Leaves(pub Vec<Leaf>);

impl Leaves {
    /// Adds the leaves `name = value` under `parent`.
    pub fn under<'a>(
        &mut self,
        parent: &DataPath,
        leaves: impl IntoIterator<Item = (&'a str, u64)>,
    ) {
        for (name, value) in leaves {
            self.0.push(Leaf {
                path: parent.join(name),
                value,
            });
        }
    }
}

/// A tree of counters a server can read now (the agent's).
pub trait CounterTree: Send + Sync + 'static {
    /// Every leaf, read now. May block (it reads maps or a switch's state); the server calls it
    /// off its async threads.
    fn read(&self) -> anyhow::Result<Vec<Leaf>>;

    /// The origins its leaves are under ("" for OpenConfig's); a path naming another is refused.
    fn origins(&self) -> &[&str];

    /// The schema models the tree follows, for Capabilities.
    fn models(&self) -> Vec<ModelData>;
}

/// The encodings the server writes values in: JSON_IETF, JSON and PROTO (scalars in
/// `TypedValue`), in the order Capabilities lists them.
pub const ENCODINGS: [Encoding; 3] = [Encoding::JsonIetf, Encoding::Json, Encoding::Proto];

/// `value` in `encoding` (one of [`ENCODINGS`]): RFC 7951 writes a 64-bit integer as a JSON
/// string, plain JSON as a number, PROTO as `uint_val`.
pub fn typed_value(value: u64, encoding: Encoding) -> TypedValue {
    let value = match encoding {
        Encoding::JsonIetf => Value::JsonIetfVal(format!("\"{value}\"").into_bytes()),
        Encoding::Json => Value::JsonVal(value.to_string().into_bytes()),
        _ => Value::UintVal(value),
    };
    TypedValue { value: Some(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_writes_the_value_its_way() {
        let v = |e| typed_value(18_446_744_073_709_551_615, e).value.unwrap();
        assert_eq!(
            v(Encoding::JsonIetf),
            Value::JsonIetfVal(b"\"18446744073709551615\"".to_vec())
        );
        assert_eq!(
            v(Encoding::Json),
            Value::JsonVal(b"18446744073709551615".to_vec())
        );
        assert_eq!(v(Encoding::Proto), Value::UintVal(u64::MAX));
    }
}
