//! The etcd backend: the same lock on an etcd v3 cluster, through its JSON gateway, for teams
//! whose machines share one memory.
//!
//! Two keys under a prefix: `<prefix>/holder` (who holds the lock, bound to a lease that
//! expires an hour after it was granted unless kept alive) and `<prefix>/last-consolidated`
//! (epoch ms, decimal). Every change is one transaction that compares what it read, so two
//! acquirers never both win; the holder key's `mod_revision` is the fencing token. Only the
//! binaries given an `etcd://` URL start an async runtime (a current-thread one, in
//! [`net::Blocking`]). Every answer goes through [`net`] (at most 4 MiB read) and is judged
//! before it is believed: one that is not etcd's is `remote` / `foreign_answer`, never "not
//! held" or "due".

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use super::process::{probe, this_node};
use super::{
    Acquired, Backend, Claimant, Claimed, KeepAlive, Lease, Released, RunStatus, Status,
    HOLD_WINDOW, START_SLACK,
};
use crate::cli::time::{epoch_ms, from_epoch_ms};
use crate::cli::Failure;
use crate::net;

/// The prefix when the URL names none: one lock per project, by its slug.
pub const DEFAULT_PREFIX: &str = "/dreamkit";
/// A testing knob: the holder lease's TTL in seconds (default: an hour).
pub const LEASE_TTL_ENV: &str = "DREAMKIT_ETCD_LEASE_TTL";
const HOLDER_KEY: &str = "holder";
/// The runner that claimed the current hold (bound to the holder's lease; never the holder
/// key itself, whose `mod_revision` is the fencing token).
const CLAIM_KEY: &str = "claim";
const CONSOLIDATED_KEY: &str = "last-consolidated";
/// How long one request may take before the next member is tried.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long an operation keeps retrying members that answer with errors (an election).
const RETRY_BUDGET: Duration = Duration::from_secs(15);
/// Passes over the member list in which every member refused the connection: etcd is down.
const UNREACHABLE_PASSES: u32 = 3;
/// Transactions lost to concurrent changes before acquire gives up.
const ACQUIRE_ATTEMPTS: usize = 16;

/// `etcd://host:port[,host:port...][/prefix]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `host:port` of each member, in the order given (the first is tried first).
    pub endpoints: Vec<String>,
    /// `/a/b`, without a trailing slash; `None` when the URL names none.
    pub prefix: Option<String>,
}

impl EtcdUrl {
    pub fn parse(url: &str) -> Result<EtcdUrl, String> {
        let rest = url
            .strip_prefix("etcd://")
            .ok_or_else(|| format!("lock backend {url:?}: expected etcd://host:port[/prefix]"))?;
        if rest.contains(['?', '#', '@'])
            || rest.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "lock backend {url:?}: no user, query, fragment or blanks allowed (etcd://host:port[,host:port...][/prefix])"
            ));
        }
        let (hosts, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let mut endpoints = Vec::new();
        for member in hosts.split(',') {
            endpoints.push(
                parse_member(member)
                    .map_err(|why| format!("lock backend {url:?}: member {member:?}: {why}"))?,
            );
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.iter().any(|s| *s == "." || *s == "..") {
            return Err(format!(
                "lock backend {url:?}: the prefix may not contain . or .. segments"
            ));
        }
        let prefix = (!segments.is_empty()).then(|| format!("/{}", segments.join("/")));
        Ok(EtcdUrl { endpoints, prefix })
    }
}

/// `host:port` or `[v6]:port`, with a port in 1..=65535.
fn parse_member(member: &str) -> Result<String, &'static str> {
    let (host, port) = member
        .rsplit_once(':')
        .ok_or("expected host:port (etcd's client port, e.g. 2379)")?;
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty() && !host.contains([':', '[', ']'])
    };
    if !host_ok {
        return Err("expected host:port (an IPv6 address in brackets)");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(member.to_string()),
        _ => Err("the port must be a number from 1 to 65535"),
    }
}

/// The lease TTL: [`LEASE_TTL_ENV`] when set (a test's few seconds), else the hold window.
fn lease_ttl() -> Result<i64, Failure> {
    match std::env::var(LEASE_TTL_ENV) {
        Err(_) => Ok(HOLD_WINDOW.as_secs() as i64),
        Ok(text) => match text.trim().parse::<i64>() {
            Ok(ttl) if (1..=HOLD_WINDOW.as_secs() as i64).contains(&ttl) => Ok(ttl),
            _ => Err(Failure::Usage(format!(
                "{LEASE_TTL_ENV}={text:?}: expected seconds from 1 to 3600"
            ))),
        },
    }
}

