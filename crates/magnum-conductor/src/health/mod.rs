//! Workload-cluster health: mTLS probes of each cluster's Kubernetes API.
//!
//! One [`HealthProber`] per conductor process polls every cluster it is given with
//! `GET /healthz` and `GET /api/v1/nodes`, trusting only that cluster's CA and presenting
//! Magnum's admin client certificate, and turns the answers into upstream's health reason
//! (`{"api": "ok", "<node>.Ready": "True"}`, spec/conductor.md §5.3).
//!
//! Differences from upstream's k8s monitor, on purpose:
//! * every probe ends within `request_timeout` (upstream's client had no timeout, so a hung
//!   API server held its thread for ever), and one round probes at most `concurrency`
//!   clusters at a time, so a hung cluster costs only its own slot;
//! * an API that cannot be asked (refused, TLS failure, timeout, gateway 5xx, client
//!   certificate refused) is [`ProbeOutcome::Unreachable`], not UNHEALTHY: the caller then
//!   asks the management side instead of recording a verdict the probe never got;
//! * the HTTP client of each cluster is kept between rounds (connections and TLS sessions are
//!   reused, so file descriptors stay flat) and replaced when the CA, client certificate or
//!   address changes (CA rotation), and dropped when the cluster is no longer polled.

mod probe;
pub(crate) mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use magnum_core::status::ClusterHealthStatus;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use magnum_certs::x509::KeyPairPem;

/// The health reason: `{"api": ..., "<node name>.Ready": "True"|"False"|"Unknown"}`, values
/// always strings.
pub type HealthReason = Map<String, Value>;

/// How the prober behaves. The conductor maps `[kubernetes]` options onto these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthSettings {
    /// How many clusters are probed at the same time in one round.
    pub concurrency: usize,
    /// Limit for the TCP connection and TLS handshake to one API server.
    pub connect_timeout: Duration,
    /// Limit for one whole probe (both requests, connection included).
    pub request_timeout: Duration,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            concurrency: 64,
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// One cluster to probe: its API and the credentials to reach it.
#[derive(Clone)]
pub struct ProbeTarget {
    pub cluster_uuid: String,
    /// `https://host:port` of the cluster's Kubernetes API.
    pub api_address: String,
    /// The cluster's Kubernetes CA (PEM; several certificates allowed), the only trust root.
    pub ca_pem: String,
    /// Magnum's admin client certificate and its decrypted key.
    pub client: KeyPairPem,
}

impl std::fmt::Debug for ProbeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // KeyPairPem redacts its key; the PEM bodies are noise in logs either way.
        f.debug_struct("ProbeTarget")
            .field("cluster_uuid", &self.cluster_uuid)
            .field("api_address", &self.api_address)
            .finish_non_exhaustive()
    }
}

/// What one probe found.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeOutcome {
    /// `/healthz` said `ok` and every node is Ready.
    Healthy { reason: HealthReason },
    /// The API answered, and something is wrong: `/healthz` not ok, a node not Ready, or no
    /// nodes at all.
    Unhealthy { reason: HealthReason },
    /// The API could not be asked (connection refused, TLS failure, timeout, gateway error,
    /// client certificate refused). No verdict: the caller falls back to the management side.
    /// The text names what failed and never holds key material.
    Unreachable { error: String },
}

impl ProbeOutcome {
    /// The status and reason to store, or `None` when the probe got no verdict.
    pub fn verdict(&self) -> Option<(ClusterHealthStatus, &HealthReason)> {
        match self {
            Self::Healthy { reason } => Some((ClusterHealthStatus::Healthy, reason)),
            Self::Unhealthy { reason } => Some((ClusterHealthStatus::Unhealthy, reason)),
            Self::Unreachable { .. } => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Healthy { .. } => "healthy",
            Self::Unhealthy { .. } => "unhealthy",
            Self::Unreachable { .. } => "unreachable",
        }
    }
}

/// Figures of one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundFigures {
    /// Wall time of the whole round.
    pub duration: Duration,
    pub healthy: usize,
    pub unhealthy: usize,
    pub unreachable: usize,
    /// The slowest probe that got an answer (Healthy or Unhealthy), from its own start: a
    /// hung cluster delaying others would show here.
    pub slowest_answer: Duration,
    /// The slowest probe of any outcome (a hung cluster: about `request_timeout`).
    pub slowest: Duration,
    /// Clients built this round (new clusters, changed credentials or addresses).
    pub clients_built: usize,
    /// Clients dropped because their cluster was not in this round.
    pub clients_evicted: usize,
    /// Clients cached after the round.
    pub clients_cached: usize,
}

