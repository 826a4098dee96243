//! One JSON-patch operation with the semantics of the `jsonpatch` 1.33 / `jsonpointer` 3.1.x
//! pair OpenStack pins (upper-constraints), including their error texts.
//!
//! Documents are Python objects there, so a string is a *sequence* too: `/labels/k/0` walks
//! into the first character of a label value, and most failures on strings have their own
//! wording. Those quirks are reproduced because the texts reach clients in 400 bodies.

use serde_json::Value;

use super::Op;
use magnum_core::py::{py_repr_map, type_name};

pub(super) enum Failure {
    /// A jsonpatch/jsonpointer exception: upstream turns it into PatchError (400).
    Conflict(String),
    /// A Python TypeError jsonpatch does not catch: upstream answers 500, magnum-rs 400.
    Crash(String),
}

/// Where a pointer walk stands: a real node, a character of a string (Python strings are
/// indexable, the result is a new 1-char string), or jsonpointer's `EndOfList` for `-`.
enum Cursor<'a> {
    Node(&'a mut Value),
    Text(String),
    EndOfList,
}

/// A reference token resolved against a sequence (list or str).
enum SeqPart<'p> {
    Dash,
    /// Index (saturated on overflow) and its canonical digits for messages.
    Index(usize, &'p str),
}

fn no_indexing(class: &str) -> Failure {
    Failure::Conflict(format!(
        "Document '<class '{class}'>' does not support indexing, must be mapping/sequence or support __getitem__"
    ))
}

/// jsonpointer's `get_part` for a sequence: `-`, or an index without sign or leading zeros.
fn seq_part(part: &str) -> Result<SeqPart<'_>, Failure> {
    if part == "-" {
        return Ok(SeqPart::Dash);
    }
    let canonical = part == "0"
        || (!part.is_empty() && !part.starts_with('0') && part.bytes().all(|b| b.is_ascii_digit()));
    if !canonical {
        return Err(Failure::Conflict(format!(
            "'{part}' is not a valid sequence index"
        )));
    }
    Ok(SeqPart::Index(part.parse().unwrap_or(usize::MAX), part))
}

/// One `walk` step (every pointer token but the last).
fn walk<'a>(cur: Cursor<'a>, part: &str) -> Result<Cursor<'a>, Failure> {
    let text = match cur {
        Cursor::EndOfList => return Err(no_indexing("jsonpointer.EndOfList")),
        Cursor::Text(s) => s,
        Cursor::Node(Value::Object(map)) => {
            if !map.contains_key(part) {
                return Err(Failure::Conflict(format!(
                    "member '{part}' not found in {}",
                    py_repr_map(map)
                )));
            }
            return map
                .get_mut(part)
                .map(Cursor::Node)
                .ok_or_else(|| Failure::Conflict(String::new()));
        }
        Cursor::Node(Value::Array(items)) => {
            return match seq_part(part)? {
                SeqPart::Dash => Ok(Cursor::EndOfList),
                SeqPart::Index(i, digits) => items
                    .get_mut(i)
                    .map(Cursor::Node)
                    .ok_or_else(|| Failure::Conflict(format!("index '{digits}' is out of bounds"))),
            };
        }
        Cursor::Node(Value::String(s)) => s.clone(),
        Cursor::Node(other) => return Err(no_indexing(type_name(other))),
    };
    match seq_part(part)? {
        SeqPart::Dash => Ok(Cursor::EndOfList),
        SeqPart::Index(i, digits) => text
            .chars()
            .nth(i)
            .map(|c| Cursor::Text(c.to_string()))
            .ok_or_else(|| Failure::Conflict(format!("index '{digits}' is out of bounds"))),
    }
}

