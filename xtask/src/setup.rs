//! `cargo xtask setup`: install what the build and the tests need, only what is missing.

use std::process::Command;

use anyhow::{bail, Context as _};

use crate::run::{cargo_home_bin, workspace_root, Cmd};

/// Debian packages: LLVM 22 for bpf-linker, iproute2/ethtool for the test beds, ping for the
/// switch tests' hosts, tshark as an independent decoder, python3-venv for the test venv,
/// nftables (the NAK test loses one frame with it), mininet (Debian's, for `lossless net`; it
/// brings its own python3 module and mnexec),
/// prometheus (Prometheus and promtool, which scrape and lint `lossless agent` in its test),
/// python3-dev (PTF's netifaces is built from source when the venv installs it), slurm-wlm and
/// munge (the single-node Slurm that `lossless sim sweep --slurm` is tested on).
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "clang-22",
    "libzstd-dev",
    "iproute2",
    "ethtool",
    "iputils-ping",
    "tshark",
    "nftables",
    "python3-venv",
    "util-linux",
    "mininet",
    "prometheus",
    "python3-dev",
    "slurm-wlm",
    "munge",
];

/// Python packages of the tests' independent decoders and clients, kept in `.venv` inside the
/// clone, each with the module that proves it is installed: scapy; the official P4Runtime
/// bindings (an independent P4Runtime client, and the source of `p4runtime/proto/`'s descriptors)
/// with the protobuf runtime, Google's common protos and gRPC they need; PTF, the P4 testing
/// framework the P4 tutorials' test suites run on, and gRPC's protoc (grpcio-tools), which
/// generates PI's `p4config` module those suites import (tests/tests/tutorials_ptf.rs).
/// kubernetes-validate, which checks the Kubernetes Job that `lossless sim sweep --k8s` writes
/// against the API's schema. pygnmi, a gNMI client with its own generated gnmi_pb2, which reads
/// the agent's gNMI server (tests/interop/gnmi_client.py).
const PYTHON_PACKAGES: &[(&str, &str)] = &[
    ("scapy==2.6.1", "scapy"),
    ("p4runtime==1.6.0", "p4.v1.p4runtime_pb2"),
    ("protobuf==7.36.2", "google.protobuf"),
    ("googleapis-common-protos==1.76.0", "google.rpc.status_pb2"),
    ("grpcio==1.85.1", "grpc"),
    ("ptf==0.12.0", "ptf"),
    ("grpcio-tools==1.85.1", "grpc_tools.protoc"),
    ("kubernetes-validate==1.37.0", "kubernetes_validate"),
    ("pygnmi==0.8.15", "pygnmi.client"),
];

/// Python packages installed into the same venv without their dependencies, each with the module
/// that proves it is installed: p4runtime-shell, whose `p4runtime_sh.p4runtime` the P4 tutorials'
/// flowcache controller imports (for its exception class). It pins p4runtime 1.4.1 and protobuf
/// 3.20 (and IPython for its shell), which cannot share the venv with the packages above; the
/// tutorials' controllers run on the P4Runtime modules the tests generate from the project's
/// descriptor set (`testkit::p4runtime_modules`), with which that module imports as it is.
const PYTHON_PACKAGES_WITHOUT_DEPENDENCIES: &[(&str, &str)] =
    &[("p4runtime-shell==0.0.6", "p4runtime_sh.p4runtime")];

/// The rustup components `test` lints with.
const LINT_COMPONENTS: &[&str] = &["rustfmt", "clippy"];

/// cargo-fuzz, which builds the fuzz targets with libFuzzer (fuzz/); pinned, like bpf-linker's
/// LLVM, so every machine fuzzes the same way.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Installs what is missing. Takes about a second when nothing is.
pub fn setup() -> anyhow::Result<()> {
    apt_packages()?;
    p4ref_packages()?;
    lint_components()?;
    nightly_rust_src()?;
    bpf_linker()?;
    cargo_fuzz()?;
    python_venv()?;
    Ok(())
}

fn apt_packages() -> anyhow::Result<()> {
    install_debs(APT_PACKAGES)
}

/// The run-time packages of the p4c/BMv2 bundle named by `LOSSLESS_P4REF` (its
/// `RUNTIME-DEPS.txt`), when one is named; p4c and BMv2 installed on PATH bring their own.
fn p4ref_packages() -> anyhow::Result<()> {
    let Some(bundle) = p4toolchain::bundle_dir() else {
        return Ok(());
    };
    let packages = p4toolchain::runtime_packages(&bundle)?;
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    install_debs(&packages)
}

