//! The front end keeps within its limits (softswitch/frontend/src/limits.rs) whatever the source: each
//! hostile program gets a diagnostic naming the limit it passed (never a stack overflow, a hang
//! or unbounded memory), a device config never reads a file, `int` constants fold exactly, and
//! a diagnostic quotes a bounded excerpt of its line. `softswitch check` and `stf` on the same
//! sources exit with an error, within 1 GiB.

mod hostile;

use hostile::{program, program_with_locals};
use softswitch_core::switch::{Clock, Execution, Switch};
use softswitch_frontend::limits::{
    MAX_EXCERPT_CHARS, MAX_INCLUDE_DEPTH, MAX_MACRO_EXPANSION, MAX_SOURCE_BYTES,
};
use softswitch_frontend::preprocessor::Includes;
use softswitch_frontend::source::SourceMap;
use std::path::Path;
use std::process::Command;

/// The stack of a thread the standard library starts: packets run on one (the server's engine
/// thread, the tests' threads), so the deepest program the limits accept must run on it.
const THREAD_STACK: usize = 2 << 20;

/// Compiles `src` (self-contained, as a device config); the error's message and rendering.
fn compile(src: &str) -> Result<softswitch_core::ir::Program, (String, String)> {
    compile_as("t.p4", src, Includes::BuiltinOnly)
}

fn compile_as(
    name: &str,
    src: &str,
    includes: Includes,
) -> Result<softswitch_core::ir::Program, (String, String)> {
    let mut map = SourceMap::new();
    let file = map.add(name, src);
    softswitch_frontend::compile_with(&mut map, file, includes)
        .map(|c| c.program)
        .map_err(|d| (d.message.clone(), d.render(&map)))
}

/// Asserts that `src` is refused with a diagnostic naming `limit`, rendered in a few lines.
fn refused(what: &str, src: &str, limit: &str) {
    match compile(src) {
        Ok(_) => panic!("{what}: compiled"),
        Err((message, rendered)) => {
            assert!(message.contains(limit), "{what}: {message}");
            assert!(
                rendered.len() < 8 * MAX_EXCERPT_CHARS,
                "{what}: a rendering of {} bytes",
                rendered.len()
            );
        }
    }
}

/// Runs one packet `frame` through `src` on a thread with the standard stack, interpreted and
/// compiled (compiling recurses as deep as running does); what leaves, the same from both.
fn run_packet(src: String, frame: Vec<u8>) -> Vec<u8> {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let program = compile(&src).unwrap_or_else(|(_, r)| panic!("{r}"));
            let run = |execution| {
                let mut switch = Switch::new(program.clone(), Clock::Virtual(0));
                switch.set_execution(execution);
                assert!(switch.compile_fallbacks().is_empty());
                switch.receive(0, frame.clone());
                switch.drain();
                let out: Vec<_> = switch.drain_outputs().collect();
                assert_eq!(out.len(), 1, "one packet leaves ({execution:?})");
                let compiled = switch.compiled_block_runs() > 0;
                assert_eq!(compiled, execution == Execution::Compiled);
                out[0].data.clone()
            };
            let interpreted = run(Execution::Interpreted);
            assert_eq!(run(Execution::Compiled), interpreted);
            interpreted
        })
        .unwrap()
        .join()
        .unwrap()
}

use testkit::TempDir;

/// Compiles the file at `path` as `softswitch check` does (reading what it includes).
fn compile_file(path: &Path) -> Result<softswitch_core::ir::Program, (String, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    compile_as(path.to_str().unwrap(), &text, Includes::Files)
}

#[test]
fn a_constant_expression_of_50000_terms_is_refused_not_a_stack_overflow() {
    refused(
        "the issue's expression",
        &hostile::long_sum(),
        "limits::MAX_NESTING",
    );
}

#[test]
fn every_kind_of_nesting_is_bounded() {
    for (what, src, limit) in hostile::deep_nestings() {
        refused(what, &src, limit);
    }
}

