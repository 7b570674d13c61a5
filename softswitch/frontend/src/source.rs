//! Source files and positions: every token and diagnostic points into a [`SourceMap`]; and
//! reading a source file from disk within a size limit.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// A byte range in one file of a [`SourceMap`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Index of the file in its [`SourceMap`].
    pub file: u32,
    /// Byte offset of the first character.
    pub lo: u32,
    /// Byte offset one past the last character.
    pub hi: u32,
}

impl Span {
    /// A span covering `self` through `other` (same file assumed).
    pub fn to(self, other: Span) -> Span {
        if other.file != self.file {
            return self;
        }
        Span {
            file: self.file,
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }
}

/// One loaded source text.
#[derive(Debug)]
pub struct SourceFile {
    /// The name shown in diagnostics (a path, or `<core.p4>` for built-ins).
    pub name: String,
    /// The text.
    pub text: String,
    line_starts: Vec<usize>,
    /// `#line` directives: from this physical line on (1-based), lines are numbered from this
    /// number, in this file name if given. In the order of the lines.
    line_marks: Vec<(usize, usize, Option<String>)>,
}

/// All source texts of one compilation (the program, its includes, an STF file).
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// A map of one text, under `name`, and that text's file index.
    pub fn of(name: impl Into<String>, text: impl Into<String>) -> (Self, u32) {
        let mut map = Self::new();
        let file = map.add(name, text);
        (map, file)
    }

    /// Adds a text under `name`, returning its file index.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> u32 {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        self.files.push(SourceFile {
            name: name.into(),
            text,
            line_starts,
            line_marks: Vec::new(),
        });
        (self.files.len() - 1) as u32
    }

    /// The file at `index`.
    pub fn file(&self, index: u32) -> &SourceFile {
        &self.files[index as usize]
    }

    /// The 1-based line and column of the start of `span`.
    pub fn line_col(&self, span: Span) -> (usize, usize) {
        let file = self.file(span.file);
        let lo = (span.lo as usize).min(file.text.len());
        let line = file.line_starts.partition_point(|&s| s <= lo) - 1;
        let col = file.text[file.line_starts[line]..lo].chars().count() + 1;
        (line + 1, col)
    }

    /// The text of 1-based line `line` of file `file`, without its newline.
    pub fn line_text(&self, file: u32, line: usize) -> &str {
        let f = self.file(file);
        let start = f.line_starts[line - 1];
        let end = f.line_starts.get(line).copied().unwrap_or(f.text.len());
        f.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// Numbers the lines of file `file` from physical line `from` (1-based) on as `line`,
    /// `line + 1`, ..., in the file named `name` when given: a `#line` directive.
    pub fn mark_line(&mut self, file: u32, from: usize, line: usize, name: Option<String>) {
        let marks = &mut self.files[file as usize].line_marks;
        marks.retain(|(f, _, _)| *f < from);
        marks.push((from, line, name));
    }

    /// The file name, line and column of the start of `span` as diagnostics give them: after
    /// `#line` directives, what they say (the excerpt is still the physical line's).
    pub fn presumed(&self, span: Span) -> (&str, usize, usize) {
        let (line, col) = self.line_col(span);
        let file = self.file(span.file);
        let mut name = file.name.as_str();
        let Some((from, number, _)) = file.line_marks.iter().rev().find(|(f, _, _)| *f <= line)
        else {
            return (name, line, col);
        };
        // The file name is the latest one given at or before this line.
        if let Some((_, _, Some(n))) = file
            .line_marks
            .iter()
            .rev()
            .find(|(f, _, n)| *f <= line && n.is_some())
        {
            name = n;
        }
        (name, number.saturating_add(line - from), col)
    }

    /// The text covered by `span`.
    pub fn snippet(&self, span: Span) -> &str {
        &self.file(span.file).text[span.lo as usize..span.hi as usize]
    }
}

/// Why a source file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The system refused to open or read it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is a FIFO, a device, a directory or a socket, which may block or never end.
    #[error("not a regular file")]
    NotAFile,
    /// It is longer than the bytes left to read.
    #[error("longer than the {0} bytes left of the source limit")]
    TooLong(usize),
    /// It is not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
}

/// Reads the text of the file at `path`, at most `max` bytes of it: a file the user names, which
/// may be a pipe (`/dev/stdin`) but is not read past `max` (`/dev/zero` ends there).
pub fn read_file(path: &Path, max: usize) -> Result<String, ReadError> {
    read_at_most(std::fs::File::open(path)?, max)
}

/// Reads the text of the regular file at `path`, at most `max` bytes of it. Anything else (a
/// FIFO, a device such as `/dev/zero`) is refused before a byte is read, and opening never waits
/// for a FIFO's writer: for a file the program names, which no one may have meant to be read.
pub fn read_regular_file(path: &Path, max: usize) -> Result<String, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(ReadError::NotAFile);
    }
    read_at_most(file, max)
}

fn read_at_most(file: std::fs::File, max: usize) -> Result<String, ReadError> {
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file of exactly `max` bytes from a longer one.
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(ReadError::TooLong(max));
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let (map, f) = SourceMap::of("a.p4", "ab\ncd\n");
        assert_eq!(
            map.line_col(Span {
                file: f,
                lo: 4,
                hi: 5
            }),
            (2, 2)
        );
        assert_eq!(map.line_text(f, 2), "cd");
    }

    #[test]
    fn reading_stops_at_the_limit_and_includes_are_regular_files_only() {
        let dir = std::env::temp_dir().join(format!("softswitch-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ten.p4");
        std::fs::write(&file, "0123456789").unwrap();
        for read in [read_file, read_regular_file] {
            assert_eq!(read(&file, 10).unwrap(), "0123456789");
            assert!(matches!(read(&file, 9), Err(ReadError::TooLong(9))));
        }
        // A file the user names is read up to the limit, whatever it is.
        let zero = Path::new("/dev/zero");
        assert!(matches!(
            read_file(zero, 1 << 20),
            Err(ReadError::TooLong(_))
        ));
        assert!(matches!(
            read_regular_file(zero, 1 << 20),
            Err(ReadError::NotAFile)
        ));
        // A FIFO without a writer: refused at once, never waited for.
        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_regular_file(&fifo, 1 << 20),
            Err(ReadError::NotAFile)
        ));
        assert!(matches!(
            read_regular_file(&dir, 1 << 20),
            Err(ReadError::NotAFile)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
