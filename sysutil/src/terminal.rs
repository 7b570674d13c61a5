//! Whether output goes to a person: colour only on a terminal and never under `NO_COLOR`
//! (nor `TERM=dumb`, and `CLICOLOR_FORCE` forces it, as anstream decides for clap), and
//! screen redraws and progress bars only on a terminal. Files and pipes get plain text.

use std::io::IsTerminal;

/// Whether text written to `stream` may carry colour codes.
pub fn colour(stream: &impl anstream::stream::RawStream) -> bool {
    anstream::AutoStream::choice(stream) != anstream::ColorChoice::Never
}

/// Whether `stream` is a terminal, so a table may be redrawn in place (clear-screen codes) or
/// a progress bar drawn.
pub fn redraws(stream: &impl IsTerminal) -> bool {
    stream.is_terminal()
}

/// The codes that clear a terminal and put the cursor at its top left.
const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

/// What goes before each refresh of a table printed again and again: on a terminal, the
/// codes that clear it (the table redraws in place); elsewhere a blank line between readings.
pub fn refresh_prefix(stream: &impl IsTerminal, first: bool) -> &'static str {
    match (redraws(stream), first) {
        (true, _) => CLEAR_SCREEN,
        (false, true) => "",
        (false, false) => "\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_get_no_codes() {
        let file = plain_file();
        assert!(!colour(&file));
        assert!(!redraws(&file));
        assert_eq!(refresh_prefix(&file, true), "");
        assert_eq!(refresh_prefix(&file, false), "\n");
    }

    /// A file (not a terminal) to test against, already unlinked.
    fn plain_file() -> std::fs::File {
        let path = std::env::temp_dir().join(format!("lossless-terminal-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}