/// One key as read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kv {
    value: Vec<u8>,
    mod_revision: i64,
    lease: i64,
}

/// What the holder key says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct HolderRecord {
    pid: Option<u32>,
    host: Option<String>,
    /// Which PID namespace on which boot the PID belongs to; only there can it be probed.
    node: Option<String>,
    since_ms: Option<i64>,
    /// Which acquire attempt wrote it, so an attempt whose answer was lost knows it won.
    nonce: Option<String>,
}

impl HolderRecord {
    fn parse(bytes: &[u8]) -> HolderRecord {
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            return HolderRecord::default();
        };
        HolderRecord {
            pid: v["pid"]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| *p > 0),
            host: v["host"].as_str().map(str::to_string),
            node: v["node"].as_str().map(str::to_string),
            since_ms: v["since_ms"].as_i64(),
            nonce: v["nonce"].as_str().map(str::to_string),
        }
    }
}

/// This machine's PID namespace: the boot ID and the namespace's inode. Two processes with
/// the same value see the same PIDs, so one may probe the other's holder.
fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// What a failed request means for what to do next.
#[derive(Debug)]
enum CallError {
    /// etcd answered with an error that retrying will not change (gRPC code and message).
    Refused { message: String },
    /// No member answered within the retry budget.
    Unreachable(String),
    /// A member answered with something that is not etcd's (a redirect, another server's
    /// JSON, a page): the URL names something else, and its answer means nothing.
    Foreign(String),
    /// A member's answer was larger than [`net::ANSWER_CAP`]: reading stopped there.
    TooLarge(String),
}

impl CallError {
    fn into_failure(self, what: &str) -> Failure {
        match self {
            CallError::Refused { message, .. } => {
                Failure::remote(format!("etcd refused to {what}: {message}"))
            }
            CallError::Unreachable(why) => Failure::remote(format!(
                "etcd is unreachable, cannot {what} ({why}); nothing was changed"
            )),
            CallError::Foreign(why) => Failure::remote(format!(
                "not an answer from etcd, cannot {what}: {why} (is each member of the URL an \
etcd client address, host:2379?)"
            ))
            .with_reason("foreign_answer"),
            CallError::TooLarge(why) => Failure::remote(format!(
                "cannot {what}: {why} (no answer of etcd to dreamkit is that large)"
            ))
            .with_reason("too_large"),
        }
    }
}

/// A JSON-gateway client over a member list, failing over to the next member.
struct Client {
    endpoints: Vec<String>,
    http: net::Blocking,
    /// The member that answered last, tried first.
    preferred: Cell<usize>,
}

impl Client {
    fn new(endpoints: Vec<String>) -> Result<Client, Failure> {
        // etcd members are named directly; a proxy from the environment has no say.
        let http = net::Blocking::new(net::Options::new(CONNECT_TIMEOUT).direct())?;
        Ok(Client {
            endpoints,
            http,
            preferred: Cell::new(0),
        })
    }

    /// POSTs `body` to `path` on the preferred member, then the others in turn. A member
    /// that refuses the connection never got the request, so trying the next is safe; one
    /// that timed out or is electing a leader may have applied it, so callers of a write
    /// must recognise their own write when they retry (see `acquire`'s nonce). An answer
    /// that is not etcd's, or one over the cap, ends the call at once.
    fn call(&self, path: &str, body: &Value) -> Result<Value, CallError> {
        let started = Instant::now();
        let n = self.endpoints.len().max(1);
        let body = body.to_string();
        let headers = [("content-type", "application/json".to_string())];
        let mut refused_passes = 0;
        let mut pass = 0u32;
        let mut last = String::from("no member");
        loop {
            let mut all_refused = true;
            for i in 0..n {
                let index = (self.preferred.get() + i) % n;
                let Some(member) = self.endpoints.get(index) else {
                    continue;
                };
                let url = format!("http://{member}{path}");
                match self
                    .http
                    .post(&url, &headers, body.as_bytes(), REQUEST_TIMEOUT)
                {
                    Ok(answer) => match verdict(member, &answer) {
                        Verdict::Reply(reply) => {
                            self.preferred.set(index);
                            return Ok(reply);
                        }
                        // Unavailable / deadline exceeded (no leader, leader changed, timed
                        // out) and 5xx: another member, or the same after an election, may
                        // answer.
                        Verdict::Retry(why) => {
                            all_refused = false;
                            last = why;
                        }
                        Verdict::Refused(message) => return Err(CallError::Refused { message }),
                        Verdict::Foreign(why) => return Err(CallError::Foreign(why)),
                    },
                    Err(e) => match e.kind {
                        net::ErrorKind::Connect => last = e.message,
                        net::ErrorKind::Timeout | net::ErrorKind::Transport => {
                            all_refused = false;
                            last = e.message;
                        }
                        net::ErrorKind::Redirect => return Err(CallError::Foreign(e.message)),
                        net::ErrorKind::TooLarge => {
                            return Err(CallError::TooLarge(format!("{member}: {}", e.message)))
                        }
                    },
                }
            }
            if all_refused {
                refused_passes += 1;
                if refused_passes >= UNREACHABLE_PASSES {
                    return Err(CallError::Unreachable(last));
                }
            }
            if started.elapsed() >= RETRY_BUDGET {
                return Err(CallError::Unreachable(last));
            }
            pass += 1;
            std::thread::sleep(Duration::from_millis(100 * u64::from(pass.min(5))));
        }
    }

