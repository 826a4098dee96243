//! How each Rust field type is read from (and written back to) magnum.conf text, with
//! oslo.config's rules for booleans, integers, floats, lists and dicts.

use std::collections::BTreeMap;

use super::registry::Spec;
use super::secret::Secret;

/// A value that does not fit its option: the offending text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    value: String,
    problem: String,
}

impl Invalid {
    fn new(value: &str, problem: impl Into<String>) -> Self {
        Self {
            value: value.to_owned(),
            problem: problem.into(),
        }
    }

    /// `'abc' is not an integer`, on one line; a secret's text is shown as `****`.
    pub fn describe(&self, secret: bool) -> String {
        let shown = if secret {
            "****".to_owned()
        } else {
            one_line(&self.value)
        };
        format!("'{shown}' {}", self.problem)
    }
}

/// Escapes line breaks and control characters so a message stays on one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' => "\\n".to_owned(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A Rust type usable as an option field.
pub(crate) trait OptValue: Sized {
    const SECRET: bool = false;
    /// oslo reads an empty number as "no value": the resolver then keeps the default.
    const EMPTY_IS_UNSET: bool = false;
    const UNSIGNED: bool = false;

    /// The type as oslo-config-generator names it, e.g. `integer value`.
    fn type_name(spec: &Spec) -> &'static str;

    /// Parses one (already substituted) value.
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid>;

    /// Parses the occurrences found in the files (never empty): single-valued types take the
    /// last one, multi-valued ones all of them.
    fn parse_all(raws: &[String], spec: &Spec) -> Result<Self, Invalid> {
        Self::parse(raws.last().map_or("", String::as_str), spec)
    }

    /// The value as it would be written in a file; empty when unset. One entry per value of
    /// a multi-valued option.
    fn render(&self, spec: &Spec) -> Vec<String>;
}

fn check_choice(raw: &str, choices: &[&str]) -> Result<(), Invalid> {
    if choices.is_empty() || choices.contains(&raw) {
        Ok(())
    } else {
        Err(Invalid::new(
            raw,
            format!("is not one of: {}", choices.join(", ")),
        ))
    }
}

impl OptValue for String {
    fn type_name(_: &Spec) -> &'static str {
        "string value"
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        check_choice(raw, spec.choices)?;
        Ok(raw.to_owned())
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        vec![self.clone()]
    }
}

impl OptValue for Option<String> {
    fn type_name(_: &Spec) -> &'static str {
        "string value"
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        String::parse(raw, spec).map(Some)
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        self.iter().cloned().collect()
    }
}

impl OptValue for Secret {
    const SECRET: bool = true;
    fn type_name(_: &Spec) -> &'static str {
        "string value"
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        String::parse(raw, spec).map(Secret::new)
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        vec![self.expose().to_owned()]
    }
}

impl OptValue for Option<Secret> {
    const SECRET: bool = true;
    fn type_name(_: &Spec) -> &'static str {
        "string value"
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        Secret::parse(raw, spec).map(Some)
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        self.iter().map(|s| s.expose().to_owned()).collect()
    }
}

impl OptValue for bool {
    fn type_name(_: &Spec) -> &'static str {
        "boolean value"
    }
    fn parse(raw: &str, _: &Spec) -> Result<Self, Invalid> {
        match raw.to_lowercase().as_str() {
            "true" | "1" | "on" | "yes" => Ok(true),
            "false" | "0" | "off" | "no" => Ok(false),
            _ => Err(Invalid::new(
                raw,
                "is not a boolean (use true/false, yes/no, on/off or 1/0)",
            )),
        }
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        vec![self.to_string()]
    }
}

/// Python's `int()`: optional sign, decimal digits, single underscores between digits, and
/// surrounding whitespace.
fn parse_python_int(raw: &str) -> Result<i128, Invalid> {
    let not_int = || Invalid::new(raw, "is not an integer");
    let s = raw.trim();
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !well_formed {
        return Err(not_int());
    }
    let magnitude: i128 = digits
        .replace('_', "")
        .parse()
        .map_err(|_| Invalid::new(raw, "is out of range"))?;
    Ok(if negative { -magnitude } else { magnitude })
}

