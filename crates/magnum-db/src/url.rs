//! `[database] connection` is an SQLAlchemy URL; sqlx wants its own spelling.

use std::fmt;

/// Which engine a connection URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    MySql,
    Postgres,
    Sqlite,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::MySql => "mysql",
            Engine::Postgres => "postgresql",
            Engine::Sqlite => "sqlite",
        })
    }
}

/// A parsed connection URL: the engine and the URL sqlx understands.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    pub engine: Engine,
    /// For sqlx; may hold a password, so never log it (use `redacted()`).
    pub sqlx_url: String,
    /// SQLite only: an in-memory database, which must live on a single connection.
    pub in_memory: bool,
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbUrl")
            .field("engine", &self.engine)
            .field("url", &redact(&self.sqlx_url))
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error(
        "unsupported database URL scheme '{0}' (use mysql+pymysql://, postgresql:// or sqlite:///path)"
    )]
    Scheme(String),
    #[error("malformed database URL {0}: {1}")]
    Malformed(String, String),
}

impl DbUrl {
    pub fn parse(connection: &str) -> Result<Self, UrlError> {
        let connection = connection.trim();
        let (scheme, rest) = connection
            .split_once("://")
            .ok_or_else(|| UrlError::Malformed(redact(connection), "no '://'".into()))?;
        let dialect = scheme
            .split('+')
            .next()
            .unwrap_or(scheme)
            .to_ascii_lowercase();
        match dialect.as_str() {
            "mysql" | "mariadb" => Ok(Self {
                engine: Engine::MySql,
                sqlx_url: format!("mysql://{}", translate_query(rest, &MYSQL_PARAMS)),
                in_memory: false,
            }),
            "postgresql" | "postgres" => Ok(Self {
                engine: Engine::Postgres,
                sqlx_url: format!("postgres://{}", translate_query(rest, &PG_PARAMS)),
                in_memory: false,
            }),
            "sqlite" => {
                // SQLAlchemy: `sqlite://` is in-memory, `sqlite:///rel` relative, `sqlite:////abs` absolute.
                let path = rest.strip_prefix('/').unwrap_or(rest);
                let path = path.split('?').next().unwrap_or(path);
                if path.is_empty() || path == ":memory:" {
                    Ok(Self {
                        engine: Engine::Sqlite,
                        sqlx_url: "sqlite::memory:".into(),
                        in_memory: true,
                    })
                } else {
                    Ok(Self {
                        engine: Engine::Sqlite,
                        sqlx_url: format!("sqlite://{path}?mode=rwc"),
                        in_memory: false,
                    })
                }
            }
            _ => Err(UrlError::Scheme(scheme.to_owned())),
        }
    }

    pub fn redacted(&self) -> String {
        redact(&self.sqlx_url)
    }
}

/// SQLAlchemy query parameters that have a sqlx equivalent; the rest are driver options of
/// PyMySQL/psycopg2 that mean nothing here and are dropped.
const MYSQL_PARAMS: [(&str, &str); 5] = [
    ("charset", "charset"),
    ("unix_socket", "socket"),
    ("ssl_ca", "ssl-ca"),
    ("ssl_cert", "ssl-cert"),
    ("ssl_key", "ssl-key"),
];
const PG_PARAMS: [(&str, &str); 5] = [
    ("sslmode", "sslmode"),
    ("sslrootcert", "sslrootcert"),
    ("sslcert", "sslcert"),
    ("sslkey", "sslkey"),
    ("host", "host"),
];

fn translate_query(rest: &str, known: &[(&str, &str)]) -> String {
    let Some((base, query)) = rest.split_once('?') else {
        return rest.to_owned();
    };
    let kept: Vec<String> = query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            known
                .iter()
                .find(|(from, _)| *from == k)
                .map(|(_, to)| format!("{to}={v}"))
        })
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// Hide the password of `scheme://user:password@host/...`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            if userinfo.contains(':') {
                format!("{scheme}://{user}:****@{host}{tail}")
            } else {
                format!("{scheme}://{userinfo}@{host}{tail}")
            }
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> DbUrl {
        match DbUrl::parse(s) {
            Ok(u) => u,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn sqlalchemy_spellings() {
        let u = p("mysql+pymysql://magnum:secret@127.0.0.1/magnum?charset=utf8&plugin=x");
        assert_eq!(u.engine, Engine::MySql);
        assert_eq!(
            u.sqlx_url,
            "mysql://magnum:secret@127.0.0.1/magnum?charset=utf8"
        );
        assert_eq!(
            p("mysql://root@localhost:3306/m").sqlx_url,
            "mysql://root@localhost:3306/m"
        );
        assert_eq!(
            p("postgresql+psycopg2://u:p@h/db").sqlx_url,
            "postgres://u:p@h/db"
        );
        assert_eq!(p("postgresql://u@h:5432/db").engine, Engine::Postgres);
        assert_eq!(
            p("sqlite:////var/lib/magnum/m.sqlite").sqlx_url,
            "sqlite:///var/lib/magnum/m.sqlite?mode=rwc"
        );
        assert_eq!(
            p("sqlite:///rel.sqlite").sqlx_url,
            "sqlite://rel.sqlite?mode=rwc"
        );
        assert!(p("sqlite://").in_memory);
        assert!(DbUrl::parse("oracle://x").is_err());
        assert!(DbUrl::parse("nonsense").is_err());
    }

    #[test]
    fn passwords_never_shown() {
        let u = p("mysql+pymysql://magnum:s3cr3t@db.example/magnum");
        assert!(!format!("{u:?}").contains("s3cr3t"));
        assert_eq!(u.redacted(), "mysql://magnum:****@db.example/magnum");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        let e = DbUrl::parse("bogus+x://a:pw@h/db")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!e.contains("pw@"), "{e}");
    }
}
