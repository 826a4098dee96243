//! The commented sample policy file, as `oslopolicy-sample-generator` lays one out.

use std::fmt::Write;

use super::defaults::{RuleDefault, defaults};

/// Every default rule as a commented-out YAML entry preceded by its description, the API
/// calls it guards and its intended scope; deprecated defaults are noted after the rule.
pub fn sample_policy_yaml() -> String {
    let mut out = String::new();
    for rule in defaults() {
        write_rule(&mut out, rule);
    }
    out
}

fn write_rule(out: &mut String, rule: &RuleDefault) {
    for line in wrap(rule.description, 70) {
        let _ = writeln!(out, "# {line}");
    }
    for op in rule.operations {
        let _ = writeln!(out, "# {}  {}", op.method, op.path);
    }
    if !rule.scope_types.is_empty() {
        let _ = writeln!(out, "# Intended scope(s): {}", rule.scope_types.join(", "));
    }
    let _ = writeln!(out, "#{}: {}", quote(rule.name), quote(rule.check_str));
    if let Some(dep) = rule.deprecated_rule {
        let _ = writeln!(out, "# DEPRECATED");
        let _ = writeln!(out, "# {}: {}", quote(dep.name), quote(dep.check_str));
        let _ = writeln!(out, "# is deprecated since {} in favour of", dep.since);
        let _ = writeln!(out, "# {}: {}.", quote(rule.name), quote(rule.check_str));
        let _ = writeln!(
            out,
            "# With [oslo_policy] enforce_new_defaults = False both are accepted."
        );
        for line in wrap(dep.reason, 70) {
            let _ = writeln!(out, "# {line}");
        }
    }
    out.push('\n');
}

/// A YAML double-quoted scalar.
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
