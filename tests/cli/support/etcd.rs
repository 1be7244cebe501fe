//! Real etcd processes for the etcd backend's tests: free loopback ports, a temp data dir per
//! member, readiness waited for with a bound, every process killed by PID when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a member (or a cluster) may take to answer after it starts.
const READY_WITHIN: Duration = Duration::from_secs(30);

pub(crate) struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Member {
    pub(crate) fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    pub(crate) fn running(&self) -> bool {
        self.child.is_some()
    }
}

/// One etcd cluster of one or more members, all on 127.0.0.1.
pub(crate) struct Etcd {
    pub members: Vec<Member>,
    initial_cluster: String,
    token: String,
    _dir: tempfile::TempDir,
}

/// `n` distinct free loopback ports: all bound at once, then released for etcd to take.
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

/// Whether `etcd` runs here. Without it the test says SKIP on the real stderr and returns,
/// unless `DREAMKIT_TEST_ETCD_REQUIRED=1` (CI installs etcd and sets it), which fails it.
fn etcd_available() -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        let why = "etcd is not installed (apt-get install etcd-server; .ci/run does)";
        assert!(
            std::env::var("DREAMKIT_TEST_ETCD_REQUIRED").as_deref() != Ok("1"),
            "{why}"
        );
        // Not `support::skip`: the stress bench includes this file alone. The real stderr,
        // so `make test` shows it.
        let test = std::thread::current()
            .name()
            .unwrap_or("an etcd test")
            .to_string();
        let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {why}");
    }
    found
}

impl Etcd {
    /// A single-node cluster, ready; `None` (after a SKIP line) where etcd is not installed.
    pub(crate) fn single() -> Option<Etcd> {
        Etcd::cluster(1)
    }

    /// An `n`-member cluster with a leader; `None` (after a SKIP line) without etcd.
    pub(crate) fn cluster(n: usize) -> Option<Etcd> {
        if !etcd_available() {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = free_ports(2 * n);
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: ports[2 * i],
                peer_port: ports[2 * i + 1],
                data_dir: dir.path().join(format!("m{i}.etcd")),
                log: dir.path().join(format!("m{i}.log")),
                child: None,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut etcd = Etcd {
            members,
            initial_cluster,
            token: format!("dreamkit-test-{}", uuid::Uuid::new_v4()),
            _dir: dir,
        };
        for i in 0..n {
            etcd.start(i);
        }
        etcd.wait_for_leader();
        Some(etcd)
    }

    /// Starts member `i` (again: its data dir is kept, so it rejoins).
    pub(crate) fn start(&mut self, i: usize) {
        let binary = "etcd";
        let m = &self.members[i];
        assert!(m.child.is_none(), "{} runs already", m.name);
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .expect("etcd log");
        let child = Command::new(binary)
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.members[i].child = Some(child);
    }

    /// SIGKILL member `i` and reap it.
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `etcd://127.0.0.1:p1,127.0.0.1:p2,.../prefix`.
    pub(crate) fn url(&self, prefix: &str) -> String {
        let endpoints: Vec<String> = self.members.iter().map(Member::endpoint).collect();
        format!("etcd://{}{prefix}", endpoints.join(","))
    }

    /// The index of the member that leads, asked of the running members.
    pub(crate) fn leader(&self) -> Option<usize> {
        for m in self.members.iter().filter(|m| m.running()) {
            let Some(status) = post(m.client_port, "/v3/maintenance/status", "{}") else {
                continue;
            };
            let Some(leader) = status["leader"].as_str().filter(|l| *l != "0") else {
                continue;
            };
            for (i, other) in self.members.iter().enumerate() {
                if !other.running() {
                    continue;
                }
                let Some(s) = post(other.client_port, "/v3/maintenance/status", "{}") else {
                    continue;
                };
                if s["header"]["member_id"].as_str() == Some(leader) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Waits (bounded) until every running member answers a linearizable read.
    pub(crate) fn wait_for_leader(&self) {
        let started = Instant::now();
        loop {
            let ready = self.members.iter().filter(|m| m.running()).all(|m| {
                post(m.client_port, "/v3/kv/range", r#"{"key":"cmVhZHk="}"#)
                    .is_some_and(|v| v.get("header").is_some())
            });
            if ready {
                return;
            }
            assert!(
                started.elapsed() < READY_WITHIN,
                "etcd did not become ready within {READY_WITHIN:?}; logs: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                let tail: String = text.lines().rev().take(5).collect::<Vec<_>>().join("\n");
                format!("{}:\n{tail}", m.name)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The value of `key` read straight from etcd (member 0), `None` when absent.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let body = serde_json::json!({"key": b64.encode(key)}).to_string();
        let m = self.members.iter().find(|m| m.running()).expect("a member");
        let reply = post(m.client_port, "/v3/kv/range", &body).expect("etcd answers");
        let value = reply["kvs"].as_array()?.first()?["value"]
            .as_str()
            .unwrap_or("")
            .to_string();
        Some(String::from_utf8(b64.decode(value).expect("base64")).expect("utf-8"))
    }
}

impl Etcd {
    /// Writes `key` straight into etcd (member 0), without a lease: what another machine's
    /// dreamkit (or an operator) left there.
    pub(crate) fn put(&self, key: &str, value: &str) {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let body = serde_json::json!({"key": b64.encode(key), "value": b64.encode(value)});
        let m = self.members.iter().find(|m| m.running()).expect("a member");
        post(m.client_port, "/v3/kv/put", &body.to_string()).expect("etcd answers");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// One POST to the gateway over plain HTTP/1.0 (the connection closes after the reply);
/// `None` when the member does not answer within a few seconds.
pub(crate) fn post(port: u16, path: &str, body: &str) -> Option<Value> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .ok()?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.") || !head.contains(" 200 ") {
        return None;
    }
    serde_json::from_str(body.lines().next()?).ok()
}

/// A gateway in front of one member that forwards every request but drops the reply to the
/// first transaction that writes (`request_put`): the write is applied, and its answer lost,
/// as when a member dies or a network times out just after committing. Returns its port.
pub(crate) fn lossy_proxy(upstream: u16) -> u16 {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dropped = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let dropped = Arc::clone(&dropped);
            std::thread::spawn(move || {
                let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
                let Some((path, body)) = read_request(&mut client) else {
                    return;
                };
                let Some(reply) = forward(upstream, &path, &body) else {
                    return;
                };
                if path == "/v3/kv/txn"
                    && body.contains("request_put")
                    && !dropped.swap(true, Ordering::SeqCst)
                {
                    // Applied upstream; the client never hears of it.
                    return;
                }
                let _ = client.write_all(&reply);
            });
        }
    });
    port
}

/// One HTTP request: its path and body (by Content-Length).
fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..head_end + length]).into_owned();
    Some((path, body))
}

/// The raw HTTP/1.0 reply of the member to one request.
fn forward(port: u16, path: &str, body: &str) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    Some(reply)
}
