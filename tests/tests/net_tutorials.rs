//! Every exercise of the P4 tutorials ($LOSSLESS_TUTORIALS/exercises) solved, as a user who
//! solved it has it — the exercise's folder with its solution's files in place of the
//! skeleton's, the build `make` leaves where the topology or the controller loads p4c's
//! output — brought up with `lossless net up TOPOLOGY` from that folder (as `make run` runs) on
//! softswitch and on BMv2, and checked in the same run the way the exercise's README says
//! (`tutorials/check_exercise.py` as the `--run` script: pings, frames read off the hosts'
//! interfaces and decoded by scapy with the exercise's own header classes, TCP connections,
//! the exercise's own mycontroller.py). One Mininet bring-up per exercise and switch; programs
//! compiled by `lossless net up` for BMv2, by testkit's cache where the exercise needs a build.
//! The exercises' controllers run on P4Runtime modules generated for the venv's protobuf
//! (`testkit::p4runtime_modules`), with PI's p4config module and p4runtime-shell (which
//! flowcache's imports) beside them (docs/mininet.md).
//!
//! Needs root, Debian's Mininet, the test venv, the tutorials (LOSSLESS_TUTORIALS) and, for
//! BMv2 and for the exercises that load p4c's output, p4c and BMv2 (LOSSLESS_P4REF or PATH):
//! skipped without them outside CI, a failure under CI=true.

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use lossless_tests::{
    bed::lossless_bin,
    net::{bmv2, mininet, net, STATE_ROOT},
};

/// An exercise as a user who solved it runs it.
struct Exercise {
    /// Its folder under `exercises/`.
    name: &'static str,
    /// The topology `make run` uses (the Makefile's TOPO), relative to the folder.
    topology: &'static str,
    /// Files of `solution/` that replace the folder's own (from, to).
    solved: &'static [(&'static str, &'static str)],
    /// Programs of the folder `make` compiles into build/ (NAME.json and NAME.p4.p4info.txtpb)
    /// that the run loads: a topology's `program`, a controller's pipeline.
    build: &'static [&'static str],
    /// Whether its check runs the exercise's controller, which imports the tutorials'
    /// p4runtime_lib (and so PI's p4config module and the P4Runtime modules).
    controller: bool,
}

/// Copies directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A run's own copy of the tutorials under `target/`: `exercises/NAME` solved and built,
/// beside a link to their `utils/` (the controllers find p4runtime_lib at ../../utils);
/// removed on drop.
struct Workspace(PathBuf);

impl Workspace {
    fn new(tutorials: &Path, exercise: &Exercise, tag: &str) -> Workspace {
        let root = testkit::bmv2::target_dir()
            .join("tutorial-exercises")
            .join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let folder = root.join("exercises").join(exercise.name);
        copy_dir(&tutorials.join("exercises").join(exercise.name), &folder);
        std::os::unix::fs::symlink(tutorials.join("utils"), root.join("utils")).unwrap();
        for (from, to) in exercise.solved {
            std::fs::copy(folder.join("solution").join(from), folder.join(to)).unwrap();
        }
        Workspace(root)
    }

