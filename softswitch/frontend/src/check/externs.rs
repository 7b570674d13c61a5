//! The v1model and core externs: instantiation of registers, counters and meters, and calls of
//! extern functions, extern methods and `packet_in`/`packet_out` methods.

use super::expr::{to_place, Val};
use super::stmt::{no_args, order_args};
use super::{unsupported, Checker, Sym};
use crate::ast::{self, ExprKind};
use crate::diagnostic::{fail, Result};
use crate::source::Span;
use crate::types::{Type, Types};
use num_traits::ToPrimitive as _;
use softswitch_core::externs::{self, CtorArg, CtorParam, Object, Param};
use softswitch_core::ir::{
    CounterKind, EmitItem, Expr, ExternArg, ExternCall, ExternId, FieldItem, FieldList, HeaderRef,
    InstanceKind, Place, Stmt,
};

const BITS32: Type = Type::Bits {
    width: 32,
    signed: false,
};

/// p4c's default `V1MODEL_VERSION`, and the first version whose `register`, `counter` and
/// `meter` take their index type (p4c's `frontends/p4/modelInstances.cpp`).
const V1MODEL_INITIAL: u128 = 20180101;
const V1MODEL_INDEXED: u128 = 20200408;

/// The kind and configuration of an extern instantiation.
pub(super) fn instance_kind(c: &mut Checker, i: &ast::Instance) -> Result<InstanceKind> {
    let ast::TypeRef::Named {
        name,
        args: type_args,
    } = &i.ty
    else {
        return fail(i.ty.span(), "expected an extern type");
    };
    let args: Vec<&ast::Expr> = i.args.iter().map(|a| &a.value).collect();
    let want = |n: usize| -> Result<()> {
        if args.len() == n {
            Ok(())
        } else {
            fail(
                i.name.span,
                format!(
                    "{} takes {n} constructor arguments, found {}",
                    name.name,
                    args.len()
                ),
            )
        }
    };
    if let Some(object) = externs::object(&name.name) {
        want(object.ctor.len())?;
        return object_instance(c, object, name, type_args, &args);
    }
    match name.name.as_str() {
        "Checksum16" => {
            want(0)?;
            Ok(InstanceKind::Checksum16)
        }
        "action_profile" => {
            want(1)?;
            Ok(InstanceKind::ActionProfile {
                size: size(c, args[0])?,
            })
        }
        "action_selector" => {
            want(3)?;
            let algo = c.const_small(args[0], 7)? as u8;
            Ok(InstanceKind::ActionSelector {
                size: size(c, args[1])?,
                algo,
            })
        }
        "value_set" => {
            want(1)?;
            let (width, fields) = match type_args.first().map(|t| c.resolve_type(t)).transpose()? {
                Some(Type::Bits { width, .. }) => (width, Vec::new()),
                Some(ty @ Type::Aggregate(agg)) if !c.types.is_header(&ty) => {
                    value_set_struct(c, agg, name.span)?
                }
                _ => {
                    return Err(unsupported(
                        name.span,
                        "a value set of a type other than bit<W> or a struct of them",
                    ))
                }
            };
            if !c.in_parser {
                return fail(i.name.span, "a value set belongs in a parser");
            }
            Ok(InstanceKind::ValueSet {
                size: size(c, args[0])?,
                width,
                fields,
            })
        }
        other => fail(
            name.span,
            format!(
                "extern '{other}' has no implementation: softswitch runs the externs of core.p4 \
                 and v1model.p4 only (BMv2's simple_switch refuses it too)"
            ),
        ),
    }
}

