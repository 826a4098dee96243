//! Policy override files: locating them as oslo does and reading their rules.

use std::path::{Path, PathBuf};

use super::PolicyError;
use super::check::{Check, ListItem, parse_list_rule_reporting, parse_rule_reporting};

/// oslo.config's `find_file`: an absolute path as is, a relative one in the first search
/// directory holding it. Existence is all that is checked (a directory also counts).
pub(crate) fn find(name: &Path, search_dirs: &[PathBuf]) -> Option<PathBuf> {
    if name.is_absolute() {
        return name.exists().then(|| name.to_owned());
    }
    search_dirs
        .iter()
        .map(|dir| dir.join(name))
        .find(|path| path.exists())
}

/// The files of a policy directory in the order oslo applies them: sorted by name, hidden
/// files and subdirectories skipped, whatever their extension.
pub(crate) fn files_in(dir: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    if !dir.is_dir() {
        return Err(PolicyError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let read_err = |source| PolicyError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') || path.is_dir() {
            continue;
        }
        files.push(path);
    }
    files.sort();
    Ok(files)
}

/// The rules of one policy file, in file order.
pub(crate) fn load(path: &Path) -> Result<Vec<(String, Check)>, PolicyError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &text)
}

/// Parses policy file text: JSON first (fast, exact line numbers for `.json`), then YAML,
/// which also accepts JSON, like oslo's `yaml.safe_load`.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<(String, Check)>, PolicyError> {
    let value: serde_yaml_ng::Value = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json) => serde_yaml_ng::to_value(json).map_err(|e| parse_error(path, None, &e))?,
        Err(json_err) => match serde_yaml_ng::from_str(text) {
            Ok(value) => value,
            Err(yaml_err) => {
                let is_json = path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("json"));
                return Err(if is_json {
                    parse_error(path, Some(json_err.line()), &json_err.to_string())
                } else {
                    let line = yaml_err.location().map(|l| l.line());
                    parse_error(path, line, &yaml_err.to_string())
                });
            }
        },
    };
    use serde_yaml_ng::Value;
    let mapping = match value {
        // `parsed or {}`: an empty document has no rules.
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(s) if s.is_empty() => return Ok(Vec::new()),
        Value::String(s) if s.is_empty() => return Ok(Vec::new()),
        Value::Mapping(mapping) => mapping,
        _ => {
            return Err(parse_error(
                path,
                None,
                &"the top level must be a mapping of rule names to rules",
            ));
        }
    };
    let mut rules = Vec::with_capacity(mapping.len());
    for (key, value) in mapping {
        let Value::String(name) = key else {
            tracing::warn!(file = %path.display(), "ignoring policy rule with a non-string name {key:?}");
            continue;
        };
        let (check, problems) = rule_value(&value).ok_or_else(|| {
            parse_error(
                path,
                None,
                &format!("rule {name:?} must be a string or a list of lists of strings"),
            )
        })?;
        for problem in &problems {
            tracing::warn!(
                file = %path.display(),
                rule = name,
                "failed to understand policy rule, which therefore denies: {problem}"
            );
        }
        rules.push((name, check));
    }
    Ok(rules)
}

fn parse_error(path: &Path, line: Option<usize>, message: &dyn std::fmt::Display) -> PolicyError {
    PolicyError::Parse {
        path: path.to_owned(),
        line,
        message: message.to_string(),
    }
}

/// A rule as oslo's `parse_rule` takes it: text, or the legacy list-of-lists form. Python
/// treats falsy values (null, `false`, `0`) as an empty list, which allows.
fn rule_value(value: &serde_yaml_ng::Value) -> Option<(Check, Vec<String>)> {
    use serde_yaml_ng::Value;
    match value {
        Value::String(text) => Some(parse_rule_reporting(text)),
        Value::Sequence(items) => {
            let items = items.iter().map(list_item).collect::<Option<Vec<_>>>()?;
            Some(parse_list_rule_reporting(&items))
        }
        other if is_falsy(other) => Some((Check::True, Vec::new())),
        _ => None,
    }
}

fn list_item(value: &serde_yaml_ng::Value) -> Option<ListItem> {
    use serde_yaml_ng::Value;
    match value {
        Value::String(text) if !text.is_empty() => Some(ListItem::Single(text.clone())),
        Value::Sequence(items) if !items.is_empty() => Some(ListItem::All(
            items
                .iter()
                .map(|item| match item {
                    Value::String(text) => Some(text.clone()),
                    _ => None,
                })
                .collect(),
        )),
        other if is_falsy(other) => Some(ListItem::Skip),
        _ => None,
    }
}

fn is_falsy(value: &serde_yaml_ng::Value) -> bool {
    use serde_yaml_ng::Value;
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        Value::Mapping(m) => m.is_empty(),
        Value::Tagged(_) => false,
    }
}
