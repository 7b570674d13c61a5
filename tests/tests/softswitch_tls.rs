//! softswitch launched as the tutorials launch `simple_switch_grpc`, with BMv2's TLS flags and
//! client authentication, driven by real clients: `lossless p4` over TLS sets the pipeline,
//! p4runtime-shell (grpcio, an independent client) with the lab CA's client certificate
//! installs the routes — h1 then pings h2 through them — and without a certificate, or with
//! another CA's, or with an expired one, is refused at the handshake; SIGHUP makes the switch
//! read new files.

use std::path::Path;

use lossless_tests::{bed::privileged, tutorial_bed::TutorialBed};
use testkit::pki::{Issued, Lab, Role, Validity};

/// A p4runtime-shell client (`p4runtime_sh.p4runtime`, over grpcio) with client certificate
/// `identity` (if any), installing the tutorials' two routes by ids read from the switch's
/// P4Info: prints `programmed`, or the error that stopped it.
const CLIENT: &str = r#"
import sys, socket
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeClient, SSLOptions
addr, ca, cert, key = sys.argv[1:5]
client = None
try:
    client = P4RuntimeClient(0, addr, (0, 2), None,
                             SSLOptions(False, ca, cert or None, key or None))
    info = client.get_p4info()
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
    action = next(a for a in info.actions if a.preamble.name == "MyIngress.ipv4_forward")
    param = {p.name: p.id for p in action.params}
    for ip, mac, port in [("10.0.1.1", "080000000111", 1), ("10.0.2.2", "080000000222", 2)]:
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        entry = update.entity.table_entry
        entry.table_id = table.preamble.id
        field = entry.match.add()
        field.field_id = table.match_fields[0].id
        field.lpm.value = socket.inet_aton(ip)
        field.lpm.prefix_len = 32
        entry.action.action.action_id = action.preamble.id
        for name, value in [("dstAddr", bytes.fromhex(mac)), ("port", bytes([port]))]:
            p = entry.action.action.params.add()
            p.param_id = param[name]
            p.value = value
        client.write_update(update)
    print("programmed")
except BaseException as e:
    print("refused:", repr(e))
finally:
    # The client's stream thread keeps Python from exiting until it is torn down.
    if client is not None:
        client.tear_down()
"#;

