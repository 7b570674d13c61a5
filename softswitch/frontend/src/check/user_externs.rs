//! Extern functions a program declares itself (`extern void f(inout bit<8> x);`): each call is
//! checked against the declaration (argument count, directions, types) and recorded. softswitch
//! runs only the externs of core.p4 and v1model.p4, so a program that calls one of its own
//! passes `check` but is refused when it is to run, naming the extern, as BMv2's simple_switch
//! refuses an extern it lacks ([`crate::compile`]).

use super::expr::{to_place, val_type, Val};
use super::Checker;
use crate::ast::{self, Direction, ExprKind, TypeRef};
use crate::diagnostic::{fail, Result};
use crate::source::Span;
use crate::types::Type;
use softswitch_core::ir::Expr;

/// A use of an extern the program declares: its name and where it is called.
#[derive(Clone, Debug, PartialEq)]
pub struct UserExtern {
    /// The extern function's name.
    pub name: String,
    /// The call.
    pub span: Span,
}

impl<'a> Checker<'a> {
    /// Records `p` as an extern function the program may call (overloads by arity).
    pub(super) fn declare_extern_function(&mut self, p: &'a ast::Prototype) {
        self.extern_functions
            .entry(p.name.name.clone())
            .or_default()
            .push(p);
    }

    /// Checks a call of extern function `name` that softswitch does not implement against its
    /// declaration and records it; gives the value of the call (`None` for `void`), which
    /// stands for nothing: a program with such a call never runs.
    pub(super) fn user_extern_call(
        &mut self,
        name: &str,
        args: &[ast::Arg],
        span: Span,
    ) -> Result<Option<Val>> {
        let protos = self.extern_functions.get(name).cloned().unwrap_or_default();
        let Some(proto) = protos.iter().find(|p| p.params.len() == args.len()) else {
            return fail(
                span,
                format!(
                    "extern function '{name}' takes {} arguments, found {}",
                    arities(&protos),
                    args.len()
                ),
            );
        };
        let generic = |t: &TypeRef| match t {
            TypeRef::Named { name, .. } => proto.type_params.iter().any(|p| p.name == name.name),
            _ => false,
        };
        for (param, arg) in proto.params.iter().zip(args) {
            if generic(&param.ty) {
                self.expr(&arg.value)?;
                continue;
            }
            let ty = self.resolve_type(&param.ty)?;
            let writes = matches!(param.direction, Direction::Out | Direction::InOut);
            if !writes && self.types.scalar_width(&ty).is_some() {
                self.scalar_of(&arg.value, &ty)?;
                continue;
            }
            if !writes && matches!(arg.value.kind, ExprKind::List(_) | ExprKind::StructInit(_)) {
                // Typed by the parameter; checked as its assignment to a scratch value (the
                // call never runs).
                let scratch = self.alloc(&ty, arg.value.span)?;
                self.assign_to(self.storage(scratch, ty), &arg.value)?;
                continue;
            }
            let v = self.expr(&arg.value)?;
            let found = val_type(&v);
            if found != ty {
                return fail(
                    arg.value.span,
                    format!(
                        "'{}' of '{name}' is {}, found {}",
                        param.name.name,
                        self.show(&ty),
                        self.show(&found)
                    ),
                );
            }
            if let (true, Val::Scalar { expr, .. }) = (writes, v) {
                to_place(expr, arg.value.span)?;
            }
        }
        self.user_externs.push(UserExtern {
            name: name.to_string(),
            span,
        });
        match &proto.ret {
            None => Ok(None),
            Some(t) if generic(t) => fail(
                span,
                format!("the result of generic extern function '{name}' cannot be used"),
            ),
            Some(t) => match self.resolve_type(t)? {
                Type::Void => Ok(None),
                ty => Ok(Some(Val::Scalar {
                    expr: Expr::Const(0),
                    ty,
                    konst: None,
                })),
            },
        }
    }
}

/// "1", "2 or 3": the arities of an extern function's overloads.
fn arities(protos: &[&ast::Prototype]) -> String {
    let mut n: Vec<usize> = protos.iter().map(|p| p.params.len()).collect();
    n.sort_unstable();
    n.dedup();
    let words: Vec<String> = n.iter().map(usize::to_string).collect();
    words.join(" or ")
}
