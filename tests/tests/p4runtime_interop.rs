//! Interop: the official P4Runtime Python bindings (PyPI `p4runtime`, with grpcio), an
//! independent client, drive `softswitch run` (started without a program or ports) through
//! arbitration (a primary, a backup told so and refused), a pipeline push, a write read back by
//! table and by wildcard, a failed batch's per-update `p4.v1.Error`s decoded from the status
//! details (with grpcio's default metadata limits, also for batches of 150 and 500 failed
//! updates), and counter reads (one cell, every cell); the P4Info it sends is `softswitch p4info
//! --format binary`, decoded by protobuf's own parser.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
};

use lossless_tests::switch::softswitch_bin;

#[test]
fn the_official_python_p4runtime_client_drives_softswitch() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask setup`",
        python.display()
    );
    let program = root.join("softswitch/tests/server/switch.p4");
    let dir = std::env::temp_dir().join(format!("lossless-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p4info = dir.join("switch.p4info.bin");
    let out = testkit::output_of(
        Command::new(softswitch_bin())
            .args(["p4info", "--format", "binary"])
            .arg(&program),
    );
    std::fs::write(&p4info, &out.stdout).unwrap();

    let mut switch = Command::new(softswitch_bin())
        .args([
            "run",
            "--grpc-server-addr",
            "127.0.0.1:0",
            "--device-id",
            "1",
            "--cpu-port",
            "255",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(switch.stderr.take().unwrap()).lines();
    let address = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("P4Runtime on ")
                .nth(1)
                .map(|rest| rest.split(' ').next().unwrap().to_string())
        })
        .expect("softswitch announces its address");
    std::thread::spawn(move || lines.for_each(drop));

    let client = Command::new(&python)
        .arg(root.join("tests/interop/p4runtime_client.py"))
        .arg(&address)
        .arg("1")
        .arg(&program)
        .arg(&p4info)
        // The bindings were generated for an older protobuf runtime (see TOOLCHAIN.md).
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .unwrap();
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(switch.id() as i32, libc::SIGTERM) };
    let status = switch.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success() && stdout.contains("interop: ok"),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(
        status.success(),
        "softswitch exited with {status} on SIGTERM"
    );
}
