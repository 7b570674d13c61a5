//! P4Runtime over TLS in process: a server on an ephemeral port of 127.0.0.1 with a lab CA's
//! certificates (testkit's PKI), and tonic clients with and without the right certificates. A
//! refusal must come at the handshake, before any RPC reaches the switch.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use p4runtime::p4::v1::{p4_runtime_client::P4RuntimeClient, CapabilitiesRequest};
use softswitch_server::engine::Transmit;
use softswitch_server::tls::{self, Tls, TlsError, TlsFiles};
use softswitch_server::Device;
use testkit::pki::{Issued, Lab, Role, Validity};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The server's TLS files of `lab`, with its CA for client certificates if `mutual`.
fn files(lab: &Lab, mutual: bool) -> TlsFiles {
    TlsFiles {
        cert: lab.server.cert.clone(),
        key: lab.server.key.clone(),
        client_ca: mutual.then(|| lab.ca.pem.clone()),
    }
}

/// A device without ports served over `tls`; stops when dropped.
struct Served {
    addr: std::net::SocketAddr,
    _device: Arc<Device>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn serve(tls: Arc<Tls>) -> Served {
    let device = Arc::new(Device::start(
        1,
        BTreeMap::<u16, Box<dyn Transmit>>::new(),
        None,
        None,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = device.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, Some(tls), async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Served {
        addr,
        _device: device,
        _stop: stop,
    }
}

/// Calls Capabilities over TLS, trusting `ca` and presenting `identity`: the version the switch
/// reports, or the error's chain.
async fn capabilities(
    addr: std::net::SocketAddr,
    ca: &Path,
    identity: Option<&Issued>,
) -> Result<String, String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(ca).unwrap()))
        .domain_name("localhost");
    if let Some(id) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(&id.cert).unwrap(),
            std::fs::read(&id.key).unwrap(),
        ));
    }
    let endpoint = Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap();
    let channel = endpoint.connect().await.map_err(|e| chain(&e))?;
    P4RuntimeClient::new(channel)
        .capabilities(CapabilitiesRequest { device_id: 1 })
        .await
        .map(|r| r.into_inner().p4runtime_api_version)
        .map_err(|e| chain(&e))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text += &format!(": {s}");
        source = s.source();
    }
    text
}

#[tokio::test]
async fn a_client_with_a_certificate_of_the_ca_is_served_under_mutual_tls() {
    let lab = Lab::new("softswitch-tls", "mutual-ok", "controller");
    let served = serve(Arc::new(tls::load(files(&lab, true)).unwrap())).await;
    let version = capabilities(served.addr, &lab.ca.pem, Some(&lab.client)).await;
    assert!(
        version.as_deref().is_ok_and(|v| v.starts_with("1.")),
        "{version:?}"
    );
}

#[tokio::test]
async fn clients_without_a_good_certificate_are_refused_at_the_handshake() {
    let lab = Lab::new("softswitch-tls", "mutual-refused", "controller");
    let served = serve(Arc::new(tls::load(files(&lab, true)).unwrap())).await;
    let stranger = lab
        .other_ca
        .issue(&lab.dir.0, "stranger", Role::Client, Validity::Now);
    let expired = lab
        .ca
        .issue(&lab.dir.0, "expired", Role::Client, Validity::Expired);
    for (who, identity, alert) in [
        ("no certificate", None, "CertificateRequired"),
        ("another CA's certificate", Some(&stranger), "UnknownCA"),
        (
            "an expired certificate",
            Some(&expired),
            "CertificateExpired",
        ),
    ] {
        // Under TLS 1.3 the server checks the client's certificate after the client has sent
        // its side of the handshake and, often, its request: the refusal reaches the client as
        // the server's alert or, when the client writes before it reads, as the connection's
        // reset — never as an answer from the switch.
        let error = capabilities(served.addr, &lab.ca.pem, identity)
            .await
            .expect_err(who);
        assert!(
            error.contains(&format!("received fatal alert: {alert}"))
                || error.contains("Broken pipe")
                || error.contains("broken pipe")
                || error.contains("reset"),
            "{who}: {error}"
        );
    }
}

