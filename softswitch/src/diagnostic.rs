//! The one error type of every phase (preprocessor, lexer, parser, checker, STF runner):
//! a message at a source position, rendered as `file:line:col` with the line and a caret.

use crate::source::{SourceMap, Span};
use std::fmt::Write;

/// An error at a position in a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the error is.
    pub span: Span,
    /// What is wrong, in one sentence.
    pub message: String,
}

/// The result type of the front end's phases.
pub type Result<T> = std::result::Result<T, Diagnostic>;

impl Diagnostic {
    /// A diagnostic at `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            span,
            message: message.into(),
        }
    }

    /// `file:line:col: error: message`, the source line, and a caret under the span.
    pub fn render(&self, map: &SourceMap) -> String {
        let (line, col) = map.line_col(self.span);
        let name = &map.file(self.span.file).name;
        let text = map.line_text(self.span.file, line);
        let mut out = format!("{name}:{line}:{col}: error: {}\n", self.message);
        let width = map
            .snippet(self.span)
            .lines()
            .next()
            .map_or(1, |s| s.chars().count().max(1));
        let pad: String = text
            .chars()
            .take(col - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let _ = write!(out, "  {text}\n  {pad}{}", "^".repeat(width));
        out
    }

    /// `file:line:col` of the diagnostic.
    pub fn location(&self, map: &SourceMap) -> String {
        let (line, col) = map.line_col(self.span);
        format!("{}:{line}:{col}", map.file(self.span.file).name)
    }
}

/// Returns `Err` with a diagnostic at `span`.
pub fn fail<T>(span: Span, message: impl Into<String>) -> Result<T> {
    Err(Diagnostic::new(span, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_points_a_caret_at_the_token() {
        let mut map = SourceMap::new();
        let f = map.add("x.p4", "const bit<8> a = ;\n");
        let d = Diagnostic::new(
            Span {
                file: f,
                lo: 17,
                hi: 18,
            },
            "expected an expression",
        );
        assert_eq!(
            d.render(&map),
            "x.p4:1:18: error: expected an expression\n  const bit<8> a = ;\n                   ^"
        );
    }
}
