//! The compiled forms of the statements that move a packet's fields between its bytes and its
//! slots, with their arguments resolved at load: `extract` of a header of fixed-width fields
//! into its slots, `emit` of such headers, and the field list of a checksum extern
//! (`verify_checksum`, `update_checksum` and their `_with_payload` forms).
//!
//! **Words.** A header's fields (or a field list's values) are packed at load into words of at
//! most 64 bits, a wider field making a word of its own: `extract` reads each word with one
//! load ([`read_bits`]) and cuts it into its fields by precomputed shifts, `emit` and the
//! checksum put each word together from its fields and write it with one call of the
//! [`BitWriter`] (IPv4's twelve fields are three words). An extract's words also start a new
//! word where a field would take one past 64 bits from the byte its word starts in, so that
//! a header read from a byte-aligned cursor loads each word as one 8-byte read.
//!
//! **Same semantics.** The checks, their order and their errors, the traces, the bytes written
//! and the extern's ending ([`Checksum::conclude`]) are the interpreter's; what is left to the
//! interpreter's own code is everything else: an `extract` into a header stack or of a header
//! with a `varbit` field, an `emit` of such a header, a checksum over a `varbit` field.

use std::sync::Arc;

use super::{Compiler, Operand, StmtFn, Unsupported};
use crate::bits::{read_bits, BitWriter};
use crate::externs::checksum::Checksum;
use crate::hash::Algorithm;
use crate::interp::{Exec, Flow};
use crate::ir::{
    self, mask, EmitItem, ExternArg, FieldItem, FieldLayout, HeaderRef, Program, Slot,
};

/// Fields packed into one value of `bits` bits, the first field in its highest bits.
struct Word<F> {
    /// Where it starts, in bits from the start of the header or list.
    offset: usize,
    /// Its width: at most 64 unless it is one field.
    bits: u16,
    /// Its fields in order, each with its width and, in a word of at most 64 bits, the mask of
    /// its width.
    fields: Vec<(F, u16, u64)>,
}

/// Packs `fields` (each with its width) into [`Word`]s; with `aligned`, a word also ends where
/// the next field would take it past 64 bits from the byte it starts in.
fn pack<F>(fields: impl IntoIterator<Item = (F, u16)>, aligned: bool) -> Vec<Word<F>> {
    let mut words: Vec<Word<F>> = Vec::new();
    let mut offset = 0;
    for (f, w) in fields {
        let fits = words.last().is_some_and(|last| {
            let lead = if aligned { last.offset % 8 } else { 0 };
            lead + usize::from(last.bits) + usize::from(w) <= 64
        });
        let field = (f, w, mask(w) as u64);
        match words.last_mut() {
            Some(last) if fits => {
                last.bits += w;
                last.fields.push(field);
            }
            _ => words.push(Word {
                offset,
                bits: w,
                fields: vec![field],
            }),
        }
        offset += usize::from(w);
    }
    words
}

impl<F> Word<F> {
    /// Its value, from its fields' values as `value` gives them in order.
    #[inline(always)]
    fn value(&self, mut value: impl FnMut(&F) -> u128) -> u128 {
        if self.bits > 64 {
            let (f, w, _) = &self.fields[0];
            return value(f) & mask(*w);
        }
        let v = self.fields.iter().fold(0u64, |acc, (f, w, m)| {
            let v = value(f) as u64 & m;
            if *w >= 64 {
                v
            } else {
                (acc << w) | v
            }
        });
        u128::from(v)
    }

    /// Writes its value (from its fields' values as `value` gives them) into `out`.
    #[inline(always)]
    fn write(&self, out: &mut BitWriter, value: impl FnMut(&F) -> u128) {
        let v = self.value(value);
        out.write(v, self.bits);
    }
}

impl Word<usize> {
    /// Stores `v`, its value, into the slots of its fields.
    #[inline(always)]
    fn store(&self, v: u128, slots: &mut [u128]) {
        if self.bits > 64 {
            let (s, w, _) = self.fields[0];
            slots[s] = v & mask(w);
            return;
        }
        let v = v as u64;
        let mut left = self.bits;
        for &(s, w, m) in &self.fields {
            left -= w;
            slots[s] = u128::from(v.checked_shr(u32::from(left)).unwrap_or(0) & m);
        }
    }
}

/// A header layout's words, its fields numbered from its first.
type Packed = Arc<[Word<usize>]>;

/// The packed words of every header layout of a program whose fields are all of fixed width,
/// packed once at load and shared by every `extract` and `emit` of that layout: their fields
/// are numbered from the layout's first field (slot `base + 1` of a header at `base`), so that
/// the memory an `extract` or `emit` takes does not grow with its header's fields.
pub(super) struct Layouts {
    /// For each layout, its words for `extract` (aligned) and for `emit`; `None` for a layout
    /// with a `varbit` field.
    packed: Vec<Option<[Packed; 2]>>,
}

