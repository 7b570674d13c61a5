//! Basic authentication against bcrypt hashes, as exporter-toolkit's: the `Authorization:
//! Basic` header's user and password are checked against the user's hash. bcrypt is slow by
//! design, so a client must not be able to make the agent run it at will: a verified (user,
//! password, hash) is remembered (by a SHA-256 digest, never the password itself) in a bounded
//! cache that a reload carries over, so a scraper that knows its password costs one
//! verification and is never throttled after it; the verifications themselves run one at a
//! time and at most [`VERIFICATIONS_PER_SECOND`] per client address (with a burst of
//! [`VERIFICATION_BURST`]), and a request past that is answered "429 Too Many Requests"
//! without one, so that a client guessing passwords slows itself, not the others. An unknown
//! user is checked against a hash of no user's, of the users' highest cost, so the time taken
//! does not tell which users exist.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::IpAddr,
    sync::Mutex,
    time::Instant,
};

use base64::Engine as _;

/// Verified (user, password) pairs remembered; past it the cache starts again.
pub const MAX_CACHED: usize = 256;
/// bcrypt verifications per second at most, per client address.
pub const VERIFICATIONS_PER_SECOND: f64 = 4.0;
/// Client addresses whose verification budgets are remembered; past it the idle ones (whose
/// budget is whole again) are forgotten, and if none is idle, all are.
pub const MAX_BUDGETS: usize = 1024;
/// Verifications that may run back to back before the rate applies.
pub const VERIFICATION_BURST: f64 = 8.0;

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
    /// What an unknown user's password is checked against: a hash of the users' highest cost,
    /// so that the time taken does not tell which users exist.
    unknown_user: String,
    verified: Mutex<HashSet<[u8; 32]>>,
    /// Each client address's budget of verifications.
    budgets: Mutex<HashMap<IpAddr, Budget>>,
    /// Taken while bcrypt runs, so verifications run one at a time.
    running: Mutex<()>,
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
    fn refill(&mut self, now: Instant) {
        let refill =
            now.saturating_duration_since(self.at).as_secs_f64() * VERIFICATIONS_PER_SECOND;
        self.tokens = (self.tokens + refill).min(VERIFICATION_BURST);
        self.at = now;
    }

    fn take(&mut self) -> bool {
        self.refill(Instant::now());
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
        let cost = users
            .values()
            .filter_map(|hash| hash.parse::<bcrypt::HashParts>().ok())
            .map(|parts| parts.get_cost())
            .max();
        let unknown_user = cost
            .and_then(|cost| {
                bcrypt::hash_with_salt(b"lossless agent: no such user", cost, [0; 16]).ok()
            })
            .map(|parts| parts.to_string())
            .unwrap_or_default();
        BasicAuth {
            users,
            unknown_user,
            ..BasicAuth::default()
        }
    }

    /// Keeps what `previous` (the [`BasicAuth`] this one replaces) verified and the budgets it
    /// counted: a reload neither makes a scraper verify again nor gives a guesser new tokens.
    /// A remembered verification binds the hash it matched, so a changed password does not
    /// carry over.
    pub fn carry_over(&self, previous: &BasicAuth) {
        self.cache().extend(previous.cache().iter().copied());
        self.budgets().extend(previous.budgets().drain());
    }

    /// Whether requests must carry credentials.
    pub fn required(&self) -> bool {
        !self.users.is_empty()
    }

    /// Checks an `Authorization` header's value sent from `peer`. Blocking: it may run bcrypt.
    pub fn check(&self, peer: IpAddr, authorization: Option<&[u8]>) -> Verdict {
        if !self.required() {
            return Verdict::Allowed;
        }
        let Some((user, password)) = authorization.and_then(credentials) else {
            return Verdict::Refused;
        };
        let (hash, known) = match self.users.get(&user) {
            Some(hash) => (hash.as_str(), true),
            None => (self.unknown_user.as_str(), false),
        };
        let digest = digest(&user, &password, hash);
        if known && self.cache().contains(&digest) {
            return Verdict::Allowed;
        }
        if !self.take_budget(peer) {
            return Verdict::Throttled;
        }
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let right = bcrypt::verify(&password, hash).unwrap_or(false) && known;
        drop(running);
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

    /// Takes one verification from `peer`'s budget, if it has one left.
    fn take_budget(&self, peer: IpAddr) -> bool {
        let mut budgets = self.budgets();
        if budgets.len() >= MAX_BUDGETS && !budgets.contains_key(&peer) {
            let now = Instant::now();
            budgets.retain(|_, budget| {
                budget.refill(now);
                budget.tokens < VERIFICATION_BURST
            });
            if budgets.len() >= MAX_BUDGETS {
                budgets.clear();
            }
        }
        budgets.entry(peer).or_default().take()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn budgets(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Budget>> {
        self.budgets.lock().unwrap_or_else(|e| e.into_inner())
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

/// The SHA-256 of the user, the password and the hash they matched, each preceded by its
/// length.
fn digest(user: &str, password: &[u8], hash: &str) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [user.as_bytes(), password, hash.as_bytes()] {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part);
    }
    let mut digest = [0; 32];
    digest.copy_from_slice(context.finish().as_ref());
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const GUESSER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn basic(user: &str, password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
        .into_bytes()
    }

    fn users(password: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("prometheus".to_owned(), bcrypt::hash(password, 4).unwrap())])
    }

    /// Spends `client`'s budget for the rest of the test: no tokens, and none coming back
    /// however long the test's own bcrypt hashing takes on a loaded machine (refill counts
    /// from `at`, an hour from now).
    fn spend_budget(auth: &BasicAuth, client: IpAddr) {
        let mut budgets = auth.budgets();
        let budget = budgets.get_mut(&client).unwrap();
        budget.tokens = 0.0;
        budget.at = Instant::now() + std::time::Duration::from_secs(3600);
    }

    #[test]
    fn checks_credentials_and_remembers_the_right_ones() {
        let auth = BasicAuth::new(users("s3cret:with colon"));
        assert!(auth.required());
        let check = |header: Option<&[u8]>| auth.check(SCRAPER, header);
        assert_eq!(check(None), Verdict::Refused);
        assert_eq!(check(Some(b"Bearer abc")), Verdict::Refused);
        assert_eq!(check(Some(b"Basic !!!")), Verdict::Refused);
        assert_eq!(check(Some(&basic("prometheus", "wrong"))), Verdict::Refused);
        assert_eq!(
            check(Some(&basic("nobody", "s3cret:with colon"))),
            Verdict::Refused
        );
        let right = basic("prometheus", "s3cret:with colon");
        assert_eq!(check(Some(&right)), Verdict::Allowed);
        assert_eq!(auth.cache().len(), 1);
        // Remembered: allowed with no verification left to spend.
        spend_budget(&auth, SCRAPER);
        assert_eq!(check(Some(&right)), Verdict::Allowed);
        assert_eq!(
            check(Some(&basic("prometheus", "wrong"))),
            Verdict::Throttled
        );
        assert_eq!(BasicAuth::default().check(SCRAPER, None), Verdict::Allowed);
    }

    /// Wrong passwords as fast as a client can send them run bcrypt at most the burst and
    /// then the rate allows; the rest are throttled without it, and another address still
    /// has its own budget.
    #[test]
    fn a_flood_of_wrong_passwords_is_throttled_for_its_sender_only() {
        let auth = BasicAuth::new(users("right"));
        let started = Instant::now();
        let verdicts: Vec<Verdict> = (0..100)
            .map(|i| auth.check(GUESSER, Some(&basic("prometheus", &format!("wrong{i}")))))
            .collect();
        let refused = verdicts.iter().filter(|v| **v == Verdict::Refused).count();
        let allowance =
            VERIFICATION_BURST + started.elapsed().as_secs_f64() * VERIFICATIONS_PER_SECOND + 1.0;
        assert!(refused as f64 <= allowance, "{refused} verifications ran");
        assert!(verdicts.contains(&Verdict::Throttled));
        assert!(!verdicts.contains(&Verdict::Allowed));
        assert_eq!(
            auth.check(SCRAPER, Some(&basic("prometheus", "right"))),
            Verdict::Allowed
        );
    }

    /// A reload keeps what was verified and the budgets spent, but a changed password's old
    /// verification does not match the new hash.
    #[test]
    fn a_reload_carries_verifications_over_but_not_a_changed_password() {
        let before = BasicAuth::new(users("old"));
        assert_eq!(
            before.check(SCRAPER, Some(&basic("prometheus", "old"))),
            Verdict::Allowed
        );
        spend_budget(&before, SCRAPER);
        let same = BasicAuth::new(before.users.clone());
        same.carry_over(&before);
        assert_eq!(
            same.check(SCRAPER, Some(&basic("prometheus", "old"))),
            Verdict::Allowed
        );
        let changed = BasicAuth::new(users("new"));
        changed.carry_over(&same);
        // Not remembered under the new hash, and the spent budget came along: throttled
        // rather than let through.
        assert_eq!(
            changed.check(SCRAPER, Some(&basic("prometheus", "old"))),
            Verdict::Throttled
        );
    }
}