#[test]
fn a_device_config_never_reads_a_file() {
    let dir = TempDir::new("softswitch", "secret");
    let secret = dir.file("secret.p4", "SECRET-7f3a = 1;\n");
    let relative = format!("../../../../../../../..{}", secret.display());
    for include in [
        format!("\"{}\"", secret.display()),
        format!("<{}>", secret.display()),
        format!("\"{relative}\""),
        "\"/dev/zero\"".to_string(),
        "\"/etc/passwd\"".to_string(),
    ] {
        let src = format!("#include <core.p4>\n#include {include}\n");
        let (message, rendered) = compile(&src).map(|_| ()).unwrap_err();
        let name = &include[1..include.len() - 1];
        assert!(
            message.starts_with(&format!(
                "#include \"{name}\": a device config cannot include files"
            )),
            "{message}"
        );
        assert!(!rendered.contains("SECRET"), "{rendered}");
    }
    // The built-in headers are found however they are named.
    compile(&program("", "").replace("#include <v1model.p4>", "#include \"v1model.p4\"")).unwrap();
}

#[test]
fn included_files_count_toward_the_source_limit_and_only_regular_files_are_read() {
    let dir = TempDir::new("softswitch", "includes");
    dir.file("big.p4", &"// padding\n".repeat(MAX_SOURCE_BYTES / 11 + 1));
    let (message, _) = compile_file(&dir.file("main.p4", "#include \"big.p4\"\n")).unwrap_err();
    assert!(message.contains("limits::MAX_SOURCE_BYTES"), "{message}");

    let fifo = dir.0.join("fifo.p4");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `name` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    for target in ["/dev/zero", "fifo.p4", "."] {
        let main = dir.file("main.p4", &format!("#include \"{target}\"\n"));
        let (message, _) = compile_file(&main).unwrap_err();
        assert!(
            message.ends_with("not a regular file"),
            "{target}: {message}"
        );
    }

    let (message, _) = compile_file(&dir.file("self.p4", "#include \"self.p4\"\n")).unwrap_err();
    assert_eq!(
        message,
        format!("#include nested more than {MAX_INCLUDE_DEPTH} deep (limits::MAX_INCLUDE_DEPTH)")
    );

    let huge = " ".repeat(MAX_SOURCE_BYTES + 1);
    let (message, _) = compile(&huge).map(|_| ()).unwrap_err();
    assert!(message.contains("limits::MAX_SOURCE_BYTES"), "{message}");
}

#[test]
fn macros_that_double_stop_at_the_expansion_limit() {
    for src in [
        hostile::doubling_macros(),
        hostile::doubling_macro_calls(),
        hostile::nested_macro_calls(),
    ] {
        let (message, rendered) = compile(&src).map(|_| ()).unwrap_err();
        assert_eq!(
            message,
            format!(
                "macro expansion writes more than {MAX_MACRO_EXPANSION} tokens \
                 (limits::MAX_MACRO_EXPANSION)"
            )
        );
        // Reported where the outermost macro is used.
        assert!(
            rendered.starts_with("t.p4:61:") || rendered.starts_with("t.p4:2:"),
            "{rendered}"
        );
    }
}

#[test]
fn tokens_are_bounded() {
    refused(
        "3 million tokens",
        &";".repeat(3 << 20),
        "limits::MAX_TOKENS",
    );
}

