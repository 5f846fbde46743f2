use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 (lower-case hex) of the canonical JSON of a request body: keys sorted, no whitespace.
///
/// Written out by hand rather than with `serde_json::to_string`, whose key order depends on whether some crate in
/// the build enables serde_json's `preserve_order` feature.
pub(crate) fn fingerprint(body: &Value) -> String {
    let mut canonical = String::with_capacity(128);
    write_canonical(body, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        // Null, booleans and numbers print the same however they were written.
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // Display of a JSON string value is its quoted, escaped form.
    let _ = write!(out, "{}", Value::from(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> String {
        fingerprint(&serde_json::from_str(text).expect("test JSON"))
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = of(r#"{"payment_id":"p-1","amount":1250,"meta":{"b":[1,{"y":2,"x":1}],"a":null}}"#);
        let b = of(r#"{ "meta": { "a": null, "b": [ 1, { "x": 1, "y": 2 } ] },
                       "amount": 1250, "payment_id": "p-1" }"#);
        assert_eq!(a, b);
    }

    #[test]
    fn values_and_array_order_do_matter() {
        assert_ne!(of(r#"{"amount":1250}"#), of(r#"{"amount":1251}"#));
        assert_ne!(of(r#"{"amount":1250}"#), of(r#"{"amount":"1250"}"#));
        assert_ne!(of(r#"{"a":[1,2]}"#), of(r#"{"a":[2,1]}"#));
        assert_ne!(of(r#"{"a":null}"#), of(r#"{}"#));
    }

    #[test]
    fn is_the_hash_of_the_canonical_text() {
        let canonical = r#"{"a":"x\"y","b":[true,null,1.5]}"#;
        let expected: String = Sha256::digest(canonical.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(of(r#"{"b":[true,null,1.5],"a":"x\"y"}"#), expected);
    }
}