impl Layouts {
    /// Packs the layouts of `prog`.
    pub(super) fn new(prog: &Program) -> Layouts {
        let packed = prog
            .header_layouts
            .iter()
            .map(|layout| {
                let fields: Vec<(usize, u16)> = layout
                    .iter()
                    .enumerate()
                    .map(|(i, f)| match *f {
                        FieldLayout::Fixed(w) => Some((i, w)),
                        FieldLayout::VarBit { .. } => None,
                    })
                    .collect::<Option<_>>()?;
                Some([true, false].map(|aligned| pack(fields.iter().copied(), aligned).into()))
            })
            .collect();
        Layouts { packed }
    }

    /// The words of `layout` for `extract` (`aligned`) or `emit`; `None` if it has a `varbit`
    /// field.
    fn words(&self, layout: usize, aligned: bool) -> Option<Packed> {
        let [extract, emit] = self.packed[layout].as_ref()?;
        Some(Arc::clone(if aligned { extract } else { emit }))
    }
}

impl Compiler<'_> {
    /// `packet.extract(h)` of a header at a fixed slot whose fields are all of fixed width;
    /// `None` for another (the interpreter runs it).
    pub(super) fn extract(&self, target: &HeaderRef) -> Option<StmtFn> {
        let HeaderRef::Static { base, layout } = *target else {
            return None;
        };
        let words = self.layouts.words(layout, true)?;
        let bits = self.prog.header_bits[layout] as usize;
        let too_short = self.prog.error_code("PacketTooShort");
        Some(Box::new(move |x| {
            let data = x.data();
            let start = x.cursor;
            if start + bits > data.len() * 8 {
                return Flow::Reject(too_short);
            }
            x.slots[base as usize] = 1;
            if x.trace.is_some() {
                x.trace_header("Extracting", base);
            }
            let fields = &mut x.slots[base as usize + 1..];
            for w in words.iter() {
                w.store(read_bits(data, start + w.offset, w.bits), fields);
            }
            x.cursor = start + bits;
            Flow::Next
        }))
    }

    /// `packet.emit` of headers whose fields are all of fixed width; `None` if one has a
    /// `varbit` field (the interpreter runs it).
    pub(super) fn emit(&self, items: &[EmitItem]) -> Option<StmtFn> {
        let headers: Vec<Emitted> = items
            .iter()
            .map(|&EmitItem::Header { base, layout }| {
                Some(Emitted {
                    valid: base,
                    words: self.layouts.words(layout, false)?,
                })
            })
            .collect::<Option<_>>()?;
        Some(Box::new(move |x| {
            x.emit_with(|x, out| {
                for h in &headers {
                    if x.slots[h.valid as usize] == 0 {
                        continue;
                    }
                    if x.trace.is_some() {
                        x.trace_header("Deparsing", h.valid);
                    }
                    let first = h.valid as usize + 1;
                    for w in h.words.iter() {
                        w.write(out, |&i| x.slots[first + i]);
                    }
                }
            });
            Flow::Next
        }))
    }
}

/// A header `emit` writes: its validity slot and its layout's words.
struct Emitted {
    valid: Slot,
    words: Packed,
}

/// A field list compiled: words of values, and the groups of a header's fields that count only
/// while it is valid.
enum Fields {
    Word(Word<Operand>),
    Header { valid: Slot, fields: Vec<Fields> },
}

impl Fields {
    /// Writes the values of `list` into `w`, as the interpreter's `write_fields` does.
    fn write(list: &[Fields], x: &mut Exec<'_>, w: &mut BitWriter) {
        for f in list {
            match f {
                Fields::Word(word) => word.write(w, |e| e.get(x)),
                Fields::Header { valid, fields } => {
                    if x.slots[*valid as usize] != 0 {
                        Fields::write(fields, x, w);
                    }
                }
            }
        }
    }
}

