//! The enforcer: Magnum's defaults merged with operator overrides, compiled once.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::PolicyError;
use super::check::{Check, Kind, Pattern, parse_rule, role_matches};
use super::creds::{Credentials, Target};
use super::defaults::{RuleDefault, defaults};
use super::file;
use crate::config::Config;
use magnum_core::RequestContext;

/// The rule oslo falls back to for an undefined `rule:` reference (`policy_default_rule`).
const DEFAULT_RULE: &str = "default";
/// How deeply `rule:` references may nest; oslo would hit Python's recursion limit.
const MAX_DEPTH: usize = 32;

/// `[oslo_policy]` as the enforcer needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyOptions {
    /// `policy_file`; `None` means oslo's default `policy.yaml`. A relative path is looked up
    /// in `search_dirs` and may be missing; a missing absolute path is an error.
    pub policy_file: Option<PathBuf>,
    /// `policy_dirs`, resolved like `policy_file`; missing ones are skipped.
    pub policy_dirs: Vec<PathBuf>,
    /// Where relative paths are searched, first match wins (see [`oslo_search_dirs`]).
    pub search_dirs: Vec<PathBuf>,
    pub enforce_scope: bool,
    pub enforce_new_defaults: bool,
}

impl Default for PolicyOptions {
    /// The built-in defaults only: no files are searched for.
    fn default() -> Self {
        Self {
            policy_file: None,
            policy_dirs: Vec::new(),
            search_dirs: Vec::new(),
            enforce_scope: true,
            enforce_new_defaults: true,
        }
    }
}

impl PolicyOptions {
    /// The options of `cfg` (`[oslo_policy]`), searching relative paths where oslo.config
    /// would given the `--config-dir` values the configuration was loaded with.
    pub fn from_config(cfg: &Config, config_dirs: &[PathBuf]) -> Self {
        let section = &cfg.oslo_policy;
        Self {
            policy_file: Some(PathBuf::from(&section.policy_file)),
            policy_dirs: section.policy_dirs.iter().map(PathBuf::from).collect(),
            search_dirs: oslo_search_dirs(cfg.files(), config_dirs),
            enforce_scope: section.enforce_scope,
            enforce_new_defaults: section.enforce_new_defaults,
        }
    }
}

/// oslo.config's `find_file` search order: the config directories, the directories of the
/// config files (last file first), then `~/.magnum`, `~`, `/etc/magnum`, `/etc`.
pub fn oslo_search_dirs(config_files: &[PathBuf], config_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = config_dirs.to_vec();
    for file in config_files.iter().rev() {
        dirs.push(match file.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        });
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        dirs.push(home.join(".magnum"));
        dirs.push(home);
    }
    dirs.push(PathBuf::from("/etc/magnum"));
    dirs.push(PathBuf::from("/etc"));
    dirs
}

/// Evaluates Magnum's policy. Cheap to clone: the compiled rules are shared.
#[derive(Clone, Debug)]
pub struct Enforcer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    rules: Vec<Rule>,
    index: HashMap<String, usize>,
    enforce_scope: bool,
    files: Vec<PathBuf>,
}

#[derive(Debug)]
struct Rule {
    name: String,
    /// The effective rule (override, default, or default OR deprecated default).
    check: Check,
    node: Node,
    /// Set when Magnum registers this name: `authorize` only accepts those.
    registered: Option<&'static RuleDefault>,
}

/// A check with `rule:` references resolved to rule indices.
#[derive(Debug)]
enum Node {
    Const(bool),
    Not(Box<Node>),
    And(Box<[Node]>),
    Or(Box<[Node]>),
    /// `None`: undefined and no `default` rule, which denies.
    Rule(Option<usize>),
    Role(Pattern),
    Generic(Kind, Pattern),
}

