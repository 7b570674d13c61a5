//! The agent's web configuration: Prometheus exporter-toolkit's file (`--web.config.file`),
//! so that the TLS and basic-auth settings written for any exporter serve the agent too:
//! `tls_server_config` (`cert_file`, `key_file`, `client_ca_file`, `client_auth_type`,
//! `min_version`, `max_version`) and `basic_auth_users` (user: bcrypt hash). Relative paths
//! are the file's folder's, as exporter-toolkit resolves them. Strict as exporter-toolkit's
//! YAML: an unknown field is an error, and so is one of exporter-toolkit's that the agent does
//! not serve (it says which). Written limits on the file's size (1 MiB, as every config file)
//! and the users. docs/agent.md.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use anyhow::{bail, Context as _};
use hostconfig::config::read_config_file;
use serde::Deserialize;
use tlsfiles::{ClientCerts, Settings, Tls, TlsFiles, Version};

use super::auth::BasicAuth;

/// Most users in `basic_auth_users`.
pub const MAX_USERS: usize = 64;
/// Longest user name, in bytes.
pub const MAX_USER_BYTES: usize = 256;

/// How the agent's HTTP server is reached: over TLS or not, with basic auth or not.
#[derive(Default)]
pub struct Web {
    /// The TLS configuration; `None` serves plain HTTP.
    pub tls: Option<Tls>,
    /// The users who may ask; with none, anyone may.
    pub auth: BasicAuth,
}

/// A bcrypt cost above which the file is taken with a warning: each step doubles a
/// verification's time (cost 10 takes tens of milliseconds, 15 over a second).
pub const SLOW_COST: u32 = 14;

/// The [`Web`] in force, replaced whole when the file is read again (SIGHUP); a connection
/// keeps the one current when it arrived.
#[derive(Default)]
pub struct CurrentWeb(RwLock<Arc<Web>>);

impl CurrentWeb {
    /// The [`Web`] a connection arriving now takes.
    pub fn get(&self) -> Arc<Web> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `web` in force for the connections to come.
    pub fn set(&self, web: Web) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(web);
    }

    /// Puts `web`, read again, in force in place of the one in force, keeping what that one
    /// verified. A reload may change certificates and users but not whether TLS or basic
    /// auth is on: a file emptied or cut short by an editor must not serve the metrics in the
    /// clear to anyone, so such a change is refused (a restart makes it).
    pub fn replace(&self, web: Web) -> anyhow::Result<()> {
        let current = self.get();
        if web.mode() != current.mode() {
            bail!(
                "the web configuration now asks for {} where {} is served: a reload does not \
                 turn TLS or basic auth on or off; restart the agent to make that change",
                web.mode(),
                current.mode()
            );
        }
        web.auth.carry_over(&current.auth);
        self.set(web);
        Ok(())
    }
}

impl Web {
    /// The URL scheme it serves: `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// How it serves: its scheme, and `with basic auth` when it asks for credentials.
    pub fn mode(&self) -> String {
        if self.auth.required() {
            format!("{} with basic auth", self.scheme())
        } else {
            self.scheme().to_owned()
        }
    }
}

/// What the file says, checked, with its paths resolved.
#[derive(Debug, PartialEq)]
pub struct WebConfig {
    /// The TLS files and settings, when the file asks for TLS.
    pub tls: Option<(TlsFiles, Settings)>,
    /// The users and their bcrypt hashes.
    pub users: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    tls_server_config: Option<TlsShape>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
    http_server_config: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsShape {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_ca_file: Option<String>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    // exporter-toolkit's, refused by name below.
    cert: Option<serde::de::IgnoredAny>,
    key: Option<serde::de::IgnoredAny>,
    client_ca: Option<serde::de::IgnoredAny>,
    client_allowed_sans: Option<serde::de::IgnoredAny>,
    cipher_suites: Option<serde::de::IgnoredAny>,
    curve_preferences: Option<serde::de::IgnoredAny>,
    prefer_server_cipher_suites: Option<serde::de::IgnoredAny>,
}

impl WebConfig {
    /// Reads and checks the file at `path` (at most 1 MiB, as every config file).
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = read_config_file(path).context("web config")?;
        let folder = path.parent().unwrap_or(Path::new("."));
        Self::from_yaml(&text, folder).with_context(|| format!("in web config {}", path.display()))
    }