impl Compiler<'_> {
    /// A call of a checksum extern with its field list compiled (its condition, algorithm and
    /// values as operands); `None` for a field list with a `varbit` field or arguments of
    /// other kinds than its signature's (the interpreter runs it).
    pub(super) fn checksum(
        &mut self,
        checksum: &'static Checksum,
        args: &[ExternArg],
    ) -> Result<Option<StmtFn>, Unsupported> {
        let (ExternArg::Value(cond), ExternArg::Fields(list), ExternArg::Value(algo)) =
            (&args[0], &args[1], &args[3])
        else {
            return Ok(None);
        };
        let varbit = ir::flat_fields(list)
            .into_iter()
            .any(|f| matches!(f, FieldItem::VarBit { .. }));
        if Checksum::width(args).is_none() || varbit {
            return Ok(None);
        }
        let fields = self.fields(list)?;
        let (cond, algo) = (self.operand(cond)?, self.operand(algo)?);
        let payload = checksum.payload();
        let checksum_arg = args[2].clone();
        Ok(Some(Box::new(move |x| {
            if cond.get(x) == 0 {
                return Flow::Next;
            }
            let c = x.checksum_with(
                |x, w| Fields::write(&fields, x, w),
                payload,
                |x| Algorithm::from_code(algo.get(x)).unwrap_or(Algorithm::Csum16),
            );
            Checksum::conclude(&checksum_arg, x, c);
            Flow::Next
        })))
    }

    /// A field list without a `varbit` field compiled. Adjacent groups of one header's fields
    /// become one group, packed together: the P4 front end gives each header field its own
    /// group, and validity cannot change while a list is read.
    fn fields<'i>(
        &mut self,
        list: impl IntoIterator<Item = &'i FieldItem>,
    ) -> Result<Vec<Fields>, Unsupported> {
        let mut out = Vec::new();
        let mut run = Vec::new();
        let mut items = list.into_iter().peekable();
        while let Some(item) = items.next() {
            match item {
                FieldItem::Bits(e, width) => run.push((self.operand(e)?, *width)),
                FieldItem::Header { valid, fields } => {
                    let mut group: Vec<&FieldItem> = fields.iter().collect();
                    while let Some(FieldItem::Header { valid: v, fields }) = items.peek() {
                        if v != valid {
                            break;
                        }
                        group.extend(fields);
                        items.next();
                    }
                    let fields = self.fields(group)?;
                    out.extend(
                        pack(std::mem::take(&mut run), false)
                            .into_iter()
                            .map(Fields::Word),
                    );
                    out.push(Fields::Header {
                        valid: *valid,
                        fields,
                    });
                }
                FieldItem::VarBit { .. } => unreachable!("the caller refuses varbit fields"),
            }
        }
        out.extend(pack(run, false).into_iter().map(Fields::Word));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words hold at most 64 bits, a wider field alone; aligned words end where a field would
    /// reach past 64 bits from the byte they start in.
    #[test]
    fn packing_keeps_words_within_64_bits() {
        let widths = [4u16, 4, 6, 2, 16, 16, 3, 13, 8, 8, 16, 32, 32];
        let words = pack(widths.iter().map(|&w| ((), w)), false);
        let bits: Vec<u16> = words.iter().map(|w| w.bits).collect();
        assert_eq!(bits, [64, 64, 32]);
        let words = pack([((), 3u16), ((), 100), ((), 61), ((), 4)], true);
        let shape: Vec<(usize, u16)> = words.iter().map(|w| (w.offset, w.bits)).collect();
        assert_eq!(shape, [(0, 3), (3, 100), (103, 61), (164, 4)]);
    }

    /// A word's fields go in and come out as they were, whatever their widths.
    #[test]
    fn words_load_what_they_store() {
        let mut next = crate::test_support::xorshift64(7);
        for _ in 0..500 {
            let mut widths = Vec::new();
            while widths.len() < 6 {
                widths.push((next() % 128 + 1) as u16);
            }
            let fields = widths.iter().enumerate().map(|(i, &w)| (i, w));
            for word in pack(fields, false) {
                let slots: Vec<u128> = (0..6)
                    .map(|_| (u128::from(next()) << 64) | u128::from(next()))
                    .collect();
                let mut back = vec![0; 6];
                word.store(word.value(|&s| slots[s]), &mut back);
                for &(s, w, _) in &word.fields {
                    assert_eq!(back[s], slots[s] & mask(w), "{widths:?}");
                }
            }
        }
    }

    /// Fields (zero-width ones too) written a word at a time give the bytes the bit writer
    /// gives them one at a time; read back from any cursor, byte-aligned or not, by the
    /// aligned words an `extract` uses, they come out as they were.
    #[test]
    fn words_write_and_read_as_fields_one_at_a_time() {
        let mut next = crate::test_support::xorshift64(11);
        for _ in 0..300 {
            let widths: Vec<u16> = (0..8).map(|_| (next() % 80) as u16).collect();
            let values: Vec<u128> = widths
                .iter()
                .map(|&w| ((u128::from(next()) << 64) | u128::from(next())) & mask(w))
                .collect();
            let lead = (next() % 8) as u16;
            let (mut by_field, mut by_word) = (BitWriter::new(), BitWriter::new());
            by_field.write(0, lead);
            by_word.write(0, lead);
            for (&v, &w) in values.iter().zip(&widths) {
                by_field.write(v, w);
            }
            let fields = || widths.iter().enumerate().map(|(i, &w)| (i, w));
            for word in pack(fields(), false) {
                word.write(&mut by_word, |&i| values[i]);
            }
            let bytes = by_field.into_bytes();
            assert_eq!(bytes, by_word.into_bytes(), "{widths:?}");
            let mut back = vec![0; widths.len()];
            for word in pack(fields(), true) {
                let at = usize::from(lead) + word.offset;
                word.store(read_bits(&bytes, at, word.bits), &mut back);
            }
            assert_eq!(back, values, "{widths:?} from bit {lead}");
        }
    }
}
