//! Extern functions a program declares itself: `softswitch check` checks their calls against
//! the declarations and passes the program with a warning; anything that would run it
//! (`compile`, `softswitch stf`) refuses it naming the extern, as BMv2's simple_switch refuses a
//! program with an extern it lacks.

use std::process::Command;

use softswitch_frontend::preprocessor::Includes;
use softswitch_frontend::source::SourceMap;

const PROGRAM: &str = "#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct hs { h_t h; }
struct m { } struct pair_t { bit<8> x; bit<8> y; } extern void mix(in pair_t p);
extern void scramble(inout bit<8> x, in bit<16> key);
extern bit<8> twice(in bit<8> x);
extern void note<T>(in T data);
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { CALLS }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out pk, in hs hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
";

const GOOD_CALLS: &str = "scramble(hdr.h.a, hdr.h.b); hdr.h.a = twice(hdr.h.a) + 1; note(hdr.h); \
                          mix({ hdr.h.a, 8w1 }); mix({ y = hdr.h.a, x = 8w2 });";

/// `PROGRAM` with `calls` in ingress.
fn with_calls(calls: &str) -> String {
    PROGRAM.replace("CALLS", calls)
}

/// The line:col and message of the diagnostic checking `src` gives.
fn check_error(src: &str) -> (String, String) {
    let mut map = SourceMap::new();
    let f = map.add("t.p4", src);
    let e = softswitch_frontend::check_with(&mut map, f, Includes::BuiltinOnly)
        .expect_err("the program is wrong");
    let loc = e.location(&map);
    (
        loc.strip_prefix("t.p4:").unwrap_or(&loc).to_string(),
        e.message,
    )
}

#[test]
fn calls_are_checked_and_recorded_but_the_program_is_not_run() {
    let src = with_calls(GOOD_CALLS);
    let mut map = SourceMap::new();
    let f = map.add("t.p4", src.as_str());
    let (_, uses) = softswitch_frontend::check_with(&mut map, f, Includes::BuiltinOnly)
        .unwrap_or_else(|e| panic!("{}", e.render(&map)));
    let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["scramble", "twice", "note", "mix", "mix"]);
    let e = softswitch_frontend::compile(&mut map, f).expect_err("a user extern cannot run");
    assert_eq!(e.location(&map), "t.p4:14:13");
    assert_eq!(
        e.message,
        "extern function 'scramble' has no implementation: softswitch runs the externs of \
         core.p4 and v1model.p4 only (BMv2's simple_switch refuses it too)"
    );
}

#[test]
fn a_call_unlike_the_declaration_is_an_error() {
    // (calls, line:col, message); `None` where the case pins only the other.
    let cases: &[(&str, Option<&str>, Option<&str>)] = &[
        (
            "scramble(hdr.h.a);",
            Some("14:13"),
            Some("extern function 'scramble' takes 2 arguments, found 1"),
        ),
        (
            "scramble(hdr.h.b, hdr.h.b);",
            Some("14:22"),
            Some("'x' of 'scramble' is bit<8>, found bit<16>"),
        ),
        (
            "scramble(1, hdr.h.b);",
            None,
            Some("'x' of 'scramble' is bit<8>, found int"),
        ),
        (
            "scramble(8w1, hdr.h.b);",
            None,
            Some("this expression cannot be assigned to"),
        ),
        ("scramble(hdr.h.a + 1, hdr.h.b);", Some("14:22"), None),
        (
            "twice(hdr.h.a, 1);",
            None,
            Some("extern function 'twice' takes 1 arguments, found 2"),
        ),
        ("hdr.h.a = twice(hdr.h.b);", Some("14:29"), None),
        (
            "mix({ hdr.h.a });",
            Some("14:17"),
            Some("pair_t has 2 fields, the list has 1 values"),
        ),
    ];
    for (calls, location, message) in cases {
        let (at, said) = check_error(&with_calls(calls));
        if let Some(location) = location {
            assert_eq!(at, *location, "{calls}");
        }
        if let Some(message) = message {
            assert_eq!(said, *message, "{calls}");
        }
    }
}

#[test]
fn check_passes_with_a_warning_and_stf_refuses_naming_the_extern() {
    let dir = std::env::temp_dir().join(format!("softswitch-user-externs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("own_extern.p4");
    let test = dir.join("own_extern.stf");
    std::fs::write(&program, with_calls(GOOD_CALLS)).unwrap();
    std::fs::write(&test, "packet 0 010002\nexpect 0 010002\n").unwrap();
    let run = |args: &[&std::path::Path]| {
        Command::new(env!("CARGO_BIN_EXE_softswitch"))
            .args(args)
            .output()
            .unwrap()
    };
    let check = run(&[std::path::Path::new("check"), &program]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:14:13: warning: extern function 'scramble' is the program's own",
            program.display()
        )),
        "{stderr}"
    );
    let stf = run(&[std::path::Path::new("stf"), &program, &test]);
    let stderr = String::from_utf8_lossy(&stf.stderr);
    assert!(!stf.status.success(), "{stderr}");
    assert!(
        stderr.contains("error: extern function 'scramble' has no implementation"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
