//! BMv2's Thrift values ⇄ the switch's: match keys (`BmMatchParam`) ⇄ [`FieldMatch`], action
//! data (`BmActionData`) ⇄ an [`ActionCall`]'s arguments, entries and default actions read
//! back, and BMv2's priorities (the smallest value wins) ⇄ the switch's (the largest wins).
//! Byte strings are big-endian and padded to their field's whole bytes, as the CLI writes
//! them, but for action data read back, which BMv2 gives in its fewest bytes; the bytestring
//! arithmetic is `p4values`'.

use p4values::bytestring;
use softswitch_core::ir::{self, ActionCall, FieldMatch, MatchKind, Program};
use softswitch_core::table::{prefix_mask, Installed};

use super::bindings::standard::{
    BmActionEntry, BmActionEntryType, BmAddEntryOptions, BmMatchParam, BmMatchParamExact,
    BmMatchParamLPM, BmMatchParamRange, BmMatchParamTernary, BmMatchParamType, BmMtEntry,
    TableOperationErrorCode,
};

/// A value of a `width`-bit field from a byte string, or `code`.
fn value(
    bytes: Option<&Vec<u8>>,
    width: u16,
    code: TableOperationErrorCode,
) -> Result<u128, TableOperationErrorCode> {
    bytes
        .and_then(|b| bytestring::decode(b, width.into()).ok())
        .ok_or(code)
}

/// `value` as BMv2 writes a `width`-bit field.
fn bytes(value: u128, width: u16) -> Vec<u8> {
    bytestring::padded(value, width.into())
}

/// The key of an entry of table `table` from BMv2's match parameters, in key order.
pub fn matches(
    program: &Program,
    table: usize,
    params: &[BmMatchParam],
) -> Result<Vec<FieldMatch>, TableOperationErrorCode> {
    let bad = TableOperationErrorCode::BAD_MATCH_KEY;
    let keys = &program.tables[table].keys;
    if params.len() != keys.len() {
        return Err(bad);
    }
    keys.iter()
        .zip(params)
        .map(|(key, p)| {
            let w = key.width;
            let full = ir::mask(w);
            Ok(match p.type_.ok_or(bad)? {
                BmMatchParamType::EXACT => FieldMatch::Masked {
                    value: value(p.exact.as_ref().and_then(|e| e.key.as_ref()), w, bad)?,
                    mask: full,
                },
                BmMatchParamType::LPM => {
                    let lpm = p.lpm.as_ref().ok_or(bad)?;
                    let len = lpm.prefix_length.ok_or(bad)?;
                    let len = u16::try_from(len).ok().filter(|&l| l <= w).ok_or(bad)?;
                    let mask = prefix_mask(w, len);
                    FieldMatch::Masked {
                        value: value(lpm.key.as_ref(), w, bad)? & mask,
                        mask,
                    }
                }
                BmMatchParamType::TERNARY => {
                    let t = p.ternary.as_ref().ok_or(bad)?;
                    let mask = value(t.mask.as_ref(), w, bad)?;
                    FieldMatch::Masked {
                        value: value(t.key.as_ref(), w, bad)? & mask,
                        mask,
                    }
                }
                BmMatchParamType::RANGE => {
                    let r = p.range.as_ref().ok_or(bad)?;
                    FieldMatch::Range {
                        lo: value(r.start.as_ref(), w, bad)?,
                        hi: value(r.end_.as_ref(), w, bad)?,
                    }
                }
                // VALID keys are P4_14's; p4c's v1model programs have none.
                _ => return Err(bad),
            })
        })
        .collect()
}

/// Whether entries of table `table` carry a priority: a key matches ternary, range or
/// optional.
pub fn has_priority(program: &Program, table: usize) -> bool {
    program.tables[table].has_priority()
}

/// The switch's priority for BMv2's `options.priority` (entries of tables without one get 0).
pub fn priority(
    program: &Program,
    table: usize,
    options: &BmAddEntryOptions,
) -> Result<i64, TableOperationErrorCode> {
    if !has_priority(program, table) {
        return Ok(0);
    }
    match options.priority {
        Some(p) if p >= 0 => Ok(-i64::from(p)),
        _ => Err(TableOperationErrorCode::BAD_MATCH_KEY),
    }
}

