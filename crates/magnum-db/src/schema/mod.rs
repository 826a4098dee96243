//! Schema creation at upstream's Alembic head, and the `alembic_version` check.
//!
//! `alembic_version` is the one version authority, shared with Python's `magnum-db-manage`:
//! an empty database gets the head schema and the head revision; a database already at head
//! is left alone; anything else is refused with a message saying what to run first.

use magnum_core::Error;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::errors::{SchemaError, map_db_err};
use crate::{Database, Engine};

/// The Alembic revision whose schema magnum-rs implements.
pub const ALEMBIC_HEAD: &str = "b3e1cf4a2d5e";

/// Every revision of upstream's linear chain, oldest first (the head is last).
pub const KNOWN_REVISIONS: [&str; 77] = [
    "2581ebaf0cb2",
    "3bea56f25597",
    "5793cd26898d",
    "3a938526b35d",
    "35cff7c86221",
    "1afee1db6cd0",
    "2d1354bbf76e",
    "29affeaa2bc2",
    "2ace4006498",
    "456126c6c9e9",
    "4ea34a59a64c",
    "e772b2598d9",
    "2d8657c0cdc",
    "4956f03cabad",
    "592131657ca1",
    "3b6c4c42adb4",
    "2b5f24dd95de",
    "59e7664a8ba1",
    "156ceb17fb0a",
    "1c1ff5e56048",
    "53882537ac57",
    "14328d6a57e3",
    "421102d1f2d2",
    "6f21dc998bb",
    "966a99e70ff",
    "6f21dc920bb",
    "5518af8dbc21",
    "4e263f236334",
    "3be65537a94a",
    "1481f5b560dd",
    "1d045384b966",
    "27ad304554e2",
    "5ad410481b88",
    "2ae93c9c6191",
    "33ef79969018",
    "417917e778f5",
    "5977879072a7",
    "40f325033343",
    "adc3b7679ae",
    "57fbdf2327a2",
    "05d3e97de9ee",
    "bb42b7cad130",
    "5d4caa6e0a42",
    "ee92b41b8809",
    "049f81f6f584",
    "e647f5931da8",
    "ef08a5e057bd",
    "d072f58ab240",
    "a1136d335540",
    "085e601a39f6",
    "68ce16dfd341",
    "e0653b2d5271",
    "1f196a3dabae",
    "859fb45df249",
    "b1f612248cab",
    "fcb4efee8f8b",
    "fb03fdef8919",
    "720f640f43d1",
    "bc46ba6cf949",
    "aa0cc27839af",
    "a0e7c8450ab1",
    "52bcaf58fecb",
    "04c625aa95ba",
    "041d9a0f1159",
    "9a1539f1cd2c",
    "cbbc65a86986",
    "87e62e3c7abc",
    "ac92cbae311c",
    "461d798132c7",
    "47380964133d",
    "c04e925e65c2",
    "95096e2334ee",
    "f1d8b0ab8b8d",
    "7da8489d6a68",
    "c0f832afc4fd",
    "d7e6a4d39fe4",
    "b3e1cf4a2d5e",
];

/// The tables of the head schema, in creation order (`alembic_version` last, so a database
/// whose creation failed half-way never claims to be at head).
pub const TABLES: [&str; 8] = [
    "cluster_template",
    "cluster",
    "nodegroup",
    "x509keypair",
    "magnum_service",
    "quotas",
    "federation",
    "alembic_version",
];

/// Tables any Magnum release ever had, to recognise an unversioned Magnum database.
const MAGNUM_TABLES: [&str; 13] = [
    "cluster",
    "cluster_template",
    "nodegroup",
    "x509keypair",
    "magnum_service",
    "quotas",
    "federation",
    "bay",
    "baymodel",
    "baylock",
    "node",
    "pod",
    "container",
];

const MYSQL_DDL: &str = include_str!("mysql.sql");
const POSTGRES_DDL: &str = include_str!("postgres.sql");
const SQLITE_DDL: &str = include_str!("sqlite.sql");

/// What `upgrade` did.
#[derive(Debug, PartialEq, Eq)]
pub enum UpgradeOutcome {
    Created,
    AlreadyAtHead,
}

/// The DDL statements for an engine, in `TABLES` order.
pub fn ddl(engine: Engine) -> Vec<&'static str> {
    let text = match engine {
        Engine::MySql => MYSQL_DDL,
        Engine::Postgres => POSTGRES_DDL,
        Engine::Sqlite => SQLITE_DDL,
    };
    // Each chunk may start with comment lines; the statement starts at CREATE TABLE.
    text.split("\n;\n")
        .filter_map(|chunk| chunk.find("CREATE TABLE").map(|i| chunk[i..].trim_end()))
        .collect()
}

async fn existing_tables(db: &Database) -> Result<Vec<String>, Error> {
    let sql = match db.engine() {
        Engine::MySql => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
        }
        Engine::Postgres => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        }
        Engine::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'",
    };
    let rows = db
        .conn()
        .query_all_raw(Statement::from_string(db.backend(), sql))
        .await
        .map_err(map_db_err)?;
    rows.iter()
        .map(|r| r.try_get_by_index::<String>(0).map_err(map_db_err))
        .collect()
}

