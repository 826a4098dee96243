//! JSON text exactly as upstream writes it into TEXT columns (Python's `json.dumps`), and
//! tolerant reading of those columns. Byte equality matters because upstream filters JSON
//! columns by comparing the text.

use serde::Serialize;

/// Serialise like Python's `json.dumps(value)` (the rules live in [`magnum_core::py`]).
pub fn dumps<T: Serialize + ?Sized>(value: &T) -> String {
    magnum_core::py::json_dumps(value)
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
    fn dumps_is_pythons() {
        // The full rules are tested in magnum_core::py.
        let v = json!({"kube_tag": "v1.30.4", "k": "é"});
        assert_eq!(dumps(&v), r#"{"kube_tag": "v1.30.4", "k": "\u00e9"}"#);
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
