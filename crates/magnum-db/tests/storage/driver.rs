//! The MariaDB driver's metadata caching (vendor/sqlx-mysql, MARIADB_CLIENT_CACHE_METADATA):
//! a repeated execute of a prepared statement comes without its column definitions, and a
//! schema change brings them back and is read with the new types.

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

/// A binary row of many columns is split on its first read past the first column
/// (vendor/sqlx-mysql, patch 4): every column reads the same whichever is read first, NULLs
/// included, and `raw_binary` lends equal bytes for equal rows.
#[tokio::test]
async fn mariadb_rows_split_on_first_read_read_alike_in_any_order() {
    let Some(db) = ServerDb::create(Server::MariaDb, "magnum_t").await else {
        return;
    };
    let mut conn = sqlx::MySqlConnection::connect(&db.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(
        "CREATE TABLE w (id INT PRIMARY KEY, s1 VARCHAR(64), n1 INT, t1 DATETIME(6), \
         s2 TEXT, b1 TINYINT(1), s3 VARCHAR(8), n2 BIGINT, s4 VARCHAR(300), s5 VARCHAR(8)); \
         INSERT INTO w VALUES \
         (1, 'one', 10, '2026-12-03 07:00:00.5', 'text', 1, NULL, 7, REPEAT('x', 300), 'e'), \
         (2, NULL, NULL, NULL, '', 0, 'c', NULL, 'short', NULL), \
         (3, 'one', 10, '2026-12-03 07:00:00.5', 'text', 1, NULL, 7, REPEAT('x', 300), 'e')"
            .to_owned(),
    ))
    .execute(&mut conn)
    .await
    .unwrap();
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
