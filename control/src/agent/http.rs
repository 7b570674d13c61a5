//! The agent's HTTP server: `GET /metrics` and `GET /healthz` over HTTP/1.1 (hyper), in the
//! clear or over TLS, with or without basic auth, as the web configuration in force says
//! ([`super::web`]), for clients that are not trusted. Bounded: connections open at once, time
//! to finish the TLS handshake and to send a request's headers, their size, and each
//! connection's life; only GET and HEAD, only the two paths, and no request body is ever read.
//!
//! Connections that hold a slot without asking anything (idle, handshaking or sending their
//! headers slowly) must not keep a scraper waiting past its timeout: every connection is
//! accepted at once, and when all [`MAX_CONNECTIONS`] slots are taken a newcomer takes the slot
//! of the connection that has waited for a request the longest, which is closed. Only
//! connections being answered keep their slots; when all are, the newcomer waits for the first
//! to finish.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use http_body_util::Full;
use hyper::{
    body::{Bytes, Incoming},
    header, Method, Request, Response, StatusCode,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
    sync::Notify,
};
use tokio_rustls::TlsAcceptor;

use super::{
    auth::Verdict,
    web::{CurrentWeb, Web},
};

/// Connections open at once; past them a newcomer closes the one that has waited for a request
/// the longest (or, when all are being answered, waits for one to finish).
pub const MAX_CONNECTIONS: usize = 32;
/// Time a client has to finish its TLS handshake, and then to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest life of a connection, keep-alive included (a scraper simply connects again).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Read buffer, which bounds a request's line and headers (hyper's least is 8 KiB).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// What the server answers: the body and media type of a path, or its status.
pub trait Pages: Send + Sync + 'static {
    /// The exposition of `/metrics` (blocking: it reads pinned maps).
    fn metrics(&self) -> (StatusCode, String);
    /// The text of `/healthz` and whether the agent is healthy.
    fn health(&self) -> (StatusCode, String);
}

/// Serves `pages` on `listener` until the task is dropped, each connection as the web
/// configuration current when it arrives says.
pub async fn serve(listener: TcpListener, pages: Arc<dyn Pages>, web: Arc<CurrentWeb>) {
    let slots = Arc::new(Slots::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: pass, the next accept may work.
                tracing::warn!("metrics server: accept: {error}");
                continue;
            }
        };
        let slot = slots.take().await;
        let pages = pages.clone();
        let web = web.get();
        tokio::spawn(async move {
            let connection = connection(stream, peer, pages, web, slot.state.clone());
            // Past its lifetime, or when a newcomer takes its slot, the connection is dropped,
            // which closes it.
            tokio::select! {
                served = tokio::time::timeout(CONNECTION_LIFETIME, connection) => {
                    if let Ok(Err(error)) = served {
                        tracing::debug!("metrics server: {peer}: {error}");
                    }
                }
                () = slot.state.closed.notified() => {
                    tracing::debug!("metrics server: {peer} closed to make room for another");
                }
            }
            drop(slot);
        });
    }
}

/// One connection: its TLS handshake if `web` asks for TLS, then its requests.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    pages: Arc<dyn Pages>,
    web: Arc<Web>,
    state: Arc<SlotState>,
) -> Result<(), hyper::Error> {
    let Some(tls) = &web.tls else {
        return requests(stream, peer, pages, web, state).await;
    };
    let acceptor = TlsAcceptor::from(tls.current());
    match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => requests(stream, peer, pages, web, state).await,
        Ok(Err(error)) => {
            tracing::warn!("metrics server: TLS handshake with {peer} refused: {error}");
            Ok(())
        }
        Err(_) => {
            tracing::debug!("metrics server: TLS handshake with {peer} not done in time");
            Ok(())
        }
    }
}

/// Answers the requests of one connection, in the clear or over TLS.
async fn requests<S>(
    stream: S,
    peer: SocketAddr,
    pages: Arc<dyn Pages>,
    web: Arc<Web>,
    state: Arc<SlotState>,
) -> Result<(), hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let pages = pages.clone();
        let web = web.clone();
        let answering = Answering::begin(&state);
        async move {
            let response = answer(request, peer, pages, web).await;
            drop(answering);
            Ok::<_, Infallible>(response)
        }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await
}

