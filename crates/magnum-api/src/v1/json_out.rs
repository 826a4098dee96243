//! Writing JSON values straight into a response's bytes, exactly as serde_json's compact
//! serializer writes them: the list handlers render their items with these, field by field
//! from the driver's rows, without an owned model or a `Serialize` pass.

use chrono::NaiveDateTime;

/// Whether `b` holds a byte that JSON strings escape (serde_json escapes `"`, `\` and
/// the control characters below 0x20; nothing else). Eight bytes at a time, the tail as
/// the last eight (overlapping) or padded with spaces: no loop over single bytes, which
/// was a third of this for the uuids and names the lists are made of.
fn needs_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Non-zero iff some byte of x is zero / below n (exact for n <= 128).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let special = |c: &[u8]| {
        let mut w = [b' '; 8];
        w[..c.len()].copy_from_slice(c);
        let x = u64::from_le_bytes(w);
        below(x, 0x20) | zero(x ^ (ONES * u64::from(b'"'))) | zero(x ^ (ONES * u64::from(b'\\')))
            != 0
    };
    if b.len() <= 8 {
        return special(b);
    }
    let mut chunks = b.chunks_exact(8);
    if chunks.by_ref().any(special) {
        return true;
    }
    !chunks.remainder().is_empty() && special(&b[b.len() - 8..])
}

/// `s` as a JSON string's contents (no quotes).
pub fn str_body(o: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        o.extend_from_slice(s.as_bytes());
        return;
    }
    // serde_json's own escaping, without the quotes it adds around it.
    let start = o.len();
    if serde_json::to_writer(&mut *o, s).is_ok() && o.len() >= start + 2 {
        o.pop();
        o.remove(start);
    } else {
        o.truncate(start);
    }
}

pub fn str(o: &mut Vec<u8>, s: &str) {
    o.push(b'"');
    str_body(o, s);
    o.push(b'"');
}

pub fn opt_str(o: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => str(o, s),
        None => o.extend_from_slice(b"null"),
    }
}

pub fn int(o: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        // m % 10 < 10: the cast keeps the digit.
        digits[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        o.push(b'-');
    }
    o.extend_from_slice(&digits[i..]);
}

pub fn opt_int(o: &mut Vec<u8>, n: Option<i32>) {
    match n {
        Some(n) => int(o, i64::from(n)),
        None => o.extend_from_slice(b"null"),
    }
}

pub fn bool(o: &mut Vec<u8>, b: bool) {
    o.extend_from_slice(if b { b"true" } else { b"false" });
}

/// A JSON TEXT column embedded as it is stored, as `super::raw_json` renders it:
/// NULL or unparsable legacy text is `null`.
pub fn raw_json(o: &mut Vec<u8>, text: Option<&str>) {
    match super::raw_json(text) {
        Some(raw) => o.extend_from_slice(raw.get().as_bytes()),
        None => o.extend_from_slice(b"null"),
    }
}

