//! A TLS server's files — certificate chain, private key and, for client certificates, a CA —
//! read with a size limit, checked, and made into a rustls server configuration (ring; no
//! OpenSSL). The one place that knows them: softswitch's gRPC services and the agent's
//! `/metrics` both serve TLS through it.
//!
//! A missing, unreadable, oversized or malformed file, a certificate that has expired or is not
//! valid yet, and a key that is not the certificate's are refused with the file named. A
//! [`Tls`] is read once, at start, and again on [`Tls::reload`] (the servers call it on
//! SIGHUP): a connection takes the configuration current when it arrives, so a reload reaches
//! new connections and leaves open ones alone; a reload that fails keeps the configuration that
//! was there and says why.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

/// The largest certificate or key file read (a chain of a few certificates is a few KiB).
pub const MAX_PEM_BYTES: u64 = 1 << 20;

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

/// A TLS protocol version rustls speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// Whether a client must present a certificate when the server has a client CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCerts {
    /// A client without a certificate the CA signed is refused at the handshake.
    Required,
    /// A client may present none; one it presents must chain to the CA.
    IfGiven,
}

/// How a server speaks TLS, beside its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The oldest version accepted.
    pub min_version: Version,
    /// The newest version accepted.
    pub max_version: Version,
    /// With a client CA, whether clients must present a certificate.
    pub client_certs: ClientCerts,
    /// The application protocols the server names in ALPN, preferred first (none: ALPN off).
    pub alpn: Vec<Vec<u8>>,
}

impl Default for Settings {
    /// TLS 1.2 and 1.3, client certificates required with a client CA, no ALPN.
    fn default() -> Self {
        Settings {
            min_version: Version::Tls12,
            max_version: Version::Tls13,
            client_certs: ClientCerts::Required,
            alpn: Vec::new(),
        }
    }
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
    /// rustls refused the configuration, or the settings contradict each other.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The subject of a DER certificate as a distinguished name (`CN=controller`), or `None` if it
/// does not parse: how a client that presented it is named in logs.
pub fn subject(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.subject().to_string())
}

/// A server's TLS configuration, reloadable from its files.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    settings: Settings,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Reads `files` and makes the configuration.
    pub fn load(files: TlsFiles, settings: Settings) -> Result<Self, TlsError> {
        let config = server_config(&files, &settings)?;
        Ok(Tls {
            files,
            settings,
            current: RwLock::new(config),
        })
    }

    /// Reads the files again; on success new connections take the new configuration, on
    /// failure the old one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files, &self.settings)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }

    /// Whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.files.client_ca.is_some() && self.settings.client_certs == ClientCerts::Required
    }

    /// The configuration a connection arriving now takes.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks `files` and makes the configuration `settings` ask for.
fn server_config(files: &TlsFiles, settings: &Settings) -> Result<Arc<ServerConfig>, TlsError> {
    if settings.min_version > settings.max_version {
        return Err(TlsError::Config(format!(
            "the oldest version accepted ({:?}) is newer than the newest ({:?})",
            settings.min_version, settings.max_version
        )));
    }
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
    let versions: Vec<&'static SupportedProtocolVersion> = [
        (Version::Tls12, &rustls::version::TLS12),
        (Version::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (settings.min_version..=settings.max_version).contains(v))
    .map(|(_, supported)| supported)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
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
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match settings.client_certs {
                ClientCerts::Required => verifier,
                ClientCerts::IfGiven => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config =
        builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    config.alpn_protocols = settings.alpn.clone();
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
