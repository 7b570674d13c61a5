//! A p4c/BMv2 bundle directory: `bin/` (wrappers that find `lib/` and `libexec/` relative to
//! themselves), `libexec/` (the binaries), `lib/`, `share/p4c/p4include`, `RUNTIME-DEPS.txt`.
//!
//! p4c looks for its P4 include directory as `p4include` beside its own executable. A bundle
//! whose `libexec/p4include` is not a directory (a symbolic link flattened into a file when the
//! bundle was copied) makes `bin/p4c-bm2-ss` fail ("libexec/p4include/bmv2: Not a directory").
//! Then p4c runs from a directory of our own, outside any repository, in the user's cache: a
//! hard link (or a copy) of `libexec/p4c-bm2-ss` beside a `p4include` link to
//! `share/p4c/p4include`, made once and reused.

use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use crate::{NotFound, Origin, Tool, Toolchain};

/// The bundle's list of Debian run-time packages.
pub const RUNTIME_DEPS: &str = "RUNTIME-DEPS.txt";

/// The toolchain of bundle `dir`.
pub fn toolchain(dir: &Path) -> Result<Toolchain, NotFound> {
    toolchain_with_cache(dir, &cache_root())
}

/// The toolchain of bundle `dir`, with p4c's own directory (if it needs one) under `cache`.
fn toolchain_with_cache(dir: &Path, cache: &Path) -> Result<Toolchain, NotFound> {
    let dir = dir.canonicalize().map_err(|e| {
        NotFound(format!(
            "{} names {}, which cannot be opened: {e}",
            crate::BUNDLE_ENV,
            dir.display()
        ))
    })?;
    let bin = |name: &str| {
        let program = dir.join("bin").join(name);
        crate::is_executable(&program).then(|| Tool {
            program,
            env: Vec::new(),
        })
    };
    let require = |name: &str| {
        bin(name).ok_or_else(|| {
            NotFound(format!(
                "the p4c/BMv2 bundle {} ({}) has no bin/{name}",
                dir.display(),
                crate::BUNDLE_ENV
            ))
        })
    };
    let p4c = if dir.join("libexec/p4include").is_dir() {
        require("p4c-bm2-ss")?
    } else {
        p4c_with_include_dir(&dir, cache)?
    };
    Ok(Toolchain {
        p4c,
        simple_switch: require("simple_switch")?,
        simple_switch_cli: require("simple_switch_CLI")?,
        simple_switch_nolog: bin("simple_switch_nolog"),
        simple_switch_grpc: bin("simple_switch_grpc"),
        origin: Origin::Bundle(dir),
    })
}

/// `libexec/p4c-bm2-ss` of bundle `dir`, run from a cache directory that holds it and a
/// `p4include` link to the bundle's `share/p4c/p4include`.
fn p4c_with_include_dir(dir: &Path, cache: &Path) -> Result<Tool, NotFound> {
    let binary = dir.join("libexec/p4c-bm2-ss");
    let include = dir.join("share/p4c/p4include");
    if !include.is_dir() || !crate::is_executable(&binary) {
        return Err(NotFound(format!(
            "the p4c/BMv2 bundle {} has neither a usable libexec/p4include nor \
             libexec/p4c-bm2-ss with share/p4c/p4include",
            dir.display()
        )));
    }
    let meta =
        std::fs::metadata(&binary).map_err(|e| NotFound(format!("{}: {e}", binary.display())))?;
    // One directory per bundle and binary version.
    let mut hasher = std::hash::DefaultHasher::new();
    (dir, meta.len(), meta.modified().ok()).hash(&mut hasher);
    let home = cache.join(format!("lossless/p4c-{:016x}", hasher.finish()));
    let program = home.join("p4c-bm2-ss");
    if !(home.join("p4include").is_dir() && crate::is_executable(&program)) {
        populate(&home, &binary, &include)
            .map_err(|e| NotFound(format!("preparing p4c in {}: {e}", home.display())))?;
    }
    let mut library_path = OsString::from(dir.join("lib"));
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        library_path.push(":");
        library_path.push(old);
    }
    Ok(Tool {
        program,
        env: vec![("LD_LIBRARY_PATH".into(), library_path)],
    })
}

