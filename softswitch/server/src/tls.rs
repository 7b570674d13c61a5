//! TLS for the gRPC services (P4Runtime, Queues): a server certificate and key, and, with a
//! client CA, mutual TLS (a client without a certificate that CA signed is refused at the
//! handshake, as BMv2's `--grpc-server-with-client-auth`). The files, their checks and their
//! reload are `tlsfiles`' (re-exported here); what is gRPC's is here: ALPN `h2`, and an accept
//! loop that bounds handshakes in time and number and logs each refusal.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

pub use tlsfiles::{Tls, TlsError, TlsFiles, MAX_PEM_BYTES};

/// How long a client may take over its handshake before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most handshakes in progress at once; a connection past it is closed at once.
pub const MAX_HANDSHAKES: usize = 64;
/// How long the accept loop waits after a failed accept before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Reads `files` into the configuration gRPC is served with: TLS 1.2 and 1.3, ALPN `h2`
/// (gRPC runs over HTTP/2, and gRPC clients insist on the server saying so).
pub fn load(files: TlsFiles) -> Result<Tls, TlsError> {
    Tls::load(
        files,
        tlsfiles::Settings {
            alpn: vec![b"h2".to_vec()],
            ..tlsfiles::Settings::default()
        },
    )
}

/// Accepts connections on `listener` and hands each one that completes its handshake to
/// `accepted`, until `accepted` is closed. A failed handshake is logged with its peer and goes
/// no further.
pub async fn accept(
    tls: Arc<Tls>,
    listener: TcpListener,
    accepted: mpsc::Sender<io::Result<TlsStream<TcpStream>>>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (tcp, peer) = tokio::select! {
            conn = listener.accept() => match conn {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors, say: accept would fail again at once.
                    tracing::warn!("accepting a gRPC connection: {e}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
            () = accepted.closed() => return,
        };
        // Accepted before a handshake slot is sought: connections that never handshake cannot
        // keep others waiting unaccepted; past the limit, new ones are closed.
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::warn!(
                "TLS handshake with {peer}: {MAX_HANDSHAKES} handshakes in progress, closed"
            );
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = TlsAcceptor::from(tls.current());
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = accepted.send(Ok(stream)).await;
                }
                Ok(Err(e)) => tracing::warn!("TLS handshake with {peer} refused: {e}"),
                Err(_) => tracing::warn!(
                    "TLS handshake with {peer}: not done in {}s, closed",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            }
        });
    }
}
