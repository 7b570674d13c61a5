//! Hostile device configs sent over P4Runtime to a running `softswitch run` (the binary, on
//! 127.0.0.1 without ports): each is refused with INVALID_ARGUMENT naming the limit it passed
//! or the file it tried to include, no reply carries a byte of a file of the switch's machine,
//! the switch keeps serving, and its peak memory stays under 1 GiB.

mod hostile;
mod running;

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1 as p4v1;
use p4v1::set_forwarding_pipeline_config_request::Action;
use running::{p4info, Controller, Switch, DEVICE};
use softswitch_frontend::limits::MAX_EXCERPT_CHARS;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_configs_are_refused_and_the_switch_keeps_serving() {
    let switch = Switch::start();
    let mut controller = Controller::connect(&switch).await;
    let mut sources = vec![
        ("long_sum", hostile::long_sum(), "limits::MAX_NESTING"),
        (
            "doubling_macros",
            hostile::doubling_macros(),
            "limits::MAX_MACRO_EXPANSION",
        ),
        (
            "doubling_macro_calls",
            hostile::doubling_macro_calls(),
            "limits::MAX_MACRO_EXPANSION",
        ),
        (
            "nested_macro_calls",
            hostile::nested_macro_calls(),
            "limits::MAX_MACRO_EXPANSION",
        ),
        (
            "doubling_empty_structs",
            hostile::doubling_empty_structs(40),
            "limits::MAX_TYPE_PARTS",
        ),
        (
            "doubling_controls",
            hostile::doubling_controls(40),
            "limits::MAX_BODIES",
        ),
        (
            "doubling_controls_with_long_names",
            hostile::doubling_controls_with_long_names(40),
            "limits::MAX_LOWERED",
        ),
        (
            "call_chain",
            hostile::call_chain(4_000, 0),
            "limits::MAX_RUN_DEPTH",
        ),
        (
            "error_in_a_long_line",
            hostile::error_in_a_long_line(),
            "unknown name",
        ),
    ];
    sources.extend(hostile::deep_nestings());
    for (what, source, expected) in sources {
        // VERIFY compiles as the other actions do, and changes nothing.
        let status = controller
            .set(Action::Verify, &source, P4Info::default())
            .await
            .expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert!(
            status.message().contains(expected),
            "{what}: {}",
            status.message()
        );
        assert!(
            status.message().len() < 8 * MAX_EXCERPT_CHARS,
            "{what}: a reply of {} bytes",
            status.message().len()
        );
        assert!(
            controller.alive().await,
            "{what}: the switch stopped answering"
        );
    }
    let peak = switch.peak_kib();
    assert!(peak < 1 << 20, "softswitch held {peak} KiB");
}

/// The config that takes the most memory to compile, sent by four requests at once: the
/// switch compiles one at a time (the others are refused while it does), so it holds no more
/// than for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_hostile_configs_are_compiled_one_at_a_time() {
    let switch = Switch::start();
    let controller = Controller::connect(&switch).await;
    let source = hostile::wide_struct_comparisons();
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let mut client = controller.client.clone();
            let source = source.clone();
            tokio::spawn(async move {
                client
                    .set_forwarding_pipeline_config(p4v1::SetForwardingPipelineConfigRequest {
                        device_id: DEVICE,
                        election_id: Some(1u128.into()),
                        action: Action::Verify as i32,
                        config: Some(p4v1::ForwardingPipelineConfig {
                            p4info: Some(P4Info::default()),
                            p4_device_config: source.into_bytes(),
                            cookie: None,
                        }),
                        ..Default::default()
                    })
                    .await
            })
        })
        .collect();
    let mut compiled = 0;
    for request in requests {
        let status = request.await.unwrap().expect_err("refused");
        if status.code() == Code::ResourceExhausted {
            assert!(
                status.message().contains("another device config"),
                "{status:?}"
            );
        } else {
            assert!(
                status.message().contains("limits::MAX_LOWERED"),
                "{status:?}"
            );
            compiled += 1;
        }
    }
    assert!(compiled >= 1, "no request was compiled");
    let peak = switch.peak_kib();
    assert!(peak < 1 << 20, "softswitch held {peak} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_includes_a_file_of_the_switch_is_refused_without_a_byte_of_it() {
    let dir = std::env::temp_dir().join(format!("softswitch-{}-secret", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.p4");
    std::fs::write(&secret, "SECRET-7f3a = 1;\n").unwrap();
    let switch = Switch::start();
    let mut controller = Controller::connect(&switch).await;
    let ok = hostile::program("", "");
    for target in [
        secret.display().to_string(),
        format!("../../../../../../..{}", secret.display()),
        "secret.p4".into(),
        "/etc/passwd".into(),
        "/proc/self/environ".into(),
        "/dev/zero".into(),
    ] {
        for include in [format!("\"{target}\""), format!("<{target}>")] {
            let source = ok.replace(
                "#include <v1model.p4>",
                &format!("#include <v1model.p4>\n#include {include}"),
            );
            let status = controller
                .set(Action::VerifyAndCommit, &source, p4info(&ok))
                .await
                .expect_err(&include);
            assert_eq!(
                status.code(),
                Code::InvalidArgument,
                "{include}: {status:?}"
            );
            let message = status.message();
            assert!(
                message.contains(&format!(
                    "#include \"{target}\": a device config cannot include files"
                )),
                "{message}"
            );
            for byte_of_a_file in ["SECRET", "root:", "PATH="] {
                assert!(!message.contains(byte_of_a_file), "{message}");
            }
        }
    }
    // The built-in headers are the device config's to include, and it runs.
    controller
        .set(Action::VerifyAndCommit, &ok, p4info(&ok))
        .await
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A BMv2 JSON whose `hexstr` has a million digits: `INVALID_ARGUMENT` naming it, in a message
/// a client receives whole (a megabyte of it made the client see `RESOURCE_EXHAUSTED` about
/// the trailer instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bmv2_json_with_a_huge_constant_is_refused_in_a_short_message() {
    let switch = Switch::start();
    let mut controller = Controller::connect(&switch).await;
    let seed = include_str!("../../fuzz/corpus/bmv2_json/basic.json");
    let mut json: serde_json::Value = serde_json::from_str(seed).unwrap();
    json["actions"][0]["primitives"] = serde_json::json!([{"op": "assign", "parameters": [
        {"type": "field", "value": ["standard_metadata", "egress_spec"]},
        {"type": "hexstr", "value": format!("0x{}", "1".repeat(1_000_000))}]}]);
    let status = controller
        .set(Action::Verify, &json.to_string(), P4Info::default())
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::InvalidArgument,
        "{:.300}",
        status.message()
    );
    assert!(
        status.message().contains("a hexstr: 0x1111"),
        "{:.300}",
        status.message()
    );
    assert!(
        status.message().len() <= p4runtime::status::MAX_STATUS_MESSAGE,
        "{} bytes",
        status.message().len()
    );
    assert!(controller.alive().await);
}