#[tokio::test]
async fn without_a_client_ca_any_client_that_trusts_the_server_is_served() {
    let lab = Lab::new("softswitch-tls", "server-only", "controller");
    let served = serve(Arc::new(tls::load(files(&lab, false)).unwrap())).await;
    assert!(capabilities(served.addr, &lab.ca.pem, None).await.is_ok());
    // A client that does not trust the server's CA stops at the handshake itself.
    let wrong = capabilities(served.addr, &lab.other_ca.pem, None).await;
    assert!(
        wrong.as_ref().is_err_and(|e| e.contains("certificate")),
        "{wrong:?}"
    );
}

#[test]
fn bad_files_are_refused_at_start_with_the_file_named() {
    let lab = Lab::new("softswitch-tls", "bad-files", "controller");
    let expired = lab
        .ca
        .issue(&lab.dir.0, "old-switch", Role::Server, Validity::Expired);
    let missing = lab.dir.0.join("missing.pem");
    let garbage = lab.dir.0.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    // One byte past the limit: refused before it is parsed.
    let huge = lab.dir.0.join("huge.pem");
    let len = usize::try_from(softswitch_server::tls::MAX_PEM_BYTES).unwrap() + 1;
    std::fs::write(&huge, vec![b'A'; len]).unwrap();
    let cases = [
        (
            "an expired certificate",
            TlsFiles {
                cert: expired.cert.clone(),
                key: expired.key.clone(),
                client_ca: None,
            },
            "old-switch.pem: the certificate is valid from",
        ),
        (
            "another certificate's key",
            TlsFiles {
                cert: lab.server.cert.clone(),
                key: lab.client.key.clone(),
                client_ca: None,
            },
            "controller.key is not the key of the certificate in",
        ),
        (
            "a missing file",
            TlsFiles {
                cert: missing.clone(),
                key: lab.server.key.clone(),
                client_ca: None,
            },
            "missing.pem: No such file",
        ),
        (
            "a file with no certificate",
            TlsFiles {
                cert: garbage.clone(),
                key: lab.server.key.clone(),
                client_ca: None,
            },
            "garbage.pem: no certificate",
        ),
        (
            "an oversized file",
            TlsFiles {
                cert: huge.clone(),
                key: lab.server.key.clone(),
                client_ca: None,
            },
            "huge.pem: larger than 1048576 bytes",
        ),
        (
            "a client CA that is not PEM",
            TlsFiles {
                client_ca: Some(garbage.clone()),
                ..files(&lab, false)
            },
            "garbage.pem: no certificate",
        ),
    ];
    for (what, files, said) in cases {
        let error = tls::load(files).expect_err(what).to_string();
        assert!(error.contains(said), "{what}: {error}");
    }
}

#[tokio::test]
async fn a_reload_reaches_new_connections_and_a_failed_one_keeps_the_old_files() {
    let lab = Lab::new("softswitch-tls", "reload", "controller");
    let tls = tls::load(files(&lab, false)).unwrap();
    // The files change under the server: a certificate of another CA at the same paths.
    let next = lab
        .other_ca
        .issue(&lab.dir.0, "switch-next", Role::Server, Validity::Now);
    let tls = Arc::new(tls);
    let served = serve(tls.clone()).await;
    assert!(capabilities(served.addr, &lab.ca.pem, None).await.is_ok());
    std::fs::copy(&next.cert, &lab.server.cert).unwrap();
    std::fs::copy(&next.key, &lab.server.key).unwrap();
    tls.reload().unwrap();
    assert!(capabilities(served.addr, &lab.other_ca.pem, None)
        .await
        .is_ok());
    assert!(capabilities(served.addr, &lab.ca.pem, None).await.is_err());
    // A reload that fails (the key no longer the certificate's) keeps what was loaded.
    std::fs::copy(&lab.client.key, &lab.server.key).unwrap();
    assert!(matches!(tls.reload(), Err(TlsError::KeyMismatch { .. })));
    assert!(capabilities(served.addr, &lab.other_ca.pem, None)
        .await
        .is_ok());
}