impl Enforcer {
    /// Loads the overrides `opts` names on top of Magnum's defaults.
    pub fn new(opts: PolicyOptions) -> Result<Self, PolicyError> {
        let mut overrides: Vec<(String, Check)> = Vec::new();
        let mut files = Vec::new();

        let policy_file = opts
            .policy_file
            .clone()
            .unwrap_or_else(|| PathBuf::from("policy.yaml"));
        match file::find(&policy_file, &opts.search_dirs) {
            Some(path) => {
                merge(&mut overrides, file::load(&path)?);
                files.push(path);
            }
            // oslo only logs a missing policy file; a missing absolute path that the operator
            // wrote is surely a mistake, so it is refused here.
            None if opts.policy_file.is_some() && policy_file.is_absolute() => {
                return Err(PolicyError::FileNotFound { path: policy_file });
            }
            None => tracing::debug!("policy file {} not found", policy_file.display()),
        }
        for dir in &opts.policy_dirs {
            let Some(dir) = file::find(dir, &opts.search_dirs) else {
                tracing::debug!("policy directory {} not found", dir.display());
                continue;
            };
            for path in file::files_in(&dir)? {
                merge(&mut overrides, file::load(&path)?);
                files.push(path);
            }
        }
        Ok(Self::build(overrides, files, &opts))
    }

