//! One probe: the client for a cluster, the two requests, and what their answers mean.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{HealthReason, HealthSettings, ProbeOutcome, ProbeTarget};

/// Idle connections outlive the default polling interval (60 s), so each round reuses the
/// previous round's connection instead of a new TCP and TLS handshake.
const POOL_IDLE: Duration = Duration::from_secs(90);
/// Two, not one: when the second request of a probe starts before the first one's
/// connection is back in the pool, hyper opens another; keeping both means that happens at
/// most once per cluster instead of again in later rounds.
const POOL_MAX_IDLE: usize = 2;
/// `/healthz` answers a few words (or one line per check when failing).
const HEALTHZ_CAP: usize = 64 * 1024;
/// A node object is a few KiB (its image list dominates); a page of `NODE_PAGE` fits easily.
const NODES_PAGE_CAP: usize = 32 * 1024 * 1024;
const NODE_PAGE: &str = "500";
/// 100,000 nodes: far beyond any cluster, and it bounds a server that never stops paging.
const MAX_NODE_PAGES: usize = 200;
/// How much of a failing `/healthz` text goes into the reason.
const REASON_TEXT_CAP: usize = 512;

/// A client that trusts only the cluster's CA and presents the admin client certificate.
pub(super) fn build_client(
    target: &ProbeTarget,
    settings: &HealthSettings,
) -> Result<reqwest::Client, String> {
    let cas = reqwest::Certificate::from_pem_bundle(target.ca_pem.as_bytes())
        .map_err(|e| format!("the cluster's CA certificate could not be read: {e}"))?;
    if cas.is_empty() {
        return Err("the cluster's CA certificate is empty".to_owned());
    }
    let mut pem = String::with_capacity(
        target.client.certificate.len() + target.client.private_key.len() + 1,
    );
    pem.push_str(&target.client.certificate);
    pem.push('\n');
    pem.push_str(&target.client.private_key);
    // Never the parser's text: it is about the key's encoding and says nothing useful.
    let identity = reqwest::Identity::from_pem(pem.as_bytes())
        .map_err(|_| "the admin client certificate or its key could not be read".to_owned())?;
    drop(pem);
    reqwest::Client::builder()
        .tls_certs_only(cas)
        .identity(identity)
        .https_only(true)
        .connect_timeout(settings.connect_timeout)
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(POOL_MAX_IDLE)
        // A workload API is reached directly, never through the conductor's HTTP proxy
        // variables, and a redirect would leave the trusted address.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "magnum-conductor/",
            env!("CARGO_PKG_VERSION"),
            " health"
        ))
        .build()
        .map_err(|e| {
            format!(
                "the admin client certificate and key, or the CA, could not be used for TLS: {}",
                root_cause(&e)
            )
        })
}

/// `/healthz`, then the node list; the caller bounds the time.
pub(super) async fn probe(
    client: &reqwest::Client,
    target: &ProbeTarget,
    settings: &HealthSettings,
) -> ProbeOutcome {
    let base = match api_base(&target.api_address) {
        Ok(b) => b,
        Err(error) => return ProbeOutcome::Unreachable { error },
    };
    let ctx = Ctx {
        client,
        addr: base,
        settings,
    };
    let api = match ctx.get("/healthz", &[], HEALTHZ_CAP).await {
        Err(error) => return ProbeOutcome::Unreachable { error },
        Ok((status, _)) if refused(status) => {
            return ProbeOutcome::Unreachable {
                error: ctx.refusal("/healthz", status),
            };
        }
        Ok((status, body)) => healthz_text(status, &body),
    };
    let api_ok = api == "ok";
    let mut reason = HealthReason::new();
    reason.insert("api".to_owned(), Value::String(api));
    match ctx.nodes().await {
        Ok(nodes) if nodes.is_empty() => {
            reason.insert(
                "nodes".to_owned(),
                Value::String("No nodes are registered with the API.".to_owned()),
            );
            ProbeOutcome::Unhealthy { reason }
        }
        Ok(nodes) => {
            let mut all_ready = api_ok;
            for (name, ready) in nodes {
                all_ready &= ready == "True";
                reason.insert(format!("{name}.Ready"), Value::String(ready.to_owned()));
            }
            if all_ready {
                ProbeOutcome::Healthy { reason }
            } else {
                ProbeOutcome::Unhealthy { reason }
            }
        }
        // /healthz already says what is wrong; the nodes would only add detail.
        Err(_) if !api_ok => ProbeOutcome::Unhealthy { reason },
        Err(error) => ProbeOutcome::Unreachable { error },
    }
}

