//! The MariaDB driver's metadata caching (vendor/sqlx-mysql, MARIADB_CLIENT_CACHE_METADATA):
//! a repeated execute of a prepared statement comes without its column definitions, and a
//! schema change brings them back and is read with the new types; rows split when first read;
//! rows handed to a callback.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use magnum_testkit::db::{Server, ServerDb};
use sqlx::{Connection, Row};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// A loopback TCP proxy to `upstream` counting the bytes the server sends to the client.
async fn counting_proxy(upstream: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let down = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&down);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let mut server = TcpStream::connect(&upstream).await.unwrap();
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let up = async {
                    let _ = tokio::io::copy(&mut cr, &mut sw).await;
                    let _ = sw.shutdown().await;
                };
                let down = async {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        use tokio::io::AsyncReadExt;
                        let n = match sr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        count.fetch_add(n, Ordering::SeqCst);
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                };
                tokio::join!(up, down);
            });
        }
    });
    (port, down)
}

/// Bytes the server sent for one execute of `sql` (prepared, cached), and its rows.
async fn run(
    conn: &mut sqlx::MySqlConnection,
    down: &AtomicUsize,
    sql: &'static str,
) -> (usize, Vec<sqlx::mysql::MySqlRow>) {
    let before = down.load(Ordering::SeqCst);
    let rows = sqlx::query(sql)
        .bind(0i32)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    // The proxy counts as it forwards, so the bytes are in before the client has them.
    (down.load(Ordering::SeqCst) - before, rows)
}

#[tokio::test]
async fn mariadb_skips_unchanged_column_definitions_and_resends_changed_ones() {
    let Some(db) = ServerDb::create(Server::MariaDb, "magnum_t").await else {
        return;
    };
    let url = url::Url::parse(&db.url()).unwrap();
    let upstream = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(3306));
    let (port, down) = counting_proxy(upstream).await;
    let mut via = url.clone();
    via.set_host(Some("127.0.0.1")).unwrap();
    via.set_port(Some(port)).unwrap();
    let mut conn = sqlx::MySqlConnection::connect(via.as_str()).await.unwrap();

    sqlx::raw_sql(sqlx::AssertSqlSafe(
        "CREATE TABLE t (id INT PRIMARY KEY, \
         a_rather_long_column_name_one VARCHAR(64), \
         a_rather_long_column_name_two INT); \
         INSERT INTO t VALUES (1, 'one', 10), (2, 'two', 20)"
            .to_owned(),
    ))
    .execute(&mut conn)
    .await
    .unwrap();

    const SQL: &str = "SELECT * FROM t WHERE id > ? ORDER BY id";
    let (first, rows) = run(&mut conn, &down, SQL).await;
    let (second, again) = run(&mut conn, &down, SQL).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(again.len(), 2);
    for (a, b) in rows.iter().zip(&again) {
        assert_eq!(a.get::<i32, _>(0), b.get::<i32, _>(0));
        assert_eq!(a.get::<String, _>(1), b.get::<String, _>(1));
        assert_eq!(a.get::<i32, _>(2), b.get::<i32, _>(2));
        // Names come from the reused metadata.
        assert_eq!(
            b.get::<String, _>("a_rather_long_column_name_one"),
            a.get::<String, _>(1)
        );
    }
    // Each of the three column definitions carries its table and column names twice
    // (about 60 bytes); without caching both executes are the same size.
    eprintln!("execute answers: {first} bytes, then {second} bytes");
    assert!(
        second + 3 * 40 <= first,
        "the second execute was not smaller ({first} then {second} bytes): \
         metadata caching is not in effect"
    );

    // A column's type changes under the cached statement: the server sends the definitions
    // again, and the rows are read with the new type, also on the execute after (which
    // skips them once more and must reuse the new ones, not the prepare's).
    sqlx::raw_sql(sqlx::AssertSqlSafe(
        "ALTER TABLE t MODIFY a_rather_long_column_name_two VARCHAR(16); \
         ALTER TABLE t ADD COLUMN c3 VARCHAR(8) DEFAULT 'x'"
            .to_owned(),
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    for round in 0..2 {
        let (bytes, rows) = run(&mut conn, &down, SQL).await;
        eprintln!("after ALTER, execute {round}: {bytes} bytes");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].len(), 4, "the added column is in the row");
        assert_eq!(rows[0].get::<String, _>(2), "10");
        assert_eq!(rows[1].get::<String, _>(3), "x");
    }
    conn.close().await.unwrap();
}