/// The open connections' slots.
#[derive(Default)]
struct Slots {
    open: Mutex<Vec<Arc<SlotState>>>,
    /// Told when a slot is freed.
    freed: Notify,
}

/// Where one connection is, shared by its task, its service and the table.
#[derive(Default)]
struct SlotState {
    /// Since when it has waited for a request; `None` while a request is answered.
    waiting: Mutex<Option<Instant>>,
    /// Told when a newcomer takes the slot.
    closed: Notify,
}

/// A connection's hold on a slot, freed when dropped.
struct Slot {
    slots: Arc<Slots>,
    state: Arc<SlotState>,
}

impl Slots {
    /// A slot for a newcomer: a free one, else the slot of the connection that has waited for
    /// a request the longest (which is told to close); when every connection is being answered,
    /// waits for one to finish.
    async fn take(self: &Arc<Self>) -> Slot {
        loop {
            let freed = self.freed.notified();
            if let Some(slot) = self.try_take() {
                return slot;
            }
            freed.await;
        }
    }

    fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= MAX_CONNECTIONS {
            let longest = open
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.waiting().map(|since| (since, i)))
                .min()?
                .1;
            open.swap_remove(longest).closed.notify_one();
        }
        let state = Arc::new(SlotState {
            waiting: Mutex::new(Some(Instant::now())),
            closed: Notify::new(),
        });
        open.push(state.clone());
        Some(Slot {
            slots: self.clone(),
            state,
        })
    }
}

impl SlotState {
    fn waiting(&self) -> Option<Instant> {
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_waiting(&self, since: Option<Instant>) {
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = since;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|s| !Arc::ptr_eq(s, &self.state));
        drop(open);
        self.slots.freed.notify_one();
    }
}

/// A request being answered on a connection: its slot is no newcomer's until dropped.
struct Answering(Arc<SlotState>);

