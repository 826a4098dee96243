//! `[DEFAULT] transport_url` as oslo.messaging's `TransportURL.parse` reads it (rpc-wire.md §2.1).
//!
//! `rabbit://user:pass@host1:5672,user:pass@host2:5672/vhost?ssl=1`: several hosts, each with
//! optional credentials, a virtual host and query overrides of `[oslo_messaging_rabbit]`
//! options. `Debug` never shows a password.

use std::fmt;

/// Port of a host given without one.
pub const DEFAULT_PORT: u16 = 5672;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    #[error("invalid transport_url: {0}")]
    Invalid(String),
    #[error("transport_url driver {0:?} is not supported (only rabbit)")]
    UnsupportedDriver(String),
}

/// One broker of the URL's host list.
#[derive(Clone, PartialEq, Eq)]
pub struct TransportHost {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl TransportHost {
    /// The credentials kombu uses: a host without both falls back to `guest`/`guest`.
    pub fn credentials(&self) -> (&str, &str) {
        match (self.username.as_deref(), self.password.as_deref()) {
            (Some(u), Some(p)) if !u.is_empty() => (u, p),
            (Some(u), None) if !u.is_empty() => (u, ""),
            _ => ("guest", "guest"),
        }
    }

    /// `host:port` (IPv6 in brackets), for logs: no credentials.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Debug for TransportHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportHost")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "****"))
            .finish()
    }
}

/// A parsed transport URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportUrl {
    /// `rabbit` (or its alias `kombu`); a `+subtransport` suffix is dropped.
    pub driver: String,
    /// Never empty: `rabbit://` means `guest:guest@localhost:5672`.
    pub hosts: Vec<TransportHost>,
    /// Percent-decoded; `None` or empty means the broker's default vhost `/`.
    pub virtual_host: Option<String>,
    /// Query parameters in order; repeated keys joined with `,` as oslo does.
    pub query: Vec<(String, String)>,
}

impl TransportUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| UrlError::Invalid("no scheme specified".into()))?;
        if scheme.is_empty() {
            return Err(UrlError::Invalid("no scheme specified".into()));
        }
        let driver = scheme
            .split('+')
            .next()
            .unwrap_or(scheme)
            .to_ascii_lowercase();
        if driver != "rabbit" && driver != "kombu" {
            return Err(UrlError::UnsupportedDriver(driver));
        }
        // urlsplit: the fragment goes first, then the query, then netloc ends at '/'.
        let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
        let (before_query, query_text) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let (netloc, path) = match before_query.find('/') {
            Some(i) => before_query.split_at(i),
            None => (before_query, ""),
        };

        let mut hosts = Vec::new();
        for entry in netloc.split(',').filter(|e| !e.is_empty()) {
            hosts.push(parse_host(entry)?);
        }
        let with = hosts.iter().filter(|h| h.password.is_some()).count();
        if with > 0 && with < hosts.len() {
            tracing::warn!(
                "transport_url: all hosts should be given with username/password or none; \
                 hosts without use guest"
            );
        }
        if hosts.is_empty() {
            hosts.push(TransportHost {
                host: "localhost".into(),
                port: DEFAULT_PORT,
                username: None,
                password: None,
            });
        }

        let virtual_host = path
            .strip_prefix('/')
            .map(|p| percent_decode(p, false))
            .transpose()?;

        let mut query: Vec<(String, String)> = Vec::new();
        for pair in query_text.unwrap_or("").split(['&', ';']) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (percent_decode(k, true)?, percent_decode(v, true)?);
            // parse_qs drops blank values.
            if v.is_empty() {
                continue;
            }
            match query.iter_mut().find(|(name, _)| *name == k) {
                Some((_, existing)) => {
                    existing.push(',');
                    existing.push_str(&v);
                }
                None => query.push((k, v)),
            }
        }

        Ok(Self {
            driver,
            hosts,
            virtual_host,
            query,
        })
    }

    /// The vhost to open: the broker default `/` when the URL names none.
    pub fn vhost(&self) -> &str {
        match self.virtual_host.as_deref() {
            None | Some("") => "/",
            Some(v) => v,
        }
    }
}

fn parse_host(entry: &str) -> Result<TransportHost, UrlError> {
    let (userinfo, hostport) = match entry.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, entry),
    };
    let (username, password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((user, pass)) => (
                Some(percent_decode(user, false)?),
                Some(percent_decode(pass, false)?),
            ),
            None => (Some(percent_decode(u, false)?), None),
        },
        None => (None, None),
    };
    let (host, port) = parse_host_port(hostport)?;
    Ok(TransportHost {
        host,
        port,
        username,
        password,
    })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; a bare IPv6 address without brackets is a host.
