//! The operator commands: `db upgrade`, `db version`, `config sample`.

use std::io::Write;

use magnum_conf::config::Config;
use magnum_db::schema::{self, ALEMBIC_HEAD, UpgradeOutcome};
use magnum_db::{Database, SchemaError};

use crate::Failure;
use crate::settings::db_settings;

pub fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Runtime(format!("cannot write to stdout: {e}")))
}

async fn connect(cfg: &Config) -> Result<Database, Failure> {
    let settings = db_settings(cfg)?;
    Database::connect(settings)
        .await
        .map_err(|e| Failure::Runtime(e.to_string()))
}

fn schema_failure(e: SchemaError) -> Failure {
    Failure::Runtime(e.to_string())
}

pub async fn db_upgrade(cfg: &Config) -> Result<(), Failure> {
    let db = connect(cfg).await?;
    let outcome = schema::upgrade(&db).await.map_err(schema_failure)?;
    let line = match outcome {
        UpgradeOutcome::Created => format!("Created the schema at Alembic head {ALEMBIC_HEAD}\n"),
        UpgradeOutcome::AlreadyAtHead => {
            format!("Already at Alembic head {ALEMBIC_HEAD}; nothing to do\n")
        }
    };
    tracing::info!(target = %db_settings(cfg)?.url.redacted(), "{}", line.trim_end());
    write_stdout(&line)
}

/// Prints the revision like `magnum-db-manage version`: the revision, or `None` when the
/// database has no schema yet.
pub async fn db_version(cfg: &Config) -> Result<(), Failure> {
    let db = connect(cfg).await?;
    let rev = schema::current_revision(&db)
        .await
        .map_err(schema_failure)?;
    write_stdout(&format!("{}\n", rev.as_deref().unwrap_or("None")))
}

/// `magnumd status`: each check on its own line, like `magnum-status upgrade check`.
pub async fn status(cfg: &Config, config_dirs: &[std::path::PathBuf]) -> Result<(), Failure> {
    let mut lines = Vec::new();
    let mut failed = 0;
    let mut report = |name: &str, result: Result<String, String>| match result {
        Ok(detail) => lines.push(format!("OK    {name}: {detail}")),
        Err(detail) => {
            failed += 1;
            lines.push(format!("FAIL  {name}: {detail}"));
        }
    };
    let files = cfg
        .files()
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>();
    report(
        "configuration",
        Ok(if files.is_empty() {
            "no file found; built-in defaults".into()
        } else {
            files.join(", ")
        }),
    );
    match db_settings(cfg) {
        Err(e) => report("database", Err(e.to_string())),
        Ok(settings) => {
            let url = settings.url.redacted();
            match Database::connect(settings).await {
                Err(e) => report("database", Err(e.to_string())),
                Ok(db) => {
                    report("database", Ok(format!("reachable at {url}")));
                    let rev = schema::current_revision(&db)
                        .await
                        .map_err(|e| e.to_string());
                    report(
                        "schema",
                        match rev {
                            Ok(Some(r)) if r == ALEMBIC_HEAD => Ok(format!("at Alembic head {r}")),
                            Ok(Some(r)) => Err(format!(
                                "at {r}, not {ALEMBIC_HEAD}; run `magnumd db upgrade`"
                            )),
                            Ok(None) => Err("empty; run `magnumd db upgrade`".into()),
                            Err(e) => Err(e),
                        },
                    );
                }
            }
        }
    }
    let policy = magnum_conf::policy::Enforcer::new(
        magnum_conf::policy::PolicyOptions::from_config(cfg, config_dirs),
    );
    report(
        "policy",
        policy
            .map(|p| match p.files() {
                [] => "built-in defaults".to_owned(),
                files => files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .map_err(|e| e.to_string()),
    );
    if cfg.api.auth_strategy == "keystone" {
        let check = match crate::server::keystone_client(cfg) {
            Err(e) => Err(e.to_string()),
            Ok(k) => k
                .project_exists("0")
                .await
                .map(|_| {
                    format!(
                        "{} answers and accepts the service credentials",
                        k.identity_url()
                    )
                })
                .map_err(|e| e.to_string()),
        };
        report("keystone", check);
    }
    if cfg.default.transport_url.is_some() {
        let check = match magnum_rpc::oslo::connect(cfg).await {
            Err(e) => Err(e.to_string()),
            Ok(handle) => {
                let up = handle
                    .wait_connected(std::time::Duration::from_secs(5))
                    .await;
                handle.close().await;
                if up {
                    Ok("RabbitMQ of [DEFAULT] transport_url accepts the connection".into())
                } else {
                    Err("no host of [DEFAULT] transport_url accepts a connection".into())
                }
            }
        };
        report("message broker", check);
    }
    let store = match cfg.certificates.cert_manager_type.as_str() {
        "x509keypair" => Ok("x509keypair (in the database)".to_owned()),
        "barbican" => barbican_check(cfg).await,
        "local" => Ok(format!(
            "local, in {} (for tests only)",
            cfg.certificates.storage_path
        )),
        other => Err(format!(
            "[certificates] cert_manager_type = {other} is not available; use barbican or x509keypair"
        )),
    };
    report("certificates", store);
    lines.push(String::new());
    write_stdout(&lines.join("\n"))?;
    if failed > 0 {
        return Err(Failure::Runtime(format!("{failed} check(s) failed")));
    }
    Ok(())
}

/// Barbican needs the service user to authenticate and the catalogue to list key-manager.
pub(crate) async fn barbican_check(cfg: &Config) -> Result<String, String> {
    let settings = crate::settings::openstack_settings(cfg).map_err(|e| e.to_string())?;
    if settings.credentials.is_none() || settings.auth_url.is_none() {
        return Err("[certificates] cert_manager_type = barbican needs Magnum's service credentials in [keystone_auth]".into());
    }
    let os =
        std::sync::Arc::new(magnum_openstack::OpenStack::new(settings).map_err(|e| e.to_string())?);
    let session = os.service_session().await.map_err(|e| e.to_string())?;
    let url = session
        .endpoint(magnum_openstack::ServiceType::KeyManager)
        .map_err(|e| e.to_string())?;
    Ok(format!("barbican at {url}"))
}