/// Runs [`CLIENT`] in the switch's namespace with `identity`, the P4Runtime modules in
/// `modules`; its output.
fn client(
    bed: &TutorialBed,
    python: &Path,
    modules: &Path,
    ca: &Path,
    identity: Option<&Issued>,
) -> String {
    let (cert, key) = identity.map_or((String::new(), String::new()), |id| {
        (id.cert.display().to_string(), id.key.display().to_string())
    });
    // Bounded: a client that hangs fails the test instead of holding up the run.
    let output = bed
        .switch_ns()
        .command("timeout")
        .arg("60")
        .arg(python)
        .env("PYTHONPATH", modules)
        .args(["-c", CLIENT, "127.0.0.1:9559"])
        .arg(ca)
        .args([cert, key])
        .output()
        .expect("running the P4Runtime client");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn mutual_tls_serves_the_ca_s_clients_and_refuses_the_rest() {
    const NAME: &str = "mutual_tls_serves_the_ca_s_clients_and_refuses_the_rest";
    if !privileged(NAME) {
        return;
    }
    let Some(python) = testkit::venv_python_or_skip(NAME) else {
        return;
    };
    // Removed on drop, after the bed (declared later, dropped first), however the test ends.
    let Lab {
        dir,
        ca,
        server,
        client: controller,
        other_ca,
    } = Lab::new("lltls", "pki", "controller");
    let pki = dir.0.as_path();
    let modules = pki.join("python");
    testkit::p4runtime_modules(&python, &modules);
    let stranger = other_ca.issue(pki, "stranger", Role::Client, Validity::Now);
    let expired = ca.issue(pki, "expired", Role::Client, Validity::Expired);
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let mut bed = TutorialBed::softswitch_as_bmv2_with(&[
        "--grpc-server-ssl",
        "--grpc-server-cert",
        &path(&server.cert),
        "--grpc-server-key",
        &path(&server.key),
        "--grpc-server-with-client-auth",
        "--grpc-server-cacert",
        &path(&ca.pem),
    ])
    .unwrap();
    bed.bed
        .wait_for_log("over TLS, client certificates required")
        .unwrap();

    // `lossless p4` with the controller's certificate sets the pipeline.
    let program = lossless_tests::switch::program("forward.p4");
    let tls = [
        "--tls-ca".to_owned(),
        path(&ca.pem),
        "--tls-cert".to_owned(),
        path(&controller.cert),
        "--tls-key".to_owned(),
        path(&controller.key),
        "--tls-server-name".to_owned(),
        "localhost".to_owned(),
    ];
    let with_tls = |args: &[&str]| -> Vec<String> {
        tls.iter()
            .cloned()
            .chain(args.iter().map(|a| a.to_string()))
            .collect()
    };
    let set = with_tls(&["pipeline", "set", "--program", &path(&program)]);
    bed.p4_ok(&set.iter().map(String::as_str).collect::<Vec<_>>());
    // The audit trail names the writer by its certificate's subject, with its address.
    bed.bed
        .wait_for_log("audit: p4runtime CN=controller (127.0.0.1:")
        .unwrap();

    // The Python client is refused without a certificate, with another CA's and with an
    // expired one of the right CA: no route yet. The switch says why, at the handshake.
    for (who, identity, why) in [
        ("none", None, "refused: peer sent no certificates"),
        (
            "another CA's",
            Some(&stranger),
            "refused: invalid peer certificate: UnknownIssuer",
        ),
        (
            "an expired",
            Some(&expired),
            "refused: invalid peer certificate: certificate expired",
        ),
    ] {
        let said = client(&bed, &python, &modules, &ca.pem, identity);
        assert!(said.contains("refused"), "{who}: {said}");
        bed.bed.wait_for_log(why).unwrap();
        assert!(!bed.ping(1), "{who}: routes were installed");
    }
    // `lossless p4` in the clear, or without its certificate, is refused too, saying so (the
    // server's refusal must not kill it by SIGPIPE without a word).
    let plain = bed.p4_refused(&["entries", "list", "MyIngress.ipv4_lpm"]);
    assert!(plain.contains("127.0.0.1:9559"), "{plain}");
    let anonymous = bed.p4_refused(&[
        "--tls-ca",
        &path(&ca.pem),
        "--tls-server-name",
        "localhost",
        "entries",
        "list",
        "MyIngress.ipv4_lpm",
    ]);
    // The client learns of the refusal as the server's alert or as the connection's end,
    // whichever it reads first.
    assert!(
        anonymous.contains("GetForwardingPipelineConfig on 127.0.0.1:9559")
            && anonymous.contains("transport error"),
        "{anonymous}"
    );

    // With the controller's certificate it programs the switch, and the routes carry pings.
    let said = client(&bed, &python, &modules, &ca.pem, Some(&controller));
    assert!(said.contains("programmed"), "{said}");
    let inserted = "INSERT table_entry MyIngress.ipv4_lpm: OK";
    bed.bed.wait_for_log(inserted).unwrap();
    let line = bed.bed.lines.iter().find(|l| l.contains(inserted)).unwrap();
    assert!(
        line.contains("audit: p4runtime CN=controller (127.0.0.1:"),
        "{line}"
    );
    bed.assert_pings(3, "through the routes p4runtime-shell's client installed");
    let list = with_tls(&["entries", "list", "MyIngress.ipv4_lpm"]);
    let list: Vec<&str> = list.iter().map(String::as_str).collect();
    let listed = bed.p4_ok(&list);
    assert!(listed.contains("10.0.2.2"), "{listed}");

    // New files at the same paths (a certificate of the other CA), then SIGHUP: new
    // connections meet the new certificate.
    let next = other_ca.issue(pki, "switch-next", Role::Server, Validity::Now);
    std::fs::copy(&next.cert, &server.cert).unwrap();
    std::fs::copy(&next.key, &server.key).unwrap();
    bed.bed.hang_up();
    bed.bed
        .wait_for_log("SIGHUP: TLS files read again")
        .unwrap();
    let stale = bed.p4_refused(&list);
    assert!(stale.contains("certificate"), "{stale}");
    let said = client(&bed, &python, &modules, &other_ca.pem, Some(&controller));
    // The switch's new certificate chains to the other CA; the controller's still to the
    // lab CA, which the switch still requires. The client gets through to the switch, which
    // refuses the writes themselves: the entries exist already.
    assert!(said.contains("P4RuntimeWriteException"), "{said}");
}
