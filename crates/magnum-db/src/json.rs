//! JSON text exactly as upstream writes it into TEXT columns: Python's `json.dumps` with its
//! default separators (`", "` and `": "`), `ensure_ascii` escaping and insertion key order.
//! Byte equality matters because upstream filters JSON columns by comparing the text.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter, Serializer};

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

/// Serialise like Python's `json.dumps(value)`.
pub fn dumps<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::with_capacity(64);
    let mut ser = Serializer::with_formatter(&mut out, PythonFormatter);
    // Serialising plain data into a Vec cannot fail; fall back to "null" rather than panic.
    if value.serialize(&mut ser).is_err() {
        return "null".to_owned();
    }
    // The formatter only writes ASCII.
    String::from_utf8(out).unwrap_or_else(|_| "null".to_owned())
}

/// Parse a JSON TEXT column. NULL and unparsable legacy text read as `None`, as upstream's
/// object layer tolerates them.
pub fn loads<T: serde::de::DeserializeOwned>(text: Option<&str>) -> Option<T> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_python_separators_and_key_order() {
        let v = json!({"kube_tag": "v1.30.4", "auto_healing_enabled": "true"});
        assert_eq!(
            dumps(&v),
            r#"{"kube_tag": "v1.30.4", "auto_healing_enabled": "true"}"#
        );
        assert_eq!(dumps(&json!([])), "[]");
        assert_eq!(dumps(&json!({})), "{}");
        let taints = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
        assert_eq!(
            dumps(&taints),
            r#"[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]"#
        );
        assert_eq!(
            dumps(&json!(["10.0.0.1", "10.0.0.2"])),
            r#"["10.0.0.1", "10.0.0.2"]"#
        );
    }

    #[test]
    fn escapes_like_ensure_ascii() {
        // Python: json.dumps({"k": "é\u007f😀\"\\\n\x01"})
        let v = json!({"k": "é\u{7f}😀\"\\\n\u{1}"});
        assert_eq!(
            dumps(&v),
            r#"{"k": "\u00e9\u007f\ud83d\ude00\"\\\n\u0001"}"#
        );
    }

    #[test]
    fn loads_tolerates_null_and_garbage() {
        assert_eq!(loads::<serde_json::Value>(None), None);
        assert_eq!(loads::<serde_json::Value>(Some("not json")), None);
        assert_eq!(
            loads::<serde_json::Map<String, serde_json::Value>>(Some("{ \"a\" :\"b\" }"))
                .map(|m| m.len()),
            Some(1)
        );
    }
}
