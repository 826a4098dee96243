//! The workload-cluster health prober against in-process Kubernetes API servers: HTTPS on
//! 127.0.0.1 ephemeral ports, client certificates required and verified against each
//! cluster's CA, `/healthz` and `/api/v1/nodes` (paged by `limit`/`continue`) in the API's
//! JSON shapes. Certificates are ECDSA P-256 for speed, except the clusters made with the
//! crate's own generators (RSA-2048, as Magnum's PKI issues them).
//!
//! One listener per cluster: the benchmark's 1,000 clusters need about 3,000 descriptors
//! (listeners, the server ends and the client ends of the connections); `fd_headroom` checks
//! the soft `ulimit -n` first and the benchmark stops with a message if it is too low.
//!
//! `cargo test -p magnum-conductor --test conductor health_bench -- --ignored --nocapture`
//! runs the benchmark and the soak.

#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use magnum_certs::x509::{KeyPairPem, X509Options, generate_ca, generate_client_cert};
use magnum_conductor::health::{HealthProber, HealthSettings, ProbeOutcome, ProbeTarget};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

// ---------------------------------------------------------------------------------------
// Certificates

/// A cluster's Kubernetes CA and Magnum's admin client certificate under it.
#[derive(Clone)]
struct Pki {
    ca: KeyPairPem,
    client: KeyPairPem,
}

impl Pki {
    fn ecdsa(cn: &str) -> Pki {
        let ca = ecdsa_ca(cn);
        let client = leaf(&ca, "admin", false);
        Pki { ca, client }
    }

    /// With the crate's generators: RSA-2048 CA and client certificate.
    fn magnum(cn: &str) -> Pki {
        let opts = X509Options::default();
        let ca = generate_ca(cn, &opts).unwrap();
        let client = generate_client_cert(&ca, "admin", "system:masters", &opts).unwrap();
        Pki { ca, client }
    }

    fn server_cert(&self) -> KeyPairPem {
        leaf(&self.ca, "kube-apiserver", true)
    }
}

fn ecdsa_ca(cn: &str) -> KeyPairPem {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = p.self_signed(&key).unwrap();
    KeyPairPem {
        certificate: cert.pem(),
        private_key: key.serialize_pem(),
    }
}

/// A P-256 leaf signed by `ca` (any key type): the API server's (SAN 127.0.0.1) or a client's.
fn leaf(ca: &KeyPairPem, cn: &str, server: bool) -> KeyPairPem {
    let ca_key = KeyPair::from_pem(&ca.private_key).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca.certificate, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = if server {
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap()
    } else {
        CertificateParams::default()
    };
    p.distinguished_name.push(DnType::CommonName, cn);
    if !server {
        p.distinguished_name
            .push(DnType::OrganizationName, "system:masters");
    }
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = p.signed_by(&key, &issuer).unwrap();
    KeyPairPem {
        certificate: cert.pem(),
        private_key: key.serialize_pem(),
    }
}

/// TLS for an API server presenting `server` and accepting only clients of `client_ca_pem`.
fn server_tls(server: &KeyPairPem, client_ca_pem: &str) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(server.certificate.as_bytes())
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_slice(server.private_key.as_bytes()).unwrap();
    Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap(),
    )
}

// ---------------------------------------------------------------------------------------
// The fake Kubernetes API server