/// The revision in `alembic_version`, or `None` when the table is missing or empty.
pub async fn current_revision(db: &Database) -> Result<Option<String>, SchemaError> {
    let tables = existing_tables(db).await?;
    if !tables.iter().any(|t| t == "alembic_version") {
        return Ok(None);
    }
    let rows = db
        .conn()
        .query_all_raw(Statement::from_string(
            db.backend(),
            "SELECT version_num FROM alembic_version",
        ))
        .await
        .map_err(map_db_err)?;
    let mut versions = rows
        .iter()
        .map(|r| r.try_get_by_index::<String>(0).map_err(map_db_err))
        .collect::<Result<Vec<_>, _>>()?;
    versions.sort();
    Ok(match versions.len() {
        0 => None,
        _ => Some(versions.join(",")),
    })
}

/// Refuse to serve a database that is not exactly at the head this build implements.
pub async fn ensure_at_head(db: &Database) -> Result<(), SchemaError> {
    match current_revision(db).await? {
        Some(v) if v == ALEMBIC_HEAD => Ok(()),
        found => Err(SchemaError::NotAtHead {
            found: found.unwrap_or_else(|| "no alembic_version".into()),
            head: ALEMBIC_HEAD,
        }),
    }
}

/// `magnumd db upgrade`.
pub async fn upgrade(db: &Database) -> Result<UpgradeOutcome, SchemaError> {
    if let Some(found) = current_revision(db).await? {
        if found == ALEMBIC_HEAD {
            return Ok(UpgradeOutcome::AlreadyAtHead);
        }
        if KNOWN_REVISIONS.contains(&found.as_str()) {
            return Err(SchemaError::OlderRevision {
                found,
                head: ALEMBIC_HEAD,
            });
        }
        return Err(SchemaError::UnknownRevision { found });
    }
    let present: Vec<String> = existing_tables(db)
        .await?
        .into_iter()
        .filter(|t| MAGNUM_TABLES.contains(&t.as_str()) || t == "alembic_version")
        .collect();
    if !present.is_empty() {
        return Err(SchemaError::Unversioned {
            tables: present.join(", "),
        });
    }
    create_all(db).await?;
    Ok(UpgradeOutcome::Created)
}

async fn create_all(db: &Database) -> Result<(), SchemaError> {
    let backend = db.backend();
    let insert = Statement::from_sql_and_values(
        backend,
        match backend {
            DbBackend::Postgres => "INSERT INTO alembic_version (version_num) VALUES ($1)",
            _ => "INSERT INTO alembic_version (version_num) VALUES (?)",
        },
        [ALEMBIC_HEAD.into()],
    );
    if db.engine() == Engine::MySql {
        // MySQL commits each DDL statement by itself: on failure, drop what was made so the
        // database is empty again rather than half-created.
        let mut created = Vec::new();
        for (table, stmt) in TABLES.iter().zip(ddl(Engine::MySql)) {
            if let Err(e) = db.conn().execute_unprepared(stmt).await {
                for t in created.iter().rev() {
                    let _ = db
                        .conn()
                        .execute_unprepared(&format!("DROP TABLE IF EXISTS `{t}`"))
                        .await;
                }
                return Err(SchemaError::Ddl(format!("{table}: {}", map_db_err(e))));
            }
            created.push(*table);
        }
        if let Err(e) = db.conn().execute_raw(insert).await {
            let _ = db
                .conn()
                .execute_unprepared("DROP TABLE IF EXISTS `alembic_version`")
                .await;
            return Err(SchemaError::Ddl(format!(
                "alembic_version: {}",
                map_db_err(e)
            )));
        }
        return Ok(());
    }
    // PostgreSQL and SQLite have transactional DDL: all or nothing.
    use sea_orm::TransactionTrait;
    let txn = db.conn().begin().await.map_err(map_db_err)?;
    for (table, stmt) in TABLES.iter().zip(ddl(db.engine())) {
        txn.execute_unprepared(stmt)
            .await
            .map_err(|e| SchemaError::Ddl(format!("{table}: {}", map_db_err(e))))?;
    }
    txn.execute_raw(insert)
        .await
        .map_err(|e| SchemaError::Ddl(format!("alembic_version: {}", map_db_err(e))))?;
    txn.commit().await.map_err(map_db_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_has_one_statement_per_table_in_order() {
        for engine in [Engine::MySql, Engine::Postgres, Engine::Sqlite] {
            let stmts = ddl(engine);
            assert_eq!(stmts.len(), TABLES.len(), "{engine}");
            for (stmt, table) in stmts.iter().zip(TABLES) {
                let quoted = if engine == Engine::MySql {
                    format!("CREATE TABLE `{table}` (")
                } else {
                    format!("CREATE TABLE \"{table}\" (")
                };
                assert!(stmt.starts_with(&quoted), "{engine}: {stmt}");
                assert!(!stmt.contains("\n;"));
            }
        }
    }

    #[test]
    fn head_is_last_known_revision() {
        assert_eq!(KNOWN_REVISIONS.last(), Some(&ALEMBIC_HEAD));
    }
}
