//! `db upgrade` on each engine, and the MariaDB schema against upstream's reference dump.

use std::collections::BTreeMap;

use magnum_db::schema::{self, ALEMBIC_HEAD, TABLES, UpgradeOutcome};
use magnum_db::{Engine, SchemaError};
use sea_orm::{ConnectionTrait, Statement};

use crate::common::TestDb;
use crate::on_every_engine;

#[tokio::test]
async fn upgrade_creates_head_then_is_a_no_op() {
    on_every_engine!(empty, |t| {
        assert_eq!(schema::current_revision(&t.db).await.unwrap(), None);
        assert_eq!(
            schema::upgrade(&t.db).await.unwrap(),
            UpgradeOutcome::Created
        );
        assert_eq!(
            schema::current_revision(&t.db).await.unwrap().as_deref(),
            Some(ALEMBIC_HEAD)
        );
        assert_eq!(
            schema::upgrade(&t.db).await.unwrap(),
            UpgradeOutcome::AlreadyAtHead
        );
        schema::ensure_at_head(&t.db).await.unwrap();
    });
}

async fn exec(t: &TestDb, sql: &str) {
    t.db.sea_connection().execute_unprepared(sql).await.unwrap();
}

#[tokio::test]
async fn other_revisions_are_refused_with_advice() {
    on_every_engine!(at_head, |t| {
        exec(
            &t,
            "UPDATE alembic_version SET version_num = 'd7e6a4d39fe4'",
        )
        .await;
        let e = schema::upgrade(&t.db).await.unwrap_err();
        assert!(matches!(e, SchemaError::OlderRevision { .. }), "{e}");
        assert!(e.to_string().contains("magnum-db-manage upgrade"), "{e}");
        assert!(schema::ensure_at_head(&t.db).await.is_err());

        exec(
            &t,
            "UPDATE alembic_version SET version_num = 'ffffffffffff'",
        )
        .await;
        let e = schema::upgrade(&t.db).await.unwrap_err();
        assert!(matches!(e, SchemaError::UnknownRevision { .. }), "{e}");
    });
}

#[tokio::test]
async fn magnum_tables_without_a_version_are_refused() {
    on_every_engine!(at_head, |t| {
        exec(&t, "DROP TABLE alembic_version").await;
        let e = schema::upgrade(&t.db).await.unwrap_err();
        assert!(matches!(e, SchemaError::Unversioned { .. }), "{e}");
    });
}

/// Upstream 23.0.0's `SHOW CREATE TABLE` output, by table, AUTO_INCREMENT counters removed.
fn reference_tables() -> BTreeMap<String, String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/magnum-head-mariadb.sql"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split("\n;\n")
        .filter_map(|chunk| {
            chunk
                .find("CREATE TABLE `")
                .map(|i| chunk[i..].trim().to_owned())
        })
        .map(|stmt| {
            let name = stmt.split('`').nth(1).unwrap().to_owned();
            (name, stmt)
        })
        .collect()
}

fn strip_auto_increment(stmt: &str) -> String {
    stmt.split(' ')
        .filter(|w| !w.starts_with("AUTO_INCREMENT="))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn mariadb_schema_equals_upstream_reference() {
    let Some(t) = TestDb::at_head(Engine::MySql).await else {
        return;
    };
    let reference = reference_tables();
    assert_eq!(reference.len(), TABLES.len());
    for table in TABLES {
        let row =
            t.db.sea_connection()
                .query_one_raw(Statement::from_string(
                    t.db.backend(),
                    format!("SHOW CREATE TABLE `{table}`"),
                ))
                .await
                .unwrap()
                .unwrap();
        let ours = strip_auto_increment(&row.try_get_by_index::<String>(1).unwrap());
        let theirs = &reference[table];
        assert_eq!(&ours, theirs, "table {table} differs from upstream's");
    }
    t.drop().await;
}

type Columns = Vec<(String, bool)>;
type UniqueKeys = Vec<Vec<String>>;

/// Column names in order with their nullability, and the unique keys' columns, as the engine
/// itself reports them.
async fn describe(t: &TestDb, table: &str) -> (Columns, UniqueKeys) {
    let conn = t.db.sea_connection();
    let backend = t.db.backend();
    let rows = |sql: String| async move {
        conn.query_all_raw(Statement::from_string(backend, sql))
            .await
            .unwrap()
    };
    let (columns_sql, unique_sql) = match t.engine {
        Engine::Sqlite => (
            format!("SELECT name, \"notnull\" = 0 FROM pragma_table_info('{table}') ORDER BY cid"),
            format!(
                "SELECT il.name, ii.name FROM pragma_index_list('{table}') il \
                 JOIN pragma_index_info(il.name) ii WHERE il.origin = 'u' AND il.\"unique\" = 1 \
                 ORDER BY il.name, ii.seqno"
            ),
        ),
        Engine::MySql | Engine::Postgres => {
            let schema = if t.engine == Engine::MySql {
                "DATABASE()"
            } else {
                "current_schema()"
            };
            (
                format!(
                    "SELECT column_name, is_nullable = 'YES' FROM information_schema.columns \
                     WHERE table_schema = {schema} AND table_name = '{table}' ORDER BY ordinal_position"
                ),
                format!(
                    "SELECT tc.constraint_name, kcu.column_name FROM information_schema.table_constraints tc \
                     JOIN information_schema.key_column_usage kcu ON tc.constraint_name = kcu.constraint_name \
                     AND tc.table_schema = kcu.table_schema AND tc.table_name = kcu.table_name \
                     WHERE tc.table_schema = {schema} AND tc.table_name = '{table}' AND tc.constraint_type = 'UNIQUE' \
                     ORDER BY tc.constraint_name, kcu.ordinal_position"
                ),
            )
        }
    };
    let cols = rows(columns_sql)
        .await
        .iter()
        .map(|r| {
            (
                r.try_get_by_index::<String>(0).unwrap(),
                r.try_get_by_index::<bool>(1).unwrap(),
            )
        })
        .collect();
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rows(unique_sql).await {
        by_name
            .entry(r.try_get_by_index(0).unwrap())
            .or_default()
            .push(r.try_get_by_index(1).unwrap());
    }
    let mut uniques: UniqueKeys = by_name.into_values().collect();
    uniques.sort();
    (cols, uniques)
}

#[tokio::test]
async fn every_engine_has_the_same_tables_columns_and_unique_keys() {
    // SQLite's schema is the yardstick when no server is configured; MariaDB's otherwise.
    let mut reference: Option<BTreeMap<&str, (Columns, UniqueKeys)>> = None;
    for engine in [Engine::MySql, Engine::Postgres, Engine::Sqlite] {
        let Some(t) = TestDb::at_head(engine).await else {
            continue;
        };
        let mut described = BTreeMap::new();
        for table in TABLES {
            let d = describe(&t, table).await;
            assert!(!d.0.is_empty(), "{engine}: {table} has no columns");
            described.insert(table, d);
        }
        // Spot checks that tie this to the head schema, whatever the engine.
        assert_eq!(
            described["nodegroup"].1,
            vec![
                vec!["cluster_id".to_string(), "name".to_string()],
                vec!["uuid".to_string()]
            ],
            "{engine}"
        );
        assert_eq!(described["cluster"].0.len(), 31);
        assert_eq!(described["cluster_template"].0.len(), 36);
        assert!(
            !described["magnum_service"]
                .0
                .iter()
                .any(|(c, n)| c == "report_count" && *n)
        );
        match &reference {
            None => reference = Some(described),
            Some(r) => assert_eq!(r, &described, "{engine} differs"),
        }
        t.drop().await;
    }
}
