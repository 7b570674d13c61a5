//! Hostile P4 sources, each at most 1 MB, each built to go past one of the front end's limits
//! (softswitch/frontend/src/limits.rs): shared by the in-process tests (`frontend_limits.rs`) and those
//! of the `softswitch` binary over P4Runtime (`untrusted_device_configs.rs`).

#![allow(dead_code)] // Each test file uses some of them.

/// A v1model program around `decls` (top level) and `ingress` (its apply block), with a header
/// `h_t { a, b, c, d, e }` of five bytes extracted and emitted.
pub fn program(decls: &str, ingress: &str) -> String {
    program_with_locals(decls, "", ingress)
}

/// [`program`] with `locals` declared in the ingress control, before its apply block.
pub fn program_with_locals(decls: &str, locals: &str, ingress: &str) -> String {
    format!(
        "#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; }}
struct hs {{ h_t h; }}
struct m {{ }}
{decls}
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.h); transition accept; }}
}}
control V(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
    {locals}
    apply {{ sm.egress_spec = 1; {ingress} }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m meta) {{ apply {{ }} }}
control D(packet_out pk, in hs hdr) {{ apply {{ pk.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"
    )
}

/// The reproduction: a constant expression of 50,000 terms (about 200 KB).
pub fn long_sum() -> String {
    format!(
        "#include <core.p4>\nconst int X = 1{};\n",
        " + 1".repeat(49_999)
    )
}

/// `#define A1 (A0+A0)` ... `A59`: 2^59 tokens if expanded.
pub fn doubling_macros() -> String {
    let mut src = String::from("#define A0 1\n");
    for i in 1..60 {
        src += &format!("#define A{i} (A{}+A{})\n", i - 1, i - 1);
    }
    src + "const int X = A59;\n"
}

/// A function-like macro that doubles its argument, nested 60 deep.
pub fn doubling_macro_calls() -> String {
    format!(
        "#define D(x) x x\nconst int X = {}1{};\n",
        "D(".repeat(60),
        ")".repeat(60)
    )
}

/// A function-like macro called inside its own argument 250,000 times: each level would copy
/// the arguments of the levels inside it.
pub fn nested_macro_calls() -> String {
    format!(
        "#define F(x) x\nconst int X = {}1{};\n",
        "F(".repeat(250_000),
        ")".repeat(250_000)
    )
}

/// Sources nested far deeper than any phase could recurse, one per kind of nesting, each
/// with what the error names.
pub fn deep_nestings() -> Vec<(&'static str, String, &'static str)> {
    const N: usize = 50_000;
    vec![
        (
            "parentheses",
            format!("const int X = {}1{};", "(".repeat(N), ")".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "unary operators",
            format!("const int X = {}1;", "-".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "casts",
            format!("const bit<8> X = {}1;", "(bit<8>)".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "conditionals",
            format!("const int X = {}1;", "true ? 1 : ".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "members",
            program("", &format!("hdr.h.a = hdr{};", ".h".repeat(N))),
            "limits::MAX_NESTING",
        ),
        (
            "calls",
            program("", &format!("hdr.h.a = f{};", "()".repeat(N))),
            "limits::MAX_NESTING",
        ),
        (
            "indexes",
            program("", &format!("hdr.h.a = x{};", "[0]".repeat(N))),
            "limits::MAX_NESTING",
        ),
        (
            "blocks",
            program("", &format!("{}{}", "{".repeat(N), "}".repeat(N))),
            "limits::MAX_NESTING",
        ),
        (
            "if statements",
            program("", &format!("{}hdr.h.a = 1;", "if (true) ".repeat(N))),
            "limits::MAX_NESTING",
        ),
        (
            "declarations",
            format!("{}{}", "control c() { ".repeat(N), "}".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "type arguments",
            format!(
                "const tuple<{}bit<8>{} X = {{}};",
                "tuple<".repeat(N),
                ">".repeat(N)
            ),
            "limits::MAX_NESTING",
        ),
        (
            "#if operators",
            format!("#if {}1\n#endif\n", "!".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "#if parentheses",
            format!("#if {}1{}\n#endif\n", "(".repeat(N), ")".repeat(N)),
            "limits::MAX_NESTING",
        ),
        (
            "macros",
            (1..N / 5).fold(String::from("#define A0 1\n"), |src, i| {
                src + &format!("#define A{i} A{}\n", i - 1)
            }) + &format!("const int X = A{};\n", N / 5 - 1),
            "limits::MAX_NESTING",
        ),
    ]
}

/// `struct S{k} { S{k-1} a; S{k-1} b; }` from an empty `S0`: no slots, 2^levels parts.
pub fn doubling_empty_structs(levels: usize) -> String {
    let mut decls = String::from("struct S0 { }\n");
    for k in 1..=levels {
        decls += &format!("struct S{k} {{ S{} a; S{} b; }}\n", k - 1, k - 1);
    }
    program(&decls, &format!("S{levels} s; s = s;"))
}

/// `control C{k}` that instantiates `C{k-1}` twice: 2^levels copies once lowered.
pub fn doubling_controls(levels: usize) -> String {
    let mut decls = String::from("control C0() { apply { exit; } }\n");
    for k in 1..=levels {
        decls += &format!(
            "control C{k}() {{ C{p}() l; C{p}() r; apply {{ l.apply(); r.apply(); }} }}\n",
            p = k - 1
        );
    }
    program_with_locals(&decls, &format!("C{levels}() c;"), "c.apply();")
}

/// [`doubling_controls`] whose innermost control has an action and a table with names of
/// 100 KB and an annotation of 10,000 tokens, which each instance would keep a copy of.
pub fn doubling_controls_with_long_names(levels: usize) -> String {
    let name = "n".repeat(100_000);
    let annotation = format!("@note({})", "x ".repeat(10_000));
    let mut decls = format!(
        "control C0() {{ action a{name}() {{ }} {annotation} table t{name} {{ actions = {{ a{name}; }} }} apply {{ t{name}.apply(); }} }}\n"
    );
    for k in 1..=levels {
        decls += &format!(
            "control C{k}() {{ C{p}() l; C{p}() r; apply {{ l.apply(); r.apply(); }} }}\n",
            p = k - 1
        );
    }
    program_with_locals(&decls, &format!("C{levels}() c;"), "c.apply();")
}

/// A struct of 16,000 fields compared with itself 200 times: the most memory per byte of
/// source that lowering can be made to take (each comparison expands to every field).
pub fn wide_struct_comparisons() -> String {
    let fields: String = (0..16_000).map(|i| format!("bit<8> f{i};")).collect();
    program(
        &format!("struct w {{ {fields} }}"),
        &format!("w v; {}", "if (v == v) { }".repeat(200)),
    )
}

/// `count` functions, each calling the one before at the bottom of a chain of `terms` additions,
/// so that running the last recurses through every call and every addition.
pub fn call_chain(count: usize, terms: usize) -> String {
    let mut decls = String::from("bit<8> f0(in bit<8> x) { return x + 1; }\n");
    for k in 1..count {
        decls += &format!(
            "bit<8> f{k}(in bit<8> x) {{ return f{}(x){}; }}\n",
            k - 1,
            " + 1".repeat(terms)
        );
    }
    program(&decls, &format!("hdr.h.a = f{}(hdr.h.a);", count - 1))
}

/// One source line of about 1 MB with an error in its middle.
pub fn error_in_a_long_line() -> String {
    let half = "hdr.h.a = 1; ".repeat(40_000);
    program("", &format!("{half}hdr.h.a = nowhere; {half}"))
}