/// The outcome of each target, in completion order, and the round's figures.
#[derive(Clone, Debug)]
pub struct RoundReport {
    pub outcomes: Vec<(String, ProbeOutcome)>,
    pub figures: RoundFigures,
}

struct CachedClient {
    fingerprint: [u8; 32],
    client: reqwest::Client,
}

type Cache = Mutex<HashMap<String, CachedClient>>;

/// Polls workload clusters' APIs; one per conductor process, cheap to clone.
#[derive(Clone)]
pub struct HealthProber {
    settings: Arc<HealthSettings>,
    clients: Arc<Cache>,
}

impl HealthProber {
    pub fn new(settings: HealthSettings) -> Self {
        Self {
            settings: Arc::new(settings),
            clients: Arc::default(),
        }
    }

    pub fn settings(&self) -> &HealthSettings {
        &self.settings
    }

    /// How many per-cluster clients are cached.
    pub fn cached_clients(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Probes every target, at most `concurrency` at a time, and drops the cached clients of
    /// clusters not among them (deleted clusters must not keep connections open). Every
    /// target gets exactly one outcome; the round lasts at most about
    /// `ceil(targets / concurrency) * request_timeout`, however many APIs hang.
    pub async fn probe_round(&self, targets: Vec<ProbeTarget>) -> RoundReport {
        let started = Instant::now();
        let clients_evicted = self.evict_absent(&targets);
        let mut figures = RoundFigures {
            clients_evicted,
            ..RoundFigures::default()
        };
        let mut outcomes = Vec::with_capacity(targets.len());
        let mut running = JoinSet::new();
        let mut uuid_of = HashMap::new();
        let mut pending = targets.into_iter();
        let limit = self.settings.concurrency.max(1);
        loop {
            // Spawn only when a slot is free, so at most `limit` probes (and sockets) exist.
            while running.len() < limit {
                let Some(target) = pending.next() else { break };
                let uuid = target.cluster_uuid.clone();
                let prober = self.clone();
                let handle = running.spawn(async move { prober.probe_timed(target).await });
                uuid_of.insert(handle.id(), uuid);
            }
            let Some(joined) = running.join_next_with_id().await else {
                break;
            };
            let (uuid, outcome, elapsed, built) = match joined {
                Ok((id, (outcome, elapsed, built))) => (
                    uuid_of.remove(&id).unwrap_or_default(),
                    outcome,
                    elapsed,
                    built,
                ),
                Err(e) => {
                    let uuid = uuid_of.remove(&e.id()).unwrap_or_default();
                    tracing::warn!(cluster = %uuid, error = %e, "health probe task failed");
                    let outcome = ProbeOutcome::Unreachable {
                        error: "the health probe task failed".to_owned(),
                    };
                    (uuid, outcome, Duration::ZERO, false)
                }
            };
            figures.slowest = figures.slowest.max(elapsed);
            match &outcome {
                ProbeOutcome::Healthy { .. } => figures.healthy += 1,
                ProbeOutcome::Unhealthy { .. } => figures.unhealthy += 1,
                ProbeOutcome::Unreachable { .. } => figures.unreachable += 1,
            }
            if outcome.verdict().is_some() {
                figures.slowest_answer = figures.slowest_answer.max(elapsed);
            }
            figures.clients_built += usize::from(built);
            outcomes.push((uuid, outcome));
        }
        figures.duration = started.elapsed();
        figures.clients_cached = self.cached_clients();
        tracing::debug!(
            duration_ms = figures.duration.as_millis() as u64,
            healthy = figures.healthy,
            unhealthy = figures.unhealthy,
            unreachable = figures.unreachable,
            clients_built = figures.clients_built,
            clients_evicted = figures.clients_evicted,
            "health round done"
        );
        RoundReport { outcomes, figures }
    }

    /// Probes one cluster with its cached client (built if missing or stale). Does not evict
    /// other clusters' clients.
    pub async fn probe(&self, target: &ProbeTarget) -> ProbeOutcome {
        self.probe_inner(target).await.0
    }

    async fn probe_timed(&self, target: ProbeTarget) -> (ProbeOutcome, Duration, bool) {
        let started = Instant::now();
        let (outcome, built) = self.probe_inner(&target).await;
        let elapsed = started.elapsed();
        match &outcome {
            ProbeOutcome::Unreachable { error } => tracing::debug!(
                cluster = %target.cluster_uuid, %error, "health probe: unreachable"
            ),
            o => tracing::debug!(
                cluster = %target.cluster_uuid, outcome = o.kind(), "health probe done"
            ),
        }
        (outcome, elapsed, built)
    }

    async fn probe_inner(&self, target: &ProbeTarget) -> (ProbeOutcome, bool) {
        let (client, built) = match self.client_for(target).await {
            Ok(c) => c,
            Err(error) => return (ProbeOutcome::Unreachable { error }, false),
        };
        // One deadline for the whole probe, so a server that answers slowly to each of
        // several requests still costs at most `request_timeout`.
        let outcome = match tokio::time::timeout(
            self.settings.request_timeout,
            probe::probe(&client, target, &self.settings),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => ProbeOutcome::Unreachable {
                error: format!(
                    "the API at {} did not answer within {} s",
                    target.api_address,
                    self.settings.request_timeout.as_secs_f64()
                ),
            },
        };
        (outcome, built)
    }

    /// The cached client for this target, or a new one when there is none or the
    /// credentials or address changed. The lock is never held while building or probing.
    async fn client_for(&self, target: &ProbeTarget) -> Result<(reqwest::Client, bool), String> {
        let fingerprint = fingerprint(target);
        if let Some(c) = lock(&self.clients).get(&target.cluster_uuid)
            && c.fingerprint == fingerprint
        {
            return Ok((c.client.clone(), false));
        }
        // Loading an RSA key (aws-lc checks it) and setting up rustls takes about 0.4 ms
        // (health benchmark, debug build): too long between two awaits, 1,000 of them at
        // start-up, so off the runtime's workers.
        let (t, settings) = (target.clone(), self.settings.clone());
        let client = tokio::task::spawn_blocking(move || probe::build_client(&t, &settings))
            .await
            .map_err(|_| "setting up the client for the cluster's API failed".to_owned())??;
        let replaced = lock(&self.clients).insert(
            target.cluster_uuid.clone(),
            CachedClient {
                fingerprint,
                client: client.clone(),
            },
        );
        if replaced.is_some() {
            tracing::info!(
                cluster = %target.cluster_uuid,
                "health probe: credentials or address changed, client rebuilt"
            );
        }
        Ok((client, true))
    }

    fn evict_absent(&self, targets: &[ProbeTarget]) -> usize {
        let keep: HashSet<&str> = targets.iter().map(|t| t.cluster_uuid.as_str()).collect();
        let mut gone = Vec::new();
        {
            let mut cache = lock(&self.clients);
            let absent: Vec<String> = cache
                .keys()
                .filter(|k| !keep.contains(k.as_str()))
                .cloned()
                .collect();
            for uuid in absent {
                if let Some(c) = cache.remove(&uuid) {
                    gone.push(c);
                }
            }
        }
        // Dropped outside the lock: dropping a client closes its pooled connections.
        let n = gone.len();
        drop(gone);
        n
    }
}

fn lock(cache: &Cache) -> MutexGuard<'_, HashMap<String, CachedClient>> {
    // The map stays consistent whatever panicked while holding it.
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SHA-256 over the address, CA and client certificate (length-prefixed, so no two inputs
/// collide by moving bytes between fields). The key changes only with its certificate.
fn fingerprint(target: &ProbeTarget) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        target.api_address.as_bytes(),
        target.ca_pem.as_bytes(),
        target.client.certificate.as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn target(ca: &str, cert: &str) -> ProbeTarget {
        ProbeTarget {
            cluster_uuid: "u".into(),
            api_address: "https://127.0.0.1:6443".into(),
            ca_pem: ca.into(),
            client: KeyPairPem {
                certificate: cert.into(),
                private_key: "SECRET".into(),
            },
        }
    }

    #[test]
    fn fingerprint_follows_ca_and_certificate_not_field_boundaries() {
        let a = fingerprint(&target("ab", "c"));
        assert_eq!(a, fingerprint(&target("ab", "c")));
        assert_ne!(a, fingerprint(&target("a", "bc")));
        assert_ne!(a, fingerprint(&target("ab", "d")));
    }

    #[test]
    fn debug_of_a_target_shows_no_key() {
        let t = target("ca", "cert");
        assert!(!format!("{t:?}").contains("SECRET"));
    }

    #[test]
    fn defaults() {
        let s = HealthSettings::default();
        assert_eq!(s.concurrency, 64);
        assert_eq!(s.connect_timeout, Duration::from_secs(2));
        assert_eq!(s.request_timeout, Duration::from_secs(5));
    }
}