    /// Parses and checks the YAML, resolving relative paths against `folder`.
    pub fn from_yaml(text: &str, folder: &Path) -> anyhow::Result<Self> {
        let file: FileShape = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        if file.http_server_config.is_some() {
            bail!("http_server_config: not served by the agent (HTTP/1.1 only, no extra headers)");
        }
        let tls = file
            .tls_server_config
            .map(|shape| tls(shape, folder))
            .transpose()?
            .flatten();
        let users = file.basic_auth_users.unwrap_or_default();
        if users.len() > MAX_USERS {
            bail!(
                "basic_auth_users: {} users, at most {MAX_USERS} are accepted",
                users.len()
            );
        }
        for (user, hash) in &users {
            if user.is_empty() || user.len() > MAX_USER_BYTES || user.contains(':') {
                bail!("basic_auth_users: user names are 1 to {MAX_USER_BYTES} bytes without ':'");
            }
            let parts = hash.parse::<bcrypt::HashParts>().map_err(|e| {
                anyhow::anyhow!("basic_auth_users: {user}: not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 {user}`")
            })?;
            // bcrypt's own range: a hash outside it would refuse every password at verify.
            if !(4..=31).contains(&parts.get_cost()) {
                bail!(
                    "basic_auth_users: {user}: bcrypt cost {} is outside 4 to 31",
                    parts.get_cost()
                );
            }
            if parts.get_cost() > SLOW_COST {
                tracing::warn!(
                    "basic_auth_users: {user}: bcrypt cost {} makes each first check of a \
                     password take seconds (verifications run one at a time)",
                    parts.get_cost()
                );
            }
        }
        Ok(WebConfig { tls, users })
    }

    /// Loads the TLS files and makes the [`Web`] the file describes.
    pub fn load(self) -> anyhow::Result<Web> {
        let tls = self
            .tls
            .map(|(files, settings)| Tls::load(files, settings))
            .transpose()
            .context("tls_server_config")?;
        Ok(Web {
            tls,
            auth: BasicAuth::new(self.users),
        })
    }
}

