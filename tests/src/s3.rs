//! A real S3-compatible server for tests: moto's server (`python3 -m moto.server`) on a free
//! port of 127.0.0.1, objects put and fetched with boto3 (`s3/s3tool.py`), and [`Proxy`], an HTTP
//! proxy in front of it that adds latency, answers with throttling errors or stops answering, and
//! (for benchmarks) can answer ranged GETs itself from whole objects it fetched once.
//!
//! A missing moto is a loud failure saying how to install it (`scripts/test.sh` and CI install
//! it), never a skipped test.

use std::{
    collections::BTreeMap,
    io::{self, BufRead, BufReader, Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

const S3TOOL: &str = include_str!("s3/s3tool.py");

/// The Python interpreter that runs moto (`ENERGON_TEST_PYTHON`, default `python3`).
fn python() -> String {
    std::env::var("ENERGON_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// A running moto S3 server; killed when dropped.
#[derive(Debug)]
pub struct S3Server {
    child: Option<Child>,
    port: u16,
}

/// A free TCP port of 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

impl S3Server {
    /// Starts a server on a free port and waits until it answers.
    ///
    /// Panics, saying how to install moto, when the interpreter lacks it.
    pub fn start() -> S3Server {
        let probe = Command::new(python()).args(["-c", "import moto.server, boto3"]).output();
        match probe {
            Ok(out) if out.status.success() => {}
            _ => panic!(
                "the S3 tests need moto's server: install it with `{} -m pip install \
                 'moto[server]'` (scripts/test.sh does this), or set ENERGON_TEST_PYTHON to an \
                 interpreter that has it",
                python()
            ),
        }
        let mut server = S3Server { child: None, port: free_port() };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let child = Command::new(python())
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting moto's server");
        self.child = Some(child);
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(30), "moto's server did not start");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the server (every object is lost with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Runs a command of `s3/s3tool.py` against this server.
    pub fn tool(&self, args: &[&str]) {
        let out = Command::new(python())
            .arg("-c")
            .arg(S3TOOL)
            .arg(self.endpoint())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running s3tool");
        assert!(
            out.status.success(),
            "s3tool {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        self.tool(&["mb", bucket]);
    }

    /// Uploads every file under `local` to `s3://bucket/prefix/...`.
    pub fn upload_dir(&self, local: &Path, bucket: &str, prefix: &str) {
        self.tool(&["put-dir", &local.to_string_lossy(), bucket, prefix]);
    }

    /// Downloads every object under `s3://bucket/prefix/` into `local`.
    pub fn download_dir(&self, bucket: &str, prefix: &str, local: &Path) {
        self.tool(&["get-dir", bucket, prefix, &local.to_string_lossy()]);
    }

    /// Uploads one file to `s3://bucket/key`.
    pub fn put_file(&self, local: &Path, bucket: &str, key: &str) {
        self.tool(&["put", &local.to_string_lossy(), bucket, key]);
    }

    /// The environment a client needs to reach this server (endpoint, test credentials, region)
    /// through `endpoint` (this server's, or a [`Proxy`]'s).
    pub fn client_env(endpoint: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", endpoint.to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the proxy does to requests.
#[derive(Debug, Default)]
pub struct ProxyControl {
    /// Added before each request is forwarded, in microseconds.
    pub latency_us: AtomicU64,
    /// Answer every Nth request with `503 SlowDown` instead of forwarding it (0: never).
    pub throttle_every: AtomicU64,
    /// Stop answering: requests are read and never answered (until cleared).
    pub stall: AtomicBool,
    /// Requests seen.
    pub requests: AtomicU64,
    /// Requests answered with `503 SlowDown`.
    pub throttled: AtomicU64,
    /// Answer a ranged GET from a copy of the whole object, fetched from the upstream once (for
    /// benchmarks, where moto's own speed would hide the client's): the answer has the upstream's
    /// headers with the range's `Content-Range` and `Content-Length`. Objects must not change
    /// while this is set.
    pub serve_ranges: AtomicBool,
    /// Ranged GETs answered from such copies.
    pub served: AtomicU64,
}

/// An HTTP/1.1 proxy on a free port of 127.0.0.1 in front of an upstream server, for latency and
/// fault tests. Each request goes to the upstream on a connection of its own; the client's
/// connection is kept alive. Its threads live as long as the process (tests are short).
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    /// What it does to requests (change it at any time).
    pub control: Arc<ProxyControl>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let control = Arc::new(ProxyControl::default());
        let ctl = control.clone();
        thread::spawn(move || {
            let copies = Arc::new(Copies::default());
            for conn in listener.incoming().flatten() {
                let (ctl, copies) = (ctl.clone(), copies.clone());
                thread::spawn(move || {
                    let _ = serve(conn, upstream_port, &ctl, &copies);
                });
            }
        });
        Proxy { port, control }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Reads one request (head and body) from `reader`; `None` at the end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> io::Result<Option<(Vec<String>, Vec<u8>)>> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            if lines.is_empty() {
                continue;
            }
            break;
        }
        lines.push(line);
    }
    let len = header(&lines, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0usize);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    Ok(Some((lines, body)))
}

fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Whole objects fetched for [`ProxyControl::serve_ranges`]: request target → (response head
/// lines without framing headers, body).
type Copies = Mutex<BTreeMap<String, Arc<(Vec<String>, Vec<u8>)>>>;

/// Sends `lines` (a request head without `Connection`) and `body` upstream on a new connection
/// and returns the whole response.
fn forward(upstream_port: u16, lines: &[String], body: &[u8]) -> io::Result<Vec<u8>> {
    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port))?;
    let mut request = Vec::new();
    for line in lines {
        if line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        request.extend_from_slice(line.as_bytes());
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"Connection: close\r\n\r\n");
    request.extend_from_slice(body);
    upstream.write_all(&request)?;
    let mut response = Vec::new();
    upstream.read_to_end(&mut response)?;
    let _ = upstream.shutdown(Shutdown::Both);
    Ok(response)
}

/// The answer to the ranged GET `lines` from a copy of the whole object (fetched on first use),
/// or `None` when it is not a plain `bytes=A-B` GET of an object the upstream returns whole.
fn ranged_answer(
    lines: &[String],
    upstream_port: u16,
    copies: &Copies,
) -> io::Result<Option<Vec<u8>>> {
    let Some(target) = lines[0].strip_prefix("GET ").and_then(|r| r.split(' ').next()) else {
        return Ok(None);
    };
    let Some((a, b)) = header(lines, "range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
    else {
        return Ok(None);
    };
    let cached = copies.lock().unwrap_or_else(PoisonError::into_inner).get(target).cloned();
    let copy = match cached {
        Some(copy) => copy,
        None => {
            let whole: Vec<String> = lines
                .iter()
                .filter(|l| !l.to_ascii_lowercase().starts_with("range:"))
                .cloned()
                .collect();
            let response = forward(upstream_port, &whole, &[])?;
            let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(None);
            };
            let head = String::from_utf8_lossy(&response[..split]).into_owned();
            let head_lines: Vec<String> = head.split("\r\n").map(str::to_owned).collect();
            let whole_body = header(&head_lines, "content-length")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n == response.len() - split - 4);
            if head.split(' ').nth(1) != Some("200") || !whole_body {
                return Ok(None);
            }
            let kept: Vec<String> = head
                .split("\r\n")
                .skip(1)
                .filter(|l| {
                    let l = l.to_ascii_lowercase();
                    !["content-length:", "connection:", "transfer-encoding:", "content-range:"]
                        .iter()
                        .any(|h| l.starts_with(h))
                })
                .map(str::to_owned)
                .collect();
            let copy = Arc::new((kept, response[split + 4..].to_vec()));
            let mut copies = copies.lock().unwrap_or_else(PoisonError::into_inner);
            copies.entry(target.to_owned()).or_insert(copy).clone()
        }
    };
    let (head, body) = (&copy.0, &copy.1);
    if a > b || a >= body.len() {
        return Ok(None);
    }
    let b = b.min(body.len() - 1);
    let mut reply = b"HTTP/1.1 206 Partial Content\r\n".to_vec();
    for line in head {
        reply.extend_from_slice(line.as_bytes());
        reply.extend_from_slice(b"\r\n");
    }
    let framing = format!(
        "Content-Range: bytes {a}-{b}/{}\r\nContent-Length: {}\r\n\r\n",
        body.len(),
        b + 1 - a
    );
    reply.extend_from_slice(framing.as_bytes());
    reply.extend_from_slice(&body[a..=b]);
    Ok(Some(reply))
}

fn serve(
    client: TcpStream,
    upstream_port: u16,
    ctl: &ProxyControl,
    copies: &Copies,
) -> io::Result<()> {
    let mut out = client.try_clone()?;
    let mut reader = BufReader::new(client);
    while let Some((lines, body)) = read_request(&mut reader)? {
        let n = ctl.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let start = Instant::now();
        while ctl.stall.load(Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(600) {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(20));
        }
        let latency = ctl.latency_us.load(Ordering::SeqCst);
        if latency > 0 {
            thread::sleep(Duration::from_micros(latency));
        }
        let every = ctl.throttle_every.load(Ordering::SeqCst);
        if every > 0 && n.is_multiple_of(every) {
            ctl.throttled.fetch_add(1, Ordering::SeqCst);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
                        <Message>Please reduce your request rate.</Message></Error>";
            write!(
                out,
                "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )?;
            continue;
        }
        if ctl.serve_ranges.load(Ordering::SeqCst)
            && let Some(reply) = ranged_answer(&lines, upstream_port, copies)?
        {
            ctl.served.fetch_add(1, Ordering::SeqCst);
            out.write_all(&reply)?;
            continue;
        }
        let is_head = lines[0].starts_with("HEAD ");
        let response = forward(upstream_port, &lines, &body)?;
        let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
            return Ok(());
        };
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        let resp_body = &response[split + 4..];
        let head_lines: Vec<String> = head.split("\r\n").map(str::to_owned).collect();
        let framed = header(&head_lines, "content-length").is_some()
            || header(&head_lines, "transfer-encoding").is_some();
        let mut reply = Vec::new();
        for line in &head_lines {
            if line.to_ascii_lowercase().starts_with("connection:") {
                continue;
            }
            reply.extend_from_slice(line.as_bytes());
            reply.extend_from_slice(b"\r\n");
        }
        if !framed && !is_head {
            reply.extend_from_slice(format!("Content-Length: {}\r\n", resp_body.len()).as_bytes());
        }
        reply.extend_from_slice(b"\r\n");
        if !is_head {
            reply.extend_from_slice(resp_body);
        }
        out.write_all(&reply)?;
    }
    Ok(())
}
