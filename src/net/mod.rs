//! The one HTTP layer, and the only place that builds an HTTP client: the model client
//! (`model/`), `feedback send` and the etcd backend (`lock/etcd.rs`) all post through it.
//!
//! What every request gets here, whoever makes it:
//! - rustls, a connect timeout, and a timeout for the whole exchange (sending and reading the
//!   answer), so nothing waits forever;
//! - redirects followed only within the origin first asked (scheme, host, port), at most
//!   [`MAX_REDIRECTS`] times: a redirect anywhere else is an error naming its `Location`, and
//!   neither the body nor a credential header went there (reqwest strips `Authorization` on
//!   a cross-host redirect, but not `x-api-key`, and would re-send the body anywhere);
//! - an answer cap: at most [`ANSWER_CAP`] of a success answer (or the client's own cap) and
//!   [`ERROR_BODY_CAP`] of an error answer are read, streamed, never the whole into memory;
//! - every message redacted ([`crate::cli::redact`]): no URL's userinfo or query values, no
//!   registered credential.
//!
//! Only the binaries that talk to the network start an async runtime (a current-thread one,
//! with [`block_on`] or a [`Blocking`] client); the others never do.

mod secret;
pub mod url;

use std::time::Duration;

use crate::cli::redact::redact;
use crate::cli::Failure;

pub use secret::{no_credential, Secret};
pub use url::{base_url, checked_url};

/// The most of a success answer that is read, by default: far more than any answer of ours
/// (a Messages answer of a few thousand tokens, an etcd reply of a few keys), far less than a
/// hostile or broken server could send.
pub const ANSWER_CAP: usize = 4 * 1024 * 1024;
/// The most of an error answer (a non-2xx status) that is read: enough for any API's error
/// message; the rest is dropped, not an error.
pub const ERROR_BODY_CAP: usize = 64 * 1024;
/// Same-origin redirects followed at most (another origin is never followed).
pub const MAX_REDIRECTS: usize = 5;

/// How a [`Client`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// Whether `HTTPS_PROXY` and the like apply (true for public APIs; false where the
    /// servers are named directly, such as etcd members).
    pub proxy_from_env: bool,
    /// The most of a success answer that is read.
    pub answer_cap: usize,
}

impl Options {
    /// A public API's client: proxies from the environment, the default cap.
    pub fn new(connect_timeout: Duration) -> Options {
        Options {
            connect_timeout,
            proxy_from_env: true,
            answer_cap: ANSWER_CAP,
        }
    }

    /// Servers named directly: no proxy from the environment has a say.
    pub fn direct(self) -> Options {
        Options {
            proxy_from_env: false,
            ..self
        }
    }
}

/// What went wrong with an exchange that produced no answer to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The connection could not be opened: the request was never sent.
    Connect,
    /// No complete answer within the timeout (the request may have been applied).
    Timeout,
    /// The connection failed after it was opened (reset, closed mid-answer).
    Transport,
    /// A 3xx that was not followed (another origin, too many, or no `Location`).
    Redirect,
    /// The answer is larger than the cap: reading stopped there.
    TooLarge,
}

/// A failed exchange; its message is redacted and names the URL (itself redacted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    /// The HTTP status, when an answer began (a redirect, an answer too large).
    pub status: Option<u16>,
    pub message: String,
}

impl Error {
    fn new(kind: ErrorKind, status: Option<u16>, message: impl AsRef<str>) -> Error {
        Error {
            kind,
            status,
            message: redact(message.as_ref()).into_owned(),
        }
    }
}

/// An answer whose status is 2xx (read whole, within the cap) or an error status (read up to
/// [`ERROR_BODY_CAP`]). Redirects never arrive here: they are an [`Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// `retry-after-ms` / `retry-after`, when the server sent one.
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
    /// An error body longer than [`ERROR_BODY_CAP`] was cut there.
    pub truncated: bool,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// An HTTP client as every dreamkit network call uses it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    answer_cap: usize,
}

impl Client {
    pub fn new(options: Options) -> Result<Client, Failure> {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if same_origin && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("dreamkit/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.connect_timeout)
            .redirect(policy);
        if !options.proxy_from_env {
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|e| Failure::environment(format!("cannot set up HTTP: {e}")))?;
        Ok(Client {
            http,
            answer_cap: options.answer_cap,
        })
    }

    /// The most of a success answer this client reads.
    pub fn answer_cap(&self) -> usize {
        self.answer_cap
    }

    /// One POST of `body` within `timeout` (sending it and reading the whole answer).
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, Error> {
        let mut builder = self.http.post(url);
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        let exchange = async {
            let response = builder
                .body(body.to_vec())
                .send()
                .await
                .map_err(|e| transport_error(&e, url))?;
            self.read(response, url).await
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Timeout,
                    None,
                    format!("{url}: no complete answer within {timeout:?}"),
                ))
            })
    }

    /// The answer, within the caps; a redirect (one that was not followed) is an error.
    async fn read(&self, mut response: reqwest::Response, url: &str) -> Result<Answer, Error> {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(no Location)")
                .to_string();
            return Err(Error::new(
                ErrorKind::Redirect,
                Some(status),
                format!(
                    "{url} redirected (HTTP {status}) to {location}: not followed, so neither \
the request nor its credential went there; use the final address instead"
                ),
            ));
        }
        let success = (200..300).contains(&status);
        let cap = if success {
            self.answer_cap
        } else {
            ERROR_BODY_CAP.min(self.answer_cap)
        };
        let too_large = || {
            Error::new(
                ErrorKind::TooLarge,
                Some(status),
                format!("the answer is larger than {cap} bytes: stopped reading it"),
            )
        };
        if success
            && response
                .content_length()
                .is_some_and(|len| len > cap as u64)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport_error(&e, url))?
        {
            if bytes.len() + chunk.len() > cap {
                if success {
                    return Err(too_large());
                }
                // An error's message is at its start: keep what fits, drop the rest.
                bytes.extend_from_slice(&chunk[..cap - bytes.len()]);
                truncated = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            retry_after,
            body: bytes,
            truncated,
        })
    }
}

