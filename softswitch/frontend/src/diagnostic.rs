//! The one error type of every phase (preprocessor, lexer, parser, checker, STF runner):
//! a message at a source position, rendered as `file:line:col` with an excerpt of the line
//! (at most [`MAX_EXCERPT_CHARS`] characters around the position) and a caret — unless the
//! file, P4 source by its name (anything but an STF test, `*.stf`), does not start as P4 source
//! (a file named by mistake, or by someone else: a topology's `program: /etc/shadow`): then no
//! line of it is quoted ([`starts_as_p4`]), only the token the message names; and
//! [`Diagnostics`], which gathers a compilation's errors and warnings (as p4c does, the
//! checker goes on after an error in a statement or a declaration), within [`MAX_ERRORS`] and
//! [`MAX_WARNINGS`].

use crate::limits::{MAX_ERRORS, MAX_EXCERPT_CHARS, MAX_WARNINGS};
use crate::source::{SourceMap, Span};
use std::fmt::Write;

/// Characters of a message: one that names something very long (an identifier of the
/// program, the text of an `#error`) is cut to this.
const MAX_MESSAGE_CHARS: usize = 4 * MAX_EXCERPT_CHARS;

/// What marks an excerpt's or a message's cut ends.
const ELLIPSIS: &str = "...";

/// How grave a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The program is refused.
    Error,
    /// The program compiles; something in it deserves a look (`#warning`).
    Warning,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// An error (or a warning) at a position in a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the error is.
    pub span: Span,
    /// What is wrong, in one sentence.
    pub message: String,
    /// Error or warning.
    pub severity: Severity,
    /// The other diagnostics of the same compilation, in the order found, when this one is
    /// the first error of a compilation that found more: [`Diagnostic::render`] renders them
    /// after this one.
    pub rest: Vec<Diagnostic>,
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
        Diagnostic {
            span,
            message,
            severity: Severity::Error,
            rest: Vec::new(),
        }
    }

    /// A warning at `span`.
    pub fn warning(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::new(span, message)
        }
    }

    /// This diagnostic rendered (see [`Diagnostic::one`]), then each of [`Diagnostic::rest`],
    /// one after the other.
    pub fn render(&self, map: &SourceMap) -> String {
        let mut out = self.one(map);
        for d in &self.rest {
            out.push('\n');
            out.push_str(&d.one(map));
        }
        out
    }

    /// `file:line:col: error: message` (or `warning:`), the source line (at most
    /// [`MAX_EXCERPT_CHARS`] of it, around the span's start, cut ends marked `...`), and a
    /// caret under the span.
    pub fn one(&self, map: &SourceMap) -> String {
        let (line, col) = map.line_col(self.span);
        let text = map.line_text(self.span.file, line);
        let mut out = format!(
            "{}: {}: {}\n",
            self.location(map),
            self.severity,
            self.message
        );
        let file = map.file(self.span.file);
        let through = &file.text[..(self.span.hi as usize).min(file.text.len())];
        if !file.name.ends_with(".stf") && !starts_as_p4(through) {
            out.push_str("  (the file does not start as P4 source: none of its lines is quoted)");
            return out;
        }
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

    /// `file:line:col` of the diagnostic (as `#line` directives number the lines), the file's
    /// control characters escaped: a `#line` file name cannot write a line of its own.
    pub fn location(&self, map: &SourceMap) -> String {
        let (name, line, col) = map.presumed(self.span);
        let name = softswitch_core::trace::Printable(name);
        format!("{name}:{line}:{col}")
    }
}

/// What a line of P4 source (or of a file it includes) may start with, after blanks: a comment
/// or an annotation, or, as a whole word, a preprocessor directive or a keyword that begins a
/// top-level declaration.
const P4_MARKS: [&str; 3] = ["//", "/*", "@"];
const P4_WORDS: [&str; 24] = [
    "#include",
    "#define",
    "#undef",
    "#if",
    "#ifdef",
    "#ifndef",
    "#line",
    "#pragma",
    "#error",
    "#warning",
    "header",
    "struct",
    "control",
    "parser",
    "const",
    "typedef",
    "type",
    "action",
    "extern",
    "enum",
    "error",
    "match_kind",
    "package",
    "bit",
];