#[test]
fn types_are_bounded_in_depth_parts_and_slots() {
    let chain = (1..=100).fold(String::from("struct S0 { bit<8> x; }\n"), |d, k| {
        d + &format!("struct S{k} {{ S{} s; }}\n", k - 1)
    });
    refused(
        "a chain of structs",
        &program(&chain, ""),
        "limits::MAX_TYPE_DEPTH",
    );
    refused(
        "empty structs that double",
        &hostile::doubling_empty_structs(40),
        "limits::MAX_TYPE_PARTS",
    );
    let wide = format!(
        "header w_t {{ {} }}",
        (0..100)
            .map(|i| format!("bit<8> f{i};"))
            .collect::<String>()
    );
    refused(
        "a stack of wide headers",
        &program(&format!("{wide} struct big {{ w_t[1024] s; }}"), "big b;"),
        "limits::MAX_SLOTS",
    );
    refused(
        "many locals",
        &program(
            &format!("{wide} struct w {{ w_t x; }}"),
            &"{ w v; }".repeat(1000),
        ),
        "limits::MAX_SLOTS",
    );
}

#[test]
fn lowering_is_bounded() {
    refused(
        "controls that double",
        &hostile::doubling_controls(40),
        "limits::MAX_BODIES",
    );
    refused(
        "controls that double, with long names",
        &hostile::doubling_controls_with_long_names(40),
        "limits::MAX_LOWERED",
    );
    refused(
        "comparisons of a wide struct",
        &hostile::wide_struct_comparisons(),
        "limits::MAX_LOWERED",
    );
}

#[test]
fn the_deepest_program_accepted_runs_on_a_standard_stack() {
    // The deepest call chain (each call at the bottom of 40 additions) the limits accept...
    let deepest = (1..)
        .map(|count| hostile::call_chain(count, 40))
        .take_while(|src| compile(src).is_ok())
        .last()
        .unwrap();
    let out = run_packet(deepest, vec![0; 5]);
    assert_ne!(out[0], 0, "the chain ran");
    // ...and a longer one is refused before it runs.
    refused(
        "4,000 chained calls",
        &hostile::call_chain(4_000, 0),
        "limits::MAX_RUN_DEPTH",
    );
}

#[test]
fn extern_cells_are_bounded() {
    refused(
        "a register of 2^32-1 cells",
        &program("", "").replace(
            "control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {",
            "control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {\n    register<bit<8>>(0xffffffff) r;",
        ),
        "limits::MAX_EXTERN_CELLS",
    );
    refused(
        "counters that add up",
        &program_with_locals(
            "",
            &"counter(3000000, CounterType.packets) c;".repeat(2),
            "",
        ),
        "limits::MAX_EXTERN_CELLS",
    );
}

/// `int` constants are exact: 2^128-1 is positive, its square is not 1, `&&` and `||` of
/// constants are constants. The packet carries what the program computed.
#[test]
fn int_constants_fold_exactly() {
    let decls = "
const int BIG = 340282366920938463463374607431768211455;
const bool NEG = BIG < 0;
const int SQUARE = BIG * BIG;
const bool AND = true && true;
const bool OR = false || true;
const int NEAR = -BIG - 1 + BIG;";
    let ingress = "
hdr.h.a = (bit<8>) (BIG >> 120);
hdr.h.b = NEG ? 8w1 : 8w0;
hdr.h.c = SQUARE == 1 ? 8w1 : 8w0;
hdr.h.d = (bit<8>) (SQUARE >> 248);
hdr.h.e = (AND && OR && NEAR == -1) ? 8w1 : 8w0;";
    let out = run_packet(program(decls, ingress), vec![0; 5]);
    assert_eq!(out, [0xff, 0, 0, 0xff, 1]);
}

#[test]
fn int_constants_are_bounded() {
    let big = "340282366920938463463374607431768211455";
    for (what, value) in [
        ("a power of BIG", [big; 9].join(" * ")),
        ("a long shift", "1 << 2000".into()),
        ("an absurd shift", "1 << 100000000000000000000".into()),
    ] {
        refused(
            what,
            &format!("const int X = {value};"),
            "limits::MAX_INT_BITS",
        );
    }
    // Shifting right by a huge amount is 0, not an error.
    compile(&program(
        &format!("const int X = ({big} * {big}) >> 100000000000000000000;"),
        "hdr.h.a = (bit<8>) X;",
    ))
    .unwrap();
}

