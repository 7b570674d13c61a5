//! `lossless net` networks for the Mininet tests: what they need (Debian's Mininet, BMv2 with
//! P4Runtime) or the skip rule, the command that drives a network, scratch directories, and
//! what a network must leave when it is gone.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::MutexGuard,
};

use crate::bed::{exclusive, lossless_bin, privileged};

/// Where `lossless net` records running networks.
pub const STATE_ROOT: &str = "/run/lossless/net";

/// Root and Debian's Mininet (`cargo xtask setup` installs it), or the skip rule.
pub fn mininet(test: &str) -> bool {
    if !privileged(test) {
        return false;
    }
    if !Path::new("/usr/bin/mnexec").exists() {
        testkit::skip(
            test,
            "needs Debian's mininet (cargo xtask setup installs it)",
        );
        return false;
    }
    true
}

/// For a Mininet test ([`mininet`]) that must run alone ([`exclusive`]): the right to, or
/// `None` when the test is to stop here.
pub fn mininet_alone(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !mininet(test) {
        return None;
    }
    exclusive(test)
}

/// BMv2 with P4Runtime, or the skip rule.
pub fn bmv2(test: &str) -> bool {
    testkit::bmv2::simple_switch_grpc_or_skip(test).is_some()
}

/// The two tests of one check on a `lossless net` fabric: `$softswitch` runs
/// `$check("t-sw-TAG", "softswitch")` where Mininet is, `$bmv2` runs `$check("t-bm-TAG", "bmv2")`
/// where BMv2 is too. Each applies the skip rule for what it needs, naming itself; the network
/// names differ, so both run in parallel.
#[macro_export]
macro_rules! on_both_switches {
    ($check:ident, $tag:literal: $softswitch:ident, $bmv2:ident) => {
        #[test]
        fn $softswitch() {
            if $crate::net::mininet(stringify!($softswitch)) {
                $check(concat!("t-sw-", $tag), "softswitch");
            }
        }

        #[test]
        fn $bmv2() {
            let test = stringify!($bmv2);
            if $crate::net::mininet(test) && $crate::net::bmv2(test) {
                $check(concat!("t-bm-", $tag), "bmv2");
            }
        }
    };
}

/// `lossless net --name NAME ARGS`, with softswitch beside it.
pub fn net(name: &str, args: &[&str]) -> Command {
    let mut command = Command::new(lossless_bin());
    command.args(["net", "--name", name]).args(args);
    command
}

/// A directory of the test's own under the system's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lossless-net-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a network leaves when it is gone: its state directory, its namespace.
pub fn assert_nothing_left(name: &str, netns: &str) {
    assert!(
        !Path::new(STATE_ROOT).join(name).exists(),
        "{name}: state left behind"
    );
    assert!(
        !Path::new("/run/netns").join(netns).exists(),
        "{name}: namespace {netns} left behind"
    );
}

/// Whether process `pid` runs (a zombie does not).
pub fn runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}
