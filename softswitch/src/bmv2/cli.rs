//! `simple_switch_CLI`, BMv2's runtime CLI, kept running for a session: a command is written
//! to its standard input and its answer is what it prints before its next `RuntimeCmd: `
//! prompt. An answer that reports a failure (as the CLI's `handle_bad_input` prints them:
//! "Error: ...", "Invalid ... (CODE)", "*** Unknown syntax: ...") is an error.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use p4toolchain::Tool;

/// What the CLI prints before reading each command.
const PROMPT: &[u8] = b"RuntimeCmd: ";
/// How long one command may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A running `simple_switch_CLI` connected to one switch.
pub struct RuntimeCli {
    child: Child,
    input: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl RuntimeCli {
    /// Starts the CLI on the switch whose Thrift server listens on `thrift_port` and waits for
    /// its first prompt (it has read the switch's JSON by then).
    pub fn start(cli: &Tool, thrift_port: u16) -> Result<RuntimeCli, String> {
        let mut child = cli
            .command()
            .args(["--thrift-port", &thrift_port.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", cli.program.display()))?;
        let input = child.stdin.take().expect("piped");
        let output = child.stdout.take().expect("piped");
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || read_answers(output, &tx));
        let mut cli = RuntimeCli {
            child,
            input,
            answers,
        };
        // The banner before the first prompt.
        cli.answer()
            .map_err(|e| format!("simple_switch_CLI did not start: {e}"))?;
        Ok(cli)
    }

    /// Runs `command`; its answer, or the failure it reports.
    pub fn run(&mut self, command: &str) -> Result<String, String> {
        if command.contains('\n') {
            return Err(format!("a CLI command is one line: {command:?}"));
        }
        writeln!(self.input, "{command}")
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("simple_switch_CLI: {e}"))?;
        let answer = self.answer()?;
        let failed = answer.lines().map(str::trim_start).any(|line| {
            line.starts_with("Error")
                || line.starts_with("Invalid")
                || line.starts_with("***")
                || line.starts_with("Traceback")
        });
        if failed {
            Err(format!("`{command}`: {}", answer.trim()))
        } else {
            Ok(answer)
        }
    }

    fn answer(&mut self) -> Result<String, String> {
        match self.answers.recv_timeout(TIMEOUT) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(format!("simple_switch_CLI gave no answer in {TIMEOUT:?}"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let mut stderr = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut stderr);
                }
                Err(format!("simple_switch_CLI exited: {}", stderr.trim()))
            }
        }
    }
}

/// Splits the CLI's output at its prompts and sends each answer.
fn read_answers(output: ChildStdout, answers: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(output);
    let mut pending = Vec::new();
    loop {
        let buffer = match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(buffer) => buffer,
        };
        let n = buffer.len();
        pending.extend_from_slice(buffer);
        reader.consume(n);
        while let Some(at) = pending.windows(PROMPT.len()).position(|w| w == PROMPT) {
            let answer = String::from_utf8_lossy(&pending[..at]).into_owned();
            pending.drain(..at + PROMPT.len());
            if answers.send(answer).is_err() {
                return;
            }
        }
    }
}

impl Drop for RuntimeCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
