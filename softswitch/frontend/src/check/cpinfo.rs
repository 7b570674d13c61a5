//! Recording what the control plane sees and the IR does not keep: `@controller_header` headers
//! and the type of each digest's data (see [`crate::cpinfo`]).

use super::expr::val_type;
use super::{unsupported, Checker};
use crate::ast::{self, ExprKind, TypeRef};
use crate::cpinfo::{self, ControllerHeader, DigestCp};
use crate::diagnostic::{fail, Result};
use crate::types::Type;

impl Checker<'_> {
    /// Records header `name` (just declared) if it carries `@controller_header("...")`.
    pub(super) fn record_controller_header(
        &mut self,
        annotations: &[ast::Annotation],
        name: &ast::Ident,
    ) -> Result<()> {
        if !cpinfo::has(annotations, "controller_header") {
            return Ok(());
        }
        let Some(controller_name) = cpinfo::string_arg(annotations, "controller_header") else {
            return fail(
                name.span,
                "@controller_header needs a string argument: @controller_header(\"packet_in\")",
            );
        };
        let aggregate = match self.lookup(&name.name) {
            Some(super::Sym::Type(Type::Aggregate(i)))
                if self.types.is_header(&Type::Aggregate(*i)) =>
            {
                *i
            }
            _ => return fail(name.span, "@controller_header belongs on a header type"),
        };
        if self.types.holds_wide(&Type::Aggregate(aggregate)) {
            return Err(unsupported(
                name.span,
                "a controller header with a field wider than 128 bits",
            ));
        }
        self.spend_annotations(annotations, name.span)?;
        self.cp.controller_headers.push(ControllerHeader {
            type_name: cpinfo::string_arg(annotations, "name").unwrap_or_else(|| name.name.clone()),
            controller_name,
            annotations: annotations.to_vec(),
            aggregate,
        });
        Ok(())
    }

    /// Records the data type of a `digest<T>(receiver, data)` call (`T` if given, else the type
    /// of `data`; an unnamed list gets the name `digest_N` as p4c gives it) and returns its index
    /// in `CpInfo::digests`.
    pub(super) fn record_digest(
        &mut self,
        type_args: &[TypeRef],
        data: &ast::Expr,
    ) -> Result<usize> {
        let ty = match type_args.first() {
            Some(t) => self.resolve_type(t)?,
            None => match &data.kind {
                ExprKind::List(items) => {
                    let mut elems = Vec::new();
                    for item in items {
                        elems.push(self.value_type(item)?);
                    }
                    Type::Tuple(elems)
                }
                _ => self.value_type(data)?,
            },
        };
        if self.types.holds_wide(&ty) {
            return Err(unsupported(
                data.span,
                "a digest of a value wider than 128 bits",
            ));
        }
        let name = match &ty {
            Type::Aggregate(i) => self.types.aggregates[*i].name.clone(),
            _ => {
                let unnamed = self
                    .cp
                    .digests
                    .iter()
                    .filter(|d| d.name.starts_with("digest_"))
                    .count();
                format!("digest_{unnamed}")
            }
        };
        if let Some(i) = self.cp.digests.iter().position(|d| d.name == name) {
            return Ok(i);
        }
        self.cp.digests.push(DigestCp { name, ty });
        Ok(self.cp.digests.len() - 1)
    }

    fn value_type(&mut self, e: &ast::Expr) -> Result<Type> {
        Ok(val_type(&self.expr(e)?))
    }
}