/// An instance of a stateful extern type of the core's, from the arguments its
/// [`Object`] data names: the cell type, the index type as the v1model version wants it, and
/// the constructor's parameters in order.
fn object_instance(
    c: &mut Checker,
    object: &Object,
    name: &ast::Ident,
    type_args: &[ast::TypeRef],
    args: &[&ast::Expr],
) -> Result<InstanceKind> {
    let n = object.p4;
    if !object.direct {
        let (cells, cell_args) = if object.cell_type {
            (1, "<bit<W>")
        } else {
            (0, "")
        };
        index_type_args(c, name, type_args.len(), cells, cell_args)?;
    }
    let width = if object.cell_type {
        let Some(t) = type_args.first() else {
            return fail(name.span, format!("{n} needs its cell type: {n}<bit<W>>"));
        };
        Some(match c.resolve_type(t)? {
            Type::Bits { width, .. } if width <= softswitch_core::ir::SLOT_BITS => width,
            Type::Bits { .. } => {
                return Err(unsupported(
                    t.span(),
                    &format!("a {n} of more than 128 bits"),
                ))
            }
            _ => {
                return Err(unsupported(
                    t.span(),
                    &format!("a {n} of a non-bit<W> type"),
                ))
            }
        })
    } else {
        None
    };
    let mut values = Vec::with_capacity(object.ctor.len());
    for (param, &e) in object.ctor.iter().zip(args) {
        values.push(match param {
            CtorParam::Size => CtorArg::Size(size(c, e)?),
            CtorParam::CounterType => CtorArg::Counter(counter_kind(c, e)?),
            CtorParam::MeterType => CtorArg::MeterBytes(meter_bytes(c, e)?),
        });
    }
    match object.instance(width, values) {
        Some(kind) => Ok(kind),
        None => fail(
            name.span,
            format!("softswitch's core makes no {n} of these arguments"),
        ),
    }
}

/// The total width and the fields of the struct a value set over several select expressions
/// holds: `bit<W>` fields, together at most 128 bits.
fn value_set_struct(c: &Checker, agg: usize, span: Span) -> Result<(u16, Vec<(String, u16)>)> {
    let mut fields = Vec::new();
    let mut total = 0u32;
    for (fname, fty, _) in &c.types.aggregates[agg].fields {
        let Type::Bits { width, .. } = fty else {
            return Err(unsupported(
                span,
                "a value set of a struct with a non-bit<W> field",
            ));
        };
        total += u32::from(*width);
        fields.push((fname.clone(), *width));
    }
    match u16::try_from(total) {
        Ok(width) if (1..=128).contains(&total) => Ok((width, fields)),
        _ => fail(
            span,
            format!("a value set's struct has {total} bits: softswitch supports 1 to 128"),
        ),
    }
}

/// Refuses `register`, `counter` and `meter` type arguments that the included v1model version
/// does not declare, as p4c does: the index type argument exists from `V1MODEL_VERSION` 20200408
/// on. `cells` is the number of type arguments before the index type, `cell_args` how they read.
fn index_type_args(
    c: &Checker,
    name: &ast::Ident,
    found: usize,
    cells: usize,
    cell_args: &str,
) -> Result<()> {
    let version = match c.lookup("__v1model_version") {
        Some(Sym::Const { value, .. }) => *value,
        _ => V1MODEL_INITIAL,
    };
    let indexed = version >= V1MODEL_INDEXED;
    if found == cells + usize::from(indexed) {
        return Ok(());
    }
    let n = &name.name;
    let close = if cell_args.is_empty() { "" } else { ">" };
    let message = if indexed {
        let sep = if cell_args.is_empty() { "<" } else { ", " };
        format!("with V1MODEL_VERSION {version}, {n} takes the type of its index: {n}{cell_args}{sep}bit<32>>")
    } else {
        format!(
            "V1MODEL_VERSION is {version} (p4c's default), where {n} takes no index type: \
             write {n}{cell_args}{close}, or #define V1MODEL_VERSION {V1MODEL_INDEXED} before \
             #include <v1model.p4>"
        )
    };
    fail(name.span, message)
}

fn size(c: &mut Checker, e: &ast::Expr) -> Result<u32> {
    match u32::try_from(c.const_u128(e)?) {
        Ok(n) if n > 0 => Ok(n),
        _ => fail(e.span, "a size must be between 1 and 2^32-1"),
    }
}

/// Whether a `MeterType` argument is `MeterType.bytes`.
fn meter_bytes(c: &mut Checker, e: &ast::Expr) -> Result<bool> {
    match c.scalar_any(e)?.konst {
        Some(k @ (0 | 1)) => Ok(k == 1),
        _ => fail(e.span, "expected MeterType.packets or MeterType.bytes"),
    }
}