/// A transport failure, worded without headers (which hold the key): the URL and the
/// innermost causes (reqwest's own text repeats the URL).
fn transport_error(e: &reqwest::Error, url: &str) -> Error {
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_connect() {
        ErrorKind::Connect
    } else {
        ErrorKind::Transport
    };
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        causes.push(err.to_string());
        source = err.source();
    }
    let detail = match causes.len() {
        0 => e.to_string(),
        n => causes[n.saturating_sub(2)..].join(": "),
    };
    Error::new(kind, None, format!("{url}: {detail}"))
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at =
        time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc2822).ok()?;
    let wait = at - time::OffsetDateTime::now_utc();
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// Runs a future to completion on a current-thread runtime. Only the binaries that talk to
/// the network call this; the others never start a runtime.
pub fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, Failure> {
    Ok(runtime()?.block_on(future))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::environment(format!("cannot start the async runtime: {e}")))
}

/// A client for callers that are not async (the etcd backend): its own current-thread
/// runtime, started when it is made.
pub struct Blocking {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Blocking {
    pub fn new(options: Options) -> Result<Blocking, Failure> {
        Ok(Blocking {
            runtime: runtime()?,
            client: Client::new(options)?,
        })
    }

    /// [`Client::post`], blocking. Called from inside another runtime (an async caller such
    /// as a model loop), nesting `block_on` would panic: the request then runs on a thread of
    /// its own while the caller waits.
    pub fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, Error> {
        let run = || {
            self.runtime
                .block_on(self.client.post(url, headers, body, timeout))
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return run();
        }
        std::thread::scope(|scope| {
            scope.spawn(run).join().unwrap_or_else(|_| {
                Err(Error::new(
                    ErrorKind::Transport,
                    None,
                    format!("{url}: the request thread failed"),
                ))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot loopback server answering the first request with `reply`, then closing.
    fn serve_once(reply: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(&reply);
            }
        });
        format!("http://127.0.0.1:{port}/x")
    }

    fn post(client: &Blocking, url: &str) -> Result<Answer, Error> {
        client.post(url, &[], b"{}", Duration::from_secs(10))
    }

    fn client(cap: usize) -> Blocking {
        Blocking::new(Options {
            answer_cap: cap,
            ..Options::new(Duration::from_secs(5)).direct()
        })
        .unwrap()
    }

    #[test]
    fn success_answers_are_capped_and_error_answers_cut() {
        let c = client(16);
        let ok = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_vec());
        let answer = post(&c, &ok).unwrap();
        assert_eq!((answer.status, &answer.body[..]), (200, &b"hello"[..]));
        let big =
            serve_once(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n0123456789abcdefXYZ".to_vec());
        let e = post(&c, &big).unwrap_err();
        assert_eq!((e.kind, e.status), (ErrorKind::TooLarge, Some(200)));
        let announced = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n".to_vec());
        assert_eq!(post(&c, &announced).unwrap_err().kind, ErrorKind::TooLarge);
        let mut error = b"HTTP/1.1 500 X\r\nconnection: close\r\n\r\n".to_vec();
        error.extend(std::iter::repeat_n(b'e', ERROR_BODY_CAP + 10));
        let c = client(ANSWER_CAP);
        let answer = post(&c, &serve_once(error)).unwrap();
        assert_eq!(answer.status, 500);
        assert_eq!(answer.body.len(), ERROR_BODY_CAP);
        assert!(answer.truncated);
    }

    #[test]
    fn redirects_elsewhere_are_errors_naming_the_location() {
        let c = client(ANSWER_CAP);
        let url = serve_once(
            b"HTTP/1.1 307 X\r\nlocation: http://127.0.0.2:9/y?key=sekrit\r\ncontent-length: 0\r\n\r\n"
                .to_vec(),
        );
        let e = post(&c, &url).unwrap_err();
        assert_eq!((e.kind, e.status), (ErrorKind::Redirect, Some(307)));
        assert!(e.message.contains("http://127.0.0.2:9/y?key="), "{e}");
        assert!(
            !e.message.contains("sekrit"),
            "the query value is redacted: {e}"
        );
        let url = serve_once(b"HTTP/1.1 302 X\r\ncontent-length: 0\r\n\r\n".to_vec());
        let e = post(&c, &url).unwrap_err();
        assert!(e.message.contains("(no Location)"), "{e}");
    }

    #[test]
    fn a_refused_connection_is_connect_and_redacted() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = client(ANSWER_CAP);
        let e = post(&c, &format!("http://u:pw-net-unit-1@127.0.0.1:{port}/x")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Connect, "{e}");
        assert!(!e.message.contains("pw-net-unit-1"), "{e}");
    }

    #[test]
    fn parses_retry_after_forms() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