/// Fills `home` with a link or copy of `binary` and a `p4include` link to `include`, in a
/// directory of its own renamed into place, so concurrent callers never see half of it.
fn populate(home: &Path, binary: &Path, include: &Path) -> std::io::Result<()> {
    let parent = home.parent().expect("the cache directory has a parent");
    std::fs::create_dir_all(parent)?;
    let staging = parent.join(format!(
        ".{}.{}",
        home.file_name().expect("a name").to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    let staged = staging.join("p4c-bm2-ss");
    // A hard link costs nothing; across file systems, a copy.
    if std::fs::hard_link(binary, &staged).is_err() {
        std::fs::copy(binary, &staged)?;
    }
    std::os::unix::fs::symlink(include, staging.join("p4include"))?;
    if home.exists() {
        // Left half made by a run that died: replace it.
        std::fs::remove_dir_all(home)?;
    }
    match std::fs::rename(&staging, home) {
        Ok(()) => Ok(()),
        // Another process finished first: its directory is as good as ours.
        Err(_) if home.join("p4include").is_dir() => std::fs::remove_dir_all(&staging),
        Err(e) => Err(e),
    }
}

/// `$XDG_CACHE_HOME`, else `$HOME/.cache`, else the temporary directory.
fn cache_root() -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{executable, scratch};

    /// A bundle with every tool, whose `libexec/p4include` is a file, as in a flattened copy.
    fn flattened_bundle(root: &Path) -> PathBuf {
        let bundle = root.join("bundle");
        for name in [
            "p4c-bm2-ss",
            "simple_switch",
            "simple_switch_CLI",
            "simple_switch_grpc",
        ] {
            executable(&bundle.join("bin").join(name));
        }
        executable(&bundle.join("libexec/p4c-bm2-ss"));
        std::fs::write(bundle.join("libexec/p4include"), "../share/p4c/p4include").unwrap();
        std::fs::create_dir_all(bundle.join("share/p4c/p4include")).unwrap();
        bundle
    }

    #[test]
    fn a_flattened_include_link_is_worked_around_in_the_cache() {
        let root = scratch("flattened");
        let bundle = flattened_bundle(&root);
        let cache = root.join("cache");
        let found = toolchain_with_cache(&bundle, &cache).unwrap();
        let home = found.p4c.program.parent().unwrap().to_path_buf();
        assert!(home.starts_with(root.join("cache/lossless")), "{home:?}");
        assert_eq!(
            std::fs::read_link(home.join("p4include")).unwrap(),
            bundle.canonicalize().unwrap().join("share/p4c/p4include")
        );
        let (key, value) = &found.p4c.env[0];
        assert_eq!(key, "LD_LIBRARY_PATH");
        assert!(value
            .to_string_lossy()
            .starts_with(&*bundle.canonicalize().unwrap().join("lib").to_string_lossy()));
        // The simple_switch wrappers work as they are.
        assert_eq!(
            found.simple_switch.program,
            bundle.canonicalize().unwrap().join("bin/simple_switch")
        );
        assert!(found.simple_switch_nolog.is_none());
        assert!(found.simple_switch_grpc.is_some());
        // Found again: the same directory, reused.
        assert_eq!(
            toolchain_with_cache(&bundle, &cache).unwrap().p4c,
            found.p4c
        );

        // A bundle whose include directory is intact uses its own wrapper.
        std::fs::remove_file(bundle.join("libexec/p4include")).unwrap();
        std::fs::create_dir(bundle.join("libexec/p4include")).unwrap();
        assert_eq!(
            toolchain_with_cache(&bundle, &cache).unwrap().p4c.program,
            bundle.canonicalize().unwrap().join("bin/p4c-bm2-ss")
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_bundle_without_a_tool_says_which() {
        let root = scratch("incomplete");
        let bundle = flattened_bundle(&root);
        std::fs::remove_file(bundle.join("bin/simple_switch_CLI")).unwrap();
        let cache = root.join("cache");
        let err = toolchain_with_cache(&bundle, &cache).unwrap_err();
        assert!(err.0.contains("has no bin/simple_switch_CLI"), "{err}");
        let err = toolchain_with_cache(&root.join("nowhere"), &cache).unwrap_err();
        assert!(err.0.contains("cannot be opened"), "{err}");
        std::fs::remove_dir_all(root).unwrap();
    }
}