    /// A linearizable read of one key (`serializable: false`: through the leader).
    fn range(&self, key: &str) -> Result<Option<Kv>, CallError> {
        let reply = self.call(
            "/v3/kv/range",
            &json!({"key": b64(key), "serializable": false}),
        )?;
        Ok(first_kv(&reply))
    }

    fn grant(&self, ttl: i64) -> Result<i64, CallError> {
        let reply = self.call("/v3/lease/grant", &json!({"TTL": ttl.to_string()}))?;
        int(&reply["ID"]).ok_or_else(|| CallError::Refused {
            message: "lease grant answered without an ID".into(),
        })
    }

    /// Best effort: a lease nobody revokes expires on its own.
    fn revoke(&self, id: i64) {
        let _ = self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}));
    }

    /// Renews a lease; `Ok(false)` when it is gone (expired or revoked).
    fn keep_alive(&self, id: i64) -> Result<bool, CallError> {
        let reply = self.call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))?;
        // A stream on the gateway: each reply is wrapped in `result`; a lost lease has no TTL.
        let ttl = int(&reply["result"]["TTL"]).unwrap_or(0);
        Ok(ttl > 0)
    }

    /// `(succeeded, revision, responses)`; a failed txn has no `succeeded` on the gateway.
    fn txn(&self, body: &Value) -> Result<(bool, i64, Vec<Value>), CallError> {
        let reply = self.call("/v3/kv/txn", body)?;
        let succeeded = reply["succeeded"].as_bool().unwrap_or(false);
        let revision = int(&reply["header"]["revision"]).unwrap_or(0);
        let responses = reply["responses"].as_array().cloned().unwrap_or_default();
        Ok((succeeded, revision, responses))
    }
}

/// What one member's answer means.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// etcd's reply (its `header` names the cluster and member).
    Reply(Value),
    /// etcd (or a proxy before it) is unavailable for now: try another member, or later.
    Retry(String),
    /// etcd's own error, which retrying will not change.
    Refused(String),
    /// Not etcd's answer at all.
    Foreign(String),
}

/// One answer judged: a 200 must be etcd's reply (a JSON object whose `header`, or the
/// keep-alive stream's `result.header`, names the cluster or member; the stream's first line
/// counts); an error status must carry etcd's error (`code` and `message`), except a 5xx,
/// which a proxy may send while a member restarts. Anything else is foreign: never read as
/// "no key", "not held" or "due".
fn verdict(member: &str, answer: &net::Answer) -> Verdict {
    let first = answer
        .body
        .split(|b| *b == b'\n')
        .next()
        .unwrap_or_default();
    let value = serde_json::from_slice::<Value>(first).ok();
    let status = answer.status;
    let error = value.as_ref().and_then(etcd_error);
    if status == 200 {
        if let Some(reply) = value.as_ref().filter(|v| is_etcd_reply(v)) {
            return Verdict::Reply(reply.clone());
        }
        // The keep-alive stream reports its errors inside a 200.
        if error.is_none() {
            return Verdict::Foreign(format!(
                "{member} answered HTTP 200 with {}",
                describe(first)
            ));
        }
    }
    match error {
        Some((code, message)) if status >= 500 || code == 14 || code == 4 => {
            Verdict::Retry(format!("{member}: {message}"))
        }
        Some((_, message)) => Verdict::Refused(message),
        None if status >= 500 => Verdict::Retry(format!("{member}: HTTP {status}")),
        None => Verdict::Foreign(format!(
            "{member} answered HTTP {status} with {}",
            describe(first)
        )),
    }
}