/// The TLS files and settings of `tls_server_config`, or `None` when it names nothing (as
/// exporter-toolkit, an empty section serves plain HTTP).
fn tls(shape: TlsShape, folder: &Path) -> anyhow::Result<Option<(TlsFiles, Settings)>> {
    for (set, name, why) in [
        (shape.cert.is_some(), "cert", "name the file with cert_file"),
        (shape.key.is_some(), "key", "name the file with key_file"),
        (
            shape.client_ca.is_some(),
            "client_ca",
            "name the file with client_ca_file",
        ),
        (
            shape.client_allowed_sans.is_some(),
            "client_allowed_sans",
            "any certificate the client CA signed is accepted",
        ),
        (
            shape.cipher_suites.is_some(),
            "cipher_suites",
            "rustls offers its safe default suites only",
        ),
        (
            shape.curve_preferences.is_some(),
            "curve_preferences",
            "rustls chooses among its safe default groups",
        ),
        (
            shape.prefer_server_cipher_suites.is_some(),
            "prefer_server_cipher_suites",
            "rustls chooses the suite",
        ),
    ] {
        if set {
            bail!("tls_server_config.{name}: not supported by the agent: {why}");
        }
    }
    let named = |field: &Option<String>| field.as_deref().is_some_and(|s| !s.is_empty());
    if ![
        &shape.cert_file,
        &shape.key_file,
        &shape.client_ca_file,
        &shape.client_auth_type,
    ]
    .into_iter()
    .any(named)
    {
        return Ok(None);
    }
    let path = |field: &Option<String>, name: &str| -> anyhow::Result<PathBuf> {
        match field.as_deref() {
            Some(p) if !p.is_empty() => Ok(folder.join(p)),
            _ => bail!("tls_server_config: missing {name}"),
        }
    };
    let cert = path(&shape.cert_file, "cert_file")?;
    let key = path(&shape.key_file, "key_file")?;
    let client_ca = named(&shape.client_ca_file)
        .then(|| path(&shape.client_ca_file, "client_ca_file"))
        .transpose()?;
    let client_certs = match shape.client_auth_type.as_deref().unwrap_or("") {
        "" | "NoClientCert" => None,
        "VerifyClientCertIfGiven" => Some(ClientCerts::IfGiven),
        "RequireAndVerifyClientCert" => Some(ClientCerts::Required),
        kind @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert") => bail!(
            "tls_server_config.client_auth_type: {kind} accepts a certificate without \
             verifying it, which authenticates nobody: not offered (use \
             RequireAndVerifyClientCert with client_ca_file)"
        ),
        other => bail!(
            "tls_server_config.client_auth_type: '{other}' is not one of NoClientCert, \
             VerifyClientCertIfGiven, RequireAndVerifyClientCert"
        ),
    };
    let client_certs = match (client_certs, &client_ca) {
        (None, Some(_)) => bail!(
            "tls_server_config: client_ca_file is given without a client_auth_type that \
             verifies (VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
        ),
        (Some(_), None) => bail!("tls_server_config: client_auth_type needs client_ca_file"),
        (certs, _) => certs.unwrap_or(ClientCerts::Required),
    };
    let version = |field: &Option<String>, name: &str, default| match field.as_deref() {
        None | Some("") => Ok(default),
        Some("TLS12") => Ok(Version::Tls12),
        Some("TLS13") => Ok(Version::Tls13),
        Some(v @ ("TLS10" | "TLS11")) => bail!(
            "tls_server_config.{name}: {v}: the agent speaks TLS 1.2 and 1.3 only (TLS12, TLS13)"
        ),
        Some(other) => bail!("tls_server_config.{name}: '{other}' is not TLS12 or TLS13"),
    };
    let settings = Settings {
        min_version: version(&shape.min_version, "min_version", Version::Tls12)?,
        max_version: version(&shape.max_version, "max_version", Version::Tls13)?,
        client_certs,
        alpn: vec![b"http/1.1".to_vec()],
    };
    if settings.min_version > settings.max_version {
        bail!("tls_server_config: max_version must be at least min_version");
    }
    Ok(Some((
        TlsFiles {
            cert,
            key,
            client_ca,
        },
        settings,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bcrypt hash (of the least cost, for speed).
    fn hash() -> String {
        bcrypt::hash("pw", 4).unwrap()
    }

    /// A reload changes users, but an emptied file does not turn basic auth off.
    #[test]
    fn a_reload_keeps_basic_auth_on() {
        let with_users = || Web {
            tls: None,
            auth: BasicAuth::new(BTreeMap::from([("prometheus".to_owned(), hash())])),
        };
        let current = CurrentWeb::default();
        current.set(with_users());
        let emptied = WebConfig::from_yaml("", Path::new("."))
            .unwrap()
            .load()
            .unwrap();
        let refused = current.replace(emptied).unwrap_err().to_string();
        assert!(
            refused.contains("asks for http where http with basic auth is served"),
            "{refused}"
        );
        assert!(current.get().auth.required());
        current.replace(with_users()).unwrap();
        assert_eq!(current.get().mode(), "http with basic auth");
    }

    fn parse(text: &str) -> anyhow::Result<WebConfig> {
        WebConfig::from_yaml(text, Path::new("/etc/lossless"))
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).expect_err(text))
    }

    #[test]
    fn reads_exporter_toolkit_s_fields() {
        let hash = hash();
        let config = parse(&format!(
            "tls_server_config:\n  cert_file: agent.pem\n  key_file: /keys/agent.key\n  \
             client_ca_file: ca.pem\n  client_auth_type: VerifyClientCertIfGiven\n  \
             min_version: TLS13\nbasic_auth_users:\n  prometheus: {hash}\n"
        ))
        .unwrap();
        let (files, settings) = config.tls.unwrap();
        assert_eq!(files.cert, Path::new("/etc/lossless/agent.pem"));
        assert_eq!(files.key, Path::new("/keys/agent.key"));
        assert_eq!(files.client_ca.unwrap(), Path::new("/etc/lossless/ca.pem"));
        assert_eq!(settings.client_certs, ClientCerts::IfGiven);
        assert_eq!(settings.min_version, Version::Tls13);
        assert_eq!(config.users["prometheus"], hash);
        // Nothing, or an empty TLS section: plain HTTP without users.
        for text in ["", "tls_server_config: {}\n", "basic_auth_users:\n"] {
            assert_eq!(
                parse(text).unwrap(),
                WebConfig {
                    tls: None,
                    users: BTreeMap::new()
                },
                "{text:?}"
            );
        }
    }

    #[test]
    fn refuses_what_it_does_not_serve() {
        let hash = hash();
        for (text, says) in [
            ("tls_server_config:\n  cert_fil: a\n", "unknown field"),
            ("other: 1\n", "unknown field"),
            ("tls_server_config:\n  cert_file: a\n", "missing key_file"),
            (
                "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
                "missing cert_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
                "without a client_auth_type",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
                "needs client_ca_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
                "authenticates nobody",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n",
                "is not one of",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n",
                "TLS 1.2 and 1.3 only",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
                "at least min_version",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "cipher_suites: not supported",
            ),
            ("http_server_config:\n  http2: false\n", "http_server_config"),
            ("basic_auth_users:\n  bob: secret\n", "not a bcrypt hash"),
            (
                &format!("basic_auth_users:\n  'a:b': {hash}\n"),
                "without ':'",
            ),
            (
                "basic_auth_users:\n  bob: x\n  bob: y\n",
                "duplicate",
            ),
            (
                &format!("basic_auth_users:\n  bob: '{}'\n", hash.replacen("$04$", "$03$", 1)),
                "cost 3 is outside 4 to 31",
            ),
        ] {
            let error = error(text);
            assert!(
                error.to_lowercase().contains(&says.to_lowercase()),
                "{text:?}: {error}"
            );
        }
        let many: String = (0..=MAX_USERS)
            .map(|i| format!("  u{i}: {hash}\n"))
            .collect();
        assert!(error(&format!("basic_auth_users:\n{many}")).contains("at most"));
    }

    #[test]
    fn an_oversized_file_is_refused_unread() {
        let dir = testkit::TempDir::new("web-config", "oversized");
        let path = dir.0.join("web.yml");
        let fill = "#".repeat(usize::try_from(hostconfig::config::MAX_CONFIG_BYTES).unwrap());
        std::fs::write(&path, format!("{fill}\n")).unwrap();
        let error = format!("{:#}", WebConfig::from_file(&path).unwrap_err());
        assert!(error.contains("longer than"), "{error}");
    }
}
