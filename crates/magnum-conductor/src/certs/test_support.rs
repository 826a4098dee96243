//! Test fixtures shared by the certificate tests: a fresh SQLite database at head.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use magnum_db::{Database, DbSettings, DbUrl};

/// A new SQLite database with upstream's schema, in a temp dir that lives as long as the
/// returned guard.
pub(crate) async fn sqlite_db() -> (Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:///{}/magnum.sqlite", dir.path().display());
    let db = Database::connect(DbSettings::new(DbUrl::parse(&url).unwrap()))
        .await
        .unwrap();
    magnum_db::schema::upgrade(&db).await.unwrap();
    (db, dir)
}