/// A reply of etcd's gateway: its response header names the cluster or the member.
fn is_etcd_reply(reply: &Value) -> bool {
    let header = reply.get("result").unwrap_or(reply).get("header");
    // uint64 ids: decimal strings on the gateway (often above i64::MAX).
    let id = |v: &Value| match v {
        Value::String(s) => s.parse::<u64>().is_ok_and(|id| id > 0),
        Value::Number(n) => n.as_u64().is_some_and(|id| id > 0),
        _ => false,
    };
    header.is_some_and(|h| id(&h["cluster_id"]) || id(&h["member_id"]))
}

/// etcd's error, `(gRPC code, message)`: `{"error", "code", "message"}`, or the keep-alive
/// stream's `{"error": {"grpc_code", "message"}}`.
fn etcd_error(value: &Value) -> Option<(i64, String)> {
    let (code, message) = match value.get("error") {
        Some(Value::Object(inner)) => (inner.get("grpc_code")?, inner.get("message")?),
        _ => (
            value.get("code")?,
            value.get("message").or_else(|| value.get("error"))?,
        ),
    };
    Some((code.as_i64()?, message.as_str()?.to_string()))
}

/// What a foreign body held, briefly.
fn describe(body: &[u8]) -> String {
    if body.is_empty() {
        return "an empty body".into();
    }
    let text = String::from_utf8_lossy(body);
    let start: String = text.chars().take(60).collect();
    let more = if start.len() < text.len() { "..." } else { "" };
    format!(
        "{} bytes that are not etcd's reply: {start:?}{more}",
        body.len()
    )
}

fn b64(text: &str) -> String {
    B64.encode(text.as_bytes())
}

/// int64 fields arrive as strings on the gateway; numbers are accepted too.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn kv_of(v: &Value) -> Option<Kv> {
    Some(Kv {
        value: v["value"]
            .as_str()
            .map_or(Some(Vec::new()), |s| B64.decode(s).ok())?,
        mod_revision: int(&v["mod_revision"])?,
        lease: int(&v["lease"]).unwrap_or(0),
    })
}

/// The first key of a range reply (`kvs` is omitted when there is none).
fn first_kv(range: &Value) -> Option<Kv> {
    range["kvs"].as_array()?.first().and_then(kv_of)
}

/// The range reply at `index` of a txn's responses.
fn txn_range(responses: &[Value], index: usize) -> Option<Kv> {
    responses
        .get(index)
        .and_then(|r| first_kv(&r["response_range"]))
}

fn range_op(key: &str) -> Value {
    json!({"request_range": {"key": b64(key)}})
}

fn put_op(key: &str, value: &str, lease: i64) -> Value {
    let mut put = json!({"key": b64(key), "value": B64.encode(value.as_bytes())});
    if lease != 0 {
        put["lease"] = json!(lease.to_string());
    }
    json!({ "request_put": put })
}

fn delete_op(key: &str) -> Value {
    json!({"request_delete_range": {"key": b64(key), "prev_kv": true}})
}

/// `mod_revision == rev`; 0 for a key that does not exist.
fn mod_is(key: &str, rev: i64) -> Value {
    json!({"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": rev.to_string()})
}

fn absent(key: &str) -> Value {
    json!({"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"})
}

/// The lock on etcd.
pub struct EtcdBackend {
    client: Client,
    holder_key: String,
    claim_key: String,
    consolidated_key: String,
    node: String,
    ttl: i64,
}

impl EtcdBackend {
    /// The backend for a project whose slug names the keys when the URL has no prefix.
    pub fn open(url: &EtcdUrl, slug: &str) -> Result<EtcdBackend, Failure> {
        let prefix = url
            .prefix
            .clone()
            .unwrap_or_else(|| format!("{DEFAULT_PREFIX}/{slug}"));
        Ok(EtcdBackend {
            client: Client::new(url.endpoints.clone())?,
            holder_key: format!("{prefix}/{HOLDER_KEY}"),
            claim_key: format!("{prefix}/{CLAIM_KEY}"),
            consolidated_key: format!("{prefix}/{CONSOLIDATED_KEY}"),
            node: this_node(),
            ttl: lease_ttl()?,
        })
    }