#[test]
fn compile_errors_quote_a_bounded_excerpt_of_their_line() {
    let (message, rendered) = compile(&hostile::error_in_a_long_line())
        .map(|_| ())
        .unwrap_err();
    assert_eq!(message, "unknown name 'nowhere'");
    assert!(
        rendered.len() < 4 * MAX_EXCERPT_CHARS,
        "{} bytes",
        rendered.len()
    );
    let lines: Vec<&str> = rendered.lines().collect();
    let caret = lines[2].find('^').unwrap();
    assert_eq!(&lines[1][caret..caret + 7], "nowhere");
    // A name of a million characters is cut in the message too.
    let name = "n".repeat(1 << 20);
    let (message, rendered) = compile(&format!("const int X = {name};"))
        .map(|_| ())
        .unwrap_err();
    assert!(
        message.len() < 8 * MAX_EXCERPT_CHARS,
        "{} bytes",
        message.len()
    );
    assert!(
        rendered.len() < 8 * MAX_EXCERPT_CHARS,
        "{} bytes",
        rendered.len()
    );
}

/// The hostile sources given to the `softswitch` binary: `check` and `stf` exit with status 1
/// and a diagnostic (no abort, no signal), and none of the processes ever held 1 GiB.
#[test]
fn check_and_stf_refuse_hostile_sources_within_a_gigabyte() {
    let dir = TempDir::new("softswitch", "cli");
    let stf = dir.file(
        "t.stf",
        "packet 0 00 00 00 00 00\nexpect 1 00 00 00 00 00\n",
    );
    let mut sources = vec![
        ("long_sum", hostile::long_sum()),
        ("doubling_macros", hostile::doubling_macros()),
        ("doubling_macro_calls", hostile::doubling_macro_calls()),
        ("nested_macro_calls", hostile::nested_macro_calls()),
        (
            "doubling_empty_structs",
            hostile::doubling_empty_structs(40),
        ),
        ("doubling_controls", hostile::doubling_controls(40)),
        (
            "doubling_controls_with_long_names",
            hostile::doubling_controls_with_long_names(40),
        ),
        ("call_chain", hostile::call_chain(4_000, 0)),
        (
            "wide_struct_comparisons",
            hostile::wide_struct_comparisons(),
        ),
        ("error_in_a_long_line", hostile::error_in_a_long_line()),
        ("dev_zero", "#include \"/dev/zero\"\n".into()),
        ("many_tokens", ";".repeat(1 << 20)),
    ];
    sources.extend(
        hostile::deep_nestings()
            .into_iter()
            .map(|(what, src, _)| (what, src)),
    );
    for (what, src) in sources {
        assert!(src.len() <= 1 << 20, "{what}: {} bytes", src.len());
        let path = dir.file("hostile.p4", &src);
        // `stf` compiles as `check` does: once is enough to show it.
        let commands: &[&[&Path]] = if what == "long_sum" {
            &[
                &[Path::new("check"), &path],
                &[Path::new("stf"), &path, &stf],
            ]
        } else {
            &[&[Path::new("check"), &path]]
        };
        for args in commands {
            let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
                .args(*args)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let command = args[0].display();
            assert_eq!(out.status.code(), Some(1), "{what} ({command}): {stderr}");
            assert!(stderr.contains(": error: "), "{what}: {stderr}");
            assert!(
                stderr.len() < 8 * MAX_EXCERPT_CHARS,
                "{what}: {} bytes",
                stderr.len()
            );
        }
    }
    // The largest resident set of any child this process waited for.
    // SAFETY: a rusage is integers and timevals, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        // SAFETY: `usage` is a whole rusage for getrusage to fill.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    let peak_kib = usage.ru_maxrss;
    assert!(peak_kib < 1 << 20, "a softswitch held {peak_kib} KiB");
}
