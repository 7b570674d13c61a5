//! The `softswitch` command line: exit codes and the form of its reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name)
}

/// A file under the system's temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("softswitch-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn softswitch(args: &[&Path]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_softswitch"));
    cmd.arg(if args.len() == 1 { "check" } else { "stf" });
    cmd.args(args);
    cmd.output().unwrap()
}

#[test]
fn check_accepts_a_good_program() {
    let out = softswitch(&[&corpus("basic.p4")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_reports_file_line_col_and_a_caret() {
    let bad = TempFile::new("bad.p4", "#include <v1model.p4>\nconst bit<8> X = 8w1 +;\n");
    let out = softswitch(&[&bad.0]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("{}:2:23: error: expected an expression, found ';'\n  const bit<8> X = 8w1 +;\n                        ^", bad.0.display());
    assert!(stderr.contains(&expected), "{stderr}");
}

#[test]
fn check_reports_every_error_and_warning_and_fails_on_an_error() {
    let program = std::fs::read_to_string(corpus("basic.p4")).unwrap();
    let broken = program.replacen("apply {", "apply {\n        x = 1;\n        break;", 1);
    let bad = TempFile::new("errors.p4", &format!("#warning unfinished\n{broken}"));
    let out = softswitch(&[&bad.0]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = bad.0.display().to_string();
    for (what, excerpt) in [
        ("warning: #warning unfinished", "#warning unfinished"),
        ("error: unknown name 'x'", "x = 1;"),
        ("error: 'break' outside a loop", "break;"),
    ] {
        let at = stderr
            .find(&format!(": {what}\n"))
            .unwrap_or_else(|| panic!("{what}: {stderr}"));
        assert!(
            stderr[..at].rsplit('\n').next().unwrap().starts_with(&name),
            "{stderr}"
        );
        assert!(
            stderr[at..].lines().nth(1).unwrap().contains(excerpt),
            "{stderr}"
        );
        assert!(
            stderr[at..].lines().nth(2).unwrap().contains('^'),
            "{stderr}"
        );
    }
    // Warnings alone: the program is fine.
    let warned = TempFile::new("warned.p4", &format!("#warning unfinished\n{program}"));
    let out = softswitch(&[&warned.0]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(": warning: #warning unfinished"));
}

#[test]
fn stf_exits_non_zero_on_a_mismatch() {
    let bad = TempFile::new(
        "bad.stf",
        "packet 2 ffffffffffff 000000000002 0806 0001\nexpect 0 00\n",
    );
    let out = softswitch(&[&corpus("basic.p4"), &bad.0]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":2:1: error: packet 1 on port 0 differs"),
        "{stderr}"
    );
}

#[test]
fn stf_verbose_prints_logs_and_digests() {
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["stf", "--verbose"])
        .arg(corpus("flow.p4"))
        .arg(corpus("flow.stf"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("log: kind 4\n"), "{stdout}");
    assert!(stdout.contains("digest 1: 0xa0b0c0d0e0f\n"), "{stdout}");
}

/// The standard output of `softswitch ARGS`, which must succeed.
fn stdout_of(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    testkit::output_of(Command::new(env!("CARGO_BIN_EXE_softswitch")).args(args)).stdout
}

/// `softswitch p4info --format FORMAT` on a corpus program, decoded back to a P4Info.
fn p4info_as(format: &str) -> p4runtime::p4::config::v1::P4Info {
    let program = corpus("basic.p4");
    let stdout = stdout_of(&[
        "p4info".as_ref(),
        "--format".as_ref(),
        format.as_ref(),
        program.as_ref(),
    ]);
    match format {
        "binary" => prost::Message::decode(stdout.as_slice()).unwrap(),
        "json" => p4runtime::format::from_json(std::str::from_utf8(&stdout).unwrap()).unwrap(),
        _ => p4runtime::format::from_text(std::str::from_utf8(&stdout).unwrap()).unwrap(),
    }
}

#[test]
fn p4info_writes_the_same_message_in_every_format() {
    let text = p4info_as("text");
    assert_eq!(
        text.tables[0].preamble.as_ref().unwrap().name,
        "MyIngress.ipv4_lpm"
    );
    assert_eq!(p4info_as("json"), text);
    assert_eq!(p4info_as("binary"), text);
}

/// `bundle` inlines the files a program includes (relative to the including file, nested),
/// keeps the built-in headers' includes, and the result compiles as a device config, which
/// may include no file, to the same program.
#[test]
fn bundle_inlines_local_includes_into_a_self_contained_program() {
    let dir = std::env::temp_dir().join(format!("softswitch-{}-bundle", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let basic = std::fs::read_to_string(corpus("basic.p4")).unwrap();
    let split = basic.find("parser ").unwrap();
    std::fs::write(dir.join("lib/types.p4"), &basic[..split]).unwrap();
    std::fs::write(dir.join("lib/all.p4"), "#include \"types.p4\"\n").unwrap();
    let main = dir.join("main.p4");
    std::fs::write(
        &main,
        format!("#include \"lib/all.p4\"\n{}", &basic[split..]),
    )
    .unwrap();

    let bundled = String::from_utf8(stdout_of(&["bundle".as_ref(), main.as_ref()])).unwrap();
    assert!(!bundled.contains("#include \""), "{bundled}");
    assert!(bundled.contains("#include <v1model.p4>"), "{bundled}");
    let compiled = |name: &str, text: &str| {
        let mut map = softswitch_frontend::source::SourceMap::new();
        let file = map.add(name, text);
        softswitch_frontend::compile(&mut map, file)
            .unwrap_or_else(|d| panic!("{}", d.render(&map)))
    };
    // Under one file name: the trace names the file of each `if`.
    assert_eq!(compiled("basic.p4", &bundled), compiled("basic.p4", &basic));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The program named on the command line may be a pipe (`/dev/stdin`), read up to the source
/// limit: `/dev/zero` ends there with an error.
#[test]
fn check_reads_a_program_from_a_pipe_and_an_endless_one_up_to_the_limit() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["check", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let program = std::fs::read(corpus("basic.p4")).unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &program).unwrap();
    assert!(child.wait_with_output().unwrap().status.success());

    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["check", "/dev/zero"])
        .output()
        .unwrap();
    refused(&out, "reading /dev/zero: longer than");
}

#[test]
fn run_refuses_ports_past_510_and_an_unknown_execution_and_stf_refuses_an_endless_file() {
    for args in [
        &["run", "--cpu-port", "511"][..],
        &["run", "--cpu-port", "65536"],
        &["run", "-i", "511@lo"],
        &["run", "--execution", "jit"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("511")
                || stderr.contains("510")
                || stderr.contains("the execution is interpreted or compiled"),
            "{stderr}"
        );
    }
    let out = softswitch(&[&corpus("basic.p4"), Path::new("/dev/zero")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("reading /dev/zero") && stderr.contains("longer than 16777216 bytes"),
        "{stderr}"
    );
}

/// Asserts that `out` is a refusal: exit status 1, `reason` in its standard error.
fn refused(out: &Output, reason: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(reason), "{stderr}");
}

/// softswitch through a symlink named `name` (BMv2's command line), in a directory of its own.
fn as_bmv2(name: &str, args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("softswitch-{}-as-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join(name);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_softswitch"), &link).unwrap();
    let out = output_within(Command::new(&link).args(args));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// The output of `command`, which must end within a minute (a switch that starts instead of
/// refusing its command line is killed, and the test fails).
fn output_within(command: &mut Command) -> Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{command:?} did not end within a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_same_interface_twice_is_refused_by_both_command_lines() {
    let own = output_within(
        Command::new(env!("CARGO_BIN_EXE_softswitch"))
            .args(["run", "-i", "1@lo", "-i", "2@lo"])
            .args(["--grpc-server-addr", "127.0.0.1:0"]),
    );
    let bmv2s = as_bmv2(
        "simple_switch_grpc",
        &["--no-p4", "-i", "1@lo", "-i", "2@lo", "--thrift-port", "0"],
    );
    for out in [own, bmv2s] {
        refused(&out, "interface lo is given twice (ports 1 and 2)");
    }
}

#[test]
fn as_simple_switch_it_takes_bmv2s_command_line() {
    let help = as_bmv2("simple_switch_grpc", &["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{text}");
    for flag in [
        "--thrift-port",
        "--log-console",
        "--no-p4",
        "--pcap",
        "--nanolog",
    ] {
        assert!(text.contains(flag), "{flag} missing from {text}");
    }
    // Neither a program nor --no-p4: refused, as BMv2 refuses it.
    let none = as_bmv2("simple_switch", &["--log-console"]);
    assert!(!none.status.success());
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("or --no-p4"), "{err}");
    // Target options after `--` are BMv2's: an unknown one is refused, naming it.
    let bad = as_bmv2("simple_switch_grpc", &["--no-p4", "--", "--bogus"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--bogus"));
    // As softswitch, its own command line is unchanged.
    let own = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["run", "--no-p4"])
        .output()
        .unwrap();
    assert!(!own.status.success());
}

#[test]
fn as_simple_switch_it_runs_a_bmv2_json_serves_thrift_and_says_what_it_ignores() {
    let json = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/bmv2_json/basic.json");
    let dir = std::env::temp_dir().join(format!("softswitch-{}-run-json", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("simple_switch");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_softswitch"), &link).unwrap();
    let mut child = Command::new(&link)
        .arg(&json)
        .args([
            // Port 0: the system picks one, so that no other switch of the machine collides.
            "--thrift-port",
            "0",
            "--pcap",
            "--",
            "--priority-queues",
            "8",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It is up once it says where P4Runtime listens; then SIGTERM ends it with 0.
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let up = line.contains("P4Runtime on 127.0.0.1:");
        seen.push(line);
        if up {
            break;
        }
    }
    // SAFETY: kill with a child's pid has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    seen.extend(lines.map_while(Result::ok));
    let _ = std::fs::remove_dir_all(&dir);
    let text = seen.join("\n");
    assert!(text.contains("basic.json"), "{text}");
    assert!(
        text.contains("Thrift (simple_switch_CLI) on 0.0.0.0:"),
        "{text}"
    );
    assert!(
        text.contains("--priority-queues accepted and ignored"),
        "{text}"
    );
    // BMv2's Thrift on every interface is said to be open, once, with how to restrict it.
    let open = "open on every interface without authentication";
    assert_eq!(text.matches(open).count(), 1, "{text}");
    assert!(text.contains("-- --thrift-addr 127.0.0.1:"), "{text}");
    assert!(status.success(), "{status:?}\n{text}");
}
