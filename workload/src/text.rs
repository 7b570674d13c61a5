//! Reading the files a workload names, within limits: a file is read no further than its limit
//! (so `/dev/zero` ends there), a line no longer than [`MAX_LINE_BYTES`].

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Origin, Result, WorkloadError};
use crate::limits::MAX_LINE_BYTES;

/// `path` opened, or the error naming it.
pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|error| WorkloadError::Read {
        path: path.to_owned(),
        error,
    })
}

/// The error for a read that failed midway.
fn read_error(path: &Path, error: std::io::Error) -> WorkloadError {
    WorkloadError::Read {
        path: path.to_owned(),
        error,
    }
}

/// The whole of `path` as text, read as a `what` of at most `limit` bytes.
pub(crate) fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String> {
    let mut bytes = Vec::new();
    open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(WorkloadError::FileTooLong {
            path: path.to_owned(),
            what,
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        WorkloadError::input(
            &Origin::line(path, 1),
            format!("not {what}: not UTF-8 text"),
        )
    })
}

/// Calls `each` with the number (from 1) and text of every line of `input`, read from `path` as
/// a `what` of at most `limit` bytes; stops at the first error. Line ends (`\n`, `\r\n`) are
/// not part of the text.
pub(crate) fn for_each_line(
    input: impl Read,
    path: &Path,
    limit: u64,
    what: &'static str,
    mut each: impl FnMut(usize, &str) -> Result<()>,
) -> Result<()> {
    let mut reader = BufReader::new(input.take(limit + 1));
    let mut line = Vec::new();
    let mut read = 0u64;
    for number in 1.. {
        line.clear();
        let n = reader
            .by_ref()
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| read_error(path, e))?;
        if n == 0 {
            return Ok(());
        }
        read += n as u64;
        if read > limit {
            return Err(WorkloadError::FileTooLong {
                path: path.to_owned(),
                what,
                limit,
            });
        }
        let at = Origin::line(path, number);
        let ended = line.last() == Some(&b'\n');
        if ended {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(WorkloadError::input(
                &at,
                format!("line longer than {MAX_LINE_BYTES} bytes"),
            ));
        }
        let text =
            std::str::from_utf8(&line).map_err(|_| WorkloadError::input(&at, "not UTF-8 text"))?;
        each(number, text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.txt");
        std::fs::write(&path, "a\r\nb\n\nlast").unwrap();
        let mut seen = Vec::new();
        let lines = |limit| {
            for_each_line(open(&path).unwrap(), &path, limit, "a test file", |_, _| {
                Ok(())
            })
        };
        for_each_line(open(&path).unwrap(), &path, 100, "a test file", |n, l| {
            seen.push((n, l.to_owned()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                (1, "a".into()),
                (2, "b".into()),
                (3, "".into()),
                (4, "last".into())
            ]
        );
        let error = lines(5).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("is longer than 5 bytes, the limit for a test file"),
            "{error}"
        );
        std::fs::write(&path, "x".repeat(MAX_LINE_BYTES + 1)).unwrap();
        let error = lines(1 << 20).unwrap_err();
        assert!(
            error.to_string().contains(":1: line longer than"),
            "{error}"
        );
        std::fs::write(&path, b"ok\n\xff\xfe\n").unwrap();
        let error = lines(100).unwrap_err();
        assert!(error.to_string().ends_with(":2: not UTF-8 text"), "{error}");
    }

    #[test]
    fn paths_are_shown_whole_and_escaped() {
        let long = format!("/nonexistent/{}/w\x1b[2J.toml", "d".repeat(100));
        let error = read_text(Path::new(&long), 10, "a test file")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("{}/w\\u{{1b}}[2J.toml: ", "d".repeat(100))),
            "{error}"
        );
    }

    #[test]
    fn endless_files_stop_at_the_limit() {
        let error = read_text(Path::new("/dev/zero"), 1000, "a test file").unwrap_err();
        assert!(
            error.to_string().contains("longer than 1000 bytes"),
            "{error}"
        );
        let zero = Path::new("/dev/zero");
        let error = for_each_line(open(zero).unwrap(), zero, 100_000, "a test file", |_, _| {
            Ok(())
        })
        .unwrap_err();
        assert!(error.to_string().contains("line longer than"), "{error}");
        let error = read_text(Path::new("/nonexistent/w.toml"), 10, "a test file").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("cannot read /nonexistent/w.toml: "),
            "{error}"
        );
    }
}
