//! `softswitch run` as a separate process (the binary, on 127.0.0.1 without ports) and a
//! P4Runtime controller of it: shared by the tests that send it hostile input over P4Runtime
//! (`untrusted_device_configs.rs`, `untrusted_writes.rs`) and read its memory from `/proc`.

#![allow(dead_code)] // Each test file uses some of them.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use p4runtime::p4::config::v1::P4Info;
use p4runtime::p4::v1::{self as p4v1, p4_runtime_client::P4RuntimeClient};
use p4v1::set_forwarding_pipeline_config_request::Action;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;

/// The device id the switch is started with.
pub const DEVICE: u64 = 1;

/// `softswitch run` serving P4Runtime on an ephemeral port, stopped on drop.
pub struct Switch {
    child: Child,
    /// Where it serves P4Runtime (`http://ADDR`).
    pub addr: String,
    /// The lines of its log after the one saying where it listens.
    log: mpsc::Receiver<String>,
}

impl Switch {
    /// Starts the switch without a program.
    pub fn start() -> Switch {
        Self::start_with(&[])
    }

    /// Starts the switch without a program, with more options for `softswitch run`.
    pub fn start_with(options: &[&str]) -> Switch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_softswitch"))
            .args(["run", "--grpc-server-addr", "127.0.0.1:0"])
            .args(["--device-id", &DEVICE.to_string()])
            .args(options)
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
            log: rx,
        }
    }

    /// Stops the switch (SIGTERM) and returns the lines of its log after the one saying where
    /// it listens, to the last.
    pub fn stop(mut self) -> Vec<String> {
        self.terminate();
        // The reader ends with the stream, and the channel with it.
        self.log.iter().collect()
    }

    /// Sends SIGTERM and waits for the process to end, which it must within a minute (its
    /// clients are given a few seconds): past that it is killed, and the test fails.
    fn terminate(&mut self) {
        // SAFETY: a plain signal to the child this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().ok().flatten().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                if !std::thread::panicking() {
                    panic!("softswitch did not stop within a minute of SIGTERM");
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A line of the process's `/proc/PID/status` (`VmHWM`, `VmRSS`), in KiB.
    fn status_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The process's peak resident set (VmHWM), in KiB.
    pub fn peak_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// The process's resident set (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// A client that is primary (election id 1) for as long as it lives.
pub struct Controller {
    /// Its P4Runtime client.
    pub client: P4RuntimeClient<Channel>,
    _stream: (
        tokio::sync::mpsc::UnboundedSender<p4v1::StreamMessageRequest>,
        tonic::Streaming<p4v1::StreamMessageResponse>,
    ),
}

impl Controller {
    /// Connects to `switch` and becomes its primary controller.
    pub async fn connect(switch: &Switch) -> Controller {
        let mut client = P4RuntimeClient::connect(switch.addr.clone())
            .await
            .unwrap()
            .max_decoding_message_size(64 << 20);
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
    pub async fn set(
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

    /// A Write of `updates` as the primary.
    pub async fn write(&mut self, updates: Vec<p4v1::Update>) -> Result<(), tonic::Status> {
        self.client
            .write(p4v1::WriteRequest {
                device_id: DEVICE,
                election_id: Some(1u128.into()),
                updates,
                ..Default::default()
            })
            .await
            .map(|_| ())
    }

    /// Whether the switch still answers.
    pub async fn alive(&mut self) -> bool {
        self.client
            .capabilities(p4v1::CapabilitiesRequest { device_id: DEVICE })
            .await
            .is_ok()
    }
}

/// The P4Info of `source`, as softswitch computes it.
pub fn p4info(source: &str) -> P4Info {
    let mut map = softswitch_frontend::source::SourceMap::new();
    let file = map.add("p.p4", source);
    let program = softswitch_frontend::compile(&mut map, file)
        .unwrap_or_else(|d| panic!("{}", d.render(&map)));
    softswitch_server::p4info::p4info(&program, &map).unwrap()
}