fn check_bounds<N: PartialOrd + std::fmt::Display + Copy>(
    raw: &str,
    value: N,
    min: Option<N>,
    max: Option<N>,
) -> Result<(), Invalid> {
    if let Some(min) = min
        && value < min
    {
        return Err(Invalid::new(raw, format!("is less than the minimum {min}")));
    }
    if let Some(max) = max
        && value > max
    {
        return Err(Invalid::new(
            raw,
            format!("is greater than the maximum {max}"),
        ));
    }
    Ok(())
}

macro_rules! integer_value {
    ($($t:ty),*) => {$(
        impl OptValue for $t {
            const EMPTY_IS_UNSET: bool = true;
            const UNSIGNED: bool = <$t>::MIN == 0;
            fn type_name(_: &Spec) -> &'static str {
                "integer value"
            }
            fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
                let value = parse_python_int(raw)?;
                // The declared bounds, narrowed to what the field type can hold.
                let (type_min, type_max) = (i128::from(<$t>::MIN), i128::from(<$t>::MAX));
                let min = spec.min.map_or(type_min, |m| i128::from(m).max(type_min));
                let max = spec.max.map_or(type_max, |m| i128::from(m).min(type_max));
                check_bounds(raw, value, Some(min), Some(max))?;
                <$t>::try_from(value).map_err(|_| Invalid::new(raw, "is out of range"))
            }
            fn render(&self, _: &Spec) -> Vec<String> {
                vec![self.to_string()]
            }
        }
    )*};
}
integer_value!(u16, u32, u64, i32, i64);

/// An integer option with no default (oslo.config's `IntOpt` defaulting to None).
impl OptValue for Option<u32> {
    const EMPTY_IS_UNSET: bool = true;
    const UNSIGNED: bool = true;
    fn type_name(spec: &Spec) -> &'static str {
        u32::type_name(spec)
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        u32::parse(raw, spec).map(Some)
    }
    fn render(&self, spec: &Spec) -> Vec<String> {
        self.iter().flat_map(|n| n.render(spec)).collect()
    }
}

impl OptValue for f64 {
    const EMPTY_IS_UNSET: bool = true;
    fn type_name(_: &Spec) -> &'static str {
        "floating point value"
    }
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        let value: f64 = raw
            .trim()
            .parse()
            .map_err(|_| Invalid::new(raw, "is not a number"))?;
        // Bounds are small integers, exactly representable as f64.
        #[allow(clippy::cast_precision_loss)]
        let (min, max) = (spec.min.map(|m| m as f64), spec.max.map(|m| m as f64));
        check_bounds(raw, value, min, max)?;
        Ok(value)
    }
    fn render(&self, _: &Spec) -> Vec<String> {
        // Debug keeps the ".0" of whole numbers, as Python's str(float) does.
        vec![format!("{self:?}")]
    }
}

impl OptValue for Vec<String> {
    fn type_name(spec: &Spec) -> &'static str {
        if spec.multi {
            "multi valued"
        } else {
            "list value"
        }
    }

    /// A comma-separated list: items trimmed, trailing commas dropped, empty text → empty list.
    fn parse(raw: &str, spec: &Spec) -> Result<Self, Invalid> {
        let s = raw.trim().trim_end_matches(',');
        if s.is_empty() {
            return Ok(Vec::new());
        }
        s.split(',')
            .map(|item| {
                let item = item.trim();
                check_choice(item, spec.item_choices)?;
                Ok(item.to_owned())
            })
            .collect()
    }

    fn parse_all(raws: &[String], spec: &Spec) -> Result<Self, Invalid> {
        if !spec.multi {
            return Self::parse(raws.last().map_or("", String::as_str), spec);
        }
        // Multi-valued: each occurrence is one item, taken as written.
        raws.iter()
            .map(|raw| {
                check_choice(raw, spec.item_choices)?;
                Ok(raw.clone())
            })
            .collect()
    }

    fn render(&self, spec: &Spec) -> Vec<String> {
        if spec.multi {
            self.clone()
        } else {
            vec![self.join(",")]
        }
    }
}