/// A timestamp as upstream renders it (`super::Ts`): Python's `isoformat()` of
/// the UTC datetime, microseconds only when there are any.
pub fn ts(o: &mut Vec<u8>, t: Option<NaiveDateTime>) {
    use chrono::{Datelike, Timelike};
    let Some(t) = t else {
        o.extend_from_slice(b"null");
        return;
    };
    // Zero-padded to `width` digits (more when the number is longer), as `{:0width$}`.
    fn pad(o: &mut Vec<u8>, n: u32, width: usize) {
        let mut digits = [b'0'; 10];
        let mut i = digits.len();
        let mut m = n;
        loop {
            i -= 1;
            // m % 10 < 10: the cast keeps the digit.
            digits[i] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        let len = digits.len() - i;
        o.extend(std::iter::repeat_n(b'0', width.saturating_sub(len)));
        o.extend_from_slice(&digits[i..]);
    }
    let micros = t.and_utc().timestamp_subsec_micros();
    o.push(b'"');
    match u32::try_from(t.year()) {
        Ok(y) => pad(o, y, 4),
        // Before year 0: the formatter's own rendering.
        Err(_) => {
            use std::io::Write;
            // Writing to a Vec cannot fail.
            let _ = write!(o, "{:04}", t.year());
        }
    }
    for (sep, n) in [
        (b'-', t.month()),
        (b'-', t.day()),
        (b'T', t.hour()),
        (b':', t.minute()),
        (b':', t.second()),
    ] {
        o.push(sep);
        pad(o, n, 2);
    }
    if micros != 0 {
        o.push(b'.');
        pad(o, micros, 6);
    }
    o.extend_from_slice(b"+00:00\"");
}

/// `[{"href": "{base}/v1/{path}{id}", "rel": "self"}, {"href": "{base}/{path}{id}",
/// "rel": "bookmark"}]`, as `super::links` renders.
pub fn links(o: &mut Vec<u8>, base: &str, path: &str, id: &str) {
    o.extend_from_slice(b"[{\"href\":\"");
    str_body(o, base);
    o.extend_from_slice(b"/v1/");
    str_body(o, path);
    str_body(o, id);
    o.extend_from_slice(b"\",\"rel\":\"self\"},{\"href\":\"");
    str_body(o, base);
    o.push(b'/');
    str_body(o, path);
    str_body(o, id);
    o.extend_from_slice(b"\",\"rel\":\"bookmark\"}]");
}

/// The end of a list body: `]`, then `,"next":"..."` when there is a next page, `}`.
pub fn end_list(o: &mut Vec<u8>, next: Option<&str>) {
    o.push(b']');
    if let Some(next) = next {
        o.extend_from_slice(b",\"next\":");
        str(o, next);
    }
    o.push(b'}');
}

/// A 200 with a JSON body already rendered.
pub fn respond(body: Vec<u8>) -> axum::response::Response {
    let mut r = axum::response::Response::new(axum::body::Body::from(body));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::v1::json_out as out;

    fn s(v: &str) -> String {
        let mut o = Vec::new();
        out::str(&mut o, v);
        String::from_utf8(o).unwrap()
    }

    /// Every string writes the bytes serde_json writes, escaped or not, at every length
    /// around the eight-byte steps.
    #[test]
    fn strings_match_serde_json() {
        let mut cases: Vec<String> = vec![
            String::new(),
            "plain".into(),
            "é ü 日本 ☃ \u{7f}".into(),
            "tab\there".into(),
            "quote\"in".into(),
            "back\\slash".into(),
            "\u{0}\u{1f}\u{1}x".into(),
            "new\nline\r\u{8}\u{c}".into(),
            "</script>".into(),
        ];
        for special in [
            '"', '\\', '\n', '\u{1f}', '\u{0}', ' ', '!', '#', '[', ']', '\u{7f}', 'é',
        ] {
            for len in 0..20 {
                for at in 0..=len {
                    let mut v: String = "a".repeat(len);
                    v.insert(at, special);
                    cases.push(v);
                }
            }
        }
        for v in cases {
            assert_eq!(s(&v), serde_json::to_string(&v).unwrap(), "{v:?}");
        }
    }

    #[test]
    fn numbers_and_times_match_serde() {
        for n in [
            0i64,
            1,
            9,
            10,
            99,
            100,
            -1,
            -10,
            12345,
            i64::MAX,
            i64::MIN,
            i64::from(i32::MIN),
        ] {
            let mut o = Vec::new();
            out::int(&mut o, n);
            assert_eq!(String::from_utf8(o).unwrap(), n.to_string());
        }
        let t = chrono::NaiveDate::from_ymd_opt(2025, 1, 2)
            .unwrap()
            .and_hms_micro_opt(3, 4, 5, 67)
            .unwrap();
        use chrono::Timelike;
        let old = chrono::NaiveDate::from_ymd_opt(-5, 12, 31)
            .unwrap()
            .and_hms_micro_opt(23, 59, 59, 999_999)
            .unwrap();
        let far = chrono::NaiveDate::from_ymd_opt(12345, 6, 7)
            .unwrap()
            .and_hms_opt(8, 9, 10)
            .unwrap();
        let seven = chrono::NaiveDate::from_ymd_opt(7, 1, 1)
            .unwrap()
            .and_hms_micro_opt(0, 0, 0, 100_000)
            .unwrap();
        for t in [
            Some(t),
            Some(t.with_nanosecond(0).unwrap()),
            Some(old),
            Some(far),
            Some(seven),
            None,
        ] {
            let mut o = Vec::new();
            out::ts(&mut o, t);
            let want = serde_json::to_string(&crate::v1::Ts(t)).unwrap();
            assert_eq!(String::from_utf8(o).unwrap(), want);
        }
        for text in [
            Some(r#"{"a": "b",  "c":1}"#),
            Some("  {\"x\": 1} "),
            Some("{bad"),
            None,
        ] {
            let mut o = Vec::new();
            out::raw_json(&mut o, text);
            let want = serde_json::to_string(&crate::v1::raw_json(text)).unwrap();
            assert_eq!(String::from_utf8(o).unwrap(), want);
        }
    }
}