    /// Magnum's defaults with the given overrides (as if read from a policy file).
    pub fn with_overrides<'a>(
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
        enforce_scope: bool,
        enforce_new_defaults: bool,
    ) -> Self {
        let overrides = overrides
            .into_iter()
            .map(|(name, rule)| (name.to_owned(), parse_rule(rule)))
            .collect();
        let opts = PolicyOptions {
            enforce_scope,
            enforce_new_defaults,
            ..PolicyOptions::default()
        };
        Self::build(overrides, Vec::new(), &opts)
    }

    fn build(file_rules: Vec<(String, Check)>, files: Vec<PathBuf>, opts: &PolicyOptions) -> Self {
        let file_index: HashMap<&str, &Check> =
            file_rules.iter().map(|(n, c)| (n.as_str(), c)).collect();
        let registered: HashMap<&str, &'static RuleDefault> =
            defaults().iter().map(|d| (d.name, d)).collect();

        let mut effective: Vec<(String, Check, Option<&'static RuleDefault>)> = file_rules
            .iter()
            .map(|(name, check)| {
                (
                    name.clone(),
                    check.clone(),
                    registered.get(name.as_str()).copied(),
                )
            })
            .collect();
        for default in defaults() {
            if file_index.contains_key(default.name) {
                continue;
            }
            let check = default_check(default, &file_index, opts.enforce_new_defaults);
            effective.push((default.name.to_owned(), check, Some(default)));
        }

        let index: HashMap<String, usize> = effective
            .iter()
            .enumerate()
            .map(|(i, (name, _, _))| (name.clone(), i))
            .collect();
        let fallback = index.get(DEFAULT_RULE).copied();
        let rules = effective
            .into_iter()
            .map(|(name, check, registered)| Rule {
                node: compile(&check, &index, fallback),
                name,
                check,
                registered,
            })
            .collect();
        let enforcer = Self {
            inner: Arc::new(Inner {
                rules,
                index,
                enforce_scope: opts.enforce_scope,
                files,
            }),
        };
        enforcer.warn_about_definitions();
        enforcer
    }

    /// Whether `rule` allows the caller to act on `target`. A rule with scope types fails
    /// for a token of another scope when `enforce_scope` is on.
    pub fn authorize(
        &self,
        rule: &str,
        target: &Target,
        ctx: &RequestContext,
    ) -> Result<(), PolicyError> {
        if self.decide(rule, target, &Credentials::from_context(ctx))? {
            Ok(())
        } else {
            Err(PolicyError::NotAuthorized {
                rule: rule.to_owned(),
            })
        }
    }

    /// `authorize` as a boolean (oslo's `do_raise=False`); an unregistered rule is false.
    pub fn check(&self, rule: &str, target: &Target, ctx: &RequestContext) -> bool {
        match self.decide(rule, target, &Credentials::from_context(ctx)) {
            Ok(allowed) => allowed,
            Err(err) => {
                tracing::warn!("{err}");
                false
            }
        }
    }

    /// Magnum's `check_is_admin`: `context_is_admin` against an empty target, with the
    /// context's own `is_admin` not yet known.
    pub fn is_admin(&self, ctx: &RequestContext) -> bool {
        self.decide(
            "context_is_admin",
            &Target::new(),
            &Credentials::without_is_admin(ctx),
        )
        .unwrap_or(false)
    }

    /// The effective check of a rule (override, default, or default OR deprecated), in
    /// oslo's canonical form.
    pub fn rule(&self, name: &str) -> Option<&Check> {
        let i = *self.inner.index.get(name)?;
        Some(&self.inner.rules[i].check)
    }

    /// The policy files that were applied, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.inner.files
    }

    fn decide(
        &self,
        rule: &str,
        target: &Target,
        creds: &Credentials<'_>,
    ) -> Result<bool, PolicyError> {
        let inner = &*self.inner;
        let found = inner.index.get(rule).map(|&i| (i, &inner.rules[i]));
        let Some((i, entry, default)) = found.and_then(|(i, r)| r.registered.map(|d| (i, r, d)))
        else {
            return Err(PolicyError::NotRegistered {
                rule: rule.to_owned(),
            });
        };
        if inner.enforce_scope && !default.scope_types.is_empty() {
            let scope = creds.token_scope().as_str();
            if !default.scope_types.contains(&scope) {
                tracing::debug!(
                    rule,
                    scope,
                    "token scope is not among the rule's scope types {:?}",
                    default.scope_types
                );
                return Ok(false);
            }
        }
        let mut path = RulePath::default();
        match path
            .enter(i)
            .and_then(|()| self.eval(&entry.node, target, creds, &mut path))
        {
            Ok(allowed) => Ok(allowed),
            // oslo recurses until Python gives up and the request fails; deny instead, and
            // for the whole decision, since a `not` around the loop must not turn it into
            // an allow.
            Err(Cycle) => {
                tracing::warn!(
                    rule,
                    "policy rule references loop or nest too deeply; denying"
                );
                Ok(false)
            }
        }
    }

    fn eval(
        &self,
        node: &Node,
        target: &Target,
        creds: &Credentials<'_>,
        path: &mut RulePath,
    ) -> Result<bool, Cycle> {
        Ok(match node {
            Node::Const(value) => *value,
            Node::Not(inner) => !self.eval(inner, target, creds, path)?,
            Node::And(nodes) => {
                for n in nodes {
                    if !self.eval(n, target, creds, path)? {
                        return Ok(false);
                    }
                }
                true
            }
            Node::Or(nodes) => {
                for n in nodes {
                    if self.eval(n, target, creds, path)? {
                        return Ok(true);
                    }
                }
                false
            }
            Node::Rule(None) => false,
            Node::Rule(Some(i)) => {
                path.enter(*i)?;
                let result = self.eval(&self.inner.rules[*i].node, target, creds, path);
                path.leave();
                result?
            }
            Node::Role(pattern) => pattern
                .render(target)
                .is_some_and(|role| role_matches(creds.roles(), &role)),
            Node::Generic(kind, pattern) => pattern
                .render(target)
                .is_some_and(|value| kind.matches(creds, &value)),
        })
    }

    /// oslo's `check_rules`: log references to undefined rules and cycles.
    fn warn_about_definitions(&self) {
        let inner = &*self.inner;
        let has_fallback = inner.index.contains_key(DEFAULT_RULE);
        for rule in &inner.rules {
            let mut refs = Vec::new();
            rule_refs(&rule.check, &mut refs);
            if !has_fallback {
                for name in refs.iter().filter(|n| !inner.index.contains_key(**n)) {
                    tracing::warn!(
                        rule = rule.name,
                        "policy rule references undefined rule {name:?}, which denies"
                    );
                }
            }
            if self.reaches_itself(&rule.name) {
                tracing::warn!(
                    rule = rule.name,
                    "policy rule is part of a cyclical reference"
                );
            }
        }
    }

    fn reaches_itself(&self, start: &str) -> bool {
        let inner = &*self.inner;
        let mut seen = HashSet::new();
        let mut stack: Vec<&str> = vec![start];
        while let Some(name) = stack.pop() {
            let Some(&i) = inner.index.get(name) else {
                continue;
            };
            let mut refs = Vec::new();
            rule_refs(&inner.rules[i].check, &mut refs);
            for r in refs {
                if r == start {
                    return true;
                }
                if seen.insert(r) {
                    stack.push(r);
                }
            }
        }
        false
    }
}

