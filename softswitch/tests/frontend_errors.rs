//! One test per class of front-end error: each malformed program gets one precise
//! diagnostic at file:line:col, never a panic.

use softswitch_frontend::diagnostic;
use softswitch_frontend::preprocessor::Includes;
use softswitch_frontend::source::SourceMap;

/// A minimal valid v1model program; `{decls}`, `{ingress}` and `{parser}` are filled in.
const TEMPLATE: &str = "#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct hs { h_t h; }
struct m { }
{decls}
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); {parser} }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    apply { {ingress} }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs hdr, inout m meta) { apply { } }
control D(packet_out pk, in hs hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
";

fn program(decls: &str, parser: &str, ingress: &str) -> String {
    let parser = if parser.is_empty() {
        "transition accept;"
    } else {
        parser
    };
    TEMPLATE
        .replace("{decls}", decls)
        .replace("{parser}", parser)
        .replace("{ingress}", ingress)
}

/// Compiles `src` as the file `name`: the result, and the source map to render it against.
fn compile(
    name: &str,
    src: impl Into<String>,
) -> (diagnostic::Result<softswitch_frontend::Compiled>, SourceMap) {
    let mut map = SourceMap::new();
    let f = map.add(name, src);
    (softswitch_frontend::compile(&mut map, f), map)
}

/// Compiles `src` as `t.p4` and returns the error's `line:col` and message.
fn error(src: &str) -> (String, String) {
    let (result, map) = compile("t.p4", src);
    let e = result.expect_err("the program is malformed");
    let rendered = e.render(&map);
    assert!(
        rendered.contains('^'),
        "a caret points at the error: {rendered}"
    );
    let loc = e.location(&map);
    (
        loc.strip_prefix("t.p4:").unwrap_or(&loc).to_string(),
        e.message,
    )
}

/// A test that each program made of `decls`, `parser` and `ingress` (see [`program`]) is
/// refused at `line:col` with `message`.
macro_rules! refused {
    (
        $name:ident: $(($decls:expr, $parser:expr, $ingress:expr $(,)?)
        => $at:literal, $message:expr);+ $(;)?
    ) => {
        #[test]
        fn $name() {
            $(assert_eq!(
                error(&program($decls, $parser, $ingress)),
                ($at.to_string(), $message.to_string())
            );)+
        }
    };
}

/// Compiles `src` as `t.p4`, panicking with the rendered diagnostic if it does not compile.
fn compiles(src: &str) {
    let (result, map) = compile("t.p4", src);
    result.unwrap_or_else(|e| panic!("{}", e.render(&map)));
}

#[test]
fn the_template_itself_compiles() {
    compiles(&program("", "", ""));
}

refused!(
    lexer_unexpected_character: ("const bit<8> X = 1 ` 2;", "", "")
    => "6:20", "unexpected character '`'"
);

#[test]
fn lexer_unterminated_comment() {
    assert_eq!(error(&program("/* never closed", "", "")).0, "6:1");
}

refused!(
    lexer_bad_digit: ("const bit<8> X = 0x1g;", "", "")
    => "6:18", "invalid digit 'g' in integer literal"
);

#[test]
fn preprocessor_missing_include() {
    let mut map = SourceMap::new();
    let f = map.add("t.p4", "#include \"nowhere.p4\"\n");
    let e = softswitch_frontend::compile_with(&mut map, f, Includes::Files).unwrap_err();
    assert_eq!(e.location(&map), "t.p4:1:1");
    assert!(
        e.message.starts_with("cannot read included file"),
        "{}",
        e.message
    );
}

#[test]
fn preprocessor_include_of_a_file_in_a_self_contained_program() {
    let (loc, msg) = error("#include \"nowhere.p4\"\n");
    assert_eq!(loc, "1:1");
    assert!(
        msg.starts_with("#include \"nowhere.p4\": a device config cannot include files"),
        "{msg}"
    );
}

#[test]
fn preprocessor_unknown_directive() {
    assert_eq!(
        error("#include <core.p4>\n#frobnicate\n"),
        (
            "2:2".into(),
            "unknown preprocessor directive '#frobnicate'".into()
        )
    );
}

#[test]
fn preprocessor_error_directive() {
    assert_eq!(
        error("#if 1\n#error too old\n#endif\n"),
        ("2:1".into(), "#error too old".into())
    );
}

refused!(
    parser_missing_semicolon: ("const bit<8> X = 1", "", "")
    => "7:1", "expected ';', found 'parser'"
);

refused!(
    parser_unexpected_token_in_expression: ("", "", "hdr.h.a = * 2;")
    => "12:23", "expected an expression, found '*'"
);

refused!(
    checker_unknown_name: ("", "", "hdr.h.a = x;")
    => "12:23", "unknown name 'x'"
);

refused!(
    checker_unknown_type: ("typedef foo_t bar_t;", "", "")
    => "6:9", "unknown type 'foo_t'"
);

refused!(
    checker_type_mismatch_in_assignment: ("", "", "hdr.h.a = hdr.h.b;")
    => "12:23", "type mismatch: expected bit<8>, found bit<16>"
);

refused!(
    checker_operands_of_different_widths: ("", "", "hdr.h.b = hdr.h.a + hdr.h.b;")
    => "12:23", "operands of '+' have different types: bit<8> and bit<16>"
);

refused!(
    checker_unknown_field: ("", "", "hdr.h.c = 1;")
    => "12:19", "h_t has no field 'c'"
);

refused!(
    checker_slice_out_of_range: ("", "", "hdr.h.a = hdr.h.a[8:1];")
    => "12:23", "slice [8:1] is out of range for bit<8>"
);

refused!(
    checker_duplicate_declaration: ("const bit<8> X = 1; const bit<8> X = 2;", "", "")
    => "6:34", "'X' is already declared in this scope"
);

refused!(
    checker_wrong_argument_count: ("action a(bit<8> v) { }", "", "a();")
    => "12:13", "expected 1 arguments, found 0"
);

refused!(
    checker_unknown_state: ("", "transition nowhere;", "")
    => "8:49", "unknown state 'nowhere'"
);

#[test]
fn checker_non_constant_select_case() {
    let (loc, msg) = error(&program(
        "",
        "transition select(hdr.h.a) { hdr.h.a: accept; }",
        "",
    ));
    assert_eq!(loc, "8:67");
    assert_eq!(msg, "expected a compile-time constant");
}

#[test]
fn checker_table_with_unknown_action() {
    let t = "table t { key = { hdr.h.a: exact; } actions = { nope; } }";
    let src = program("", "", "").replace(
        "    apply {  }\n}\ncontrol E",
        &format!("    {t}\n    apply {{ t.apply(); }}\n}}\ncontrol E"),
    );
    assert_eq!(
        error(&src),
        ("12:53".into(), "unknown action 'nope'".into())
    );
}

#[test]
fn checker_recursive_generic_function() {
    let (loc, msg) = error(&program(
        "T f<T>(in T x) { return f(x); }",
        "",
        "hdr.h.a = f(hdr.h.a);",
    ));
    assert_eq!(
        (loc.as_str(), msg.as_str()),
        ("6:25", "'f' calls itself: recursion is not allowed in P4")
    );
}

#[test]
fn checker_self_instantiating_control() {
    let src = program(
        "control L(inout hs h) { L() again; apply { again.apply(h); } }",
        "",
        "",
    );
    let src = src.replace(
        "apply {  }\n}\ncontrol E",
        "L() l;\n    apply { l.apply(hdr); }\n}\ncontrol E",
    );
    assert_eq!(
        error(&src),
        ("6:25".into(), "'L' instantiates itself".into())
    );
}

#[test]
fn checker_missing_main() {
    let src = program("", "", "").replace("V1Switch(P(), V(), I(), E(), C(), D()) main;\n", "");
    assert_eq!(
        error(&src).1,
        "the program has no 'main' instance (V1Switch(...) main;)"
    );
}

/// The checker's word for a run-time value passed to a directionless parameter named `v`.
const NOT_CONSTANT: &str = "argument used for directionless parameter 'v' must be a compile-time \
                            constant (p4c refuses a run-time value outside an action call); \
                            declare the parameter `in` to pass one";

#[test]
fn checker_directionless_arguments_of_actions_take_run_time_values() {
    // As p4c's BMv2 back end: an action called directly binds its action data to any value
    // (the P4 tutorials' calc and firewall); a function's directionless parameter takes
    // compile-time constants only (p4c: "argument used for directionless parameter 'v' must be
    // a compile-time constant").
    compiles(&program(
        "action a(inout bit<8> x, bit<8> v) { x = v; } \
         action b(inout bit<8> x) { a(x, x + 1); }",
        "",
        "a(hdr.h.a, hdr.h.a); b(hdr.h.a);",
    ));
    assert_eq!(
        error(&program(
            "bit<8> f(bit<8> v) { return v; }",
            "",
            "hdr.h.a = f(hdr.h.a);"
        )),
        ("12:25".into(), NOT_CONSTANT.into())
    );
}

#[test]
fn checker_in_and_directionless_parameters_are_read_only() {
    // p4c: "Expression v cannot be the target of an assignment", for either, assigned or
    // passed as an out argument; `inout` and `out` parameters are written.
    let refused = "an `in` or directionless parameter cannot be the target of an assignment \
                   (p4c refuses it too)";
    for decls in [
        "action a(in bit<8> v) { v = 1; }",
        "action a(bit<8> v) { v = 1; }",
        "action o(out bit<8> x) { x = 1; } action a(in bit<8> v) { o(v); }",
        "bit<8> f(in bit<8> v) { v = 2; return v; } action a(in bit<8> v) { }",
    ] {
        assert_eq!(error(&program(decls, "", "a(1);")).1, refused, "{decls}");
    }
    compiles(&program(
        "action a(inout bit<8> x, out bit<8> y) { x = 1; y = x; }",
        "",
        "a(hdr.h.a, hdr.h.a);",
    ));
}

#[test]
fn checker_in_parameters_take_run_time_values() {
    compiles(&program(
        "action a(in bit<8> v) { }",
        "",
        "a(hdr.h.a); a(1);",
    ));
}

#[test]
fn checker_index_types_need_the_2020_v1model() {
    // p4c's v1model.p4 defaults to version 20180101, where registers, counters and meters
    // take no index type; 20200408 adds it.
    assert_eq!(
        error(&program("register<bit<8>, bit<32>>(4) r;", "", "")),
        (
            "6:1".into(),
            "V1MODEL_VERSION is 20180101 (p4c's default), where register takes no index type: \
             write register<bit<W>>, or #define V1MODEL_VERSION 20200408 before #include \
             <v1model.p4>"
                .into()
        )
    );
    let v2020 = |decls: &str| {
        format!(
            "#define V1MODEL_VERSION 20200408\n{}",
            program(decls, "", "")
        )
    };
    assert_eq!(
        error(&v2020("counter(4, CounterType.packets) c;")),
        (
            "7:1".into(),
            "with V1MODEL_VERSION 20200408, counter takes the type of its index: counter<bit<32>>"
                .into()
        )
    );
    for decls in [
        "register<bit<8>, bit<32>>(4) r; counter<bit<32>>(4, CounterType.packets) c;",
        "meter<bit<32>>(4, MeterType.packets) mt;",
    ] {
        compiles(&v2020(decls));
    }
}

#[test]
fn port_id_is_v1models_only_from_2020() {
    // As in p4c's v1model.p4: version 20180101 (the default) declares no PortId_t, so a program
    // may declare its own, of any width (the P4 tutorials' flowcache declares bit<9>); 20200408
    // declares it, and a second declaration is a duplicate.
    for width in [9, 16] {
        compiles(&program(
            &format!("typedef bit<{width}> PortId_t;"),
            "",
            "PortId_t p = (PortId_t)sm.ingress_port; sm.egress_spec = (bit<9>)p;",
        ));
    }
    let v2020 = |decls: &str, ingress: &str| {
        format!(
            "#define V1MODEL_VERSION 20200408\n{}",
            program(decls, "", ingress)
        )
    };
    compiles(&v2020(
        "",
        "PortId_t p = sm.ingress_port; sm.egress_spec = p;",
    ));
    assert_eq!(
        error(&v2020("typedef bit<9> PortId_t;", "")),
        (
            "7:16".into(),
            "'PortId_t' is already declared in this scope".into()
        )
    );
}

#[test]
fn checker_unsupported_construct_is_named() {
    assert_eq!(
        error(&program("header w_t { bit<2049> x; }", "", "")),
        (
            "6:14".into(),
            "width 2049 is not supported: softswitch supports 1 to 2048 bits, as p4c does".into()
        )
    );
    assert_eq!(
        error(&program("", "", "bit<256> x; x = x + 1;")).1,
        "'+' on bit<256>, wider than 128 bits: softswitch supports copies, int constants, &, |, ^, \
         ~, shifts by a constant, ==, != and slices of at most 128 bits of such values, not other \
         operations yet"
    );
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    for src in [
        format!(
            "const bit<8> X = {}1{};",
            "(".repeat(5000),
            ")".repeat(5000)
        ),
        format!("const bit<8> X = {}1;", "-".repeat(5000)),
        format!(
            "control c() {{ apply {{ {}{} }} }}",
            "{".repeat(5000),
            "}".repeat(5000)
        ),
        format!("const bit<8> X = {}1;", "1 + (".repeat(5000)),
    ] {
        let (result, _) = compile("t.p4", src);
        assert_eq!(
            result.unwrap_err().message,
            "nested more than 256 levels deep (limits::MAX_NESTING)"
        );
    }
}

#[test]
fn garbage_never_panics() {
    for src in [
        "",
        "}",
        "control",
        "header h { bit<",
        "#if",
        "parser p(",
        "\u{0}\u{ff}",
        "const bit<0> x = 1;",
        "@",
        "a.b.c();",
    ] {
        let (result, map) = compile("t.p4", src);
        let _ = result.map_err(|e| e.render(&map));
    }
}

/// Compiles `src` as `t.p4`; every diagnostic of the failure as `(line:col, message)`, in order.
fn all_errors(src: &str) -> Vec<(String, String)> {
    let (result, map) = compile("t.p4", src);
    let e = result.expect_err("the program is malformed");
    std::iter::once(&e)
        .chain(&e.rest)
        .map(|d| {
            let loc = d.location(&map);
            (
                loc.strip_prefix("t.p4:").unwrap_or(&loc).to_string(),
                d.message.clone(),
            )
        })
        .collect()
}

#[test]
fn every_error_of_the_checker_is_reported_not_only_the_first() {
    let src = program(
        "const bit<8> K = nope;",
        "",
        "hdr.h.a = missing; bit<8> x = 1; hdr.h.zz = x; x = true;",
    );
    assert_eq!(
        all_errors(&src),
        vec![
            ("6:18".into(), "unknown name 'nope'".into()),
            ("12:23".into(), "unknown name 'missing'".into()),
            ("12:52".into(), "h_t has no field 'zz'".into()),
            (
                "12:64".into(),
                "type mismatch: expected bit<8>, found bool".into()
            ),
        ]
    );
    // Each is rendered with its excerpt and caret, one after the other.
    let (result, map) = compile("t.p4", src);
    let rendered = result.unwrap_err().render(&map);
    assert_eq!(rendered.matches(": error: ").count(), 4, "{rendered}");
    assert!(rendered.matches('^').count() >= 4, "{rendered}");
}

#[test]
fn the_checker_stops_at_max_errors() {
    use softswitch_frontend::limits::MAX_ERRORS;
    let src = program("", "", &"hdr.h.a = missing;\n".repeat(3 * MAX_ERRORS));
    let errors = all_errors(&src);
    assert_eq!(errors.len(), MAX_ERRORS + 1, "{errors:?}");
    assert_eq!(
        errors.last().unwrap().1,
        format!("stopping after {MAX_ERRORS} errors (limits::MAX_ERRORS)")
    );
}

#[test]
fn break_and_continue_need_a_loop_and_parsers_have_none() {
    assert_eq!(
        error(&program("", "", "break;")),
        ("12:13".into(), "'break' outside a loop".into())
    );
    assert_eq!(
        error(&program("", "", "if (true) { continue; }")),
        ("12:25".into(), "'continue' outside a loop".into())
    );
    let (loc, msg) = error(&program(
        "",
        "for (bit<8> i = 0; i < 2; i = i + 1) { } transition accept;",
        "",
    ));
    assert_eq!(loc, "8:38");
    assert!(msg.starts_with("a for loop cannot be in a parser"), "{msg}");
    assert_eq!(
        error(&program("", "", "for (bit<8> x in hdr.h.a) { }")).1,
        "a for-in loop runs over a header stack, a list { ... } or a range lo .. hi"
    );
}

#[test]
fn warnings_are_kept_beside_a_compiled_program() {
    let (result, _) = compile("t.p4", format!("#warning look\n{}", program("", "", "")));
    let compiled = result.unwrap();
    assert_eq!(compiled.warnings.len(), 1);
    assert_eq!(compiled.warnings[0].message, "#warning look");
}

#[test]
fn checker_directionless_struct_arguments_must_be_constant() {
    let decls = "struct p_t { bit<8> x; bit<8> y; } bit<8> f(p_t v) { return v.x; }";
    compiles(&program(decls, "", "hdr.h.a = f({ 8w1, 8w2 });"));
    assert_eq!(
        error(&program(decls, "", "hdr.h.a = f({ hdr.h.a, 8w2 });")),
        ("12:25".into(), NOT_CONSTANT.into())
    );
}

refused!(
    checker_list_expressions_need_a_type_from_the_other_side:
    ("", "", "if ({ 1, 2 } == { 1, 2 }) { }")
    => "12:17", "comparing two list or struct expressions: neither gives the other a type";
    ("", "", "if (hdr.h == { 8w1 }) { }")
    => "12:26", "h_t has 2 fields, the list has 1 values";
    ("", "", "hdr.h = { a = 8w1, a = 8w2 };")
    => "12:32", "field 'a' is initialized twice"
);

refused!(
    checker_dont_care_extract_needs_a_header_type:
    ("", "pk.extract(_); transition accept;", "")
    => "8:49", "extract(_) needs the header type: extract<H>(_)";
    ("", "pk.extract<bit<8>>(_); transition accept;", "")
    => "8:49", "extract<H>(_) needs a header type H"
);

refused!(
    checker_list_variables_need_their_values:
    ("", "", "list<bit<8>> l;")
    => "12:13", "a list<T> variable needs its values: list<T> l = (list<T>){ ... }";
    ("", "", "list<bit<8>> l = (list<bit<8>>){ 8w1 }; l = (list<bit<16>>){ 16w1 };")
    => "12:58", "this cast does not give a value of type tuple<bit<8>>"
);

#[test]
fn checker_direct_type_invocation_of_itself_is_refused() {
    let src = program("", "", "").replace(
        "control C(inout hs hdr, inout m meta) { apply { } }",
        "control C(inout hs hdr, inout m meta) { apply { C.apply(hdr, meta); } }",
    );
    assert_eq!(error(&src), ("15:49".into(), "'C' applies itself".into()));
}

/// A file that is not P4 source (a topology naming `/etc/shadow` as its program) gets its
/// error's position and the offending token, and no line of it.
#[test]
fn a_file_that_is_not_p4_is_not_quoted() {
    for text in [
        "root:$y$j9T$SECRET:19000:0:99999:7:::\n",
        "alice:x:1000:1000:SECRET,,,:/home/alice:/bin/bash\n",
        "# note\nSECRET=1\n",
        "{\"SECRET\": 1}\n",
    ] {
        let (result, map) = compile("shadow", text);
        let e = result.expect_err(text);
        let rendered = e.render(&map);
        assert!(rendered.starts_with("shadow:1:"), "{rendered}");
        assert!(!rendered.contains("SECRET"), "{rendered}");
        assert!(
            rendered.contains("none of its lines is quoted"),
            "{rendered}"
        );
    }
}
