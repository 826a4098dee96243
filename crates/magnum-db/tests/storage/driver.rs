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
