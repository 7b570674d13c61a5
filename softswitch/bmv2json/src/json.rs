//! Reading JSON values with the context of the object they belong to, so every error says
//! where in the program it is.

use serde_json::Value;

use crate::{fail, limits, Result};

/// The member `key` of object `v` (`what` names the object in errors).
pub fn member<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Value> {
    match v.get(key) {
        Some(m) => Ok(m),
        None => fail(format!("{what} has no \"{key}\"")),
    }
}

/// The array `v`, at most [`limits::MAX_OBJECTS`] long.
pub fn array<'a>(v: &'a Value, what: &str) -> Result<&'a [Value]> {
    match v {
        Value::Array(a) if a.len() <= limits::MAX_OBJECTS => Ok(a),
        Value::Array(a) => fail(format!(
            "{what} has {} elements, more than {} (limits::MAX_OBJECTS)",
            a.len(),
            limits::MAX_OBJECTS
        )),
        _ => fail(format!("{what} must be an array")),
    }
}

/// The array member `key` of `v`; a missing or null member is empty.
pub fn array_member<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a [Value]> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(a) => array(a, &format!("{what}'s \"{key}\"")),
    }
}

/// The string `v`.
pub fn string<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    v.as_str()
        .map_or_else(|| fail(format!("{what} must be a string")), Ok)
}

/// The string member `key` of `v`.
pub fn str_member<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a str> {
    string(member(v, key, what)?, &format!("{what}'s \"{key}\""))
}

/// The non-negative integer `v`.
pub fn uint(v: &Value, what: &str) -> Result<u64> {
    v.as_u64().map_or_else(
        || fail(format!("{what} must be a non-negative integer")),
        Ok,
    )
}

/// The non-negative integer member `key` of `v`.
pub fn uint_member(v: &Value, key: &str, what: &str) -> Result<u64> {
    uint(member(v, key, what)?, &format!("{what}'s \"{key}\""))
}

/// The boolean member `key` of `v`, false when missing or null.
pub fn flag(v: &Value, key: &str, what: &str) -> Result<bool> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => fail(format!("{what}'s \"{key}\" must be true or false")),
    }
}

/// The name of object `v` (its `"name"`), for errors and lookups.
pub fn name<'a>(v: &'a Value, what: &str) -> Result<&'a str> {
    str_member(v, "name", what)
}

/// A hexadecimal string (`"0x0800"`, `"-0x1"`, as p4c writes constants) as a 128-bit two's
/// complement value, and whether it was negative.
pub fn hex(s: &str, what: &str) -> Result<(u128, bool)> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
        .unwrap_or(digits);
    let digits = digits.trim_start_matches('0');
    if digits.len() > 32 {
        return fail(format!(
            "{what}: {s} is wider than 128 bits, which softswitch does not support"
        ));
    }
    let v = if digits.is_empty() {
        0
    } else {
        u128::from_str_radix(digits, 16).map_err(|_| {
            crate::LoadError::new(format!("{what}: {s} is not a hexadecimal number"))
        })?
    };
    Ok(if neg {
        (v.wrapping_neg(), true)
    } else {
        (v, false)
    })
}

/// A byte string given as hexadecimal (`"0x0a000001"`): its bytes, most significant first,
/// padded on the left to whole bytes.
pub fn hex_bytes(s: &str, what: &str) -> Result<Vec<u8>> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    if digits.len() > 2 * 16 * 64 {
        return fail(format!("{what}: {s} is too long"));
    }
    let padded = if digits.len() % 2 == 1 {
        format!("0{digits}")
    } else {
        digits.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| {
            padded
                .get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .map_or_else(
                    || fail(format!("{what}: {s} is not a hexadecimal byte string")),
                    Ok,
                )
        })
        .collect()
}
