//! A lab PKI for the TLS tests: a CA, and certificates it signs (for a server named
//! `localhost` and 127.0.0.1, for clients, valid now or expired), written as PEM files the way
//! an operator's `openssl` or `step` would leave them.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A certificate authority whose key the test holds.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    /// Its certificate (PEM file).
    pub pem: PathBuf,
}

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// Whether an issued certificate is valid today.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// From a year ago to a year from now.
    Now,
    /// For 2020 only.
    Expired,
}

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A server known as `localhost` and 127.0.0.1.
    Server,
    /// A client.
    Client,
}

impl Ca {
    /// A new CA called `name`, its certificate written to `dir/name.pem`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().expect("a key pair");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        valid(&mut params, Validity::Now);
        let cert = params.self_signed(&key).expect("a self-signed CA");
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).expect("writing the CA");
        Ca { cert, key, pem }
    }

    /// A certificate for `role` with common name `name`, signed by this CA, written to
    /// `dir/name.pem` and `dir/name.key`.
    pub fn issue(&self, dir: &Path, name: &str, role: Role, validity: Validity) -> Issued {
        let key = KeyPair::generate().expect("a key pair");
        let names = match role {
            Role::Server => vec!["localhost".to_string(), "127.0.0.1".to_string()],
            Role::Client => Vec::new(),
        };
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![match role {
            Role::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Role::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        valid(&mut params, validity);
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("a signed certificate");
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("writing a certificate");
        std::fs::write(&issued.key, key.serialize_pem()).expect("writing a key");
        issued
    }
}

/// A lab PKI in a scratch directory of its own, removed on drop: a CA, a server certificate
/// and a client certificate it signs, and a second CA that signed neither.
pub struct Lab {
    /// The directory the PEM files are in.
    pub dir: crate::TempDir,
    /// The CA, `lab-ca`.
    pub ca: Ca,
    /// The server's certificate, `switch`, valid now.
    pub server: Issued,
    /// The client's certificate, valid now.
    pub client: Issued,
    /// Another CA, `other-ca`: what it signs the server must refuse.
    pub other_ca: Ca,
}

impl Lab {
    /// A lab in a new directory `PREFIX-PID-N-NAME` (as [`crate::TempDir::new`]), its client
    /// certificate named `client`.
    pub fn new(prefix: &str, name: &str, client: &str) -> Lab {
        let dir = crate::TempDir::new(prefix, name);
        let ca = Ca::new(&dir.0, "lab-ca");
        let server = ca.issue(&dir.0, "switch", Role::Server, Validity::Now);
        let client = ca.issue(&dir.0, client, Role::Client, Validity::Now);
        let other_ca = Ca::new(&dir.0, "other-ca");
        Lab {
            dir,
            ca,
            server,
            client,
            other_ca,
        }
    }
}

fn valid(params: &mut CertificateParams, validity: Validity) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let year = 1970 + (now / 31_557_600) as i32;
    (params.not_before, params.not_after) = match validity {
        Validity::Now => (date_time_ymd(year - 1, 1, 1), date_time_ymd(year + 2, 1, 1)),
        Validity::Expired => (date_time_ymd(2020, 1, 1), date_time_ymd(2021, 1, 1)),
    };
}
