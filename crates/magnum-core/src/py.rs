//! Python renderings of JSON data: `str()`, `repr()`, `repr(float)` and `json.dumps`.
//!
//! Upstream error texts embed Python renderings of request data (`Value: '...'`, the
//! `Couldn't apply patch '[{...}]'` list, oslo's `str()` coercions), and upstream writes JSON
//! TEXT columns with `json.dumps`, whose bytes matter because filters compare the text. One
//! module keeps the Python rules in one place.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter, Serializer};
use serde_json::{Map, Value};

/// Python `str()`: strings as-is, everything else as `repr()`.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python `repr()` of the value a JSON document decodes to (`json.loads`).
pub fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v);
    out
}

/// Python `repr()` of a dict.
pub fn py_repr_map(m: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(&mut out, m);
    out
}

fn write_repr(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&number_repr(n)),
        Value::String(s) => out.push_str(&str_repr(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => write_map(out, m),
    }
}

fn write_map(out: &mut String, m: &Map<String, Value>) {
    out.push('{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&str_repr(k));
        out.push_str(": ");
        write_repr(out, v);
    }
    out.push('}');
}

/// Whether Python's `json` module would have produced an `int` (not a `float`) for this number.
pub fn is_py_int(n: &serde_json::Number) -> bool {
    // With serde_json's `arbitrary_precision` a big integer is neither i64 nor u64; its text then
    // tells whether JSON had a fraction or exponent.
    n.is_i64() || n.is_u64() || !n.to_string().contains(['.', 'e', 'E'])
}

fn number_repr(n: &serde_json::Number) -> String {
    if is_py_int(n) {
        return n.to_string();
    }
    match n.as_f64() {
        Some(f) => float_repr(f),
        None => n.to_string(),
    }
}

/// Python `repr(float)`: shortest round-trip digits, positional for exponents -4..16,
/// scientific (`1e+16`, `1.5e-07`) otherwise.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // `{:e}` yields the shortest round-trip digits as `d[.ddd]e<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // position of the decimal point within `digits`
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mant = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{esign}{:02}", exp.unsigned_abs())
    }
}

/// Python `repr(str)`: single quotes unless the text has `'` and no `"`; non-printable
/// characters escaped as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// Approximation of `str.isprintable()` for one character: false for controls, separators
/// other than the ASCII space, format characters, private use and non-characters. (Unassigned
/// code points, which Python also escapes, are not tracked.)
fn is_printable(c: char) -> bool {
    let u = c as u32;
    if u < 0x20 || (0x7f..0xa0).contains(&u) {
        return false;
    }
    if u < 0x7f {
        return true;
    }
    const NOT_PRINTABLE: &[(u32, u32)] = &[
        (0x00a0, 0x00a0),
        (0x00ad, 0x00ad),
        (0x0600, 0x0605),
        (0x061c, 0x061c),
        (0x06dd, 0x06dd),
        (0x070f, 0x070f),
        (0x0890, 0x0891),
        (0x08e2, 0x08e2),
        (0x1680, 0x1680),
        (0x180e, 0x180e),
        (0x2000, 0x200f),
        (0x2028, 0x202f),
        (0x205f, 0x2064),
        (0x2066, 0x206f),
        (0x3000, 0x3000),
        (0xd800, 0xf8ff),
        (0xfdd0, 0xfdef),
        (0xfeff, 0xfeff),
        (0xfff9, 0xfffb),
        (0x110bd, 0x110bd),
        (0x110cd, 0x110cd),
        (0x13430, 0x1343f),
        (0x1bca0, 0x1bca3),
        (0x1d173, 0x1d17a),
        (0xe0001, 0xe0001),
        (0xe0020, 0xe007f),
        (0xf0000, 0x10ffff),
    ];
    if u & 0xfffe == 0xfffe {
        return false;
    }
    !NOT_PRINTABLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
}