#[derive(Clone, Debug)]
enum Mode {
    /// Answers: `/healthz` with this status and text, `/api/v1/nodes` with `nodes` nodes, the
    /// ones listed in `not_ready` NotReady.
    Serve {
        healthz: (u16, &'static str),
        nodes: usize,
        not_ready: Vec<usize>,
    },
    /// TCP and TLS complete, the request is read, no answer ever comes (until the client goes).
    Hang,
}

fn healthy(nodes: usize) -> Mode {
    Mode::Serve {
        healthz: (200, "ok"),
        nodes,
        not_ready: vec![],
    }
}

fn not_ready(nodes: usize, which: usize) -> Mode {
    Mode::Serve {
        healthz: (200, "ok"),
        nodes,
        not_ready: vec![which],
    }
}

fn healthz(status: u16, text: &'static str) -> Mode {
    Mode::Serve {
        healthz: (status, text),
        nodes: 2,
        not_ready: vec![],
    }
}

struct ServerState {
    name: String,
    /// The TLS configuration and its generation: a rotation makes a new one and the
    /// connections of older ones close, as a restarted API server's do.
    tls: Mutex<(Arc<ServerConfig>, u64)>,
    generation: tokio::sync::watch::Sender<u64>,
    mode: Mutex<Mode>,
    /// Completed TLS handshakes, ever.
    handshakes: AtomicUsize,
    /// Connections open now (past the handshake).
    open: AtomicUsize,
    requests: AtomicUsize,
}

struct ApiServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // Its connections live in the task's JoinSet, so they go with it.
        self.task.abort();
    }
}

impl ApiServer {
    async fn start(name: &str, tls: Arc<ServerConfig>, mode: Mode) -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ServerState {
            name: name.to_owned(),
            tls: Mutex::new((tls, 0)),
            generation: tokio::sync::watch::Sender::new(0),
            mode: Mutex::new(mode),
            handshakes: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
        });
        let s = state.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((tcp, _)) = accepted {
                            conns.spawn(connection(tcp, s.clone()));
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        ApiServer { addr, state, task }
    }

    fn set_tls(&self, tls: Arc<ServerConfig>) {
        let g = *self.state.generation.borrow() + 1;
        *self.state.tls.lock().unwrap() = (tls, g);
        self.state.generation.send_replace(g);
    }

    fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    fn open(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }
}

struct OpenGuard(Arc<ServerState>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn connection(tcp: TcpStream, state: Arc<ServerState>) {
    let (config, generation) = state.tls.lock().unwrap().clone();
    let mut restarted = state.generation.subscribe();
    let Ok(tls) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await else {
        return;
    };
    state.handshakes.fetch_add(1, Ordering::SeqCst);
    state.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenGuard(state.clone());
    let mut io = BufReader::new(tls);
    loop {
        let mut request_line = String::new();
        tokio::select! {
            n = io.read_line(&mut request_line) => if n.unwrap_or(0) == 0 { return },
            // A restarted API server closes what it had, idle connections included.
            _ = restarted.wait_for(|g| *g != generation) => return,
        }
        loop {
            let mut header = String::new();
            if io.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
        }
        state.requests.fetch_add(1, Ordering::SeqCst);
        let mode = state.mode.lock().unwrap().clone();
        let (status, content_type, body) = match mode {
            Mode::Hang => {
                // Hold the connection without a word until the client closes it.
                let mut sink = [0u8; 1024];
                while io.read(&mut sink).await.unwrap_or(0) > 0 {}
                return;
            }
            Mode::Serve {
                healthz,
                nodes,
                not_ready,
            } => {
                let target = request_line.split(' ').nth(1).unwrap_or("/");
                let (path, query) = target.split_once('?').unwrap_or((target, ""));
                match path {
                    "/healthz" => (healthz.0, "text/plain; charset=utf-8", healthz.1.to_owned()),
                    "/api/v1/nodes" => (
                        200,
                        "application/json",
                        node_list(&state.name, nodes, &not_ready, query).to_string(),
                    ),
                    _ => (404, "application/json", not_found(path).to_string()),
                }
            }
        };
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            reason_phrase(status),
            body.len()
        );
        if io.write_all(head.as_bytes()).await.is_err()
            || io.write_all(body.as_bytes()).await.is_err()
            || io.flush().await.is_err()
        {
            return;
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn node_name(cluster: &str, i: usize) -> String {
    if i == 0 {
        format!("{cluster}-control-plane-7kq2x")
    } else {
        format!("{cluster}-default-worker-{i:05}")
    }
}

/// A page of a NodeList as the API serves it (`limit` and an opaque `continue` token).
fn node_list(cluster: &str, n: usize, not_ready: &[usize], query: &str) -> Value {
    let mut limit = n;
    let mut start = 0;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("limit", v)) => limit = v.parse().unwrap_or(n),
            Some(("continue", v)) => start = v.trim_start_matches("offset-").parse().unwrap_or(0),
            _ => {}
        }
    }
    let end = n.min(start + limit.max(1));
    let items: Vec<Value> = (start..end)
        .map(|i| node(&node_name(cluster, i), !not_ready.contains(&i)))
        .collect();
    let mut metadata = json!({"resourceVersion": "48213"});
    if end < n {
        metadata["continue"] = json!(format!("offset-{end}"));
    }
    json!({"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": items})
}

