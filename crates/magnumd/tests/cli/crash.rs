//! `magnumd serve` killed with SIGKILL while clusters are being created, then restarted: every
//! cluster ends COMPLETE, or FAILED once its create_timeout has passed; none stays in progress.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use magnum_testkit::ChildGuard;

use crate::client::free_port;
use crate::http;

fn serve(conf: &Path, port: u16, log: &Path) -> ChildGuard {
    crate::spawn_magnumd(conf.to_str().unwrap(), "serve", log, port)
}

fn status(port: u16, uuid: &str) -> (String, String) {
    let (code, c) = http(port, None, "GET", &format!("/v1/clusters/{uuid}"), None);
    assert_eq!(code, 200, "{c}");
    (
        c["status"].as_str().unwrap_or_default().to_owned(),
        c["status_reason"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn sigkill_during_create_then_restart_finishes_every_cluster() {
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let db_file = work.path().join("magnum.sqlite");
    let conf = work.path().join("magnum.conf");
    std::fs::write(
        &conf,
        format!(
            "[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n\n\
             [database]\nconnection = sqlite:///{}\n\n\
             [simulated_driver]\ncreate_delay = 3\n\n[conductor]\nsync_interval = 1\n\n\
             [certificates]\ncert_manager_type = x509keypair\n",
            db_file.display()
        ),
    )
    .unwrap();
    let log = work.path().join("serve.log");
    let mut first = serve(&conf, port, &log);

    let (code, t) = http(
        port,
        None,
        "POST",
        "/v1/clustertemplates",
        Some(&json!({"name": "t", "coe": "kubernetes", "image_id": "img",
                     "external_network_id": "public"})),
    );
    assert_eq!(code, 201, "{t}");
    let create = |name: &str, labels: Value| {
        let (code, r) = http(
            port,
            None,
            "POST",
            "/v1/clusters",
            Some(&json!({"name": name, "cluster_template_id": "t", "labels": labels})),
        );
        assert_eq!(code, 202, "{r}");
        r["uuid"].as_str().unwrap().to_owned()
    };
    let finishing = create("finishing", json!({}));
    let hanging = create("hanging", json!({"simulated_hang": "create"}));
    assert_eq!(status(port, &finishing).0, "CREATE_IN_PROGRESS");
    // Let the conductor hand both to the driver, then kill everything mid-create.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(status(port, &finishing).0, "CREATE_IN_PROGRESS");
    first.kill().unwrap();
    first.wait().unwrap();

    // The hanging one was started long enough ago that its 60-minute timeout has passed.
    let sql = format!(
        "UPDATE cluster SET created_at = datetime('now', '-61 minutes') WHERE uuid = '{hanging}'"
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let url = format!("sqlite:///{}", db_file.display());
            let db = magnum_db::Database::connect(magnum_db::DbSettings::new(
                magnum_db::DbUrl::parse(&url).unwrap(),
            ))
            .await
            .unwrap();
            db.execute_text(&sql).await.unwrap();
        });

    let mut second = serve(&conf, port, &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (done, failed) = loop {
        let (a, b) = (status(port, &finishing), status(port, &hanging));
        if !a.0.ends_with("IN_PROGRESS") && !b.0.ends_with("IN_PROGRESS") {
            break (a, b);
        }
        assert!(Instant::now() < deadline, "still in progress: {a:?} {b:?}");
        std::thread::sleep(Duration::from_millis(300));
    };
    second.kill().ok();
    second.wait().ok();
    assert_eq!(done.0, "CREATE_COMPLETE", "{done:?}");
    assert_eq!(failed.0, "CREATE_FAILED");
    assert_eq!(
        failed.1,
        "Cluster creation did not complete within its create_timeout of 60 minutes."
    );
}