/// The base URL without a trailing slash; only https is probed.
fn api_base(address: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(address)
        .map_err(|e| format!("the cluster's API address {address:?} is not a URL: {e}"))?;
    if url.scheme() != "https" {
        return Err(format!(
            "the cluster's API address {address} is not https; only TLS APIs are probed"
        ));
    }
    Ok(address.trim_end_matches('/').to_owned())
}

/// Statuses that mean the API server was not really asked: the client certificate was not
/// accepted, or a proxy or load balancer in front has no API server to pass the request to.
fn refused(status: StatusCode) -> bool {
    matches!(status.as_u16(), 401 | 403 | 502 | 503 | 504)
}

/// What `/healthz` said, as upstream records it: `ok`, or the (failing) checks' text.
fn healthz_text(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if status == StatusCode::OK && text == "ok" {
        return "ok".to_owned();
    }
    let shown = truncate(text, REASON_TEXT_CAP);
    if status == StatusCode::OK {
        shown.to_owned()
    } else if shown.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {shown}")
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Each node's name and its Ready condition: "True", "False" or "Unknown" (also when the
/// condition is missing or has a value Kubernetes does not define).
fn ready_of_nodes(list: &Value) -> Result<Vec<(String, &'static str)>, String> {
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .ok_or("the node list has no items")?;
    let mut out = Vec::with_capacity(items.len());
    for node in items {
        let Some(name) = node.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let ready = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            })
            .and_then(|c| c.get("status").and_then(Value::as_str));
        let ready = match ready {
            Some("True") => "True",
            Some("False") => "False",
            _ => "Unknown",
        };
        out.push((name.to_owned(), ready));
    }
    Ok(out)
}

struct Ctx<'a> {
    client: &'a reqwest::Client,
    addr: String,
    settings: &'a HealthSettings,
}

impl Ctx<'_> {
    /// GET `path`, reading at most `cap` bytes of body.
    async fn get(
        &self,
        path: &str,
        query: &[(&str, &str)],
        cap: usize,
    ) -> Result<(StatusCode, Vec<u8>), String> {
        let url = format!("{}{path}", self.addr);
        let mut resp = self
            .client
            .get(&url)
            .query(query)
            .header(reqwest::header::ACCEPT, "application/json, */*")
            .send()
            .await
            .map_err(|e| self.describe(path, &e))?;
        let status = resp.status();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.describe(path, &e))? {
            if body.len() + chunk.len() > cap {
                return Err(format!(
                    "the answer of the API at {} to {path} is larger than {} KiB",
                    self.addr,
                    cap / 1024
                ));
            }
            body.extend_from_slice(&chunk);
        }
        drop(resp);
        // The connection goes back to the pool from other tasks once the body is read;
        // letting them run first mostly keeps the next request on this connection.
        tokio::task::yield_now().await;
        Ok((status, body))
    }

    /// Every node, page by page (`limit`/`continue`), as the API serves large clusters.
    async fn nodes(&self) -> Result<Vec<(String, &'static str)>, String> {
        let mut nodes = Vec::new();
        let mut token = String::new();
        for _ in 0..MAX_NODE_PAGES {
            let mut query = vec![("limit", NODE_PAGE)];
            if !token.is_empty() {
                query.push(("continue", token.as_str()));
            }
            let (status, body) = self.get("/api/v1/nodes", &query, NODES_PAGE_CAP).await?;
            if status != StatusCode::OK {
                return Err(self.refusal("/api/v1/nodes", status));
            }
            let list: Value = serde_json::from_slice(&body).map_err(|e| {
                format!(
                    "the API at {} answered /api/v1/nodes with something that is not a node list: {e}",
                    self.addr
                )
            })?;
            nodes.extend(ready_of_nodes(&list)?);
            match list.pointer("/metadata/continue").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => token = next.to_owned(),
                _ => return Ok(nodes),
            }
        }
        Err(format!(
            "the API at {} kept paging the node list beyond {MAX_NODE_PAGES} pages",
            self.addr
        ))
    }

    fn refusal(&self, path: &str, status: StatusCode) -> String {
        match status.as_u16() {
            401 | 403 => format!(
                "the API at {} refused the admin client certificate on {path} (HTTP {status})",
                self.addr
            ),
            _ => format!(
                "the API at {} answered {path} with HTTP {status}",
                self.addr
            ),
        }
    }

    /// A transport failure in words; TLS verification failures are named as such.
    fn describe(&self, path: &str, e: &reqwest::Error) -> String {
        let addr = &self.addr;
        if let Some(tls) = rustls_error(e) {
            return match tls {
                rustls::Error::InvalidCertificate(c) => format!(
                    "the certificate of the API at {addr} did not verify against the cluster's CA: {c}"
                ),
                rustls::Error::AlertReceived(alert) => format!(
                    "the API at {addr} rejected the TLS handshake ({alert:?}): it does not accept the admin client certificate"
                ),
                other => format!("TLS with the API at {addr} failed: {other}"),
            };
        }
        let cause = root_cause(e);
        if e.is_connect() && e.is_timeout() {
            format!(
                "could not connect to the API at {addr} within {} s",
                self.settings.connect_timeout.as_secs_f64()
            )
        } else if e.is_connect() {
            format!("could not connect to the API at {addr}: {cause}")
        } else if e.is_timeout() {
            format!("the API at {addr} did not answer {path} in time")
        } else {
            format!("the request to the API at {addr}{path} failed: {cause}")
        }
    }
}

