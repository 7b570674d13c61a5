//! The P4 tutorials' PTF suites (basic: 6 tests, basic_tunnel: 7; BMv2 passes them all) against
//! softswitch launched by the suites' own `runptf.sh`, with its own switch line: runptf.sh runs
//! as it is, in a network namespace of the test's own (it makes its veths with the tutorials'
//! `veth_setup.sh` in whatever namespace it runs in), with a `PATH` in front of which:
//! `simple_switch_grpc` is softswitch under that name (argv[0]); `p4c` is p4c's BMv2 back end
//! taking the driver's arguments (the bundle has no driver); `ptf` is the venv's; `sudo` runs
//! its command as it is (the test is root); `pkill` kills the switch this run started, by its
//! pid, never by name (runptf.sh's `pkill --list-name simple_switch` would reach every
//! engineer's switch on the machine). PI's `p4config` module, which the tutorials'
//! `p4runtime_lib` imports, is generated from `pi-proto/` into the run's directory under
//! `target/`. The exercise's files are linked, never copied or written: the run writes `build/`
//! and `logs/` (which `make run` would have made) beside the links.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lossless_tests::{bed::privileged_and, switch::softswitch_bin};
use sysutil::netns::{unique_name, Namespace};

/// How long one suite may take (it takes about 20 s: p4c, runptf.sh's three 2 s sleeps, the
/// tests) before the run is killed and the test fails.
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);

/// A suite's run: its directory under `target/`, its namespace, and whatever it started,
/// all removed or killed however the test ends.
struct Run {
    dir: PathBuf,
    child: Option<Child>,
    ns: Option<Namespace>,
}

impl Run {
    /// The switch's pid, as the `simple_switch_grpc` shim wrote it.
    fn switch_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("switch.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // runptf.sh and all it started (the switch, ptf) are one process group.
            // SAFETY: kill(2) of the group this test created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
        if let Some(pid) = self.switch_pid() {
            // SAFETY: kill(2) of the switch this run started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        drop(self.ns.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes an executable shell script.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A shell word of `path`, quoted.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Runs exercise `exercise`'s `runptf.sh` against softswitch, and checks that it exited 0 and
/// that ptf ran `tests` tests, all passing.
fn run_suite(test: &str, exercise: &str, tests: usize) {
    let Some(tutorials) = privileged_and(test, testkit::tutorials_or_skip) else {
        return;
    };
    let Some(toolchain) = testkit::bmv2::toolchain_or_skip(test) else {
        return;
    };
    let Some(python) = testkit::venv_python_or_skip(test) else {
        return;
    };
    let ptf = python.with_file_name("ptf");
    if !ptf.exists() {
        testkit::skip(test, "needs PTF in the test venv: run `cargo xtask setup`");
        return;
    }
    let dir = testkit::bmv2::target_dir()
        .join("tutorials-ptf")
        .join(unique_name("ptf"));
    let mut run = Run {
        dir: dir.clone(),
        child: None,
        ns: None,
    };
    std::fs::create_dir_all(&dir).unwrap();

    // The exercise as users have it, linked; what runptf.sh writes, beside.
    let work = dir.join("exercises").join(exercise);
    for sub in ["build", "logs"] {
        std::fs::create_dir_all(work.join(sub)).unwrap();
    }
    let source = tutorials.join("exercises").join(exercise);
    for name in ["runptf.sh", "ptf", "solution"] {
        std::os::unix::fs::symlink(source.join(name), work.join(name)).unwrap();
    }
    for name in ["bin", "utils"] {
        std::os::unix::fs::symlink(tutorials.join(name), dir.join(name)).unwrap();
    }

    // PI's p4config module beside the p4runtime package's `p4` (extended, not replaced).
    let generated = dir.join("python");
    testkit::p4config_module(&python, &tutorials, &generated);

    // The commands runptf.sh calls.
    let shims = dir.join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let pidfile = dir.join("switch.pid");
    script(&shims.join("sudo"), "#!/bin/sh\nexec \"$@\"\n");
    script(
        &shims.join("simple_switch_grpc"),
        &format!(
            "#!/bin/bash\necho $$ > {}\nexec -a simple_switch_grpc {} \"$@\"\n",
            quoted(&pidfile),
            quoted(&softswitch_bin())
        ),
    );
    script(
        &shims.join("pkill"),
        &format!("#!/bin/sh\nexec kill -9 \"$(cat {})\"\n", quoted(&pidfile)),
    );
    let p4c_env: String = toolchain
        .p4c
        .env
        .iter()
        .map(|(k, v)| format!("{}={} ", k.to_string_lossy(), quoted(Path::new(v))))
        .collect();
    script(
        &shims.join("p4c"),
        &format!(
            "#!/bin/bash\n\
             # p4c --target bmv2 --arch v1model --p4runtime-files F -o DIR PROGRAM, as p4c-bm2-ss\n\
             set -e\n\
             while [ $# -gt 1 ]; do\n\
             case \"$1\" in\n\
             --target|--arch) shift 2;;\n\
             --p4runtime-files) runtime=\"$2\"; shift 2;;\n\
             -o) out=\"$2\"; shift 2;;\n\
             *) echo \"p4c (test shim): unexpected $1\" >&2; exit 2;;\n\
             esac\n\
             done\n\
             exec env {p4c_env}{} --arch v1model --p4runtime-files \"$runtime\" \
             -o \"$out/$(basename \"$1\" .p4).json\" \"$1\"\n",
            quoted(&toolchain.p4c.program)
        ),
    );
    std::os::unix::fs::symlink(&ptf, shims.join("ptf")).unwrap();

    let ns = Namespace::create("lptf").unwrap();
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = dir.join("runptf.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut command = ns.command("bash");
    command
        .arg("runptf.sh")
        .current_dir(&work)
        .env("PATH", path)
        .env("PYTHONPATH", &generated)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // The p4runtime package's generated modules need it with protobuf 4 and later.
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0);
    run.ns = Some(ns);
    run.child = Some(command.spawn().unwrap());
    let deadline = Instant::now() + SUITE_TIMEOUT;
    let status = loop {
        let child = run.child.as_mut().expect("started");
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    let Some(status) = status else {
        panic!("runptf.sh for {exercise} took more than {SUITE_TIMEOUT:?}:\n{printed}");
    };
    run.child = None;
    assert!(
        printed.contains(&format!("Ran {tests} tests")) && printed.lines().any(|l| l == "OK"),
        "ptf did not pass all {tests} tests of {exercise} on softswitch ({status}):\n{printed}"
    );
    assert!(
        status.success(),
        "runptf.sh exited with {status}:\n{printed}"
    );
}

#[test]
fn the_tutorials_basic_ptf_suite_passes_on_softswitch_as_simple_switch_grpc() {
    run_suite(
        "the_tutorials_basic_ptf_suite_passes_on_softswitch_as_simple_switch_grpc",
        "basic",
        6,
    );
}

#[test]
fn the_tutorials_basic_tunnel_ptf_suite_passes_on_softswitch_as_simple_switch_grpc() {
    run_suite(
        "the_tutorials_basic_tunnel_ptf_suite_passes_on_softswitch_as_simple_switch_grpc",
        "basic_tunnel",
        7,
    );
}