impl Answering {
    fn begin(state: &Arc<SlotState>) -> Answering {
        state.set_waiting(None);
        Answering(state.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.set_waiting(Some(Instant::now()));
    }
}

async fn answer(
    request: Request<Incoming>,
    peer: SocketAddr,
    pages: Arc<dyn Pages>,
    web: Arc<Web>,
) -> Response<Full<Bytes>> {
    if web.auth.required() {
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|value| value.as_bytes().to_vec());
        // bcrypt is slow: off the async threads.
        let verdict = tokio::task::spawn_blocking(move || {
            web.auth.check(peer.ip(), authorization.as_deref())
        })
        .await;
        match verdict.unwrap_or(Verdict::Refused) {
            Verdict::Allowed => {}
            Verdict::Refused => {
                let mut response = text(StatusCode::UNAUTHORIZED, "Unauthorized\n".into());
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Basic"),
                );
                return response;
            }
            Verdict::Throttled => {
                let mut response = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many password checks: try again\n".into(),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
                return response;
            }
        }
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let head = request.method() == Method::HEAD;
    let (status, body, content_type) = match request.uri().path() {
        "/metrics" => {
            let rendered = tokio::task::spawn_blocking(move || pages.metrics()).await;
            let (status, body) = rendered
                .unwrap_or_else(|error| (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")));
            (status, body, host::metrics::CONTENT_TYPE)
        }
        "/healthz" => {
            let (status, body) = pages.health();
            (status, body, "text/plain; charset=utf-8")
        }
        _ => (
            StatusCode::NOT_FOUND,
            "not found: the agent serves /metrics and /healthz\n".into(),
            "text/plain; charset=utf-8",
        ),
    };
    let length = body.len();
    let mut response = text(status, if head { String::new() } else { body });
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    headers.insert(header::CONTENT_LENGTH, length.into());
    response
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;

    struct Fixed;

    impl Pages for Fixed {
        fn metrics(&self) -> (StatusCode, String) {
            (StatusCode::OK, "lossless_up 1\n".into())
        }
        fn health(&self) -> (StatusCode, String) {
            (StatusCode::SERVICE_UNAVAILABLE, "eth0: failed\n".into())
        }
    }

    /// The server of the [`Fixed`] pages with the settings `web`, on a port of its own: its
    /// address, and its task (to abort).
    async fn start(web: Arc<CurrentWeb>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (addr, tokio::spawn(serve(listener, Arc::new(Fixed), web)))
    }

    /// Sends `request` raw, from a blocking thread, and returns the whole answer (the server
    /// closes or answers).
    async fn exchange(addr: SocketAddr, request: String) -> String {
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.set_read_timeout(Some(HEADER_TIMEOUT * 3)).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut answer = Vec::new();
            let mut buffer = [0; 4096];
            // Read until the server closes (Connection: close) or a whole answer came.
            while let Ok(n) = stream.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                answer.extend_from_slice(&buffer[..n]);
            }
            String::from_utf8_lossy(&answer).into_owned()
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_two_paths_and_refuses_the_rest() {
        let (addr, server) = start(Arc::default()).await;
        let ask = |request: &str| exchange(addr, request.to_owned());
        let metrics = ask("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
        assert!(metrics.ends_with("lossless_up 1\n"), "{metrics}");
        let health = ask("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(health.starts_with("HTTP/1.1 503"), "{health}");
        let post = ask("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let other = ask("GET /etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        // Headers past the buffer: refused, the connection closed.
        let huge = format!(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Fill: {}\r\n\r\n",
            "a".repeat(MAX_HEADER_BYTES * 2)
        );
        let refused = ask(&huge).await;
        assert!(
            refused.starts_with("HTTP/1.1 431") || refused.is_empty(),
            "{refused}"
        );
        server.abort();
    }

    /// The attack of issue 30: 161 connections held open without a request. `/healthz`
    /// answers while they are held: a newcomer takes the slot of the connection that has
    /// waited the longest instead of waiting for a slot (it waited 23 s behind them).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_connections_held_open_do_not_keep_a_scrape_waiting() {
        let (addr, server) = start(Arc::default()).await;
        let idle: Vec<std::net::TcpStream> = (0..161)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let started = std::time::Instant::now();
        let health = exchange(
            addr,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
        )
        .await;
        let waited = started.elapsed();
        assert!(health.starts_with("HTTP/1.1 503"), "{health:?}");
        // Not a measure of speed: the first idle connection would give up its slot at
        // HEADER_TIMEOUT at the earliest, so an answer before it did not wait for them.
        assert!(
            waited < HEADER_TIMEOUT,
            "/healthz answered after {waited:?} behind idle connections"
        );
        drop(idle);
        server.abort();
    }

    /// With users, every path asks for credentials: none or wrong ones get 401 and the
    /// challenge, the right ones the page.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn basic_auth_guards_every_path() {
        use base64::Engine as _;
        let web = Arc::new(CurrentWeb::default());
        web.set(Web {
            tls: None,
            auth: super::super::auth::BasicAuth::new(
                [("scraper".to_owned(), bcrypt::hash("pw", 4).unwrap())].into(),
            ),
        });
        let (addr, server) = start(web).await;
        let ask = |credentials: Option<&str>, path: &str| {
            let header = credentials.map_or(String::new(), |c| {
                format!(
                    "Authorization: Basic {}\r\n",
                    base64::engine::general_purpose::STANDARD.encode(c)
                )
            });
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: x\r\n{header}Connection: close\r\n\r\n");
            exchange(addr, request)
        };
        for (credentials, path) in [
            (None, "/metrics"),
            (None, "/healthz"),
            (None, "/other"),
            (Some("scraper:wrong"), "/metrics"),
            (Some("nobody:pw"), "/metrics"),
        ] {
            let answer = ask(credentials, path).await;
            assert!(
                answer.starts_with("HTTP/1.1 401"),
                "{credentials:?} {path}: {answer}"
            );
            assert!(
                answer.to_lowercase().contains("www-authenticate: basic"),
                "{answer}"
            );
            assert!(!answer.contains("lossless_up"), "{answer}");
        }
        let answer = ask(Some("scraper:pw"), "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("lossless_up 1\n"), "{answer}");
        server.abort();
    }

    /// A client that never finishes its headers is cut off after [`HEADER_TIMEOUT`].
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_clients_are_cut_off() {
        let (addr, server) = start(Arc::default()).await;
        let started = std::time::Instant::now();
        let answer = exchange(addr, "GET /metrics HTTP/1.1\r\n".into()).await;
        let waited = started.elapsed();
        assert!(!answer.contains("lossless_up"), "{answer}");
        assert!(
            waited < HEADER_TIMEOUT * 2,
            "the connection stayed open {waited:?}"
        );
        server.abort();
    }
}
