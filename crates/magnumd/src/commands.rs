//! The operator commands: `db upgrade`, `db version`, `config sample`.

use std::io::Write;

use magnum_core::config::Config;
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
