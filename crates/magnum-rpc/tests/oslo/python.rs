//! Interop with the real Python library (PyPI oslo.messaging 18.3.1, test-support/oslo/):
//! a Python client against our server, our client against a Python server, and a Python
//! notification listener receiving our notifications.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use magnum_core::ErrorKind;
use magnum_rpc::oslo::{OsloHandle, OsloSettings, PassThrough};
use magnum_rpc::*;
use magnum_testkit::ChildGuard;
use serde_json::{Value, json};

use crate::common::*;

fn support_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-support/oslo")
}

/// The venv's python (built on first use), or `None` to skip.
fn python() -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(support_dir().join("setup-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("bash");
    if !out.status.success() {
        magnum_testkit::skip(
            "test-support/oslo/setup-venv.sh could not build the oslo.messaging venv",
        );
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A running peer.py: its stdout lines as JSON.
struct Peer {
    child: ChildGuard,
    stdin: Option<ChildStdin>,
    lines: std_mpsc::Receiver<String>,
}

impl Peer {
    fn spawn(python: &PathBuf, args: &[&str]) -> Self {
        let mut child = ChildGuard::new(
            Command::new(python)
                .arg(support_dir().join("peer.py"))
                .args(args)
                .env("PYTHONPATH", support_dir().join("stub"))
                .env("PYTHONWARNINGS", "ignore")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python"),
        );
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std_mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn next(&self, secs: u64) -> Value {
        let line =
            tokio::task::block_in_place(|| self.lines.recv_timeout(Duration::from_secs(secs)))
                .expect("no output from the Python peer in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn write_and_close(&mut self, text: &str) {
        let mut stdin = self.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
    }

    /// Closes stdin (servers stop on EOF) and waits for the process.
    fn finish(mut self) {
        drop(self.stdin.take());
        let _ = tokio::task::block_in_place(|| self.child.wait());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_against_our_server() {
    let Some(url) = rabbit_url() else { return };
    let Some(py) = python() else { return };
    let names = Names::new("pyclient");
    let h = connect(&url, &names).await;
    let (rec, mut seen) = recorder();
    let server = h.start_server(rec, Arc::new(PassThrough), None);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let turl = test_url(&url);
    let mut peer = Peer::spawn(&py, &["client", &turl, &names.exchange, &names.topic]);
    let upgrade = json!({"cluster_uuid": "c1", "nodegroup_uuid": "n1",
                         "cluster_template_uuid": "t1", "max_batch_size": null});
    let ops = json!([
        {"kind": "cast", "method": "nodegroup_delete", "args": {"cluster_uuid": "c1", "nodegroup_uuid": "n1"}},
        {"kind": "call", "method": "sign_certificate", "args": {"cluster_uuid": "c1", "csr": "CSR", "ca_cert_type": null}},
        {"kind": "call", "method": "get_ca_certificate", "args": {"cluster_uuid": "c9", "ca_cert_type": null}},
        {"kind": "call", "method": "cluster_upgrade", "args": upgrade},
        {"kind": "call", "method": "echo", "args": {"message": "hi"}},
        {"kind": "call", "method": "ping_conductor", "version": "2.0"},
        {"kind": "call", "method": "ping_conductor", "server": server.server_id()},
        // 3 s of work under a 2 s call monitor: only our heartbeats keep the call alive.
        {"kind": "call", "method": "credential_rotate", "args": {"cluster_uuid": "c1"},
         "timeout": 20, "call_monitor_timeout": 2},
    ]);
    peer.write_and_close(&ops.to_string());

    assert_eq!(peer.next(20), json!({"ok": null}));
    let s = next_seen(&mut seen, 5).await;
    assert_eq!(s.method, "nodegroup_delete");
    assert_eq!(
        s.args,
        json!({"cluster_uuid": "c1", "nodegroup_uuid": "n1"})
    );
    assert_eq!(
        s.ctx.user_id.as_deref(),
        Some("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
    );
    assert_eq!(
        s.ctx.project_id.as_deref(),
        Some("a1b2c3d4e5f60718293a4b5c6d7e8f90")
    );
    assert_eq!(s.ctx.user_name.as_deref(), Some("alice"));
    assert_eq!(s.ctx.roles, ["member", "reader"]);

    assert_eq!(peer.next(10), json!({"ok": "signed:CSR"}));

    // Our ClusterNotFound is rebuilt as the Magnum class, code 404.
    let e = peer.next(10)["error"].clone();
    assert_eq!(e["type"], "ClusterNotFound_Remote");
    assert_eq!(e["is_cluster_not_found"], true);
    assert_eq!(e["code"], 404);
    assert_eq!(e["kwargs"], json!({"cluster": "c9", "code": 404}));
    assert_eq!(e["first_line"], "Cluster c9 could not be found.");

    // A '%' in the message survives Python's re-formatting.
    let e = peer.next(10)["error"].clone();
    assert_eq!(e["type"], "NotSupported_Remote");
    assert_eq!(e["code"], 400);
    assert_eq!(
        e["first_line"],
        "Upgrading more than 50% of the nodes at once is not supported."
    );

    // oslo's dispatcher errors, as a Python conductor would send them.
    let e = peer.next(10)["error"].clone();
    assert_eq!(e["type"], "RemoteError");
    assert_eq!(e["exc_type"], "NoSuchMethod");
    assert_eq!(e["value"], "Endpoint does not support RPC method echo");
    let e = peer.next(10)["error"].clone();
    assert_eq!(e["exc_type"], "UnsupportedVersion");
    assert_eq!(
        e["value"],
        "Endpoint does not support RPC version 2.0. Attempted method: ping_conductor"
    );

    assert_eq!(peer.next(10), json!({"ok": true}));
    assert_eq!(peer.next(20), json!({"ok": null}));
    for expected in [
        "sign_certificate",
        "get_ca_certificate",
        "cluster_upgrade",
        "ping_conductor",
        "credential_rotate",
    ] {
        assert_eq!(next_seen(&mut seen, 5).await.method, expected);
    }
    nothing_more(&mut seen, 200).await;
    peer.finish();
    server.stop().await;
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_against_python_server() {
    let Some(url) = rabbit_url() else { return };
    let Some(py) = python() else { return };
    let names = Names::new("pyserver");
    let turl = test_url(&url);
    let peer = Peer::spawn(
        &py,
        &[
            "server",
            &turl,
            &names.exchange,
            &names.topic,
            "pyconductor",
        ],
    );
    assert_eq!(peer.next(30), json!("READY"));

    let h = connect(&url, &names).await;
    let t = h.transport(Arc::new(PassThrough));
    let msg = |method: &str, args: Value| Message {
        context: ctx(),
        method: method.into(),
        args,
    };

    t.cast(msg("cluster_delete", json!({"cluster_uuid": "c1"})))
        .await
        .unwrap();
    let got = peer.next(10);
    assert_eq!(got["method"], "cluster_delete");
    assert_eq!(got["args"], json!({"cluster_uuid": "c1"}));
    let context = got["context"].as_object().unwrap();
    // oslo's listener adds `client_timeout` (from `_timeout`) on its side.
    let mut keys: Vec<&str> = context
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "client_timeout")
        .collect();
    keys.sort_unstable();
    let mut expected = vec![
        "user",
        "project_id",
        "system_scope",
        "project",
        "domain",
        "user_domain",
        "project_domain",
        "is_admin",
        "read_only",
        "show_deleted",
        "auth_token",
        "request_id",
        "global_request_id",
        "resource_uuid",
        "roles",
        "user_identity",
        "is_admin_project",
        "auth_url",
        "user_domain_id",
        "user_domain_name",
        "user_name",
        "user_id",
        "project_name",
        "auth_token_info",
        "all_tenants",
    ];
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(context["is_admin"], false);
    assert_eq!(context["roles"], json!(["member", "reader"]));
    assert_eq!(context["user_id"], "0f1e2d3c4b5a69788796a5b4c3d2e1f0");
    assert_eq!(context["auth_token"], Value::Null);

    let r = t
        .call(
            msg(
                "sign_certificate",
                json!({"cluster_uuid": "c1", "csr": "CSR"}),
            ),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(r, json!({"pem": "py:CSR"}));
    assert_eq!(peer.next(5)["method"], "sign_certificate");

    // A Python Magnum failure: kind from kwargs.code, class and message kept.
    let err = t
        .call(
            msg("get_ca_certificate", json!({"cluster_uuid": "c9"})),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    let RpcError::Remote(r) = err else {
        panic!("{err:?}")
    };
    assert_eq!(r.kind, ErrorKind::NotFound);
    assert_eq!(r.class.as_deref(), Some("ClusterNotFound"));
    assert_eq!(r.message, "Cluster c9 could not be found.");
    assert_eq!(r.params, vec![("cluster".to_owned(), json!("c9"))]);
    assert_eq!(peer.next(5)["method"], "get_ca_certificate");

    let err = t
        .call(
            msg("echo", json!({"message": "hi"})),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    let RpcError::Remote(r) = err else {
        panic!("{err:?}")
    };
    assert_eq!(r.class.as_deref(), Some("NoSuchMethod"));
    assert_eq!(r.kind, ErrorKind::Internal);

    let direct = t.to_server("pyconductor");
    let r = direct
        .call(msg("ping_conductor", json!({})), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(r, json!(true));
    assert_eq!(peer.next(5)["method"], "ping_conductor");

    peer.finish();
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_listener_receives_our_notifications() {
    let Some(url) = rabbit_url() else { return };
    let Some(py) = python() else { return };
    let names = Names::new("notify");
    let topic = unique("notifications");
    let turl = test_url(&url);
    let peer = Peer::spawn(&py, &["listen", &turl, &names.exchange, &topic]);
    assert_eq!(peer.next(30), json!("READY"));

    let mut s = OsloSettings::for_url(&turl).unwrap();
    s.control_exchange = names.exchange.clone();
    s.notification_drivers = vec!["messagingv2".into()];
    s.notification_topics = vec![topic.clone()];
    let h = OsloHandle::connect(s).await.unwrap();
    assert!(h.wait_connected(Duration::from_secs(10)).await);
    let n = h.notifier();
    assert!(n.is_enabled());

    let payload = json!({"typeURI": "http://schemas.dmtf.org/cloud/audit/1.0/event",
                         "action": "delete", "outcome": "pending",
                         "target": {"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}});
    let message = |priority: &str, event: &str| {
        json!({
            "message_id": uuid::Uuid::new_v4().to_string(),
            "publisher_id": "container-infra.ctl-a",
            "event_type": event,
            "priority": priority,
            "payload": payload,
            "timestamp": "2026-07-18 12:30:45.123456",
        })
    };
    n.publish_with_context("INFO", message("INFO", "magnum.cluster.delete"), &ctx())
        .await
        .unwrap();
    n.publish("ERROR", message("ERROR", "magnum.cluster.update"))
        .await
        .unwrap();

    let mut got = [peer.next(10), peer.next(10)];
    got.sort_by_key(|v| v["priority"].as_str().unwrap_or("").to_owned());
    let (error, info) = (&got[0], &got[1]);
    assert_eq!(info["priority"], "info");
    assert_eq!(info["event_type"], "magnum.cluster.delete");
    assert_eq!(info["publisher_id"], "container-infra.ctl-a");
    assert_eq!(info["payload"], payload);
    assert_eq!(
        info["context"]["user_id"],
        "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    );
    assert_eq!(info["context"]["auth_token"], Value::Null);
    assert_eq!(info["context"]["all_tenants"], false);
    assert!(info["metadata"]["message_id"].is_string());
    assert_eq!(error["priority"], "error");
    assert_eq!(error["event_type"], "magnum.cluster.update");
    peer.finish();
    h.close().await;
}
