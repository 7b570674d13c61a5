//! The one error type of every phase (preprocessor, lexer, parser, checker, STF runner):
//! a message at a source position, rendered as `file:line:col` with an excerpt of the line
//! (at most [`MAX_EXCERPT_CHARS`] characters around the position) and a caret.

use crate::limits::MAX_EXCERPT_CHARS;
use crate::source::{SourceMap, Span};
use std::fmt::Write;

/// Characters of a message: one that names something very long (an identifier of the
/// program, the text of an `#error`) is cut to this.
const MAX_MESSAGE_CHARS: usize = 4 * MAX_EXCERPT_CHARS;

/// What marks an excerpt's or a message's cut ends.
const ELLIPSIS: &str = "...";

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
    /// A diagnostic at `span` (a message longer than [`MAX_MESSAGE_CHARS`] is cut).
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
            message.truncate(cut);
            message.push_str(ELLIPSIS);
        }
        Diagnostic { span, message }
    }

    /// `file:line:col: error: message`, the source line (at most [`MAX_EXCERPT_CHARS`] of it,
    /// around the span's start, cut ends marked `...`), and a caret under the span.
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
        // The excerpt: characters `first..last` of the line, the span's start in the middle.
        let len = text.chars().count();
        let first = (col - 1)
            .saturating_sub(MAX_EXCERPT_CHARS / 2)
            .min(len.saturating_sub(MAX_EXCERPT_CHARS));
        let last = len.min(first + MAX_EXCERPT_CHARS);
        let excerpt: String = text.chars().skip(first).take(last - first).collect();
        let (before, after) = (
            if first > 0 { ELLIPSIS } else { "" },
            if last < len { ELLIPSIS } else { "" },
        );
        let pad: String = " ".repeat(before.len())
            + &excerpt
                .chars()
                .take(col - 1 - first)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect::<String>();
        let width = width.min(last.max(col) - (col - 1)).max(1);
        let _ = write!(
            out,
            "  {before}{excerpt}{after}\n  {pad}{}",
            "^".repeat(width)
        );
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

    #[test]
    fn render_quotes_a_bounded_excerpt_of_a_long_line() {
        let mut map = SourceMap::new();
        let line = format!(
            "const int X = {}err{};",
            "1 + ".repeat(10_000),
            " + 1".repeat(10_000)
        );
        let f = map.add("long.p4", line.clone());
        let lo = line.find("err").unwrap() as u32;
        let d = Diagnostic::new(
            Span {
                file: f,
                lo,
                hi: lo + 3,
            },
            "unknown name 'err'",
        );
        let rendered = d.render(&map);
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 3, "{rendered}");
        let excerpt = lines[1].trim_start();
        assert!(
            excerpt.starts_with(ELLIPSIS) && excerpt.ends_with(ELLIPSIS),
            "{excerpt}"
        );
        assert_eq!(
            excerpt.chars().count(),
            MAX_EXCERPT_CHARS + 2 * ELLIPSIS.len()
        );
        // The caret is under the name, in the excerpt.
        let caret = lines[2].find('^').unwrap();
        assert_eq!(&lines[1][caret..caret + 3], "err");
        assert_eq!(lines[2][caret..].trim_end(), "^^^");
    }

    #[test]
    fn a_message_naming_something_huge_is_cut() {
        let d = Diagnostic::new(
            Span::default(),
            format!("unknown name '{}'", "x".repeat(100_000)),
        );
        assert_eq!(
            d.message.chars().count(),
            MAX_MESSAGE_CHARS + ELLIPSIS.len()
        );
    }
}