fn node(name: &str, ready: bool) -> Value {
    let ready_condition = if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "message": "kubelet is posting ready status",
               "lastHeartbeatTime": "2026-11-29T10:00:00Z",
               "lastTransitionTime": "2026-11-28T09:00:00Z"})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
               "message": "container runtime network not ready: NetworkReady=false",
               "lastHeartbeatTime": "2026-11-29T10:00:00Z",
               "lastTransitionTime": "2026-11-29T09:58:00Z"})
    };
    json!({
        "metadata": {
            "name": name,
            "uid": "7b1a3c7e-3a55-4d4e-9b8e-0f2d7c6f1a11",
            "resourceVersion": "48211",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"cluster.x-k8s.io/machine": format!("{name}-machine")},
        },
        "spec": {"providerID": format!("openstack:///{name}"), "podCIDR": "10.100.1.0/24"},
        "status": {
            "capacity": {"cpu": "2", "memory": "4030184Ki", "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                ready_condition,
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.12"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.33.4", "containerRuntimeVersion": "containerd://1.7.27",
                         "osImage": "Ubuntu 24.04.3 LTS", "architecture": "amd64"},
        }
    })
}

fn not_found(path: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("the server could not find the requested resource ({path})"),
           "reason": "NotFound", "code": 404})
}

// ---------------------------------------------------------------------------------------
// Clusters

struct FakeCluster {
    uuid: String,
    pki: Pki,
    server: ApiServer,
}

impl FakeCluster {
    async fn start(name: &str, pki: Pki, mode: Mode) -> FakeCluster {
        let tls = server_tls(&pki.server_cert(), &pki.ca.certificate);
        Self::with_tls(name, pki, tls, mode).await
    }

    /// The API server presents a certificate from another CA (it still trusts the
    /// cluster's client certificates).
    async fn foreign_server_cert(name: &str, pki: Pki) -> FakeCluster {
        let other = Pki::ecdsa("someone-else");
        let tls = server_tls(&other.server_cert(), &pki.ca.certificate);
        Self::with_tls(name, pki, tls, healthy(2)).await
    }

    /// The API server trusts another CA's clients: Magnum's client certificate is refused.
    async fn foreign_client_ca(name: &str, pki: Pki) -> FakeCluster {
        let other = Pki::ecdsa("someone-else");
        let tls = server_tls(&pki.server_cert(), &other.ca.certificate);
        Self::with_tls(name, pki, tls, healthy(2)).await
    }

    async fn with_tls(name: &str, pki: Pki, tls: Arc<ServerConfig>, mode: Mode) -> FakeCluster {
        FakeCluster {
            uuid: format!("uuid-{name}"),
            pki,
            server: ApiServer::start(name, tls, mode).await,
        }
    }

    fn target(&self) -> ProbeTarget {
        ProbeTarget {
            cluster_uuid: self.uuid.clone(),
            api_address: format!("https://{}", self.server.addr),
            ca_pem: self.pki.ca.certificate.clone(),
            client: self.pki.client.clone(),
        }
    }

    /// A CA rotation: the API restarts with a server certificate from `new` and accepts only
    /// `new`'s clients; the connections it had are closed.
    fn rotate(&mut self, new: Pki) {
        self.server
            .set_tls(server_tls(&new.server_cert(), &new.ca.certificate));
        self.pki = new;
    }

    fn node(&self, i: usize) -> String {
        node_name(&self.server.state.name, i)
    }
}

