//! `simple_switch_CLI`, BMv2's runtime CLI, kept running for a session: a command is written
//! to its standard input and its answer is what it prints before its next `RuntimeCmd: `
//! prompt. An answer that reports a failure (as the CLI's `handle_bad_input` prints them:
//! "Error: ...", "Invalid ... (CODE)", "*** Unknown syntax: ...") is an error.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::{mpsc, Arc, Mutex};
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
    /// The end of what the CLI wrote to its standard error, for when it fails.
    errors: Arc<Mutex<String>>,
}

/// How much of the CLI's standard error is kept.
const ERRORS_KEPT: usize = 4096;

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
        // Drained all along: a full pipe would stop the CLI (it notes every whole-register read
        // there).
        let errors = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("piped");
        let kept = Arc::clone(&errors);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 1024];
            while let Ok(n @ 1..) = stderr.read(&mut buffer) {
                let mut text = kept.lock().expect("not poisoned");
                text.push_str(&String::from_utf8_lossy(&buffer[..n]));
                if text.len() > ERRORS_KEPT {
                    let cut = text.len() - ERRORS_KEPT;
                    let cut = (cut..text.len())
                        .find(|&i| text.is_char_boundary(i))
                        .unwrap_or(0);
                    text.drain(..cut);
                }
            }
        });
        let mut cli = RuntimeCli {
            child,
            input,
            answers,
            errors,
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
                let _ = self.child.wait();
                let errors = self.errors.lock().expect("not poisoned");
                Err(format!("simple_switch_CLI exited: {}", errors.trim()))
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