/// A rule was re-entered while being evaluated (or references nest beyond [`MAX_DEPTH`]).
struct Cycle;

/// The rules being evaluated, innermost last: a fixed array, so deciding never allocates.
#[derive(Default)]
struct RulePath {
    stack: [usize; MAX_DEPTH],
    len: usize,
}

impl RulePath {
    fn enter(&mut self, rule: usize) -> Result<(), Cycle> {
        if self.len == MAX_DEPTH || self.stack[..self.len].contains(&rule) {
            return Err(Cycle);
        }
        self.stack[self.len] = rule;
        self.len += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.len = self.len.saturating_sub(1);
    }
}

/// Later files override earlier ones rule by rule (policy.d after policy.yaml).
fn merge(into: &mut Vec<(String, Check)>, rules: Vec<(String, Check)>) {
    for (name, check) in rules {
        match into.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = check,
            None => into.push((name, check)),
        }
    }
}

/// oslo's `_handle_deprecated_rule` for a default the files do not override.
fn default_check(
    default: &RuleDefault,
    file_rules: &HashMap<&str, &Check>,
    enforce_new_defaults: bool,
) -> Check {
    let check = parse_rule(default.check_str);
    let Some(deprecated) = default.deprecated_rule else {
        return check;
    };
    let deprecated_check = parse_rule(deprecated.check_str);
    if deprecated.name != default.name
        && let Some(file_check) = file_rules.get(deprecated.name)
    {
        // An operator's override of the old name carries over to the new one, unless it is
        // the old default itself or merely aliases the new rule.
        if **file_check != deprecated_check
            && file_check.to_string() != format!("rule:{}", default.name)
        {
            return (*file_check).clone();
        }
    }
    if !enforce_new_defaults && deprecated.check_str != default.check_str {
        return Check::Or(vec![check, deprecated_check]);
    }
    check
}

fn compile(check: &Check, index: &HashMap<String, usize>, fallback: Option<usize>) -> Node {
    let all = |checks: &[Check]| -> Box<[Node]> {
        checks.iter().map(|c| compile(c, index, fallback)).collect()
    };
    match check {
        Check::True => Node::Const(true),
        Check::False | Check::External { .. } => Node::Const(false),
        Check::Not(inner) => Node::Not(Box::new(compile(inner, index, fallback))),
        Check::And(checks) => Node::And(all(checks)),
        Check::Or(checks) => Node::Or(all(checks)),
        Check::Rule(name) => Node::Rule(index.get(name).copied().or(fallback)),
        Check::Role(pattern) => Node::Role(pattern.clone()),
        Check::Generic { kind, pattern } => Node::Generic(kind.clone(), pattern.clone()),
    }
}

fn rule_refs<'c>(check: &'c Check, out: &mut Vec<&'c str>) {
    match check {
        Check::Rule(name) => out.push(name),
        Check::Not(inner) => rule_refs(inner, out),
        Check::And(checks) | Check::Or(checks) => {
            for c in checks {
                rule_refs(c, out);
            }
        }
        _ => {}
    }
}