    fn folder(&self, exercise: &Exercise) -> PathBuf {
        self.0.join("exercises").join(exercise.name)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `make` leaves in build/ for `program`: p4c's JSON and P4Info, compiled once per
/// program text (testkit's cache).
fn build(toolchain: &p4toolchain::Toolchain, folder: &Path, program: &str) {
    let compiled = testkit::bmv2::compiled(toolchain, &folder.join(format!("{program}.p4")))
        .unwrap_or_else(|e| panic!("{e}"));
    let build = folder.join("build");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::copy(&compiled.json, build.join(format!("{program}.json"))).unwrap();
    std::fs::copy(
        &compiled.p4info_text,
        build.join(format!("{program}.p4.p4info.txtpb")),
    )
    .unwrap();
}

/// Brings `exercise` up on `switch` from its solved folder and runs its check.
fn run(test: &str, exercise: &Exercise, switch: &str) {
    if !mininet(test) || (switch == "bmv2" && !bmv2(test)) {
        return;
    }
    let Some(tutorials) = testkit::tutorials_or_skip(test) else {
        return;
    };
    let Some(python) = testkit::venv_python_or_skip(test) else {
        return;
    };
    let toolchain = if exercise.build.is_empty() {
        None
    } else {
        match testkit::bmv2::toolchain_or_skip(test) {
            Some(toolchain) => Some(toolchain),
            None => return,
        }
    };
    let workspace = Workspace::new(&tutorials, exercise, &format!("{}-{switch}", exercise.name));
    let folder = workspace.folder(exercise);
    for program in exercise.build {
        build(toolchain.expect("found above"), &folder, program);
    }
    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("tutorials/check_exercise.py");
    let script = folder.join("check.sh");
    std::fs::write(
        &script,
        format!(
            "exec \"{}\" \"{}\" {}\n",
            python.display(),
            check.display(),
            exercise.name
        ),
    )
    .unwrap();
    // Network names of at most 32 bytes, distinct per test.
    let name = format!("tut-{}-{}", exercise.name.replace('_', "-"), &switch[..2]);
    let mut up = net(
        &name,
        &["up", exercise.topology, "--switch", switch, "--run"],
    );
    up.arg(&script)
        .current_dir(&folder)
        .env("LOSSLESS_BIN", lossless_bin());
    if exercise.controller {
        let generated = workspace.0.join("python");
        testkit::p4config_module(&python, &tutorials, &generated);
        testkit::p4runtime_modules(&python, &generated);
        up.env("PYTHONPATH", &generated);
    }
    let started = Instant::now();
    let out = up.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{test}: {:.1} s\n{stdout}", started.elapsed().as_secs_f64());
    assert!(
        out.status.success() && stdout.contains(&format!("PASSED {}", exercise.name)),
        "{}: {}\n{stdout}\n{stderr}",
        exercise.name,
        out.status
    );
    assert!(
        !Path::new(STATE_ROOT).join(&name).exists(),
        "{name} left state"
    );
}

/// One test per exercise and switch.
macro_rules! exercises {
    ($($name:ident: $exercise:expr;)*) => {
        mod softswitch {
            use super::*;
            $(#[test]
            fn $name() {
                run(concat!("softswitch::", stringify!($name)), &$exercise, "softswitch");
            })*
        }
        mod bmv2 {
            use super::*;
            $(#[test]
            fn $name() {
                run(concat!("bmv2::", stringify!($name)), &$exercise, "bmv2");
            })*
        }
    };
}

exercises! {
    basic: Exercise {
        name: "basic",
        topology: "pod-topo/topology.json",
        solved: &[("basic.p4", "basic.p4")],
        build: &[],
        controller: false,
    };
    basic_tunnel: Exercise {
        name: "basic_tunnel",
        topology: "topology.json",
        solved: &[("basic_tunnel.p4", "basic_tunnel.p4")],
        build: &[],
        controller: false,
    };
    calc: Exercise {
        name: "calc",
        topology: "topology.json",
        solved: &[("calc.p4", "calc.p4")],
        build: &[],
        controller: false,
    };
    flowcache: Exercise {
        name: "flowcache",
        topology: "topology.json",
        // The solution is the program and its controller, which the README runs as
        // ./mycontroller.py from the exercise's folder.
        solved: &[
            ("flowcache.p4", "flowcache.p4"),
            ("mycontroller.py", "mycontroller.py"),
        ],
        // The controller sets the pipeline from build/.
        build: &["flowcache"],
        controller: true,
    };
    ecn: Exercise {
        name: "ecn",
        topology: "topology.json",
        solved: &[("ecn.p4", "ecn.p4")],
        build: &[],
        controller: false,
    };
    firewall: Exercise {
        name: "firewall",
        topology: "pod-topo/topology.json",
        solved: &[("firewall.p4", "firewall.p4")],
        // s1's `program` is build/firewall.json.
        build: &["firewall"],
        controller: false,
    };
    link_monitor: Exercise {
        name: "link_monitor",
        topology: "pod-topo/topology.json",
        solved: &[("link_monitor.p4", "link_monitor.p4")],
        build: &[],
        controller: false,
    };
    load_balance: Exercise {
        name: "load_balance",
        topology: "topology.json",
        solved: &[("load_balance.p4", "load_balance.p4")],
        build: &[],
        controller: false,
    };
    mri: Exercise {
        name: "mri",
        topology: "topology.json",
        solved: &[("mri.p4", "mri.p4")],
        build: &[],
        controller: false,
    };
    multicast: Exercise {
        name: "multicast",
        topology: "sig-topo/topology.json",
        solved: &[("multicast.p4", "multicast.p4"), ("s1-runtime.json", "sig-topo/s1-runtime.json")],
        build: &[],
        controller: false,
    };
    p4runtime: Exercise {
        name: "p4runtime",
        topology: "topology.json",
        // advanced_tunnel.p4 is complete; the solution is the controller, which the README
        // runs as ./mycontroller.py (it finds p4runtime_lib at ../../utils from its own
        // folder, so not from solution/).
        solved: &[("mycontroller.py", "mycontroller.py")],
        // The controller sets the pipeline from build/.
        build: &["advanced_tunnel"],
        controller: true,
    };
    qos: Exercise {
        name: "qos",
        topology: "topology.json",
        solved: &[("qos.p4", "qos.p4")],
        build: &[],
        controller: false,
    };
    source_routing: Exercise {
        name: "source_routing",
        topology: "topology.json",
        solved: &[("source_routing.p4", "source_routing.p4")],
        build: &[],
        controller: false,
    };
}
