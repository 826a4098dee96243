//! Secret option values and URL password redaction for logs.

use std::fmt;

/// The value of a secret option (passwords, database and transport URLs).
///
/// `Debug` and `Display` print `****`, so a secret cannot leak through `{:?}` of a config
/// struct or an error; the value is only reachable through [`Secret::expose`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value itself. Call it only where the value is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value as a URL with its passwords masked (see [`redact_url`]), for logging.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// Masks the password of every `user:password@` in a URL, for logging:
/// `mysql+pymysql://magnum:pw@db/magnum` becomes `mysql+pymysql://magnum:****@db/magnum`, and
/// the multi-host transport form `rabbit://u:p@h1:5672,u:p@h2:5672/vhost` becomes
/// `rabbit://u:****@h1:5672,u:****@h2:5672/vhost`.
///
/// Passwords are often written unencoded, so `@`, `/` and `,` inside them are tolerated; when
/// the form is ambiguous more is masked rather than less. Text without `@` is returned as is.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let Some(last_at) = rest.rfind('@') else {
        return url.to_owned();
    };
    // The host list ends at the first path, query or fragment delimiter after the last '@'.
    let authority_end = rest[last_at..]
        .find(['/', '?', '#'])
        .map_or(rest.len(), |i| last_at + i);
    let (authority, tail) = rest.split_at(authority_end);

    let mut entries: Vec<String> = Vec::new();
    let mut pending = String::new();
    for piece in authority.split(',') {
        if !pending.is_empty() {
            pending.push(',');
        }
        pending.push_str(piece);
        // A piece like `user:pa` (no '@', not `host:port`) is the start of a password that
        // contains a comma: keep it with the next piece.
        if !pending.contains('@') && looks_like_broken_userinfo(&pending) {
            continue;
        }
        entries.push(redact_entry(&pending));
        pending.clear();
    }
    if !pending.is_empty() {
        entries.push(redact_entry(&pending));
    }
    format!("{scheme}{}{tail}", entries.join(","))
}

/// `true` for `x:y` where `y` is not a port number (and `x` is not a bracketed IPv6 host).
fn looks_like_broken_userinfo(piece: &str) -> bool {
    if piece.starts_with('[') {
        return false;
    }
    match piece.rfind(':') {
        Some(i) => !piece[i + 1..].chars().all(|c| c.is_ascii_digit()),
        None => false,
    }
}

fn redact_entry(entry: &str) -> String {
    let Some(at) = entry.rfind('@') else {
        // No '@' here but maybe part of an unparseable password: mask anything after a colon
        // that is not a port.
        if looks_like_broken_userinfo(entry)
            && let Some(colon) = entry.find(':')
        {
            return format!("{}:****", &entry[..colon]);
        }
        return entry.to_owned();
    };
    let (userinfo, host) = entry.split_at(at);
    match userinfo.find(':') {
        Some(colon) => format!("{}:****{host}", &userinfo[..colon]),
        None => entry.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "****");
        assert_eq!(format!("{s}"), "****");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(****)");
        assert_eq!(s.expose(), "hunter2");
        assert!(!s.is_empty());
        assert!(Secret::default().is_empty());
    }

    #[test]
    fn redacts_database_urls() {
        assert_eq!(
            redact_url("mysql+pymysql://magnum:s3cret@db.example/magnum?charset=utf8"),
            "mysql+pymysql://magnum:****@db.example/magnum?charset=utf8"
        );
        assert_eq!(
            redact_url("postgresql://magnum:pa@ss/w:rd@db:5432/magnum"),
            "postgresql://magnum:****@db:5432/magnum"
        );
        assert_eq!(
            redact_url("sqlite:////var/lib/magnum/magnum.sqlite"),
            "sqlite:////var/lib/magnum/magnum.sqlite"
        );
        assert_eq!(
            redact_url("mysql://magnum@db/magnum"),
            "mysql://magnum@db/magnum"
        );
        assert_eq!(redact_url("mysql://:pw@db/m"), "mysql://:****@db/m");
    }

    #[test]
    fn redacts_multi_host_transport_urls() {
        assert_eq!(
            redact_url("rabbit://u:p1@h1:5672,u:p2@h2:5672/vhost"),
            "rabbit://u:****@h1:5672,u:****@h2:5672/vhost"
        );
        assert_eq!(
            redact_url("rabbit://u:p1@h1:5672,h2:5672/"),
            "rabbit://u:****@h1:5672,h2:5672/"
        );
        assert_eq!(
            redact_url("rabbit://u:pa,ss@h1:5672,u:p2@[::1]:5672/"),
            "rabbit://u:****@h1:5672,u:****@[::1]:5672/"
        );
        assert_eq!(redact_url("rabbit://"), "rabbit://");
    }

    #[test]
    fn redaction_never_leaks_the_password() {
        for (url, pw) in [
            ("rabbit://guest:Zq9,x@host/", "Zq9"),
            ("rabbit://guest:a/b@host/", "a/b"),
            ("mysql://u:p?q@h/db", "p?q"),
            ("u:plain@h", "plain"),
        ] {
            let out = redact_url(url);
            assert!(!out.contains(pw), "{url} -> {out}");
            assert!(out.contains("****"), "{url} -> {out}");
        }
    }
}
