//! API access policy, evaluated the way oslo.policy evaluates Magnum's rules.
//!
//! The rule language, the precedence of `and`/`or`/`not`, the treatment of unparsable
//! rules (deny, with a warning), of undefined `rule:` references (the `default` rule if one
//! is defined, else deny), the deprecated-default fallback of `enforce_new_defaults = False`
//! and the scope check of `enforce_scope` all follow oslo.policy, because operators carry
//! their `policy.yaml` over from the Python service.
//!
//! ```
//! use magnum_core::RequestContext;
//! use magnum_conf::policy::{Enforcer, PolicyOptions, Target};
//!
//! let enforcer = Enforcer::new(PolicyOptions::default()).unwrap();
//! let ctx = RequestContext::for_project("p1", "u1");
//! assert!(enforcer.authorize("cluster:create", &Target::from_context(&ctx), &ctx).is_ok());
//! let other = Target::owned_by(Some("p2"), Some("u2"));
//! let err = enforcer.authorize("cluster:delete", &other, &ctx).unwrap_err();
//! assert_eq!(err.to_string(), "Policy doesn't allow cluster:delete to be performed.");
//! ```

mod check;
mod creds;
mod defaults;
mod enforcer;
mod file;
mod sample;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use check::{
    Check, Kind, ListItem, Pattern, RuleSyntaxError, parse_list_rule, parse_rule, try_parse_rule,
};
pub use creds::{CredValue, Credentials, Target, TokenScope};
pub use defaults::{
    DEPRECATED_ADMIN_OR_OWNER, DEPRECATED_ADMIN_OR_USER, DeprecatedRule, Operation, RuleDefault,
    defaults,
};
pub use enforcer::{Enforcer, PolicyOptions, oslo_search_dirs};
pub use sample::sample_policy_yaml;

/// Why a policy could not be loaded or did not allow an operation.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The caller may not do this (also for a token of the wrong scope): HTTP 403.
    #[error("Policy doesn't allow {rule} to be performed.")]
    NotAuthorized { rule: String },
    /// The code asked for a rule Magnum does not register: a programming error.
    #[error("Policy {rule} has not been registered")]
    NotRegistered { rule: String },
    #[error("policy file {} not found", path.display())]
    FileNotFound { path: PathBuf },
    #[error("cannot read policy file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse policy file {}{}: {message}", path.display(), at_line(*line))]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("policy directory {} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}