/// Installs those of `packages` that are not installed.
fn install_debs(packages: &[&str]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !deb_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("setup: installing {}", missing.join(" "));
    Cmd::new("apt-get").args(["update", "-qq"]).run()?;
    Cmd::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(missing.iter().copied())
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()
}

fn deb_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", package])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// rustfmt and clippy, which `test` runs before anything else, on the toolchain that builds the
/// workspace (a minimal rustup profile has neither).
fn lint_components() -> anyhow::Result<()> {
    let installed = Command::new("rustup")
        .args(["component", "list", "--installed"])
        .current_dir(workspace_root())
        .output()
        .context("running rustup component list")?;
    if !installed.status.success() {
        bail!("rustup component list failed: {}", installed.status);
    }
    let installed = String::from_utf8_lossy(&installed.stdout);
    let missing: Vec<&str> = LINT_COMPONENTS
        .iter()
        .copied()
        .filter(|c| !installed.lines().any(|l| l.starts_with(&format!("{c}-"))))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("setup: adding {} to the toolchain", missing.join(" "));
    Cmd::new("rustup")
        .args(["component", "add"])
        .args(missing)
        .run()
}

fn nightly_rust_src() -> anyhow::Result<()> {
    let installed = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output();
    match installed {
        Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("rust-src") => {
            Ok(())
        }
        // The nightly the machine has (its LLVM matches bpf-linker's): only add rust-src.
        Ok(o) if o.status.success() => {
            eprintln!("setup: adding rust-src to the nightly toolchain");
            Cmd::new("rustup")
                .args(["component", "add", "rust-src", "--toolchain", "nightly"])
                .run()
        }
        _ => {
            eprintln!("setup: installing the nightly toolchain with rust-src");
            Cmd::new("rustup")
                .args([
                    "toolchain",
                    "install",
                    "nightly",
                    "--profile",
                    "minimal",
                    "--component",
                    "rust-src",
                ])
                .run()
        }
    }
}

/// What `$CARGO_HOME/bin/BINARY --version` prints, if it runs.
fn installed_version(binary: &str) -> Option<String> {
    Command::new(cargo_home_bin().join(binary))
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn bpf_linker() -> anyhow::Result<()> {
    if installed_version("bpf-linker").is_some() {
        return Ok(());
    }
    eprintln!("setup: building bpf-linker against LLVM 22 (about 75 s)");
    Cmd::new("cargo")
        .args([
            "install",
            "--locked",
            "bpf-linker",
            "--no-default-features",
            "--features",
            "llvm-22",
        ])
        .env("LLVM_PREFIX", "/usr/lib/llvm-22")
        .run()
}

fn cargo_fuzz() -> anyhow::Result<()> {
    if installed_version("cargo-fuzz").is_some_and(|v| v.contains(CARGO_FUZZ_VERSION)) {
        return Ok(());
    }
    eprintln!("setup: installing cargo-fuzz {CARGO_FUZZ_VERSION} (about a minute)");
    Cmd::new("cargo")
        .args(["install", "--locked", "cargo-fuzz", "--version"])
        .arg(CARGO_FUZZ_VERSION)
        .run()
}

fn python_venv() -> anyhow::Result<()> {
    let venv = workspace_root().join(".venv");
    let python = venv.join("bin/python");
    let import_check = PYTHON_PACKAGES
        .iter()
        .chain(PYTHON_PACKAGES_WITHOUT_DEPENDENCIES)
        .map(|(_, module)| format!("import {module}"))
        .collect::<Vec<_>>()
        .join("; ");
    let specs: Vec<&str> = PYTHON_PACKAGES.iter().map(|(spec, _)| *spec).collect();
    let alone: Vec<&str> = PYTHON_PACKAGES_WITHOUT_DEPENDENCIES
        .iter()
        .map(|(spec, _)| *spec)
        .collect();
    let ready = Command::new(&python)
        .args(["-c", &import_check])
        // The p4runtime bindings were generated for an older protobuf runtime.
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ready {
        return Ok(());
    }
    eprintln!(
        "setup: creating {} with {} (and {} without dependencies)",
        venv.display(),
        specs.join(" "),
        alone.join(" ")
    );
    if !python.exists() {
        // Debian's interpreter, so later Mininet helpers see the same one.
        Cmd::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .run()?;
    }
    let pip_install = || {
        Cmd::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
    };
    pip_install().args(&specs).run()?;
    pip_install().arg("--no-deps").args(&alone).run()?;
    let ok = Command::new(&python)
        .args(["-c", &import_check])
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .status()
        .context("running the venv's python")?;
    if !ok.success() {
        bail!(
            "the test venv at {} cannot import its packages",
            venv.display()
        );
    }
    Ok(())
}