/// Whether `through`, the text of a file up to the end of an error's token, shows the file to
/// be P4 source: one of its lines (the error's own up to the token's end) starts as a line of
/// P4 does ([`P4_MARKS`], [`P4_WORDS`]). A file that does not (a password file, a JSON
/// document) has nothing of it quoted in a diagnostic but the token the message names.
pub fn starts_as_p4(through: &str) -> bool {
    through.lines().any(|line| {
        let line = line.trim_start();
        P4_MARKS.iter().any(|m| line.starts_with(m))
            || P4_WORDS.iter().any(|w| {
                line.strip_prefix(w).is_some_and(|rest| {
                    !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
            })
    })
}

/// The diagnostics of one compilation so far: every warning and error the phases report, up to
/// [`MAX_WARNINGS`] warnings (the others are counted) and [`MAX_ERRORS`] errors (the phases
/// stop at the last).
#[derive(Debug, Default)]
pub struct Diagnostics {
    list: Vec<Diagnostic>,
    errors: usize,
    warnings: usize,
    /// Whether [`MAX_ERRORS`] errors were reached: the phases are stopping.
    stopped: bool,
}

impl Diagnostics {
    /// Records a warning.
    pub fn warn(&mut self, d: Diagnostic) {
        self.warnings += 1;
        if self.warnings <= MAX_WARNINGS {
            self.list.push(d);
        }
    }

    /// Records an error the phase goes on after; `Err` when it is the [`MAX_ERRORS`]th, or
    /// an error past one of the [`limits`](crate::limits) (it names one: the program is hostile,
    /// and going on would only spend more): the phase must stop (and pass the `Err` up).
    pub fn error(&mut self, d: Diagnostic) -> Result<()> {
        if self.stopped {
            return Err(d);
        }
        if d.message.contains("(limits::") {
            self.stopped = true;
            self.list.push(d.clone());
            self.errors += 1;
            return Err(d);
        }
        let span = d.span;
        self.list.push(d);
        self.errors += 1;
        if self.errors < MAX_ERRORS {
            return Ok(());
        }
        self.stopped = true;
        let stop = Diagnostic::new(
            span,
            format!("stopping after {MAX_ERRORS} errors (limits::MAX_ERRORS)"),
        );
        self.list.push(stop.clone());
        Err(stop)
    }

    /// The first error recorded, if any.
    pub fn first_error(&self) -> Option<Diagnostic> {
        self.list
            .iter()
            .find(|d| d.severity == Severity::Error)
            .cloned()
    }

    /// Whether an error was recorded.
    pub fn has_errors(&self) -> bool {
        self.errors > 0
    }

    /// The outcome of a compilation whose phases gave `r`: its value and warnings when
    /// there was no error, else the first error with every other diagnostic in
    /// [`Diagnostic::rest`] (`r`'s own error too, unless recorded already or a consequence of
    /// the stop at [`MAX_ERRORS`]).
    pub fn conclude<T>(
        mut self,
        r: Result<T>,
    ) -> std::result::Result<(T, Vec<Diagnostic>), Diagnostic> {
        match r {
            Ok(v) if !self.has_errors() => {
                if self.warnings > MAX_WARNINGS {
                    let span = self.list.last().map_or(Span::default(), |d| d.span);
                    self.list.push(Diagnostic::warning(
                        span,
                        format!(
                            "{} more warnings not shown (limits::MAX_WARNINGS)",
                            self.warnings - MAX_WARNINGS
                        ),
                    ));
                }
                return Ok((v, self.list));
            }
            Ok(_) => {}
            Err(e) => {
                if !self.stopped && !self.list.contains(&e) {
                    self.list.push(e);
                }
            }
        }
        let first = self
            .list
            .iter()
            .position(|d| d.severity == Severity::Error)
            .expect("an error was recorded");
        let mut head = self.list.remove(first);
        head.rest = self.list;
        Err(head)
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
        let (map, f) = SourceMap::of("x.p4", "const bit<8> a = ;\n");
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
    fn a_line_directives_file_name_cannot_forge_a_line() {
        let (mut map, f) = SourceMap::of("x.p4", "//\ny\n");
        map.mark_line(f, 2, 7, Some("a.p4\n[forged] line\u{1b}[2J".into()));
        let d = Diagnostic::new(
            Span {
                file: f,
                lo: 3,
                hi: 4,
            },
            "bad",
        );
        let text = d.render(&map);
        assert!(
            text.starts_with("a.p4\\n[forged] line\\u{1b}[2J:7:1: error: bad\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3, "{text}");
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

    /// A file that is not P4 source (a topology naming `/etc/shadow` as its program) has no
    /// line quoted, whichever phase finds the error; a P4 file's error line is quoted even in
    /// its first declaration, and an STF test's lines always are.
    #[test]
    fn a_file_that_does_not_start_as_p4_is_not_quoted() {
        let secret = "root:$y$j9T$SECRETHASH:19000:0:99999:7:::\nbin:*:19000::::::\n";
        for (name, text, at, quoted) in [
            ("shadow", secret, 5, false),
            ("shadow", secret, 45, false),
            (
                "passwd",
                "alice:x:1000:1000:SECRET,,,:/home/alice:/bin/bash\n",
                5,
                false,
            ),
            (
                "hosts",
                "# SECRET network\n10.0.0.1 secret-host\n",
                2,
                false,
            ),
            ("p.p4", "header h_t { bit<8 SECRET; }\n", 18, true),
            ("p.p4", "#include <core.p4>\nSECRET x;\n", 19, true),
            ("p.p4", "interface SECRET;\n", 10, false),
            ("t.stf", "SECRET 1 2\n", 0, true),
        ] {
            let (map, f) = SourceMap::of(name, text);
            let d = Diagnostic::new(
                Span {
                    file: f,
                    lo: at,
                    hi: at + 1,
                },
                "expected something",
            );
            let rendered = d.render(&map);
            assert_eq!(
                rendered.contains("SECRET"),
                quoted,
                "{name} {text:?}: {rendered}"
            );
        }
    }
}
