//! Loopback ports and plain HTTP/1.1, for requests a client library would not send as is.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// Where [`free_port`] picks: below Linux's ephemeral range (32768-60999), so neither an
/// outgoing connection nor another server's bind to port 0 (a test Keystone's, say) can take
/// the port between its pick and its use, and below the test cloud's 20000-32767.
const PORTS: std::ops::Range<u16> = 10000..20000;

/// A loopback port free at the time of the call, never handed out before by this process.
/// (Picked by the kernel from its ephemeral range, a port was once taken by another test's
/// Keystone in that gap: the test's client got that Keystone's 404 for its magnumd.)
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let span = u64::from(PORTS.end - PORTS.start);
    // A random start (std's per-process random hasher keys), then the next free one.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(given.len());
    let start = h.finish() % span;
    for i in 0..span {
        let port = PORTS.start + u16::try_from((start + i) % span).unwrap_or(0);
        if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        given.push(port);
        return port;
    }
    panic!("no free port in {PORTS:?}");
}

/// Panics, naming the port, when another process already listens on a fixed port a test must
/// start its own server on: otherwise that server's answers (a 401 from another magnumd, say)
/// would read as the test's failure.
pub fn assert_port_free(port: u16) {
    if TcpStream::connect(("127.0.0.1", port)).is_ok() {
        panic!(
            "127.0.0.1:{port} is already held by another process (see `ss -ltnp 'sport = :{port}'`); \
             this test starts its own server there: stop the other one and run it again"
        );
    }
}

/// Sends `request` (the whole HTTP/1.1 text, with `Connection: close`) to 127.0.0.1:`port`
/// and returns the whole reply, status line and headers included.
pub fn raw_http(port: u16, request: &str, timeout: Duration) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    if let (Some(code), Some((_, body))) = (
        out.get(9..12).and_then(|c| c.parse().ok()),
        out.split_once("\r\n\r\n"),
    ) {
        crate::scan::error_body(code, body);
    }
    out
}

/// Waits until something listens on `port`; panics if `child` exits first or after 30 s.
pub fn wait_for_port(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the server exited early: {status}");
        }
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