/// A target whose port nobody listens on.
async fn refused_target(pki: &Pki) -> ProbeTarget {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    ProbeTarget {
        cluster_uuid: "uuid-refused".into(),
        api_address: format!("https://{addr}"),
        ca_pem: pki.ca.certificate.clone(),
        client: pki.client.clone(),
    }
}

fn quick() -> HealthSettings {
    HealthSettings {
        concurrency: 64,
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
    }
}

fn reason(pairs: &[(&str, &str)]) -> serde_json::Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
        .collect()
}

fn by_uuid(outcomes: Vec<(String, ProbeOutcome)>) -> HashMap<String, ProbeOutcome> {
    let n = outcomes.len();
    let map: HashMap<_, _> = outcomes.into_iter().collect();
    assert_eq!(map.len(), n, "one outcome per cluster");
    map
}

fn unreachable_error(o: &ProbeOutcome) -> &str {
    match o {
        ProbeOutcome::Unreachable { error } => error,
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

/// No private key, or any piece of one, in a text the prober produced.
fn assert_no_secret(text: &str, pkis: &[&Pki]) {
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    for p in pkis {
        for key in [&p.client.private_key, &p.ca.private_key] {
            let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
            let piece = &body[body.len() / 2..body.len() / 2 + 24];
            assert!(!text.contains(piece), "{text}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scenarios

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_scenarios() {
    // Magnum's own PKI (RSA-2048) for the healthy cluster, P-256 for the rest.
    let good = FakeCluster::start("good", Pki::magnum("good"), healthy(3)).await;
    let sick = FakeCluster::start("sick", Pki::ecdsa("sick"), not_ready(3, 2)).await;
    let failing = FakeCluster::start(
        "failing",
        Pki::ecdsa("failing"),
        healthz(
            500,
            "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nhealthz check failed\n",
        ),
    )
    .await;
    let nok = FakeCluster::start("nok", Pki::ecdsa("nok"), healthz(200, "nok")).await;
    let empty = FakeCluster::start("empty", Pki::ecdsa("empty"), healthy(0)).await;
    let gateway = FakeCluster::start(
        "gateway",
        Pki::ecdsa("gateway"),
        healthz(503, "no healthy upstream"),
    )
    .await;
    let big = FakeCluster::start("big", Pki::ecdsa("big"), not_ready(1203, 1202)).await;
    let hung = FakeCluster::start("hung", Pki::ecdsa("hung"), Mode::Hang).await;
    let impostor = FakeCluster::foreign_server_cert("impostor", Pki::ecdsa("impostor")).await;
    let picky = FakeCluster::foreign_client_ca("picky", Pki::ecdsa("picky")).await;
    let nobody = refused_target(&good.pki).await;
    let all = [
        &good, &sick, &failing, &nok, &empty, &gateway, &big, &hung, &impostor, &picky,
    ];
    let mut targets: Vec<ProbeTarget> = all.iter().map(|c| c.target()).collect();
    targets.push(nobody.clone());

    let prober = HealthProber::new(quick());
    let report = prober.probe_round(targets.clone()).await;
    let f = &report.figures;
    let got = by_uuid(report.outcomes.clone());
    assert_eq!(got.len(), 11);

    assert_eq!(
        got[&good.uuid],
        ProbeOutcome::Healthy {
            reason: reason(&[
                ("api", "ok"),
                (&format!("{}.Ready", good.node(0)), "True"),
                (&format!("{}.Ready", good.node(1)), "True"),
                (&format!("{}.Ready", good.node(2)), "True"),
            ])
        }
    );
    // Keys are node names (the API's), values the Ready condition's status.
    assert_eq!(
        got[&sick.uuid],
        ProbeOutcome::Unhealthy {
            reason: reason(&[
                ("api", "ok"),
                (&format!("{}.Ready", sick.node(0)), "True"),
                (&format!("{}.Ready", sick.node(1)), "True"),
                (&format!("{}.Ready", sick.node(2)), "False"),
            ])
        }
    );
    let ProbeOutcome::Unhealthy { reason: r } = &got[&failing.uuid] else {
        panic!("{:?}", got[&failing.uuid]);
    };
    assert_eq!(
        r["api"],
        "HTTP 500 Internal Server Error: [+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nhealthz check failed"
    );
    let ProbeOutcome::Unhealthy { reason: r } = &got[&nok.uuid] else {
        panic!("{:?}", got[&nok.uuid]);
    };
    assert_eq!(r["api"], "nok");
    assert_eq!(r[&format!("{}.Ready", nok.node(1))], "True");
    assert_eq!(
        got[&empty.uuid],
        ProbeOutcome::Unhealthy {
            reason: reason(&[
                ("api", "ok"),
                ("nodes", "No nodes are registered with the API.")
            ])
        }
    );
    // A load balancer with nothing behind it is no verdict on the cluster.
    assert!(unreachable_error(&got[&gateway.uuid]).contains("HTTP 503"));
    // Three pages of nodes, every one read; the last node is the NotReady one.
    let ProbeOutcome::Unhealthy { reason: r } = &got[&big.uuid] else {
        panic!("{:?}", got[&big.uuid]);
    };
    assert_eq!(r.len(), 1 + 1203);
    assert_eq!(r[&format!("{}.Ready", big.node(1202))], "False");
    assert_eq!(r[&format!("{}.Ready", big.node(600))], "True");

    let e = unreachable_error(&got[&hung.uuid]);
    assert!(e.contains("did not answer within 2 s"), "{e}");
    let e = unreachable_error(&got[&impostor.uuid]);
    assert!(
        e.contains("certificate") && e.contains("did not verify"),
        "{e}"
    );
    let e = unreachable_error(&got[&picky.uuid]);
    assert!(e.contains("client certificate"), "{e}");
    let e = unreachable_error(&got[&nobody.cluster_uuid]);
    assert!(e.contains("could not connect"), "{e}");

    // The hung API cost its own slot only: every answered probe was quick, and the round
    // took about one request timeout.
    assert!(f.slowest_answer < Duration::from_secs(1), "{f:?}");
    assert!(f.slowest >= Duration::from_secs(2), "{f:?}");
    assert!(f.duration < Duration::from_secs(4), "{f:?}");
    assert_eq!((f.healthy, f.unhealthy, f.unreachable), (1, 5, 5), "{f:?}");
    assert_eq!(f.clients_built, 11);
    assert_eq!(f.clients_cached, 11);

    // Nothing secret in any text the prober made.
    let pkis: Vec<&Pki> = all.iter().map(|c| &c.pki).collect();
    for (_, o) in &report.outcomes {
        assert_no_secret(&format!("{o:?}"), &pkis);
    }
    assert_no_secret(&format!("{:?}", targets[0]), &pkis);

    // Rounds two and three: the same clients and connections (at most two per cluster,
    // see POOL_MAX_IDLE), nothing rebuilt.
    for _ in 0..2 {
        let again = prober.probe_round(targets.clone()).await;
        assert_eq!(again.figures.clients_built, 0);
        assert_eq!(by_uuid(again.outcomes)[&good.uuid], got[&good.uuid]);
    }
    for c in [&good, &sick, &big] {
        assert!(
            c.server.handshakes() <= 2,
            "{}: {}",
            c.uuid,
            c.server.handshakes()
        );
    }

    // A cluster left out of a round loses its client, and its connection closes.
    let kept: Vec<ProbeTarget> = targets
        .iter()
        .filter(|t| t.cluster_uuid != sick.uuid)
        .cloned()
        .collect();
    assert!(sick.server.open() >= 1);
    let third = prober.probe_round(kept).await;
    assert_eq!(third.figures.clients_evicted, 1);
    assert_eq!(third.figures.clients_cached, 10);
    let deadline = Instant::now() + Duration::from_secs(3);
    while sick.server.open() > 0 {
        assert!(
            Instant::now() < deadline,
            "the evicted cluster's connection stayed open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(good.server.open() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_ca_rotation_replaces_the_cached_client() {
    // Magnum's PKI on both sides of the rotation, as rotate_ca_certificate makes it.
    let mut c = FakeCluster::start("rot", Pki::magnum("rot"), healthy(2)).await;
    let prober = HealthProber::new(quick());
    let before = c.target();
    assert!(matches!(
        prober.probe(&before).await,
        ProbeOutcome::Healthy { .. }
    ));
    assert_eq!(prober.cached_clients(), 1);

    c.rotate(Pki::magnum("rot"));
    // The restart closed the client's idle connection; give it a moment to notice.
    tokio::time::sleep(Duration::from_millis(100)).await;
    // With the old CA the new server certificate does not verify (the old connection is
    // gone with the restart, so the cached client must handshake again).
    let e = prober.probe(&before).await;
    assert!(unreachable_error(&e).contains("did not verify"), "{e:?}");
    // The new CA and client certificate, same uuid: the client is rebuilt and it works.
    let report = prober.probe_round(vec![c.target()]).await;
    assert_eq!(report.figures.clients_built, 1);
    assert_eq!(report.figures.clients_cached, 1);
    assert!(
        matches!(report.outcomes[0].1, ProbeOutcome::Healthy { .. }),
        "{:?}",
        report.outcomes
    );
    // And it stays cached.
    let report = prober.probe_round(vec![c.target()]).await;
    assert_eq!(report.figures.clients_built, 0);
    assert!(matches!(report.outcomes[0].1, ProbeOutcome::Healthy { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_bad_credentials_and_addresses_are_unreachable_without_secrets() {
    let pki = Pki::ecdsa("creds");
    let prober = HealthProber::new(quick());
    let base = ProbeTarget {
        cluster_uuid: "u".into(),
        api_address: "https://127.0.0.1:1".into(),
        ca_pem: pki.ca.certificate.clone(),
        client: pki.client.clone(),
    };
    let cases = [
        ProbeTarget {
            ca_pem: "not a certificate".into(),
            ..base.clone()
        },
        ProbeTarget {
            client: KeyPairPem {
                certificate: pki.client.certificate.clone(),
                private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
                    .into(),
            },
            ..base.clone()
        },
        ProbeTarget {
            api_address: "http://127.0.0.1:8080".into(),
            ..base.clone()
        },
    ];
    let wants = ["CA certificate", "admin client certificate", "not https"];
    for (t, want) in cases.iter().zip(wants) {
        let o = prober.probe(t).await;
        let e = unreachable_error(&o);
        assert!(e.contains(want), "{e}");
        assert_no_secret(e, &[&pki]);
    }
}

// ---------------------------------------------------------------------------------------
// Scale: the small checked version, the benchmark and the soak

struct Fleet {
    clusters: Vec<FakeCluster>,
    kinds: Vec<&'static str>,
}

impl Fleet {
    /// `healthy`, `hung`, `wrong_ca` and `not_ready` clusters, interleaved so the hung ones
    /// are spread over the round as they would be in a real fleet.
    async fn start(healthy_n: usize, hung: usize, wrong_ca: usize, sick: usize) -> Fleet {
        let mut kinds = Vec::new();
        kinds.extend(std::iter::repeat_n("healthy", healthy_n));
        kinds.extend(std::iter::repeat_n("hung", hung));
        kinds.extend(std::iter::repeat_n("wrong_ca", wrong_ca));
        kinds.extend(std::iter::repeat_n("not_ready", sick));
        // A fixed shuffle: a stride coprime with the length visits every index once.
        let n = kinds.len();
        let stride = (7..).find(|s| gcd(*s, n) == 1).unwrap_or(1);
        let kinds: Vec<&'static str> = (0..n).map(|i| kinds[(i * stride) % n]).collect();
        let mut clusters = Vec::with_capacity(n);
        for (i, kind) in kinds.iter().enumerate() {
            let name = format!("c{i:04}");
            let pki = Pki::ecdsa(&name);
            let c = match *kind {
                "healthy" => FakeCluster::start(&name, pki, healthy(3)).await,
                "hung" => FakeCluster::start(&name, pki, Mode::Hang).await,
                "wrong_ca" => FakeCluster::foreign_server_cert(&name, pki).await,
                _ => FakeCluster::start(&name, pki, not_ready(3, 1)).await,
            };
            clusters.push(c);
        }
        Fleet { clusters, kinds }
    }

    fn targets(&self) -> Vec<ProbeTarget> {
        self.clusters.iter().map(FakeCluster::target).collect()
    }

    /// Checks every outcome against the kind of its cluster.
    fn check(&self, outcomes: Vec<(String, ProbeOutcome)>) {
        let got = by_uuid(outcomes);
        assert_eq!(got.len(), self.clusters.len());
        for (c, kind) in self.clusters.iter().zip(&self.kinds) {
            let o = &got[&c.uuid];
            let ok = match (*kind, o) {
                ("healthy", ProbeOutcome::Healthy { reason }) => reason.len() == 4,
                ("not_ready", ProbeOutcome::Unhealthy { reason }) => {
                    reason[&format!("{}.Ready", c.node(1))] == "False"
                }
                ("hung", ProbeOutcome::Unreachable { error }) => error.contains("did not answer"),
                ("wrong_ca", ProbeOutcome::Unreachable { error }) => {
                    error.contains("certificate") && error.contains("did not verify")
                }
                _ => false,
            };
            assert!(ok, "{} ({kind}): {o:?}", c.uuid);
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// The soft open-file limit, or None if it is below what `needed` descriptors require.
fn fd_headroom(needed: usize) -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    (soft >= needed + open_fds()).then_some(soft)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_round_of_50_with_hung_servers() {
    let fleet = Fleet::start(40, 5, 3, 2).await;
    let prober = HealthProber::new(HealthSettings {
        concurrency: 8,
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
    });
    let r = prober.probe_round(fleet.targets()).await;
    let f = r.figures.clone();
    fleet.check(r.outcomes);
    assert_eq!((f.healthy, f.unhealthy, f.unreachable), (40, 2, 8), "{f:?}");
    // Five hung servers in eight slots cost about one timeout (2 s, a little more as they
    // start at different times), not five (10 s); no answered probe waited for them.
    assert!(f.duration < Duration::from_secs(5), "{f:?}");
    assert!(f.slowest_answer < Duration::from_secs(1), "{f:?}");
    assert_eq!(f.clients_built, 50);

    // Rounds two and three reuse every client and the answering clusters' connections (at
    // most two each, see POOL_MAX_IDLE).
    for _ in 0..2 {
        let r = prober.probe_round(fleet.targets()).await;
        assert_eq!(r.figures.clients_built, 0);
        fleet.check(r.outcomes);
    }
    for (c, kind) in fleet.clusters.iter().zip(&fleet.kinds) {
        if matches!(*kind, "healthy" | "not_ready") {
            assert!(c.server.handshakes() <= 2, "{}", c.uuid);
        }
    }
    // Ten clusters deleted: their clients go.
    let r = prober.probe_round(fleet.targets()[10..].to_vec()).await;
    assert_eq!(r.figures.clients_evicted, 10);
    assert_eq!(prober.cached_clients(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn health_bench() {
    // --- Client set-up cost: 1,000 first probes (client built) against 1,000 repeats
    // (cached), each ending at once on a refused port.
    let rsa = Pki::magnum("bench-rsa");
    let ec = Pki::ecdsa("bench-ec");
    let nobody = refused_target(&rsa).await;
    for (label, pki) in [("RSA-2048", &rsa), ("P-256", &ec)] {
        let prober = HealthProber::new(HealthSettings::default());
        let targets: Vec<ProbeTarget> = (0..1000)
            .map(|i| ProbeTarget {
                cluster_uuid: format!("b{i}"),
                ca_pem: pki.ca.certificate.clone(),
                client: pki.client.clone(),
                ..nobody.clone()
            })
            .collect();
        let t = Instant::now();
        for target in &targets {
            prober.probe(target).await;
        }
        let first = t.elapsed();
        let t = Instant::now();
        for target in &targets {
            prober.probe(target).await;
        }
        let cached = t.elapsed();
        println!(
            "client build ({label} identity): {:.1} µs per client ({:?} for 1,000 first probes, {:?} for 1,000 cached)",
            first.saturating_sub(cached).as_secs_f64() * 1e6 / 1000.0,
            first,
            cached
        );
    }

    // --- 1,000 clusters, one prober, default settings.
    let (n_ok, n_hung, n_bad_ca, n_sick) = (900, 40, 30, 30);
    let n = n_ok + n_hung + n_bad_ca + n_sick;
    let Some(limit) = fd_headroom(4 * n) else {
        panic!(
            "the soft open-file limit is below {} descriptors: raise it (ulimit -n) for this benchmark",
            4 * n
        );
    };
    let t = Instant::now();
    let fleet = Fleet::start(n_ok, n_hung, n_bad_ca, n_sick).await;
    println!(
        "{n} API servers started in {:?} (fd soft limit {limit}, {} fds open)",
        t.elapsed(),
        open_fds()
    );
    let prober = HealthProber::new(HealthSettings::default());
    let settings = prober.settings().clone();
    for round in 1..=2 {
        let r = prober.probe_round(fleet.targets()).await;
        let f = r.figures.clone();
        fleet.check(r.outcomes);
        println!(
            "round {round}: {:?} for {n} clusters (concurrency {}, request timeout {:?}): \
             {} healthy, {} unhealthy, {} unreachable; slowest answered probe {:?}, slowest {:?}; \
             {} clients built, {} cached; {} fds, {} threads, {} tasks",
            f.duration,
            settings.concurrency,
            settings.request_timeout,
            f.healthy,
            f.unhealthy,
            f.unreachable,
            f.slowest_answer,
            f.slowest,
            f.clients_built,
            f.clients_cached,
            open_fds(),
            threads(),
            alive_tasks(),
        );
        assert_eq!(
            (f.healthy, f.unhealthy, f.unreachable),
            (n_ok, n_sick, n_hung + n_bad_ca)
        );
        assert!(f.duration < Duration::from_secs(10), "{f:?}");
        // No hung server delayed anyone else: answered probes stay far below the timeout.
        assert!(f.slowest_answer < settings.request_timeout / 5, "{f:?}");
    }
    drop(fleet);

    // --- Soak: 100 clusters, 100 rounds (10,000 probes); descriptors, threads and tasks
    // must not grow. Short timeouts so the hung ones cost 200 ms a round.
    let fleet = Fleet::start(90, 4, 3, 3).await;
    let prober = HealthProber::new(HealthSettings {
        concurrency: 64,
        connect_timeout: Duration::from_millis(200),
        request_timeout: Duration::from_millis(200),
    });
    let targets = fleet.targets();
    let mut marks = Vec::new();
    let t = Instant::now();
    for round in 1..=100 {
        let r = prober.probe_round(targets.clone()).await;
        if round == 1 || round == 100 {
            fleet.check(r.outcomes);
        }
        if matches!(round, 1 | 50 | 100) {
            // Let closed connections finish closing before counting.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let m = (
                round,
                open_fds(),
                threads(),
                alive_tasks(),
                prober.cached_clients(),
            );
            println!(
                "soak after round {}: {} fds, {} threads, {} tasks, {} cached clients",
                m.0, m.1, m.2, m.3, m.4
            );
            marks.push(m);
        }
    }
    println!("soak: 10,000 probes in {:?}", t.elapsed());
    let (first, last) = (marks[0], marks[2]);
    assert!(last.1 <= first.1 + 5, "fds grew: {marks:?}");
    assert!(last.3 <= first.3 + 5, "tasks grew: {marks:?}");
    assert_eq!(last.4, 100);
    let handshakes: usize = fleet
        .clusters
        .iter()
        .zip(&fleet.kinds)
        .filter(|(_, k)| matches!(**k, "healthy" | "not_ready"))
        .map(|(c, _)| c.server.handshakes())
        .sum();
    println!("soak: {handshakes} TLS handshakes for 93 answering clusters over 100 rounds");
    assert!(
        handshakes <= 2 * 93,
        "connections are not reused: {handshakes} handshakes"
    );
}