/// A connection to a fresh MariaDB database on which `setup` (SQL statements) has run; `None`
/// when no MariaDB is configured. The database lives as long as the returned `ServerDb`.
async fn mariadb_with(setup: &str) -> Option<(ServerDb, sqlx::MySqlConnection)> {
    let db = ServerDb::create(Server::MariaDb, "magnum_t").await?;
    let mut conn = sqlx::MySqlConnection::connect(&db.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(setup.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap();
    Some((db, conn))
}

/// A binary row of many columns is split on its first read past the first column
/// (vendor/sqlx-mysql, patch 4): every column reads the same whichever is read first, NULLs
/// included, and `raw_binary` lends equal bytes for equal rows.
#[tokio::test]
async fn mariadb_rows_split_on_first_read_read_alike_in_any_order() {
    let Some((_db, mut conn)) = mariadb_with(
        "CREATE TABLE w (id INT PRIMARY KEY, s1 VARCHAR(64), n1 INT, t1 DATETIME(6), \
         s2 TEXT, b1 TINYINT(1), s3 VARCHAR(8), n2 BIGINT, s4 VARCHAR(300), s5 VARCHAR(8)); \
         INSERT INTO w VALUES \
         (1, 'one', 10, '2026-12-03 07:00:00.5', 'text', 1, NULL, 7, REPEAT('x', 300), 'e'), \
         (2, NULL, NULL, NULL, '', 0, 'c', NULL, 'short', NULL), \
         (3, 'one', 10, '2026-12-03 07:00:00.5', 'text', 1, NULL, 7, REPEAT('x', 300), 'e')",
    )
    .await
    else {
        return;
    };
    type Cols = (
        i32,
        Option<String>,
        Option<i32>,
        Option<chrono::NaiveDateTime>,
        Option<String>,
        Option<bool>,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<String>,
    );
    let all = |r: &sqlx::mysql::MySqlRow| -> Cols {
        (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
            r.get(8),
            r.get(9),
        )
    };
    let fetch = async |conn: &mut sqlx::MySqlConnection| {
        sqlx::query("SELECT id, s1, n1, t1, s2, b1, s3, n2, s4, s5 FROM w WHERE id > ? ORDER BY id")
            .bind(0i32)
            .fetch_all(&mut *conn)
            .await
            .unwrap()
    };
    // Read in order (the first column before the split) ...
    let want: Vec<Cols> = fetch(&mut conn).await.iter().map(all).collect();
    assert_eq!(want[1].1, None);
    assert_eq!(want[0].8.as_deref().map(str::len), Some(300));
    assert_eq!(want[1].6.as_deref(), Some("c"));
    // ... and from the last column back, and a middle one first: the same values.
    for row in fetch(&mut conn).await.iter().zip(&want) {
        let (r, w) = row;
        assert_eq!(r.get::<Option<String>, _>(9), w.9);
        assert_eq!(r.get::<Option<i64>, _>(7), w.7);
        assert_eq!(&all(r), w);
    }
    let rows = fetch(&mut conn).await;
    assert_eq!(rows[0].get::<Option<bool>, _>(5), want[0].5);
    // Rows 1 and 3 differ only in their id.
    let raw = |r: &sqlx::mysql::MySqlRow| r.raw_binary().unwrap().to_vec();
    let (a, c) = (raw(&rows[0]), raw(&rows[2]));
    assert_eq!(a.len(), c.len());
    assert_eq!(a.iter().zip(&c).filter(|(x, y)| x != y).count(), 1);
    assert_ne!(raw(&rows[0]), raw(&rows[1]));
    conn.close().await.unwrap();
}

/// Rows handed to a callback (vendor/sqlx-mysql, change 5): the same rows in the same order
/// as sqlx's stream gives; a callback's error ends the reading and the connection answers
/// its next statement correctly (the rest of the result is drained), as it does after a
/// statement sent and dropped unread; a statement without rows hands none; a server error
/// comes from `start_rows`.
#[tokio::test]
async fn mariadb_rows_go_to_a_callback_and_a_stopped_reading_leaves_the_connection_usable() {
    let Some((_db, mut conn)) = mariadb_with(
        "CREATE TABLE r (id INT PRIMARY KEY, s VARCHAR(64)); \
         INSERT INTO r SELECT seq, CONCAT('row-', seq) FROM seq_1_to_2000",
    )
    .await
    else {
        return;
    };
    const SQL: &str = "SELECT id, s FROM r WHERE id > ? ORDER BY id";
    let pairs = |rows: &[sqlx::mysql::MySqlRow]| -> Vec<(i32, String)> {
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    let streamed = pairs(&sqlx::query(SQL).bind(0).fetch_all(&mut conn).await.unwrap());
    assert_eq!(streamed.len(), 2000);

    // Every row, in order: prepared and cached, prepared for once, and as text (no arguments).
    for query in [
        sqlx::query(SQL).bind(0),
        sqlx::query(SQL).bind(0).persistent(false),
    ] {
        let pending = conn.start_rows(query).await.unwrap();
        let mut got = Vec::new();
        let n = conn
            .each_row(pending, |row| -> Result<(), sqlx::Error> {
                got.push(row);
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(n, 2000);
        assert_eq!(pairs(&got), streamed);
    }
    let text = conn
        .start_rows(sqlx::query("SELECT id, s FROM r ORDER BY id LIMIT 3"))
        .await
        .unwrap();
    let mut ids = Vec::new();
    conn.each_row(text, |row| -> Result<(), sqlx::Error> {
        ids.push(row.get::<i32, _>(0));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(ids, [1, 2, 3]);

    // A callback that fails on the 10th row: its error, and the next statement is right.
    enum Stop {
        Enough,
        Driver(sqlx::Error),
    }
    impl From<sqlx::Error> for Stop {
        fn from(e: sqlx::Error) -> Self {
            Stop::Driver(e)
        }
    }
    let pending = conn.start_rows(sqlx::query(SQL).bind(0)).await.unwrap();
    let mut seen = 0;
    let stopped = conn
        .each_row(pending, |_| {
            seen += 1;
            if seen == 10 {
                Err(Stop::Enough)
            } else {
                Ok(())
            }
        })
        .await;
    match stopped {
        Err(Stop::Enough) => {}
        Err(Stop::Driver(e)) => panic!("the driver failed: {e}"),
        Ok(n) => panic!("not stopped, {n} rows"),
    }
    assert_eq!(seen, 10);
    let after: (i32, String) = sqlx::query_as("SELECT id, s FROM r WHERE id = ?")
        .bind(1234)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(after, (1234, "row-1234".to_owned()));

    // Sent and dropped unread: the same.
    drop(conn.start_rows(sqlx::query(SQL).bind(0)).await.unwrap());
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM r")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 2000);

    // No rows: an UPDATE, and a SELECT that matches nothing.
    for sql in [
        "UPDATE r SET s = s WHERE id < ?",
        "SELECT id FROM r WHERE id < ?",
    ] {
        let pending = conn.start_rows(sqlx::query(sql).bind(0)).await.unwrap();
        let n = conn
            .each_row(pending, |_| -> Result<(), sqlx::Error> { panic!("a row") })
            .await
            .unwrap();
        assert_eq!(n, 0, "{sql}");
    }

    // The server's error comes from start_rows, and the connection goes on.
    let missing = conn
        .start_rows(sqlx::query("SELECT nope FROM r WHERE id > ?").bind(0))
        .await;
    assert!(
        matches!(&missing, Err(sqlx::Error::Database(e)) if e.message().contains("nope")),
        "{:?}",
        missing.err()
    );
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();
}

/// `[database] mysql_wsrep_sync_wait` is set on every new MySQL session, beside the SQL mode,
/// as oslo.db does (Galera reads that wait for the node to catch up); unset leaves the
/// server's value.
#[tokio::test]
async fn mariadb_sessions_get_wsrep_sync_wait_when_configured() {
    let Some(db) = ServerDb::create(Server::MariaDb, "magnum_t").await else {
        return;
    };
    for (configured, want) in [(Some(1), 1), (None, 0)] {
        let mut settings = magnum_testkit::db::settings(&db.url());
        settings.mysql_wsrep_sync_wait = configured;
        let storage = magnum_db::Database::connect(settings).await.unwrap();
        let got = storage
            .scalar_text("SELECT CAST(@@SESSION.wsrep_sync_wait AS SIGNED)")
            .await
            .unwrap();
        assert_eq!(got, Some(want), "configured {configured:?}");
        storage.close().await;
    }
}

/// A query dropped after its execute went out and before its answer was read leaves the
/// answer to be drained by the connection's next use. With MariaDB's metadata caching that
/// answer may come without its column definitions (the statement's third execute here), and
/// the drain must read the byte that says so: taking the row for a definition, it would
/// swallow the end of the result set and wait for a packet that never comes.
#[tokio::test]
async fn mariadb_drains_a_dropped_answer_that_skipped_its_column_definitions() {
    let Some((_db, mut conn)) = mariadb_with(
        "CREATE TABLE d (a INT, b INT, c INT, e INT); \
         INSERT INTO d VALUES (1, 2, 3, 4);",
    )
    .await
    else {
        return;
    };
    let select = "SELECT a, b, c, e FROM d";
    for _ in 0..2 {
        let row = sqlx::query(select).fetch_one(&mut conn).await.unwrap();
        assert_eq!(row.get::<i32, _>(3), 4);
    }
    // Polled once: the execute is sent, then the future is dropped unread (on loopback the
    // answer sometimes arrives within that poll: then it was read whole, and again).
    let dropped = {
        let mut dropped = false;
        for _ in 0..200 {
            let fetch = sqlx::query(select).fetch_one(&mut conn);
            futures::pin_mut!(fetch);
            if futures::poll!(fetch.as_mut()).is_pending() {
                dropped = true;
                break;
            }
        }
        dropped
    };
    assert!(dropped, "every execute was answered within its first poll");
    let next = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sqlx::query("SELECT 7").fetch_one(&mut conn),
    )
    .await
    .expect("the connection hung draining the dropped answer")
    .unwrap();
    assert_eq!(next.get::<i64, _>(0), 7);
}