fn parse_host_port(s: &str) -> Result<(String, u16), UrlError> {
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| UrlError::Invalid(format!("invalid port {p:?}")))
    };
    if let Some(inner) = s.strip_prefix('[') {
        let (host, tail) = inner
            .split_once(']')
            .ok_or_else(|| UrlError::Invalid("unclosed [ in host".into()))?;
        return match tail.strip_prefix(':') {
            Some(p) if !p.is_empty() => Ok((host.to_owned(), port(p)?)),
            _ if tail.is_empty() || tail == ":" => Ok((host.to_owned(), DEFAULT_PORT)),
            _ => Err(UrlError::Invalid("garbage after ] in host".into())),
        };
    }
    match s.matches(':').count() {
        0 => Ok((s.to_owned(), DEFAULT_PORT)),
        1 => {
            let (h, p) = s.split_once(':').unwrap_or((s, ""));
            if p.is_empty() {
                Ok((h.to_owned(), DEFAULT_PORT))
            } else {
                Ok((h.to_owned(), port(p)?))
            }
        }
        _ => Ok((s.to_owned(), DEFAULT_PORT)),
    }
}

/// `%XX` decoding (and `+` as space in query strings); invalid escapes are kept as text,
/// as Python's `unquote` does.
fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, UrlError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| UrlError::Invalid("percent-escapes are not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn host(h: &str, port: u16, u: Option<&str>, p: Option<&str>) -> TransportHost {
        TransportHost {
            host: h.into(),
            port,
            username: u.map(Into::into),
            password: p.map(Into::into),
        }
    }

    #[test]
    fn several_hosts_credentials_vhost_and_query() {
        let u = TransportUrl::parse(
            "rabbit://magnum:s%40cr%3At@rabbit1:5673,magnum:pw@[fd00::1]:5674,rabbit3/my%2Fvhost?ssl=1&heartbeat_timeout_threshold=30&ssl=0",
        )
        .unwrap();
        assert_eq!(u.driver, "rabbit");
        assert_eq!(
            u.hosts,
            vec![
                host("rabbit1", 5673, Some("magnum"), Some("s@cr:t")),
                host("fd00::1", 5674, Some("magnum"), Some("pw")),
                host("rabbit3", 5672, None, None),
            ]
        );
        assert_eq!(u.hosts[2].credentials(), ("guest", "guest"));
        assert_eq!(u.hosts[1].address(), "[fd00::1]:5674");
        assert_eq!(u.vhost(), "my/vhost");
        assert_eq!(
            u.query,
            vec![
                ("ssl".into(), "1,0".into()),
                ("heartbeat_timeout_threshold".into(), "30".into())
            ]
        );
    }

    #[test]
    fn passwords_split_on_last_at_and_first_colon() {
        let u = TransportUrl::parse("kombu+memory://us:er:p@ss@h").unwrap();
        assert_eq!(u.driver, "kombu");
        assert_eq!(u.hosts, vec![host("h", 5672, Some("us"), Some("er:p@ss"))]);
    }

    #[test]
    fn vhost_forms() {
        assert_eq!(
            TransportUrl::parse("rabbit://h:5672/").unwrap().vhost(),
            "/"
        );
        assert_eq!(
            TransportUrl::parse("rabbit://h:5672//").unwrap().vhost(),
            "/"
        );
        assert_eq!(
            TransportUrl::parse("rabbit://h/magnum").unwrap().vhost(),
            "magnum"
        );
        assert_eq!(TransportUrl::parse("rabbit://h").unwrap().vhost(), "/");
    }

    #[test]
    fn empty_url_is_local_guest() {
        let u = TransportUrl::parse("rabbit://").unwrap();
        assert_eq!(u.hosts, vec![host("localhost", 5672, None, None)]);
        assert_eq!(u.hosts[0].credentials(), ("guest", "guest"));
    }

    #[test]
    fn refuses_other_drivers_and_garbage() {
        assert_eq!(
            TransportUrl::parse("amqp://h/"),
            Err(UrlError::UnsupportedDriver("amqp".into()))
        );
        assert!(TransportUrl::parse("rabbit:/h").is_err());
        assert!(TransportUrl::parse("rabbit://h:notaport/").is_err());
    }

    #[test]
    fn debug_never_shows_passwords() {
        let u = TransportUrl::parse("rabbit://magnum:hunter2@h/").unwrap();
        let text = format!("{u:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("****"), "{text}");
    }
}
