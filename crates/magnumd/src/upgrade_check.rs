//! `magnumd status upgrade check`: what upstream's `magnum-status upgrade check` checks (the
//! policy file's JSON-to-YAML migration), and what a cut-over to magnum-rs needs (schema at
//! head, the policy file loads, every template's driver is here, the certificate store
//! answers), printed as oslo.upgradecheck's table, with its exit codes: 0 success, 1 warning,
//! 2 failure.

use magnum_conf::config::Config;
use magnum_core::RequestContext;
use magnum_db::repo::Page;
use magnum_db::schema::{self, ALEMBIC_HEAD};

use crate::Failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Success = 0,
    Warning = 1,
    Failure = 2,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Success => "Success",
            Outcome::Warning => "Warning",
            Outcome::Failure => "Failure",
        }
    }
}

pub struct Check {
    pub name: &'static str,
    pub outcome: Outcome,
    pub details: Option<String>,
}

fn check(name: &'static str, outcome: Outcome, details: Option<String>) -> Check {
    Check {
        name,
        outcome,
        details,
    }
}

/// Upstream's one check (a JSON policy file still in use), and whether the policy loads.
fn policy(cfg: &Config, config_dirs: &[std::path::PathBuf]) -> [Check; 2] {
    let migration = "Policy File JSON to YAML Migration";
    let loads = "Policy file loads";
    match magnum_conf::policy::Enforcer::new(magnum_conf::policy::PolicyOptions::from_config(
        cfg,
        config_dirs,
    )) {
        Err(e) => [
            check(migration, Outcome::Success, None),
            check(loads, Outcome::Failure, Some(e.to_string())),
        ],
        Ok(enforcer) => {
            let json: Vec<String> = enforcer
                .files()
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "json"))
                .map(|f| f.display().to_string())
                .collect();
            let first = if json.is_empty() {
                check(migration, Outcome::Success, None)
            } else {
                check(
                    migration,
                    Outcome::Warning,
                    Some(format!(
                        "JSON policy files are deprecated ({}): convert them to YAML (oslopolicy-convert-json-to-yaml) and point [oslo_policy] policy_file at the result.",
                        json.join(", ")
                    )),
                )
            };
            [first, check(loads, Outcome::Success, None)]
        }
    }
}

async fn database(cfg: &Config) -> (Check, Option<Check>) {
    let name = "Database schema at head";
    let db = match crate::settings::db_settings(cfg) {
        Ok(s) => magnum_db::Database::connect(s)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let db = match db {
        Ok(db) => db,
        Err(e) => return (check(name, Outcome::Failure, Some(e)), None),
    };
    let schema_check = match schema::current_revision(&db).await {
        Ok(Some(r)) if r == ALEMBIC_HEAD => check(name, Outcome::Success, None),
        Ok(Some(r)) => check(
            name,
            Outcome::Failure,
            Some(format!(
                "at {r}, not {ALEMBIC_HEAD}: run `magnumd db upgrade`"
            )),
        ),
        Ok(None) => check(
            name,
            Outcome::Failure,
            Some("empty: run `magnumd db upgrade`".into()),
        ),
        Err(e) => check(name, Outcome::Failure, Some(e.to_string())),
    };
    if schema_check.outcome != Outcome::Success {
        return (schema_check, None);
    }
    (schema_check, Some(template_drivers(cfg, &db).await))
}

/// Every template's driver must be one this deployment has, or its clusters cannot be
/// managed after the cut-over.
async fn template_drivers(cfg: &Config, db: &magnum_db::Database) -> Check {
    let name = "Cluster template drivers";
    let registry = magnum_conductor::drivers_from_config(cfg);
    let all = RequestContext::admin_all_tenants();
    let rows = match db.cluster_templates().list(&all, &Page::default()).await {
        Ok(r) => r,
        Err(e) => return check(name, Outcome::Failure, Some(e.to_string())),
    };
    let missing: Vec<String> = rows
        .iter()
        .map(magnum_core::model::ClusterTemplate::from)
        .filter_map(|t| {
            registry
                .for_template(&t)
                .err()
                .map(|e| format!("{} ({}): {e}", t.name.clone().unwrap_or_default(), t.uuid))
        })
        .collect();
    if missing.is_empty() {
        check(name, Outcome::Success, None)
    } else {
        check(
            name,
            Outcome::Warning,
            Some(format!(
                "{} template(s) need a driver that is not loaded (have: {}): {}",
                missing.len(),
                registry.names().join(", "),
                missing.join("; ")
            )),
        )
    }
}

async fn certificate_store(cfg: &Config) -> Check {
    let name = "Certificate store";
    match cfg.certificates.cert_manager_type.trim() {
        "x509keypair" | "local" => check(name, Outcome::Success, None),
        "barbican" => match crate::commands::barbican_check(cfg).await {
            Ok(_) => check(name, Outcome::Success, None),
            Err(e) => check(name, Outcome::Failure, Some(e)),
        },
        other => check(
            name,
            Outcome::Failure,
            Some(format!("unknown [certificates] cert_manager_type {other}")),
        ),
    }
}

pub async fn run(cfg: &Config, config_dirs: &[std::path::PathBuf]) -> Vec<Check> {
    let mut checks: Vec<Check> = policy(cfg, config_dirs).into();
    let (schema_check, drivers) = database(cfg).await;
    checks.push(schema_check);
    checks.extend(drivers);
    checks.push(certificate_store(cfg).await);
    checks
}

/// oslo.upgradecheck's table.
pub fn render(checks: &[Check]) -> String {
    let mut rows = vec!["Upgrade Check Results".to_owned()];
    let mut blocks = Vec::new();
    for c in checks {
        blocks.push(vec![
            format!("Check: {}", c.name),
            format!("Result: {}", c.outcome.word()),
            format!("Details: {}", c.details.as_deref().unwrap_or("None")),
        ]);
    }
    let width = blocks
        .iter()
        .flatten()
        .chain(rows.iter())
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let line = format!("+{}+", "-".repeat(width + 2));
    let row = |t: &str| format!("| {t}{} |", " ".repeat(width - t.chars().count()));
    let mut out = vec![line.clone(), row(&rows.remove(0)), line.clone()];
    for b in &blocks {
        for l in b {
            out.push(row(l));
        }
        out.push(line.clone());
    }
    out.join("\n") + "\n"
}

/// Prints the table; the exit code is the worst outcome's.
pub async fn main(cfg: &Config, config_dirs: &[std::path::PathBuf]) -> Result<u8, Failure> {
    let checks = run(cfg, config_dirs).await;
    crate::commands::write_stdout(&render(&checks))?;
    Ok(checks
        .iter()
        .map(|c| c.outcome)
        .max()
        .unwrap_or(Outcome::Success) as u8)
}
