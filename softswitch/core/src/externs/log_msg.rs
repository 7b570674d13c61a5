//! `log_msg(format)` and `log_msg(format, data)`: the format with each `{}` replaced by the
//! next of data's values in decimal (a `{}` past them stays), sent to the packet's trace at
//! info level and kept in the switch's log, as BMv2's `log_msg` writes its log.

use super::{Extern, Machine, Param, Signature};
use crate::ir::{Expr, ExternArg};

/// The `log_msg` extern.
pub(crate) struct LogMsg;

impl Extern for LogMsg {
    fn signature(&self) -> &'static Signature {
        &Signature {
            of: None,
            names: &["log_msg"],
            arg_names: &[],
            bmv2_ops: &["log_msg"],
            params: &[Param::Format, Param::Values],
            bmv2_params: &[],
        }
    }

    fn execute(&self, args: &[ExternArg], m: &mut dyn Machine) -> Result<(), u128> {
        let format = match &args[0] {
            ExternArg::Text(f) => f.as_str(),
            _ => "",
        };
        let values: &[Expr] = match args.get(1) {
            Some(ExternArg::Values(v)) => v,
            _ => &[],
        };
        let mut text = String::new();
        let mut values = values.iter();
        for (i, part) in format.split("{}").enumerate() {
            if i > 0 {
                match values.next() {
                    Some(e) => text.push_str(&m.value(e).to_string()),
                    None => text.push_str("{}"),
                }
            }
            text.push_str(part);
        }
        m.trace_info(&text);
        m.state().log(text);
        Ok(())
    }
}
