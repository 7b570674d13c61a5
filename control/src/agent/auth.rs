//! Basic authentication against bcrypt hashes, as exporter-toolkit's: the `Authorization:
//! Basic` header's user and password are checked against the user's hash. bcrypt is slow by
//! design, so a client must not be able to make the agent run it at will: a verified (user,
//! password) is remembered (by a SHA-256 digest, never the password itself) in a bounded
//! cache, so a scraper that knows its password costs one verification; the verifications
//! themselves run one at a time and at most [`VERIFICATIONS_PER_SECOND`] (with a burst of
//! [`VERIFICATION_BURST`]), and a request past that is answered "429 Too Many Requests"
//! without one. An unknown user is checked against a hash of no user's, so the time taken
//! does not tell which users exist.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Mutex, OnceLock},
    time::Instant,
};

use base64::Engine as _;

/// Verified (user, password) pairs remembered; past it the cache starts again.
pub const MAX_CACHED: usize = 256;
/// bcrypt verifications per second at most, over all clients.
pub const VERIFICATIONS_PER_SECOND: f64 = 4.0;
/// Verifications that may run back to back before the rate applies.
pub const VERIFICATION_BURST: f64 = 8.0;
/// The cost of the hash an unknown user is checked against (htpasswd's and exporter-toolkit's
/// usual cost).
const UNKNOWN_USER_COST: u32 = 10;

/// Whether a request may be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No users are configured, or the credentials are right.
    Allowed,
    /// No credentials, or wrong ones: 401 with `WWW-Authenticate: Basic`.
    Refused,
    /// Too many verifications lately: 429, try again.
    Throttled,
}

/// The users who may ask, and what was verified of them.
#[derive(Default)]
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    verified: Mutex<HashSet<[u8; 32]>>,
    /// Taken while bcrypt runs, so verifications run one at a time.
    budget: Mutex<Budget>,
}

/// A token bucket of verifications.
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tokens: VERIFICATION_BURST,
            at: Instant::now(),
        }
    }
}

impl Budget {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * VERIFICATIONS_PER_SECOND;
        self.tokens = (self.tokens + refill).min(VERIFICATION_BURST);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

impl BasicAuth {
    /// Basic authentication for `users` (name to bcrypt hash, checked by the caller); with
    /// none, every request is allowed.
    pub fn new(users: BTreeMap<String, String>) -> Self {
        BasicAuth {
            users,
            ..BasicAuth::default()
        }
    }

    /// Whether requests must carry credentials.
    pub fn required(&self) -> bool {
        !self.users.is_empty()
    }

    /// Checks an `Authorization` header's value. Blocking: it may run bcrypt.
    pub fn check(&self, authorization: Option<&[u8]>) -> Verdict {
        if !self.required() {
            return Verdict::Allowed;
        }
        let Some((user, password)) = authorization.and_then(credentials) else {
            return Verdict::Refused;
        };
        let digest = digest(&user, &password);
        if self.cache().contains(&digest) {
            return Verdict::Allowed;
        }
        let mut budget = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        if !budget.take() {
            return Verdict::Throttled;
        }
        let (hash, known) = match self.users.get(&user) {
            Some(hash) => (hash.as_str(), true),
            None => (unknown_user_hash(), false),
        };
        let right = bcrypt::verify(&password, hash).unwrap_or(false) && known;
        drop(budget);
        if !right {
            return Verdict::Refused;
        }
        let mut cache = self.cache();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(digest);
        Verdict::Allowed
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The user and password of `Basic <base64 of user:password>`.
fn credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
    let header = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

/// The SHA-256 of the user and password, each preceded by its length.
fn digest(user: &str, password: &[u8]) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [user.as_bytes(), password] {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    let mut digest = [0; 32];
    digest.copy_from_slice(context.finish().as_ref());
    digest
}

/// A hash no password is expected to match, of the usual cost.
fn unknown_user_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        bcrypt::hash_with_salt(b"lossless agent: no such user", UNKNOWN_USER_COST, [0; 16])
            .map(|parts| parts.to_string())
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
        .into_bytes()
    }

    #[test]
    fn checks_credentials_and_remembers_the_right_ones() {
        let auth = BasicAuth::new(BTreeMap::from([(
            "prometheus".to_owned(),
            bcrypt::hash("s3cret:with colon", 4).unwrap(),
        )]));
        assert!(auth.required());
        assert_eq!(auth.check(None), Verdict::Refused);
        assert_eq!(auth.check(Some(b"Bearer abc")), Verdict::Refused);
        assert_eq!(auth.check(Some(b"Basic !!!")), Verdict::Refused);
        assert_eq!(
            auth.check(Some(&basic("prometheus", "wrong"))),
            Verdict::Refused
        );
        assert_eq!(
            auth.check(Some(&basic("nobody", "s3cret:with colon"))),
            Verdict::Refused
        );
        let right = basic("prometheus", "s3cret:with colon");
        assert_eq!(auth.check(Some(&right)), Verdict::Allowed);
        assert_eq!(auth.cache().len(), 1);
        // Remembered: allowed with no verification left to spend.
        auth.budget.lock().unwrap().tokens = 0.0;
        assert_eq!(auth.check(Some(&right)), Verdict::Allowed);
        assert_eq!(
            auth.check(Some(&basic("prometheus", "wrong"))),
            Verdict::Throttled
        );
        assert_eq!(BasicAuth::default().check(None), Verdict::Allowed);
    }

    /// Wrong passwords as fast as a client can send them run bcrypt at most the burst and
    /// then the rate allows; the rest are throttled without it.
    #[test]
    fn a_flood_of_wrong_passwords_is_throttled() {
        let auth = BasicAuth::new(BTreeMap::from([(
            "prometheus".to_owned(),
            bcrypt::hash("right", 4).unwrap(),
        )]));
        let started = Instant::now();
        let verdicts: Vec<Verdict> = (0..100)
            .map(|i| auth.check(Some(&basic("prometheus", &format!("wrong{i}")))))
            .collect();
        let refused = verdicts.iter().filter(|v| **v == Verdict::Refused).count();
        let allowance =
            VERIFICATION_BURST + started.elapsed().as_secs_f64() * VERIFICATIONS_PER_SECOND + 1.0;
        assert!(refused as f64 <= allowance, "{refused} verifications ran");
        assert!(verdicts.contains(&Verdict::Throttled));
        assert!(!verdicts.contains(&Verdict::Allowed));
    }
}
