//! TLS for the gRPC services (P4Runtime, Queues): a server certificate and key, and, with a
//! client CA, mutual TLS (a client without a certificate that CA signed is refused at the
//! handshake, as BMv2's `--grpc-server-with-client-auth`). rustls with ring; no OpenSSL.
//!
//! The files are read once, at start, and again on [`Tls::reload`] (softswitch calls it on
//! SIGHUP): a connection takes the configuration current when it arrives, so a reload reaches
//! new connections and leaves open ones alone; a reload that fails keeps the configuration
//! that was there and says why. A missing, unreadable, oversized or malformed file, a
//! certificate that has expired or is not valid yet, and a key that is not the certificate's
//! are refused with the file named.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The largest certificate or key file read (a chain of a few certificates is a few KiB).
pub const MAX_PEM_BYTES: u64 = 1 << 20;
/// How long a client may take over its handshake before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most handshakes in progress at once; a connection past it is closed at once.
pub const MAX_HANDSHAKES: usize = 64;
/// How long the accept loop waits after a failed accept before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The files a TLS server is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA (PEM, one or more certificates) client certificates must chain to; without
    /// one, clients are not asked for a certificate.
    pub client_ca: Option<PathBuf>,
}

/// Why a TLS configuration could not be made.
#[derive(Debug, Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is larger than [`MAX_PEM_BYTES`].
    #[error("{}: larger than {MAX_PEM_BYTES} bytes: not a certificate or key file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file holds no PEM object of the kind wanted, or a malformed one.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The certificate is outside its validity period.
    #[error("{}: the certificate is valid from {not_before} to {not_after}: not now", path.display())]
    NotValidNow {
        /// The file.
        path: PathBuf,
        /// The start of its validity.
        not_before: String,
        /// The end of its validity.
        not_after: String,
    },
    /// The key is not the certificate's.
    #[error("{} is not the key of the certificate in {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A server's TLS configuration, reloadable from its files.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Reads `files` and makes the configuration.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let config = server_config(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new(config),
        })
    }

    /// Reads the files again; on success new connections take the new configuration, on
    /// failure the old one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// Whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.files.client_ca.is_some()
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }

    /// Accepts connections on `listener` and hands each one that completes its handshake to
    /// `accepted`, until `accepted` is closed. A failed handshake is logged with its peer and
    /// goes no further.
    pub async fn accept(
        self: Arc<Self>,
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
            // Accepted before a handshake slot is sought: connections that never handshake
            // cannot keep others waiting unaccepted; past the limit, new ones are closed.
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                tracing::warn!(
                    "TLS handshake with {peer}: {MAX_HANDSHAKES} handshakes in progress, closed"
                );
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = self.acceptor();
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
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certificates(&files.cert)?;
    check_valid_now(&files.cert, &chain[0])?;
    let key = read(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| TlsError::Pem {
        path: files.key.clone(),
        what: format!("no private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
    })?;
    let provider = provider();
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Pem {
            path: files.key.clone(),
            what: format!("not a usable private key: {e}"),
        })?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|_| TlsError::KeyMismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca)? {
                roots.add(cert).map_err(|e| TlsError::Pem {
                    path: ca.clone(),
                    what: format!("not a CA certificate: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config =
        builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    // gRPC runs over HTTP/2, and gRPC clients insist on the server saying so.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of a PEM file, at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: format!("malformed PEM: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            what: "no certificate (a PEM \"BEGIN CERTIFICATE\" block)".into(),
        });
    }
    Ok(certs)
}

fn check_valid_now(path: &Path, cert: &CertificateDer<'_>) -> Result<(), TlsError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: format!("not an X.509 certificate: {e}"),
        })?;
    let validity = parsed.validity();
    if validity.is_valid() {
        return Ok(());
    }
    Err(TlsError::NotValidNow {
        path: path.to_owned(),
        not_before: validity.not_before.to_string(),
        not_after: validity.not_after.to_string(),
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            path: path.to_owned(),
        });
    }
    Ok(bytes)
}
