//! Hostile device configs sent over P4Runtime to a running `softswitch run` (the binary, on
//! 127.0.0.1 without ports): each is refused with INVALID_ARGUMENT naming the limit it passed
//! or the file it tried to include, no reply carries a byte of a file of the switch's machine,
//! the switch keeps serving, and its peak memory stays under 1 GiB.

mod hostile;

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1::{self as p4v1, p4_runtime_client::P4RuntimeClient};
use p4v1::set_forwarding_pipeline_config_request::Action;
use softswitch_frontend::limits::MAX_EXCERPT_CHARS;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;
use tonic::Code;

const DEVICE: u64 = 1;

/// `softswitch run` serving P4Runtime on an ephemeral port, stopped on drop.
struct Switch {
    child: Child,
    addr: String,
}

impl Switch {
    fn start() -> Switch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_softswitch"))
            .args(["run", "--grpc-server-addr", "127.0.0.1:0"])
            .args(["--device-id", &DEVICE.to_string()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Its log goes on being read, so that the pipe never fills.
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let addr = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("softswitch says where it listens");
            if let Some(rest) = line.strip_prefix("softswitch: P4Runtime on ") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        Switch {
            child,
            addr: format!("http://{addr}"),
        }
    }

    /// The process's peak resident set (VmHWM), in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        // SAFETY: a plain signal to the child this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A client that is primary (election id 1) for as long as it lives.
struct Controller {
    client: P4RuntimeClient<Channel>,
    _stream: (
        tokio::sync::mpsc::UnboundedSender<p4v1::StreamMessageRequest>,
        tonic::Streaming<p4v1::StreamMessageResponse>,
    ),
}

impl Controller {
    async fn connect(switch: &Switch) -> Controller {
        let mut client = P4RuntimeClient::connect(switch.addr.clone()).await.unwrap();
        let (tx, requests) = tokio::sync::mpsc::unbounded_channel();
        let mut rx = client
            .stream_channel(UnboundedReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        let update = p4v1::MasterArbitrationUpdate {
            device_id: DEVICE,
            election_id: Some(1u128.into()),
            ..Default::default()
        };
        tx.send(p4v1::StreamMessageRequest {
            update: Some(p4v1::stream_message_request::Update::Arbitration(update)),
        })
        .unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.next())
            .await
            .expect("an arbitration answer")
            .unwrap()
            .unwrap();
        Controller {
            client,
            _stream: (tx, rx),
        }
    }

    /// SetForwardingPipelineConfig with `action` of `source`, with `p4info`.
    async fn set(
        &mut self,
        action: Action,
        source: &str,
        p4info: P4Info,
    ) -> Result<(), tonic::Status> {
        self.client
            .set_forwarding_pipeline_config(p4v1::SetForwardingPipelineConfigRequest {
                device_id: DEVICE,
                election_id: Some(1u128.into()),
                action: action as i32,
                config: Some(p4v1::ForwardingPipelineConfig {
                    p4info: Some(p4info),
                    p4_device_config: source.as_bytes().to_vec(),
                    cookie: None,
                }),
                ..Default::default()
            })
            .await
            .map(|_| ())
    }

    /// Whether the switch still answers.
    async fn alive(&mut self) -> bool {
        self.client
            .capabilities(p4v1::CapabilitiesRequest { device_id: DEVICE })
            .await
            .is_ok()
    }
}

/// The P4Info of `source`, as softswitch computes it.
fn p4info(source: &str) -> P4Info {
    let mut map = softswitch_frontend::source::SourceMap::new();
    let file = map.add("p.p4", source);
    let program = softswitch_frontend::compile(&mut map, file)
        .unwrap_or_else(|d| panic!("{}", d.render(&map)));
    softswitch_server::p4info::p4info(&program, &map).unwrap()
}

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