    /// The holder lease's TTL in seconds (what [`LEASE_TTL_ENV`] sets for the binaries).
    pub fn with_lease_ttl(mut self, seconds: i64) -> Self {
        self.ttl = seconds.clamp(1, HOLD_WINDOW.as_secs() as i64);
        self
    }

    /// Holder and last-consolidated time in one linearizable read.
    fn snapshot(&self) -> Result<(Option<Kv>, Option<Kv>), Failure> {
        let body =
            json!({"success": [range_op(&self.holder_key), range_op(&self.consolidated_key)]});
        let (_, _, responses) = self
            .client
            .txn(&body)
            .map_err(|e| e.into_failure("read the lock"))?;
        Ok((txn_range(&responses, 0), txn_range(&responses, 1)))
    }

    fn consolidated_ms(&self, kv: Option<&Kv>) -> Result<Option<i64>, Failure> {
        let Some(kv) = kv else { return Ok(None) };
        std::str::from_utf8(&kv.value)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|ms| *ms > 0)
            .map(Some)
            .ok_or_else(|| {
                Failure::remote(format!(
                    "etcd key {} does not hold a time in epoch ms: {:?}",
                    self.consolidated_key,
                    String::from_utf8_lossy(&kv.value)
                ))
            })
    }

    /// Held = a record within the hour whose process is alive (probed when it runs in our
    /// PID namespace, taken at its word elsewhere; its lease bounds a crashed machine's
    /// hold). A record nobody can read names no holder.
    fn judge(&self, record: &HolderRecord, now: SystemTime) -> Judged {
        let (Some(pid), Some(since_ms)) = (record.pid, record.since_ms) else {
            return Judged::default();
        };
        let since = from_epoch_ms(since_ms);
        let fresh = now
            .duration_since(since)
            .map_or(true, |age| age < HOLD_WINDOW);
        if record.node.as_deref() != Some(self.node.as_str()) {
            return Judged {
                held: fresh,
                alive: None,
            };
        }
        let info = probe(pid);
        // A PID recycled by a later process holds nothing.
        let same_process = info
            .started
            .is_none_or(|started| started <= since + START_SLACK);
        Judged {
            held: fresh && info.alive && same_process,
            alive: Some(info.alive),
        }
    }

    fn holder_pid(kv: Option<&Kv>) -> Option<u32> {
        kv.and_then(|kv| HolderRecord::parse(&kv.value).pid)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Judged {
    held: bool,
    /// Whether the PID is alive; `None` when it runs elsewhere (or none is recorded).
    alive: Option<bool>,
}

impl Backend for EtcdBackend {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn location(&self) -> (&'static str, String) {
        ("key", self.holder_key.clone())
    }

    fn last_consolidated(&self) -> Result<Option<SystemTime>, Failure> {
        let kv = self
            .client
            .range(&self.consolidated_key)
            .map_err(|e| e.into_failure("read the last-consolidated time"))?;
        let now = SystemTime::now();
        Ok(self
            .consolidated_ms(kv.as_ref())?
            .map(|ms| from_epoch_ms(ms).min(now)))
    }

    fn status(&self, now: SystemTime) -> Result<Status, Failure> {
        let (holder, consolidated) = self.snapshot()?;
        let last = self
            .consolidated_ms(consolidated.as_ref())?
            .map(|ms| from_epoch_ms(ms).min(now));
        let Some(kv) = holder else {
            return Ok(Status {
                held: false,
                holder_pid: None,
                holder_alive: None,
                command_running: false,
                since: None,
                stale: false,
                last_consolidated: last,
                token: None,
            });
        };
        let record = HolderRecord::parse(&kv.value);
        let judged = self.judge(&record, now);
        Ok(Status {
            held: judged.held,
            holder_pid: record.pid,
            holder_alive: judged.alive,
            command_running: false,
            since: record.since_ms.map(|ms| from_epoch_ms(ms).min(now)),
            stale: !judged.held,
            last_consolidated: last,
            token: judged.held.then(|| kv.mod_revision.to_string()),
        })
    }

    fn acquire(&self, pid: u32, now: SystemTime) -> Result<Acquired, Failure> {
        let base = uuid::Uuid::new_v4().to_string();
        let now_ms = epoch_ms(now);
        let mut lease = None;
        // The prior time each attempt saw, by nonce: an attempt whose answer was lost may
        // have won, and the next read then shows our own nonce.
        let mut priors: Vec<(String, i64)> = Vec::new();
        let mut result = Err(Failure::remote(
            "the lock kept changing under concurrent acquirers; try again",
        ));
        for attempt in 0..ACQUIRE_ATTEMPTS {
            let (holder, consolidated) = match self.snapshot() {
                Ok(read) => read,
                Err(failure) => {
                    result = Err(failure);
                    break;
                }
            };
            if let Some(kv) = &holder {
                let record = HolderRecord::parse(&kv.value);
                if let Some((_, prior)) = priors
                    .iter()
                    .find(|(nonce, _)| record.nonce.as_deref() == Some(nonce))
                {
                    return Ok(Acquired::Yes(Lease {
                        pid,
                        prior_mtime_ms: *prior,
                        token: kv.mod_revision.to_string(),
                    }));
                }
                if self.judge(&record, now).held {
                    result = Ok(Acquired::Held {
                        holder_pid: record.pid,
                        since: record.since_ms.map(from_epoch_ms),
                    });
                    break;
                }
            }
            // A future time is taken as now, so a roll-back cannot restore it.
            let prior = match self.consolidated_ms(consolidated.as_ref()) {
                Ok(ms) => ms.map_or(0, |ms| ms.min(now_ms)),
                Err(failure) => {
                    result = Err(failure);
                    break;
                }
            };
            let lease_id = match lease {
                Some(id) => id,
                None => match self.client.grant(self.ttl) {
                    Ok(id) => *lease.insert(id),
                    Err(e) => {
                        result = Err(e.into_failure("grant the holder's lease"));
                        break;
                    }
                },
            };
            let nonce = format!("{base}-{attempt}");
            priors.push((nonce.clone(), prior));
            let record = json!({
                "pid": pid,
                "host": hostname(),
                "node": self.node,
                "since_ms": now_ms,
                "nonce": nonce,
            });
            let holder_compare = match &holder {
                None => absent(&self.holder_key),
                Some(kv) => mod_is(&self.holder_key, kv.mod_revision),
            };
            let consolidated_rev = consolidated.as_ref().map_or(0, |kv| kv.mod_revision);
            let body = json!({
                "compare": [holder_compare, mod_is(&self.consolidated_key, consolidated_rev)],
                "success": [
                    put_op(&self.holder_key, &record.to_string(), lease_id),
                    put_op(&self.consolidated_key, &now_ms.to_string(), 0),
                    delete_op(&self.claim_key),
                ],
            });
            match self.client.txn(&body) {
                // Both puts carry the txn's revision: the holder's mod_revision.
                Ok((true, revision, _)) if revision > 0 => {
                    return Ok(Acquired::Yes(Lease {
                        pid,
                        prior_mtime_ms: prior,
                        token: revision.to_string(),
                    }))
                }
                // Somebody changed a key between our read and our txn: read again.
                Ok(_) => {}
                Err(e) => {
                    result = Err(e.into_failure("take the lock"));
                    break;
                }
            }
        }
        // Not ours: the lease we were granted binds nothing.
        if let Some(id) = lease {
            self.client.revoke(id);
        }
        result
    }

    fn release(
        &self,
        token: &str,
        prior_mtime_ms: i64,
        outcome: RunStatus,
    ) -> Result<Released, Failure> {
        let Ok(revision) = token.trim().parse::<i64>() else {
            // Not a revision (a file backend's token): it cannot be the holder's.
            let holder = self
                .client
                .range(&self.holder_key)
                .map_err(|e| e.into_failure("read the lock"))?;
            return Ok(Released::NotHolder {
                holder_pid: Self::holder_pid(holder.as_ref()),
            });
        };
        let now = SystemTime::now();
        let (consolidated_op, last) = match outcome {
            RunStatus::Completed => (
                put_op(&self.consolidated_key, &epoch_ms(now).to_string(), 0),
                Some(from_epoch_ms(epoch_ms(now))),
            ),
            _ if prior_mtime_ms <= 0 => (delete_op(&self.consolidated_key), None),
            _ => (
                put_op(&self.consolidated_key, &prior_mtime_ms.to_string(), 0),
                Some(from_epoch_ms(prior_mtime_ms)),
            ),
        };
        let body = json!({
            "compare": [mod_is(&self.holder_key, revision)],
            "success": [delete_op(&self.holder_key), consolidated_op, delete_op(&self.claim_key)],
            "failure": [range_op(&self.holder_key)],
        });
        let (succeeded, _, responses) = self
            .client
            .txn(&body)
            .map_err(|e| e.into_failure("release the lock"))?;
        if !succeeded {
            return Ok(Released::NotHolder {
                holder_pid: Self::holder_pid(txn_range(&responses, 0).as_ref()),
            });
        }
        // The holder's lease binds nothing any more.
        let lease = responses
            .first()
            .and_then(|r| r["response_delete_range"]["prev_kvs"].as_array())
            .and_then(|kvs| kvs.first())
            .and_then(kv_of)
            .map_or(0, |kv| kv.lease);
        if lease != 0 {
            self.client.revoke(lease);
        }
        Ok(Released::Yes {
            last_consolidated: last,
        })
    }

    fn holds(&self, token: &str) -> Result<bool, Failure> {
        let kv = self
            .client
            .range(&self.holder_key)
            .map_err(|e| e.into_failure("check the lock's token"))?;
        Ok(kv.is_some_and(|kv| kv.mod_revision.to_string() == token.trim()))
    }

    fn claim(&self, token: &str, task_id: &str, replace: Option<&str>) -> Result<Claimed, Failure> {
        let Ok(revision) = token.trim().parse::<i64>() else {
            return Ok(Claimed::NotHeld);
        };
        for _ in 0..ACQUIRE_ATTEMPTS {
            let body = json!({"success": [range_op(&self.holder_key), range_op(&self.claim_key)]});
            let (_, _, responses) = self
                .client
                .txn(&body)
                .map_err(|e| e.into_failure("read the lock's claim"))?;
            let Some(holder) = txn_range(&responses, 0).filter(|kv| kv.mod_revision == revision)
            else {
                return Ok(Claimed::NotHeld);
            };
            let claim = txn_range(&responses, 1);
            if let Some(other) = claim
                .as_ref()
                .and_then(|kv| serde_json::from_slice::<Claimant>(&kv.value).ok())
            {
                let theirs = other.task_id != task_id && Some(other.task_id.as_str()) != replace;
                if other.token == token.trim() && theirs {
                    return Ok(Claimed::ByOther(other));
                }
            }
            let mine = serde_json::to_string(&Claimant::new(token, task_id))
                .map_err(|e| Failure::remote(format!("cannot write the claim: {e}")))?;
            let claim_compare = match &claim {
                None => absent(&self.claim_key),
                Some(kv) => mod_is(&self.claim_key, kv.mod_revision),
            };
            let body = json!({
                "compare": [mod_is(&self.holder_key, revision), claim_compare],
                "success": [put_op(&self.claim_key, &mine, holder.lease)],
            });
            match self.client.txn(&body) {
                Ok((true, _, _)) => return Ok(Claimed::Ours),
                Ok(_) => {}
                Err(e) => return Err(e.into_failure("claim the lock")),
            }
        }
        Err(Failure::remote(
            "the lock's claim kept changing under concurrent runners; try again",
        ))
    }

    fn claimant(&self, token: &str) -> Result<Option<Claimant>, Failure> {
        let kv = self
            .client
            .range(&self.claim_key)
            .map_err(|e| e.into_failure("read the lock's claim"))?;
        Ok(kv
            .and_then(|kv| serde_json::from_slice::<Claimant>(&kv.value).ok())
            .filter(|c| c.token == token.trim()))
    }

    fn keep_alive(&self, token: &str) -> Result<Option<KeepAlive>, Failure> {
        let kv = self
            .client
            .range(&self.holder_key)
            .map_err(|e| e.into_failure("read the lock"))?;
        let lease = match kv {
            Some(kv) if kv.mod_revision.to_string() == token.trim() && kv.lease != 0 => kv.lease,
            _ => {
                return Err(Failure::remote(
                    "the lock is no longer ours: its lease cannot be kept alive",
                ))
            }
        };
        let endpoints = self.client.endpoints.clone();
        // Renew three times per TTL; after a failed renewal, retry within a second.
        let every = Duration::from_millis((self.ttl as u64 * 1000 / 3).max(500));
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("etcd-keep-alive".into())
            .spawn(move || {
                let Ok(client) = Client::new(endpoints) else {
                    flag.store(true, Ordering::SeqCst);
                    return;
                };
                let mut wait = every;
                loop {
                    match stopped.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    match client.keep_alive(lease) {
                        Ok(true) => wait = every,
                        Err(CallError::Unreachable(_)) => wait = every.min(Duration::from_secs(1)),
                        Ok(false) | Err(_) => {
                            flag.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            })
            .map_err(|e| Failure::environment(format!("cannot start the keep-alive: {e}")))?;
        Ok(Some(KeepAlive::new(stop, thread, lost)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let url = EtcdUrl::parse("etcd://127.0.0.1:2379").unwrap();
        assert_eq!(url.endpoints, vec!["127.0.0.1:2379"]);
        assert_eq!(url.prefix, None);
        let url = EtcdUrl::parse("etcd://a:1,b:2,[::1]:3/team/repo/").unwrap();
        assert_eq!(url.endpoints, vec!["a:1", "b:2", "[::1]:3"]);
        assert_eq!(url.prefix.as_deref(), Some("/team/repo"));
        assert_eq!(EtcdUrl::parse("etcd://a:1/").unwrap().prefix, None);
        for bad in [
            "etcd://",
            "etcd:///x",
            "etcd://host",
            "etcd://host:0",
            "etcd://host:65536",
            "etcd://host:port",
            "etcd://a:1,,b:2",
            "etcd://user@a:1",
            "etcd://a:1/x?y",
            "etcd://a:1/../x",
            "etcd://::1:2379",
            "etcd://a b:1",
        ] {
            assert!(EtcdUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gateway_values() {
        assert_eq!(int(&json!("42")), Some(42));
        assert_eq!(int(&json!(42)), Some(42));
        assert_eq!(int(&json!(null)), None);
        let reply =
            json!({"kvs": [{"key": "YQ==", "mod_revision": "7", "value": "eA==", "lease": "9"}]});
        assert_eq!(
            first_kv(&reply),
            Some(Kv {
                value: b"x".to_vec(),
                mod_revision: 7,
                lease: 9
            })
        );
        // An empty value and no lease are omitted by the gateway.
        let reply = json!({"kvs": [{"key": "YQ==", "mod_revision": "8"}]});
        assert_eq!(
            first_kv(&reply).map(|kv| (kv.value, kv.lease)),
            Some((vec![], 0))
        );
        assert_eq!(first_kv(&json!({"count": "0"})), None);
    }

    #[test]
    fn only_etcds_answers_are_believed() {
        let answer = |status: u16, body: &str| net::Answer {
            status,
            retry_after: None,
            body: body.as_bytes().to_vec(),
            truncated: false,
        };
        let header = r#"{"cluster_id":"13466267132964393475","member_id":"2","revision":"3"}"#;
        let range = format!(r#"{{"header":{header},"count":"0"}}"#);
        assert!(matches!(
            verdict("m", &answer(200, &range)),
            Verdict::Reply(_)
        ));
        let keepalive = format!("{{\"result\":{{\"header\":{header},\"ID\":\"1\"}}}}\n");
        assert!(matches!(
            verdict("m", &answer(200, &keepalive)),
            Verdict::Reply(_)
        ));
        for foreign in [
            "",
            "{}",
            r#"{"ok":true}"#,
            r#"{"header":{}}"#,
            r#"{"kvs":[],"count":"0"}"#,
            "<html>hello</html>",
            "[1,2]",
        ] {
            let v = verdict("m", &answer(200, foreign));
            assert!(matches!(v, Verdict::Foreign(_)), "{foreign:?}: {v:?}");
        }
        assert!(matches!(
            verdict("m", &answer(404, "Not Found\n")),
            Verdict::Foreign(_)
        ));
        assert!(matches!(
            verdict("m", &answer(307, "")),
            Verdict::Foreign(_)
        ));
        let refused = r#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        assert_eq!(
            verdict("m", &answer(404, refused)),
            Verdict::Refused("etcdserver: requested lease not found".into())
        );
        let stream = r#"{"error":{"grpc_code":5,"http_code":404,"message":"gone"}}"#;
        assert_eq!(
            verdict("m", &answer(200, stream)),
            Verdict::Refused("gone".into())
        );
        let no_leader =
            r#"{"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14}"#;
        assert!(matches!(
            verdict("m", &answer(503, no_leader)),
            Verdict::Retry(_)
        ));
        assert!(matches!(
            verdict("m", &answer(502, "<html>bad gateway</html>")),
            Verdict::Retry(_)
        ));
    }

    #[test]
    fn holder_records() {
        let r =
            HolderRecord::parse(br#"{"pid":42,"host":"h","node":"n","since_ms":5,"nonce":"x"}"#);
        assert_eq!(r.pid, Some(42));
        assert_eq!(r.since_ms, Some(5));
        for none in [
            &b""[..],
            b"42",
            b"{\"pid\":0}",
            b"{\"pid\":-1}",
            b"not json",
        ] {
            assert_eq!(HolderRecord::parse(none).pid, None);
        }
    }
}