/// BMv2's priority of an entry of table `table` whose switch priority is `ours` (-1: none).
fn bmv2_priority(program: &Program, table: usize, ours: i64) -> i32 {
    if has_priority(program, table) {
        i32::try_from(-ours).unwrap_or(i32::MAX)
    } else {
        -1
    }
}

/// The call of action `action` with BMv2's action data.
pub fn call(
    program: &Program,
    action: usize,
    data: &[Vec<u8>],
) -> Result<ActionCall, TableOperationErrorCode> {
    let bad = TableOperationErrorCode::BAD_ACTION_DATA;
    let widths = action_data_widths(program, action);
    if widths.len() != data.len() {
        return Err(bad);
    }
    let args = widths
        .into_iter()
        .zip(data)
        .map(|(w, d)| value(Some(d), w, bad))
        .collect::<Result<_, _>>()?;
    Ok(ActionCall { action, args })
}

/// The widths of action `action`'s action-data parameters, in order.
fn action_data_widths(program: &Program, action: usize) -> Vec<u16> {
    program.bodies[program.actions[action].body]
        .params
        .iter()
        .filter(|p| p.action_data)
        .map(|p| p.width)
        .collect()
}

/// An action with its data as BMv2 reads it back: each value in its fewest bytes, zero as one
/// (BMv2 keeps action data as numbers, without their width: simple_switch_CLI's `table_dump`
/// prints port 2 as `02`, where match keys keep their field's width).
pub fn action_entry(program: &Program, call: &ActionCall) -> BmActionEntry {
    let data: Vec<Vec<u8>> = call.args.iter().map(|&v| bytestring::encode(v)).collect();
    BmActionEntry::new(
        BmActionEntryType::ACTION_DATA,
        program.actions[call.action].name.clone(),
        data,
        None,
        None,
    )
}

/// An entry handle as BMv2 sends it: the switch's 32-bit handle (a version in the high 8
/// bits) in the wire's `i32`, negative from version 128 on, as BMv2's C++ server converts it.
pub fn wire_handle(handle: usize) -> i32 {
    handle as u32 as i32
}

/// An entry handle from the wire: [`wire_handle`] undone.
pub fn entry_handle(h: i32) -> usize {
    h as u32 as usize
}

/// Entry `handle` of table `table` as BMv2 reads it back.
pub fn entry(program: &Program, table: usize, handle: usize, installed: &Installed) -> BmMtEntry {
    let keys = &program.tables[table].keys;
    let match_key = keys
        .iter()
        .zip(&installed.entry.matches)
        .map(|(key, m)| match_param(key, m))
        .collect::<Vec<_>>();
    BmMtEntry::new(
        match_key,
        BmAddEntryOptions::new(bmv2_priority(program, table, installed.entry.priority)),
        wire_handle(handle),
        action_entry(program, &installed.entry.action),
        None,
    )
}

/// One key field of an entry as BMv2 reads it back: in the type of the key's match kind.
fn match_param(key: &ir::Key, m: &FieldMatch) -> BmMatchParam {
    let w = key.width;
    let param = |type_, exact, lpm, ternary, range| {
        BmMatchParam::new(type_, exact, lpm, ternary, None, range)
    };
    match (key.kind, *m) {
        (MatchKind::Exact, FieldMatch::Masked { value, .. }) => param(
            BmMatchParamType::EXACT,
            Some(BmMatchParamExact::new(bytes(value, w))),
            None,
            None,
            None,
        ),
        (MatchKind::Lpm, FieldMatch::Masked { value, mask }) => param(
            BmMatchParamType::LPM,
            None,
            Some(BmMatchParamLPM::new(
                bytes(value, w),
                mask.count_ones() as i32,
            )),
            None,
            None,
        ),
        (_, FieldMatch::Range { lo, hi }) => param(
            BmMatchParamType::RANGE,
            None,
            None,
            None,
            Some(BmMatchParamRange::new(bytes(lo, w), bytes(hi, w))),
        ),
        (_, FieldMatch::Masked { value, mask }) => param(
            BmMatchParamType::TERNARY,
            None,
            None,
            Some(BmMatchParamTernary::new(bytes(value, w), bytes(mask, w))),
            None,
        ),
    }
}
