//! Require-or-skip: a test that needs a server (MariaDB, PostgreSQL, RabbitMQ, Keystone,
//! a Python venv) skips without it, unless `MAGNUM_TEST_REQUIRE_ALL=1` (CI), where the
//! missing server fails the test instead, so CI never passes by skipping.

/// Whether `MAGNUM_TEST_REQUIRE_ALL=1`.
pub fn require_all() -> bool {
    flag("MAGNUM_TEST_REQUIRE_ALL")
}

/// Whether the environment variable `var` is `1`.
pub fn flag(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// Says the test is skipped because of `missing`; panics instead when every test is required.
/// Callers return right after it.
#[track_caller]
pub fn skip(missing: &str) {
    assert!(
        !require_all(),
        "{missing}, but MAGNUM_TEST_REQUIRE_ALL=1 requires every test to run"
    );
    eprintln!("skipping: {missing}");
}

/// The non-empty value of `var`, or None after [`skip`].
#[track_caller]
pub fn env_or_skip(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            skip(&format!("{var} is not set"));
            None
        }
    }
}