/// The rustls error behind a failed request, if TLS is what failed. It sits in io::Errors
/// nested in io::Errors, whose `source()` skips the error they wrap, so those are opened.
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        cur = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn node_readiness_from_conditions() {
        let list = json!({
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "1"},
            "items": [
                {"metadata": {"name": "a"}, "status": {"conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "True"}]}},
                {"metadata": {"name": "b"}, "status": {"conditions": [
                    {"type": "Ready", "status": "False"}]}},
                {"metadata": {"name": "c"}, "status": {"conditions": [
                    {"type": "Ready", "status": "Unknown"}]}},
                {"metadata": {"name": "d"}, "status": {}},
                {"metadata": {}},
            ]
        });
        assert_eq!(
            ready_of_nodes(&list).unwrap(),
            vec![
                ("a".to_owned(), "True"),
                ("b".to_owned(), "False"),
                ("c".to_owned(), "Unknown"),
                ("d".to_owned(), "Unknown"),
            ]
        );
        assert!(ready_of_nodes(&json!({"kind": "Status"})).is_err());
    }

    #[test]
    fn healthz_text_as_upstream_records_it() {
        assert_eq!(healthz_text(StatusCode::OK, b"ok"), "ok");
        assert_eq!(healthz_text(StatusCode::OK, b"ok\n"), "ok");
        assert_eq!(healthz_text(StatusCode::OK, b"nok"), "nok");
        assert_eq!(
            healthz_text(
                StatusCode::INTERNAL_SERVER_ERROR,
                b"[-]etcd failed: reason withheld\nhealthz check failed\n"
            ),
            "HTTP 500 Internal Server Error: [-]etcd failed: reason withheld\nhealthz check failed"
        );
        assert_eq!(
            healthz_text(StatusCode::INTERNAL_SERVER_ERROR, b""),
            "HTTP 500 Internal Server Error"
        );
        let long = "é".repeat(400);
        assert!(healthz_text(StatusCode::OK, long.as_bytes()).len() <= REASON_TEXT_CAP);
    }

    #[test]
    fn only_https_addresses_are_probed() {
        assert_eq!(
            api_base("https://10.0.0.5:6443/").unwrap(),
            "https://10.0.0.5:6443"
        );
        assert!(
            api_base("http://10.0.0.5:8080")
                .unwrap_err()
                .contains("not https")
        );
        assert!(api_base("10.0.0.5").is_err());
    }

    #[test]
    fn gateway_and_auth_statuses_are_no_verdict() {
        for s in [401, 403, 502, 503, 504] {
            assert!(refused(StatusCode::from_u16(s).unwrap()));
        }
        for s in [200, 404, 500] {
            assert!(!refused(StatusCode::from_u16(s).unwrap()));
        }
    }
}