impl OptValue for BTreeMap<String, String> {
    fn type_name(_: &Spec) -> &'static str {
        "dict value"
    }

    /// `k1:v1,k2:v2`. As in oslo, a piece without `:` is glued to the next one (so a value may
    /// contain commas), keys and values are trimmed, and empty or repeated keys are errors.
    fn parse(raw: &str, _: &Spec) -> Result<Self, Invalid> {
        let s = raw.trim();
        let mut map = BTreeMap::new();
        if s.is_empty() {
            return Ok(map);
        }
        let mut pending = String::new();
        let mut pieces = s.split(',').peekable();
        while let Some(piece) = pieces.next() {
            if !pending.is_empty() {
                pending.push(',');
            }
            pending.push_str(piece);
            let Some((key, value)) = pending.split_once(':') else {
                if pieces.peek().is_none() {
                    return Err(Invalid::new(
                        raw,
                        "is not a list of key:value pairs separated by ','",
                    ));
                }
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                return Err(Invalid::new(raw, "has an empty key"));
            }
            if map.insert(key.to_owned(), value.to_owned()).is_some() {
                return Err(Invalid::new(raw, format!("repeats the key '{key}'")));
            }
            pending.clear();
        }
        Ok(map)
    }

    fn render(&self, _: &Spec) -> Vec<String> {
        let pairs: Vec<String> = self.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        vec![pairs.join(",")]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::registry::opt;

    fn err<T: OptValue + std::fmt::Debug>(raw: &str, spec: &Spec) -> String {
        T::parse(raw, spec).unwrap_err().describe(T::SECRET)
    }

    #[test]
    fn booleans_in_oslo_spelling() {
        for t in ["true", "TRUE", "yes", "Yes", "on", "1"] {
            assert!(bool::parse(t, &opt()).unwrap(), "{t}");
        }
        for f in ["false", "False", "no", "OFF", "0"] {
            assert!(!bool::parse(f, &opt()).unwrap(), "{f}");
        }
        assert_eq!(
            err::<bool>("maybe", &opt()),
            "'maybe' is not a boolean (use true/false, yes/no, on/off or 1/0)"
        );
        assert!(bool::parse("", &opt()).is_err());
        assert!(bool::parse("t", &opt()).is_err());
    }

    #[test]
    fn integers_like_python_int() {
        assert_eq!(u32::parse("42", &opt()).unwrap(), 42);
        assert_eq!(u32::parse(" +7 ", &opt()).unwrap(), 7);
        assert_eq!(i64::parse("-1", &opt()).unwrap(), -1);
        assert_eq!(u32::parse("1_000", &opt()).unwrap(), 1000);
        for bad in ["abc", "1.0", "0x10", "1__0", "_1", "1_", "", "-", "1 2"] {
            assert_eq!(
                err::<i64>(bad, &opt()),
                format!("'{bad}' is not an integer")
            );
        }
    }

    #[test]
    fn integer_bounds_come_from_spec_and_type() {
        let port = opt().range(1, 65535);
        assert_eq!(u16::parse("9511", &port).unwrap(), 9511);
        assert_eq!(err::<u16>("0", &port), "'0' is less than the minimum 1");
        assert_eq!(
            err::<u16>("70000", &port),
            "'70000' is greater than the maximum 65535"
        );
        assert_eq!(err::<u32>("-1", &opt()), "'-1' is less than the minimum 0");
        assert_eq!(
            err::<i64>("-2", &opt().min(-1)),
            "'-2' is less than the minimum -1"
        );
        assert_eq!(
            err::<i64>("99999999999999999999999999999999999999999", &opt()),
            "'99999999999999999999999999999999999999999' is out of range"
        );
    }

    #[test]
    fn floats() {
        assert_eq!(f64::parse("2.5", &opt()).unwrap(), 2.5);
        assert_eq!(f64::parse(" 3 ", &opt()).unwrap(), 3.0);
        assert_eq!(f64::parse("1e3", &opt()).unwrap(), 1000.0);
        assert_eq!(err::<f64>("fast", &opt()), "'fast' is not a number");
        assert_eq!(
            err::<f64>("-0.5", &opt().min(0)),
            "'-0.5' is less than the minimum 0"
        );
        assert_eq!(2.0_f64.render(&opt()), ["2.0"]);
        assert_eq!(0.25_f64.render(&opt()), ["0.25"]);
    }

    #[test]
    fn strings_and_choices() {
        let strategy = opt().choices(&["keystone", "noauth"]);
        assert_eq!(String::parse("noauth", &strategy).unwrap(), "noauth");
        assert_eq!(
            err::<String>("Keystone", &strategy),
            "'Keystone' is not one of: keystone, noauth"
        );
        assert_eq!(
            Option::<String>::parse("", &opt()).unwrap(),
            Some(String::new())
        );
        assert!(Option::<String>::None.render(&opt()).is_empty());
    }

    #[test]
    fn secrets_never_show_their_text() {
        let spec = opt().choices(&["a"]);
        let e = Secret::parse("hunter2", &spec).unwrap_err();
        assert_eq!(e.describe(true), "'****' is not one of: a");
        assert_eq!(
            err::<Option<Secret>>("hunter2", &spec),
            "'****' is not one of: a"
        );
    }

    #[test]
    fn lists() {
        let l = |s: &str| Vec::<String>::parse(s, &opt()).unwrap();
        assert_eq!(l("a, b ,c"), ["a", "b", "c"]);
        assert_eq!(l("a, b,,c,"), ["a", "b", "", "c"]);
        assert_eq!(l(""), Vec::<String>::new());
        assert_eq!(l("  , "), Vec::<String>::new());
        assert_eq!(
            l("Digital Signature, Key Encipherment"),
            ["Digital Signature", "Key Encipherment"]
        );
        let spec = opt().item_choices(&["keyUsage", "subjectAltName"]);
        assert_eq!(
            err::<Vec<String>>("keyUsage, bogus", &spec),
            "'bogus' is not one of: keyUsage, subjectAltName"
        );
        assert_eq!(vec!["a".to_owned(), "b".to_owned()].render(&opt()), ["a,b"]);
    }

    #[test]
    fn multi_valued_keeps_each_occurrence_whole() {
        let multi = opt().multi();
        let raws = vec!["messagingv2".to_owned(), "log, noop".to_owned()];
        assert_eq!(
            Vec::<String>::parse_all(&raws, &multi).unwrap(),
            ["messagingv2", "log, noop"]
        );
        // Single-valued lists take the last occurrence.
        assert_eq!(
            Vec::<String>::parse_all(&raws, &opt()).unwrap(),
            ["log", "noop"]
        );
        assert_eq!(Vec::<String>::type_name(&multi), "multi valued");
    }

    #[test]
    fn dicts() {
        let d = |s: &str| BTreeMap::<String, String>::parse(s, &opt()).unwrap();
        let m = d("a:1, b : 2");
        assert_eq!(m.get("a").map(String::as_str), Some("1"));
        assert_eq!(m.get("b").map(String::as_str), Some("2"));
        assert_eq!(d("a:1:2").get("a").map(String::as_str), Some("1:2"));
        assert_eq!(d("a,b:1").get("a,b").map(String::as_str), Some("1"));
        assert!(d("").is_empty());
        type Map = BTreeMap<String, String>;
        assert_eq!(
            err::<Map>("a", &opt()),
            "'a' is not a list of key:value pairs separated by ','"
        );
        assert_eq!(
            err::<Map>("a:1,a:2", &opt()),
            "'a:1,a:2' repeats the key 'a'"
        );
        assert_eq!(err::<Map>(":1", &opt()), "':1' has an empty key");
        assert_eq!(m.render(&opt()), ["a:1,b:2"]);
    }

    #[test]
    fn messages_stay_on_one_line() {
        assert_eq!(err::<u32>("1\n2", &opt()), "'1\\n2' is not an integer");
    }
}
