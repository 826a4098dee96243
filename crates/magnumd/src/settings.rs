//! From magnum.conf to the settings each layer takes, and logging.

use std::time::Duration;

use magnum_core::config::Config;
use magnum_db::{DbSettings, DbUrl};
use tracing_subscriber::EnvFilter;

use crate::Failure;

/// Logs go to stderr; `RUST_LOG` overrides `[DEFAULT] debug`.
pub fn init_logging(cfg: &Config) {
    let default = if cfg.default.debug {
        "debug,sqlx=warn"
    } else {
        "info,sqlx=warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn non_negative(v: i64, unlimited: u32) -> u32 {
    if v < 0 {
        unlimited
    } else {
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

/// `[database]` as storage takes it. A URL we cannot use is a configuration error.
pub fn db_settings(cfg: &Config) -> Result<DbSettings, Failure> {
    let d = &cfg.database;
    let url = DbUrl::parse(d.connection.expose())
        .map_err(|e| Failure::Config(format!("invalid value for [database] connection: {e}")))?;
    let mut s = DbSettings::new(url);
    s.mysql_sql_mode = d.mysql_sql_mode.clone();
    s.max_pool_size = d.max_pool_size.max(1);
    // -1 means "no limit" upstream; a pool still needs a ceiling.
    s.max_overflow = non_negative(d.max_overflow, 100);
    s.pool_timeout = u64::from(d.pool_timeout.max(1));
    s.connection_recycle_time = u64::from(non_negative(d.connection_recycle_time, u32::MAX));
    s.db_max_retries = non_negative(d.db_max_retries, u32::MAX);
    s.db_retry_interval = Duration::from_secs(u64::from(d.db_retry_interval));
    s.db_inc_retry_interval = d.db_inc_retry_interval;
    s.db_max_retry_interval = Duration::from_secs(u64::from(d.db_max_retry_interval));
    Ok(s)
}

/// `magnumd serve` without a config file keeps its SQLite database in a data directory
/// (`--data-dir`, else `[DEFAULT] state_path`) and creates that directory.
pub fn embedded_defaults(
    cfg: &mut Config,
    data_dir: Option<&std::path::Path>,
    found_config: bool,
) -> Result<(), Failure> {
    if found_config && data_dir.is_none() {
        return Ok(());
    }
    let dir = data_dir
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::PathBuf::from(&cfg.default.state_path));
    std::fs::create_dir_all(&dir).map_err(|e| {
        Failure::Runtime(format!(
            "cannot create the data directory {}: {e}",
            dir.display()
        ))
    })?;
    let dir = dir.canonicalize().unwrap_or(dir);
    if !found_config {
        // Barbican is upstream's default store but not available here yet; the embedded
        // default keeps certificates in its own database.
        cfg.certificates.cert_manager_type = "x509keypair".into();
    }
    if !found_config || cfg.database.connection.expose().starts_with("sqlite") {
        cfg.database.connection =
            magnum_core::config::Secret::new(format!("sqlite:///{}/magnum.sqlite", dir.display()));
    }
    Ok(())
}