fn counter_kind(c: &mut Checker, e: &ast::Expr) -> Result<CounterKind> {
    let v = c.scalar_any(e)?;
    Ok(match v.konst {
        Some(0) => CounterKind::Packets,
        Some(1) => CounterKind::Bytes,
        Some(2) => CounterKind::PacketsAndBytes,
        _ => {
            return fail(
                e.span,
                "expected CounterType.packets, .bytes or .packets_and_bytes",
            )
        }
    })
}

fn one(call: ExternCall) -> Result<Vec<Stmt>> {
    Ok(vec![Stmt::Extern(Box::new(call))])
}

impl Checker<'_> {
    /// A scalar out-parameter place and its width.
    fn out_scalar(&mut self, e: &ast::Expr) -> Result<(Place, u16, Type)> {
        match self.place(e)? {
            Val::Scalar {
                expr,
                ty: ty @ Type::Bits { width, .. },
                ..
            } => Ok((to_place(expr, e.span)?, width, ty)),
            _ => fail(e.span, "expected a bit<W> l-value"),
        }
    }

    /// Any sized unsigned scalar argument (the generic `I`, `T` of v1model externs).
    fn sized(&mut self, e: &ast::Expr) -> Result<Expr> {
        let v = self.scalar_any(e)?;
        match v.ty {
            Type::Bits { .. } => Ok(v.expr),
            Type::Int => Ok(Expr::Const(v.konst.expect("int is constant"))),
            Type::Enum(i) if self.types.enums[i].repr.is_some() => Ok(v.expr),
            t => fail(
                e.span,
                format!("expected a bit<W> value, found {}", self.show(&t)),
            ),
        }
    }

    pub(super) fn const_small(&mut self, e: &ast::Expr, max: u128) -> Result<u128> {
        let k = match self.expr(e)? {
            Val::Int(n) => n.to_u128(),
            v => self.scalar_from(v, e.span)?.konst,
        };
        match k {
            Some(k) if k <= max => Ok(k),
            _ => fail(
                e.span,
                format!("expected a compile-time constant up to {max}"),
            ),
        }
    }

    /// The id of the field list of user-metadata fields tagged `@field_list(n)`.
    fn user_field_list_id(&mut self, n: u8) -> usize {
        let slots = self
            .user_field_lists
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        self.field_lists.push(slots);
        self.field_lists.len() - 1
    }

    /// The id of a field list made of the l-values in a deprecated extern's data argument
    /// (`resubmit({ meta.a, meta.b })`, `clone3(..., meta)`).
    fn data_field_list_id(&mut self, e: &ast::Expr) -> Result<usize> {
        let items: Vec<&ast::Expr> = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        let mut slots = Vec::new();
        for item in items {
            match self.place(item)? {
                Val::Scalar {
                    expr: Expr::Load(s),
                    ..
                } => slots.push(s),
                Val::Agg { base, ty } => slots.extend(base..base + self.types.size(&ty)),
                _ => {
                    return fail(
                        item.span,
                        "a preserved field must be a field or a struct of fields",
                    )
                }
            }
        }
        self.field_lists.push(slots);
        Ok(self.field_lists.len() - 1)
    }

    /// The flattened fields of a hash, checksum or digest data argument.
    pub(super) fn field_list(&mut self, e: &ast::Expr) -> Result<FieldList> {
        if let ExprKind::List(_) | ExprKind::StructInit(_) = &e.kind {
            let items: Vec<&ast::Expr> = match &e.kind {
                ExprKind::List(items) => items.iter().collect(),
                ExprKind::StructInit(inits) => inits.iter().map(|(_, e)| e).collect(),
                _ => unreachable!("matched above"),
            };
            let mut out = Vec::new();
            for i in items {
                out.extend(self.field_list(i)?);
            }
            return Ok(out);
        }
        // A field of a header counts only while the header is valid.
        let header = match &e.kind {
            ExprKind::Member(object, _) if is_path(object) => match self.expr(object)? {
                Val::Agg { base, ty } if self.types.is_header(&ty) => Some(base),
                _ => None,
            },
            _ => None,
        };
        let guarded = |fields: FieldList| match header {
            Some(valid) => vec![FieldItem::Header { valid, fields }],
            None => fields,
        };
        match self.expr(e)? {
            Val::Int(_) => fail(
                e.span,
                "fields of a list must have a width: write 8w1, not 1",
            ),
            Val::Scalar { expr, ty, .. } => match self.types.scalar_width(&ty) {
                Some(w) => Ok(guarded(vec![FieldItem::Bits(expr, w)])),
                None => fail(e.span, "this value cannot be part of a field list"),
            },
            Val::Agg { base, ty } => {
                self.spend(self.types.parts(&ty) as usize, e.span)?;
                Ok(self.flatten(base, &ty))
            }
            Val::DynElem { .. } => Err(unsupported(
                e.span,
                "a stack element chosen at run time in a field list",
            )),
            Val::Lookahead { .. } => Err(unsupported(e.span, "a lookahead in a field list")),
            Val::Wide { .. } => Err(unsupported(
                e.span,
                "a computed value wider than 128 bits in a field list",
            )),
        }
    }

    fn flatten(&self, base: u32, ty: &Type) -> FieldList {
        let mut out = Vec::new();
        match ty {
            Type::Aggregate(a) => {
                let mut fields = Vec::new();
                for (_, off, fty) in self.types.aggregates[*a].fields_at() {
                    fields.extend(self.flatten(base + off, fty));
                }
                if self.types.is_header(ty) {
                    out.push(FieldItem::Header {
                        valid: base,
                        fields,
                    });
                } else {
                    out.extend(fields);
                }
            }
            Type::Stack(a, n) => {
                let stride = self.types.size(&Type::Aggregate(*a));
                for i in 0..*n {
                    out.extend(self.flatten(base + 1 + i * stride, &Type::Aggregate(*a)));
                }
            }
            Type::VarBit(max) => out.push(FieldItem::VarBit { base, max: *max }),
            Type::Bits { width, .. } if Types::is_wide(ty) => out.extend(
                (base..)
                    .zip(softswitch_core::ir::slot_widths(*width))
                    .map(|(slot, w)| FieldItem::Bits(Expr::Load(slot), w)),
            ),
            Type::Tuple(elems) => {
                for (off, ety) in self.types.tuple_elements(elems) {
                    out.extend(self.flatten(base + off, ety));
                }
            }
            t => out.push(FieldItem::Bits(
                Expr::Load(base),
                self.types.scalar_width(t).unwrap_or(1),
            )),
        }
        out
    }

    /// A call of an extern function.
    pub(super) fn function_call(
        &mut self,
        name: &str,
        type_args: &[ast::TypeRef],
        args: &[ast::Arg],
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let a: Vec<&ast::Expr> = args.iter().map(|a| &a.value).collect();
        if let Some(ext) = externs::by_name(name) {
            return self.registered_call(ext, name, None, type_args, &a, span);
        }
        let arity = |n: usize| -> Result<()> {
            if a.len() == n {
                Ok(())
            } else {
                fail(
                    span,
                    format!("{name} takes {n} arguments, found {}", a.len()),
                )
            }
        };
        match name {
            "verify" => {
                arity(2)?;
                let cond = self.bool_expr(a[0])?;
                let error = self.scalar_of(a[1], &Type::Error)?;
                if !self.in_parser {
                    return fail(span, "verify is only allowed in a parser");
                }
                one(ExternCall::Verify { cond, error })
            }
            other => {
                self.user_extern_call(other, args, span)?;
                Ok(Vec::new())
            }
        }
    }

    /// A call of a registered extern, a function or (with its receiver `inst`) a method: its
    /// arguments checked against the parameters its signature gives (`type_args` are the
    /// call's, which a digest's data type may name).
    fn registered_call(
        &mut self,
        ext: ExternId,
        name: &str,
        inst: Option<usize>,
        type_args: &[ast::TypeRef],
        a: &[&ast::Expr],
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let params = externs::signature(ext).params;
        // The receiver is no argument in P4.
        let passed: Vec<Param> = params
            .iter()
            .copied()
            .filter(|p| *p != Param::Instance)
            .collect();
        // Optional parameters come last (v1model's older forms leave out a trailing
        // `standard_metadata`, `log_msg` its data).
        let required = passed
            .iter()
            .rposition(|p| !p.optional())
            .map_or(0, |i| i + 1);
        if a.len() < required || a.len() > passed.len() {
            let n = if required == passed.len() {
                required.to_string()
            } else {
                format!("{required} to {}", passed.len())
            };
            return fail(
                span,
                format!("{name} takes {n} arguments, found {}", a.len()),
            );
        }
        let kind = inst.map(|i| self.instances[i].kind.clone());
        let cell = kind
            .as_ref()
            .and_then(|k| Some((k.type_name(), k.cell_width()?)));
        let mut out_type = None;
        let mut args = Vec::with_capacity(params.len());
        let mut a = a.iter();
        for param in params {
            if *param == Param::Instance {
                match inst {
                    Some(i) => args.push(ExternArg::Instance(i)),
                    None => return fail(span, format!("{name} is a method, not a function")),
                }
                continue;
            }
            let arg = match (param, a.next()) {
                (Param::StandardMetadata, _) | (_, None) => ExternArg::Unused,
                (Param::Instance, _) => unreachable!("taken above"),
                (Param::AnyBits, Some(e)) => ExternArg::Value(self.sized(e)?),
                (Param::Sized, Some(e)) => {
                    let v = self.scalar_any(e)?;
                    let Some(width) = self.types.scalar_width(&v.ty) else {
                        return fail(e.span, format!("{name} needs a bit<W> value here"));
                    };
                    ExternArg::Sized(v.expr, width)
                }
                (Param::Choice(max), Some(e)) => {
                    ExternArg::Value(Expr::Const(self.const_small(e, u128::from(*max))?))
                }
                (Param::Algorithm, Some(e)) => {
                    ExternArg::Value(Expr::Const(self.const_small(e, 7)?))
                }
                (Param::Fields, Some(e)) => ExternArg::Fields(self.field_list(e)?),
                (Param::Digest, Some(e)) => {
                    let digest = self.record_digest(type_args, e)?;
                    ExternArg::Digest {
                        digest,
                        data: self.field_list(e)?,
                    }
                }
                (Param::PreservedIndex, Some(e)) => {
                    let n = self.const_small(e, 255)? as u8;
                    ExternArg::Preserved(self.user_field_list_id(n))
                }
                (Param::PreservedData, Some(e)) => {
                    ExternArg::Preserved(self.data_field_list_id(e)?)
                }
                (Param::Format, Some(e)) => {
                    let ExprKind::Str(format) = &e.kind else {
                        return fail(span, format!("{name} needs a string literal first"));
                    };
                    self.spend_name(format, span)?;
                    ExternArg::Text(format.clone())
                }
                (Param::Values, Some(e)) => {
                    let fields = self.field_list(e)?;
                    let values = softswitch_core::ir::flat_fields(&fields)
                        .into_iter()
                        .filter_map(|f| match f {
                            FieldItem::Bits(e, _) => Some(e.clone()),
                            _ => None,
                        })
                        .collect();
                    ExternArg::Values(values)
                }
                (Param::CellOut | Param::Cell, Some(e)) => {
                    let Some((of, width)) = cell else {
                        return fail(span, format!("{name} needs an instance with cells"));
                    };
                    if *param == Param::Cell {
                        let ty = Type::Bits {
                            width,
                            signed: false,
                        };
                        ExternArg::Value(self.scalar_of(e, &ty)?)
                    } else {
                        let (place, w, _) = self.out_scalar(e)?;
                        if w != width {
                            return fail(
                                e.span,
                                format!("the {of} holds bit<{width}>, the result is bit<{w}>"),
                            );
                        }
                        ExternArg::Out(place, w)
                    }
                }
                (Param::Bits(width), Some(e)) => {
                    let ty = Type::Bits {
                        width: *width,
                        signed: false,
                    };
                    ExternArg::Value(self.scalar_of(e, &ty)?)
                }
                (Param::Bool, Some(e)) => ExternArg::Value(self.bool_expr(e)?),
                (Param::Out, Some(e)) => {
                    let (place, width, ty) = self.out_scalar(e)?;
                    out_type = Some(ty);
                    ExternArg::Out(place, width)
                }
                (Param::LikeOut, Some(e)) => {
                    let Some(ty) = out_type.clone() else {
                        return fail(e.span, format!("{name}'s out argument must come first"));
                    };
                    ExternArg::Value(self.scalar_of(e, &ty)?)
                }
            };
            args.push(arg);
        }
        one(ExternCall::Call { ext, args })
    }

    /// A call of a method of an extern instance.
    pub(super) fn method_call(
        &mut self,
        inst: usize,
        method: &ast::Ident,
        args: &[ast::Arg],
        span: Span,
    ) -> Result<Vec<Stmt>> {
        let kind = self.instances[inst].kind.clone();
        let m = method.name.as_str();
        if let Some(ext) = externs::by_method(kind.type_name(), m) {
            let names = externs::signature(ext).arg_names;
            let a: Vec<&ast::Expr> = order_args(names, args, span)?
                .into_iter()
                .map(|a| &a.value)
                .collect();
            return self.registered_call(ext, m, Some(inst), &[], &a, span);
        }
        // A method the type says does nothing (a direct counter's `count`) adds nothing.
        if externs::object(kind.type_name()).is_some_and(|o| o.inert.contains(&m)) {
            order_args(&[], args, span)?;
            no_args(args)?;
            return Ok(Vec::new());
        }
        fail(
            method.span,
            format!("{} has no method '{m}'", self.instances[inst].name),
        )
    }

    /// A statement call of a `packet_in` or `packet_out` method.
    pub(super) fn packet_call(
        &mut self,
        out: bool,
        method: &ast::Ident,
        type_args: &[ast::TypeRef],
        args: &[ast::Arg],
        span: Span,
    ) -> Result<Vec<Stmt>> {
        match (out, method.name.as_str()) {
            (false, "extract") => {
                let (arg, bits) = match args {
                    [arg] => (arg, None),
                    [arg, bits] => (arg, Some(self.scalar_of(&bits.value, &BITS32)?)),
                    _ => {
                        return fail(
                            span,
                            "extract takes a header and, for a varbit header, its size in bits",
                        )
                    }
                };
                let target = match (&arg.value.kind, type_args) {
                    (ExprKind::DontCare, _) if bits.is_some() => {
                        return fail(
                            arg.value.span,
                            "'_' cannot be a header with a varbit field (p4c refuses it too)",
                        )
                    }
                    (ExprKind::DontCare, [t]) => self.discarded_header(t)?,
                    (ExprKind::DontCare, _) => {
                        return fail(
                            arg.value.span,
                            "extract(_) needs the header type: extract<H>(_)",
                        )
                    }
                    _ => self.header_ref(&arg.value)?,
                };
                let siblings = self.invalidate_union_siblings(&arg.value)?;
                let layout = match target {
                    HeaderRef::Static { layout, .. } | HeaderRef::Next { layout, .. } => layout,
                };
                let has_varbit = self.layouts[layout]
                    .iter()
                    .any(|f| matches!(f, softswitch_core::ir::FieldLayout::VarBit { .. }));
                if has_varbit != bits.is_some() {
                    let why = if has_varbit {
                        "this header has a varbit field: give its size, extract(h, bits)"
                    } else {
                        "only a header with a varbit field takes a size"
                    };
                    return fail(span, why);
                }
                let mut out = siblings;
                out.push(Stmt::Extern(Box::new(ExternCall::Extract {
                    target,
                    varbit: bits,
                })));
                Ok(out)
            }
            (false, "advance") => {
                let [arg] = args else {
                    return fail(span, "advance takes one argument");
                };
                let bits = self.scalar_of(&arg.value, &BITS32)?;
                one(ExternCall::Advance(bits))
            }
            (true, "emit") => {
                let [arg] = args else {
                    return fail(span, "emit takes one argument");
                };
                match self.expr(&arg.value)? {
                    Val::Agg { base, ty } => {
                        self.spend(self.types.parts(&ty) as usize, arg.value.span)?;
                        one(ExternCall::Emit(self.emit_items(base, &ty)))
                    }
                    _ => fail(
                        arg.value.span,
                        "emit needs a header, a header stack or a struct of them",
                    ),
                }
            }
            (_, m) => fail(
                method.span,
                format!(
                    "{} has no method '{m}' usable as a statement",
                    if out { "packet_out" } else { "packet_in" }
                ),
            ),
        }
    }

    /// A scratch header of type `t` for `extract<H>(_)`: the header is parsed (the packet's
    /// cursor moves past it, a short packet is a parser error) and its value dropped, as p4c
    /// lowers it (into a temporary).
    fn discarded_header(&mut self, t: &ast::TypeRef) -> Result<HeaderRef> {
        let ty = self.resolve_type(t)?;
        let Type::Aggregate(a) = ty else {
            return fail(t.span(), "extract<H>(_) needs a header type H");
        };
        if !self.types.is_header(&ty) {
            return fail(t.span(), "extract<H>(_) needs a header type H");
        }
        let base = self.alloc(&ty, t.span())?;
        Ok(HeaderRef::Static {
            base,
            layout: self.types.aggregates[a].layout,
        })
    }

    fn header_ref(&mut self, e: &ast::Expr) -> Result<HeaderRef> {
        if let Some(next) = self.next_header(e)? {
            return Ok(next);
        }
        match self.expr(e)? {
            Val::Agg {
                base,
                ty: Type::Aggregate(a),
            } if self.types.is_header(&Type::Aggregate(a)) => Ok(HeaderRef::Static {
                base,
                layout: self.types.aggregates[a].layout,
            }),
            _ => fail(e.span, "extract needs a header (or stack.next)"),
        }
    }

    /// `e` as `stack.next` in a stack of headers, or `stack.next.member` in a stack of header
    /// unions; `None` for anything else.
    pub(super) fn next_header(&mut self, e: &ast::Expr) -> Result<Option<HeaderRef>> {
        let ExprKind::Member(base, m) = &e.kind else {
            return Ok(None);
        };
        let (stack_expr, member) = match &base.kind {
            ExprKind::Member(stack, next) if next.name == "next" => (stack, Some(m)),
            _ if m.name == "next" => (base, None),
            _ => return Ok(None),
        };
        let Val::Agg {
            base: stack,
            ty: Type::Stack(agg, count),
        } = self.expr(stack_expr)?
        else {
            return Ok(None);
        };
        let elem = Type::Aggregate(agg);
        let stride = self.types.size(&elem);
        let (offset, header) = match member {
            None if self.types.is_header(&elem) => (0, agg),
            Some(m) if self.types.is_union(&elem) => match self.types.field(agg, &m.name) {
                Some((off, Type::Aggregate(h))) => (off, h),
                _ => return fail(m.span, format!("the union has no header '{}'", m.name)),
            },
            _ => return Ok(None),
        };
        Ok(Some(HeaderRef::Next {
            stack,
            count,
            stride,
            offset,
            layout: self.types.aggregates[header].layout,
        }))
    }

    fn emit_items(&self, base: u32, ty: &Type) -> Vec<EmitItem> {
        match ty {
            Type::Aggregate(a) if self.types.is_header(ty) => vec![EmitItem::Header {
                base,
                layout: self.types.aggregates[*a].layout,
            }],
            Type::Aggregate(a) => self.types.aggregates[*a]
                .fields_at()
                .flat_map(|(_, off, fty)| self.emit_items(base + off, fty))
                .collect(),
            Type::Stack(a, n) => {
                let stride = self.types.size(&Type::Aggregate(*a));
                (0..*n)
                    .flat_map(|i| self.emit_items(base + 1 + i * stride, &Type::Aggregate(*a)))
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Whether `e` names a place (`hdr`, `hdr.h`, `hdr.s[0]`): lowering it again has no effect.
fn is_path(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Name(_) => true,
        ExprKind::Member(object, _) => is_path(object),
        ExprKind::Index(object, index) => is_path(object) && matches!(index.kind, ExprKind::Int(_)),
        _ => false,
    }
}