/// Python's `type(x).__name__` for a decoded JSON value.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if is_py_int(n) => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    // serde_json's shortest form is `1e16`; Python writes `1e+16`. (Non-finite floats never get
    // here: serde_json writes them as `null`.)
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(w, f64::from(value))
    }

    /// Python escapes everything outside printable ASCII (`' '..='~'`), including DEL and all
    /// non-ASCII, as lowercase `\uXXXX` (UTF-16 surrogate pairs above the BMP).
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[start..i])?;
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                write!(w, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let s: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => return write!(w, "\\u{byte:04x}"),
            // serde_json only asks for the escapes above; keep any future ones Python-shaped.
            #[allow(unreachable_patterns)]
            _ => b"",
        };
        w.write_all(s)
    }
}

/// Python's `json.dumps(value)` with its defaults: `", "` and `": "` separators, insertion key
/// order, `ensure_ascii` escapes and floats as `repr(float)`.
pub fn json_dumps<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::with_capacity(64);
    let mut ser = Serializer::with_formatter(&mut out, PythonFormatter);
    // Serialising plain data into a Vec cannot fail; fall back to "null" rather than panic.
    if value.serialize(&mut ser).is_err() {
        return "null".to_owned();
    }
    // The formatter only writes ASCII.
    String::from_utf8(out).unwrap_or_else(|_| "null".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_render_like_python() {
        let cases = [
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e15, "1000000000000000.0"),
            (-0.0, "-0.0"),
            (1e22, "1e+22"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (100000.0, "100000.0"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "{f:?}");
        }
    }

    #[test]
    fn strings_render_like_python() {
        assert_eq!(str_repr("abc"), "'abc'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("it's \"q\""), "'it\\'s \"q\"'");
        assert_eq!(
            str_repr("a\\b\n\t\r\u{1}\u{7f}"),
            "'a\\\\b\\n\\t\\r\\x01\\x7f'"
        );
        assert_eq!(str_repr("é😀"), "'é😀'");
        assert_eq!(str_repr("\u{a0}\u{200b}\u{85}"), "'\\xa0\\u200b\\x85'");
    }

    #[test]
    fn values_render_like_python() {
        let v = json!({"b": [1, "x", null, true, 1.0e20, -0.0, false], "a": {}});
        assert_eq!(
            py_repr(&v),
            "{'b': [1, 'x', None, True, 1e+20, -0.0, False], 'a': {}}"
        );
        assert_eq!(py_str(&json!("x")), "x");
        assert_eq!(py_str(&json!(1.5)), "1.5");
        assert_eq!(type_name(&json!(2.0)), "float");
        assert_eq!(type_name(&json!(2)), "int");
    }

    #[test]
    fn dumps_matches_python_separators_and_key_order() {
        let v = json!({"kube_tag": "v1.30.4", "auto_healing_enabled": "true"});
        assert_eq!(
            json_dumps(&v),
            r#"{"kube_tag": "v1.30.4", "auto_healing_enabled": "true"}"#
        );
        assert_eq!(json_dumps(&json!([])), "[]");
        assert_eq!(json_dumps(&json!({})), "{}");
        let taints = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
        assert_eq!(
            json_dumps(&taints),
            r#"[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]"#
        );
        assert_eq!(
            json_dumps(&json!(["10.0.0.1", "10.0.0.2"])),
            r#"["10.0.0.1", "10.0.0.2"]"#
        );
    }

    #[test]
    fn escapes_like_ensure_ascii() {
        // Python: json.json_dumps({"k": "é\u007f😀\"\\\n\x01"})
        let v = json!({"k": "é\u{7f}😀\"\\\n\u{1}"});
        assert_eq!(
            json_dumps(&v),
            r#"{"k": "\u00e9\u007f\ud83d\ude00\"\\\n\u0001"}"#
        );
    }

    #[test]
    fn dumps_writes_floats_like_python() {
        assert_eq!(
            json_dumps(&json!([1.0, 1e16, 0.1, -0.0])),
            "[1.0, 1e+16, 0.1, -0.0]"
        );
        assert_eq!(json_dumps(&["a", "b"]), r#"["a", "b"]"#);
    }

    #[test]
    fn str_of_scalars() {
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(3)), "3");
        assert_eq!(py_str(&json!(1e16)), "1e+16");
        assert_eq!(py_str(&json!(2.5)), "2.5");
        assert_eq!(py_str(&Value::Null), "None");
    }
}