/// Apply one operation to `doc` in place. `path` has passed the `^(/[\w-]+)+$` check.
pub(super) fn apply(
    doc: &mut Value,
    op: Op,
    path: &str,
    value: Option<&Value>,
) -> Result<(), Failure> {
    // jsonpatch reads `value` before resolving the pointer.
    let value = match (op, value) {
        (Op::Remove, _) => None,
        (_, Some(v)) => Some(v),
        (_, None) => {
            return Err(Failure::Conflict(
                "The operation does not contain a 'value' member".into(),
            ));
        }
    };
    // Only reachable with ops built by hand: parsed paths always start with `/`.
    if !path.starts_with('/') && !path.is_empty() {
        return Err(Failure::Conflict("Location must start with /".into()));
    }
    let tokens: Vec<&str> = path.split('/').skip(1).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(Failure::Conflict("can't remove the whole document".into()));
    };
    let mut cur = Cursor::Node(doc);
    for part in parents {
        cur = walk(cur, part)?;
    }
    let last = *last;
    match cur {
        Cursor::EndOfList => Err(no_indexing("jsonpointer.EndOfList")),
        Cursor::Node(Value::Object(map)) => match op {
            Op::Remove => match map.shift_remove(last) {
                Some(_) => Ok(()),
                None => Err(Failure::Conflict(format!(
                    "can't remove a non-existent object '{last}'"
                ))),
            },
            Op::Add => {
                // Existing keys keep their position, new ones go last: Python dict order.
                map.insert(last.to_string(), value.cloned().unwrap_or(Value::Null));
                Ok(())
            }
            Op::Replace => {
                if last == "-" {
                    return Err(Failure::Conflict(
                        "'path' with '-' can't be applied to 'replace' operation".into(),
                    ));
                }
                match map.get_mut(last) {
                    Some(slot) => {
                        *slot = value.cloned().unwrap_or(Value::Null);
                        Ok(())
                    }
                    None => Err(Failure::Conflict(format!(
                        "can't replace a non-existent object '{last}'"
                    ))),
                }
            }
        },
        Cursor::Node(Value::Array(items)) => {
            let part = seq_part(last)?;
            match (op, part) {
                (Op::Remove, SeqPart::Dash) => {
                    Err(Failure::Conflict("invalid array index '-'".into()))
                }
                (Op::Remove, SeqPart::Index(i, digits)) => {
                    if i < items.len() {
                        items.remove(i);
                        Ok(())
                    } else {
                        Err(Failure::Conflict(format!(
                            "can't remove a non-existent object '{digits}'"
                        )))
                    }
                }
                (Op::Add, part) => {
                    let value = value.cloned().unwrap_or(Value::Null);
                    match part {
                        SeqPart::Dash => items.push(value),
                        SeqPart::Index(i, _) if i > items.len() => {
                            return Err(Failure::Conflict("can't insert outside of list".into()));
                        }
                        SeqPart::Index(i, _) => items.insert(i, value),
                    }
                    Ok(())
                }
                (Op::Replace, part) => match part {
                    SeqPart::Dash => Err(Failure::Conflict(
                        "'path' with '-' can't be applied to 'replace' operation".into(),
                    )),
                    SeqPart::Index(i, _) => match items.get_mut(i) {
                        Some(slot) => {
                            *slot = value.cloned().unwrap_or(Value::Null);
                            Ok(())
                        }
                        None => Err(Failure::Conflict("can't replace outside of list".into())),
                    },
                },
            }
        }
        Cursor::Node(Value::String(_)) | Cursor::Text(_) => {
            // A str is an immutable sequence: the index is validated, then the op fails.
            let part = seq_part(last)?;
            let shown = match part {
                SeqPart::Dash => "-",
                SeqPart::Index(_, digits) => digits,
            };
            match (op, part) {
                (Op::Remove, SeqPart::Dash) => {
                    Err(Failure::Conflict("invalid array index '-'".into()))
                }
                (Op::Remove, SeqPart::Index(..)) => Err(Failure::Crash(
                    "'str' object doesn't support item deletion".into(),
                )),
                (Op::Add, _) => Err(Failure::Conflict(format!(
                    "unable to fully resolve json pointer {path}, part {shown}"
                ))),
                (Op::Replace, part) => match part {
                    SeqPart::Dash => Err(Failure::Conflict(
                        "'path' with '-' can't be applied to 'replace' operation".into(),
                    )),
                    SeqPart::Index(..) => Err(Failure::Conflict(format!(
                        "unable to fully resolve json pointer {path}, part {shown}"
                    ))),
                },
            }
        }
        Cursor::Node(other) => Err(no_indexing(type_name(other))),
    }
}
