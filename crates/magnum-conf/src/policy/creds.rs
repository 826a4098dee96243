//! What a rule is evaluated against: the caller's credentials and the target resource.

use magnum_core::RequestContext;

/// The target of an operation: string keys to Python-rendered values, e.g. a resource's
/// `project_id` and `user_id`. A key present with no value is Python's `None` and renders as
/// `None` in `%(key)s`; an absent key makes any check that substitutes it false.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    // A handful of entries per request: a vector beats hashing.
    entries: Vec<(String, Option<String>)>,
}

impl Target {
    /// The empty target (`{}`), as used for `context_is_admin`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Magnum's default target when a controller passes none: the caller's own
    /// `project_id` and `user_id`, so ownership clauses always hold.
    pub fn from_context(ctx: &RequestContext) -> Self {
        Self::owned_by(ctx.project_id.as_deref(), ctx.user_id.as_deref())
    }

    /// A resource's ownership as `as_dict()` exposes it (clusters, cluster templates).
    pub fn owned_by(project_id: Option<&str>, user_id: Option<&str>) -> Self {
        Self::new()
            .with_opt("project_id", project_id)
            .with_opt("user_id", user_id)
    }

    /// Sets `key` to a string value, replacing any earlier one.
    pub fn with(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.with_opt(key, Some(value))
    }

    /// Sets `key` to a value or to Python's `None`, replacing any earlier one.
    pub fn with_opt(mut self, key: impl Into<String>, value: Option<impl Into<String>>) -> Self {
        self.set(key, value.map(Into::into));
        self
    }

    pub fn set(&mut self, key: impl Into<String>, value: Option<String>) {
        let key = key.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// `Some(None)` for a key holding `None`, `None` for an absent key.
    pub fn get(&self, key: &str) -> Option<Option<&str>> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref())
    }

    /// `str(target[key])` in Python terms.
    pub(crate) fn python_str(&self, key: &str) -> Option<&str> {
        self.get(key).map(|value| value.unwrap_or("None"))
    }
}

/// A credential value as Magnum's `context.to_dict()` holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredValue<'a> {
    Str(&'a str),
    Bool(bool),
    /// Python's `None`.
    None,
    List(&'a [String]),
}

impl<'a> CredValue<'a> {
    fn from_opt(value: Option<&'a String>) -> Self {
        value.map_or(CredValue::None, |s| CredValue::Str(s))
    }

    /// `str(value)` for scalars, as oslo compares them.
    pub fn python_str(&self) -> &'a str {
        match self {
            CredValue::Str(s) => s,
            CredValue::Bool(true) => "True",
            CredValue::Bool(false) => "False",
            CredValue::None => "None",
            // Lists are compared element-wise by the caller.
            CredValue::List(_) => "",
        }
    }
}

/// The token scope oslo derives from the credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenScope {
    System,
    Domain,
    Project,
}

impl TokenScope {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::System => "system",
            TokenScope::Domain => "domain",
            TokenScope::Project => "project",
        }
    }
}

/// The caller as rules see it: a view of the request context under the key names of
/// Magnum's `RequestContext.to_dict()` (oslo.context's keys included), built without copying.
#[derive(Clone, Copy, Debug)]
pub struct Credentials<'a> {
    ctx: &'a RequestContext,
    /// `None` while `context_is_admin` itself is being computed, as in Magnum where the
    /// context's `is_admin` is still unset at that point.
    is_admin: Option<bool>,
}

impl<'a> Credentials<'a> {
    pub fn from_context(ctx: &'a RequestContext) -> Self {
        Self {
            ctx,
            is_admin: Some(ctx.is_admin),
        }
    }

    /// The credentials used to decide whether the caller is an admin at all.
    pub fn without_is_admin(ctx: &'a RequestContext) -> Self {
        Self {
            ctx,
            is_admin: None,
        }
    }

    pub fn roles(&self) -> &'a [String] {
        &self.ctx.roles
    }

    /// The credential named `key`; `None` when the key does not exist at all.
    pub fn get(&self, key: &str) -> Option<CredValue<'a>> {
        let ctx = self.ctx;
        Some(match key {
            "user_id" | "user" => CredValue::from_opt(ctx.user_id.as_ref()),
            "project_id" | "project" => CredValue::from_opt(ctx.project_id.as_ref()),
            "user_name" => CredValue::from_opt(ctx.user_name.as_ref()),
            "project_name" => CredValue::from_opt(ctx.project_name.as_ref()),
            "domain_id" | "domain" => CredValue::from_opt(ctx.domain_id.as_ref()),
            "user_domain_id" | "user_domain" => CredValue::from_opt(ctx.user_domain_id.as_ref()),
            "project_domain_id" | "project_domain" => {
                CredValue::from_opt(ctx.project_domain_id.as_ref())
            }
            "system_scope" => CredValue::from_opt(ctx.system_scope.as_ref()),
            // oslo copies a truthy `system_scope` into `system` before evaluating.
            "system" => match ctx.system_scope.as_deref() {
                Some(scope) if !scope.is_empty() => CredValue::Str(scope),
                _ => return None,
            },
            "roles" => CredValue::List(&ctx.roles),
            "is_admin" => self.is_admin.map_or(CredValue::None, CredValue::Bool),
            "all_tenants" => CredValue::Bool(ctx.all_tenants),
            "request_id" => CredValue::from_opt(ctx.request_id.as_ref()),
            "read_only" | "show_deleted" => CredValue::Bool(false),
            "is_admin_project" => CredValue::Bool(true),
            _ => return None,
        })
    }

    /// oslo's scope of the token: system if `system_scope` is set, domain if a domain id
    /// is, else project.
    pub fn token_scope(&self) -> TokenScope {
        if self
            .ctx
            .system_scope
            .as_deref()
            .is_some_and(|s| !s.is_empty())
        {
            TokenScope::System
        } else if self.ctx.domain_id.as_deref().is_some_and(|s| !s.is_empty()) {
            TokenScope::Domain
        } else {
            TokenScope::Project
        }
    }
}
