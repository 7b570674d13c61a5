//! Finding p4c's BMv2 back end (`p4c-bm2-ss`) and BMv2 (`simple_switch`, its CLI, its
//! performance and P4Runtime builds), in one place for the whole project: the directory named by
//! `LOSSLESS_P4REF` (a bundle laid out as `bin/`, `lib/`, `libexec/`, `share/`), else `PATH`.
//! Also compiles P4 programs with the p4c found ([`compile`]).
//!
//! No dependencies, so that xtask (which installs a bundle's run-time packages), the tests and
//! the command lines of softswitch and lossless can all use it.
#![forbid(unsafe_code)]

mod bundle;
pub mod compile;

pub use compile::{CompileError, Compiled};

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that names a p4c/BMv2 bundle directory.
pub const BUNDLE_ENV: &str = "LOSSLESS_P4REF";

/// One program of the toolchain and the environment it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    /// The executable.
    pub program: PathBuf,
    /// Variables to set when running it (a bundle's library path).
    pub env: Vec<(OsString, OsString)>,
}

impl Tool {
    /// A command running this tool.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        self.set_env(&mut command);
        command
    }

    /// Sets this tool's environment on `command` (for a command that runs it indirectly, such
    /// as `nsenter ... TOOL`).
    pub fn set_env(&self, command: &mut Command) {
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
    }
}

/// Where the toolchain was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The bundle directory named by [`BUNDLE_ENV`].
    Bundle(PathBuf),
    /// The directories of `PATH`.
    Path,
}

/// p4c's BMv2 back end and BMv2, found.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// `p4c-bm2-ss`.
    pub p4c: Tool,
    /// `simple_switch`, BMv2's default build (logging compiled in).
    pub simple_switch: Tool,
    /// `simple_switch_CLI`, the Thrift runtime CLI.
    pub simple_switch_cli: Tool,
    /// `simple_switch_nolog`: BMv2 built without logging macros and event logger (its
    /// performance build), when there is one.
    pub simple_switch_nolog: Option<Tool>,
    /// `simple_switch_grpc`: BMv2 with the P4Runtime server, when there is one.
    pub simple_switch_grpc: Option<Tool>,
    /// Where they were found.
    pub origin: Origin,
}

/// Why the toolchain was not found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotFound(pub String);

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

impl Toolchain {
    /// The toolchain of the bundle named by `LOSSLESS_P4REF` when it is set (an error if that
    /// directory is not a usable bundle: no silent fallback), else the tools on `PATH`.
    pub fn find() -> Result<Toolchain, NotFound> {
        match bundle_dir() {
            Some(dir) => Toolchain::from_bundle(&dir),
            None => Toolchain::from_path(&std::env::var_os("PATH").unwrap_or_default()),
        }
    }

    /// The toolchain of bundle directory `dir`.
    pub fn from_bundle(dir: &Path) -> Result<Toolchain, NotFound> {
        bundle::toolchain(dir)
    }

    /// The tools found in the directories of `path` (a `PATH` value); `p4c-bm2-ss`,
    /// `simple_switch` and `simple_switch_CLI` are required.
    pub fn from_path(path: &OsStr) -> Result<Toolchain, NotFound> {
        let find = |name: &str| {
            std::env::split_paths(path)
                .map(|dir| dir.join(name))
                .find(|candidate| is_executable(candidate))
                .map(|program| Tool {
                    program,
                    env: Vec::new(),
                })
        };
        let require = |name: &str| {
            find(name).ok_or_else(|| {
                NotFound(format!(
                    "{name} is not on PATH and {BUNDLE_ENV} is not set (p4c and BMv2 are needed: \
                     install them, or set {BUNDLE_ENV} to a p4c/BMv2 bundle directory)"
                ))
            })
        };
        Ok(Toolchain {
            p4c: require("p4c-bm2-ss")?,
            simple_switch: require("simple_switch")?,
            simple_switch_cli: require("simple_switch_CLI")?,
            simple_switch_nolog: find("simple_switch_nolog"),
            simple_switch_grpc: find("simple_switch_grpc"),
            origin: Origin::Path,
        })
    }

    /// Where the tools are, in one line.
    pub fn describe(&self) -> String {
        match &self.origin {
            Origin::Bundle(dir) => format!("the bundle {} ({BUNDLE_ENV})", dir.display()),
            Origin::Path => format!("PATH (p4c-bm2-ss is {})", self.p4c.program.display()),
        }
    }
}

/// The bundle directory `LOSSLESS_P4REF` names, if it is set and not empty.
pub fn bundle_dir() -> Option<PathBuf> {
    std::env::var_os(BUNDLE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The Debian packages bundle `dir` needs at run time (its `RUNTIME-DEPS.txt`, one per line).
pub fn runtime_packages(dir: &Path) -> Result<Vec<String>, NotFound> {
    let file = dir.join(bundle::RUNTIME_DEPS);
    let text = std::fs::read_to_string(&file)
        .map_err(|e| NotFound(format!("reading {}: {e}", file.display())))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A fresh directory under the system's temporary directory.
    pub(crate) fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("p4toolchain-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub(crate) fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn tools_are_found_on_path_in_its_order() {
        let dir = scratch("path");
        let (first, second) = (dir.join("a"), dir.join("b"));
        for name in ["p4c-bm2-ss", "simple_switch", "simple_switch_CLI"] {
            executable(&second.join(name));
        }
        executable(&first.join("simple_switch"));
        // Not executable: skipped.
        std::fs::write(first.join("p4c-bm2-ss"), "").unwrap();
        let path = std::env::join_paths([&first, &second]).unwrap();
        let found = Toolchain::from_path(&path).unwrap();
        assert_eq!(found.simple_switch.program, first.join("simple_switch"));
        assert_eq!(found.p4c.program, second.join("p4c-bm2-ss"));
        assert_eq!(found.simple_switch_grpc, None);
        assert_eq!(found.origin, Origin::Path);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_tool_names_itself_and_the_variable() {
        let dir = scratch("missing");
        executable(&dir.join("p4c-bm2-ss"));
        let err = Toolchain::from_path(dir.as_os_str()).unwrap_err();
        assert!(err.0.contains("simple_switch is not on PATH"), "{err}");
        assert!(err.0.contains(BUNDLE_ENV), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn runtime_packages_skip_blanks_and_comments() {
        let dir = scratch("deps");
        std::fs::write(
            dir.join("RUNTIME-DEPS.txt"),
            "cpp\n\n# note\n python3-thrift \n",
        )
        .unwrap();
        assert_eq!(runtime_packages(&dir).unwrap(), ["cpp", "python3-thrift"]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
