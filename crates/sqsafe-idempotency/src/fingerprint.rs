use std::fmt;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// SHA-256 (lower-case hex) of the canonical JSON form of the fields that define an intent.
///
/// Two payloads with the same fields in another key order, or with other whitespace, or writing `1.0` for `1`, have
/// the same fingerprint. A selected field that is absent is left out, which is not the same as an explicit `null`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Fingerprint of `payload` restricted to `fields`.
    pub fn of_value(payload: &Value, fields: &FingerprintFields) -> Self {
        let mut canonical = Vec::with_capacity(256);
        match fields {
            FingerprintFields::All => write_canonical(payload, &mut canonical),
            FingerprintFields::Only(pointers) => {
                // `only` keeps the pointers sorted and without repeats; a list built by hand may not be.
                let resorted;
                let pointers: &[String] = if pointers.is_sorted_by(|a, b| a < b) {
                    pointers
                } else {
                    let mut copy = pointers.clone();
                    copy.sort_unstable();
                    copy.dedup();
                    resorted = copy;
                    &resorted
                };
                canonical.push(b'{');
                let mut first = true;
                for pointer in pointers {
                    let Some(value) = lookup(payload, pointer) else {
                        continue;
                    };
                    if !first {
                        canonical.push(b',');
                    }
                    first = false;
                    write_string(pointer, &mut canonical);
                    canonical.push(b':');
                    write_canonical(value, &mut canonical);
                }
                canonical.push(b'}');
            }
            FingerprintFields::Except(pointers) => {
                let mut trimmed = payload.clone();
                for pointer in pointers {
                    remove_pointer(&mut trimmed, pointer);
                }
                write_canonical(&trimmed, &mut canonical);
            }
        }
        Self(sha256_hex(&canonical))
    }

    /// Fingerprint of any serialisable payload.
    pub fn of<T: Serialize + ?Sized>(payload: &T, fields: &FingerprintFields) -> Result<Self> {
        let value = serde_json::to_value(payload)
            .map_err(|e| Error::Config(format!("payload cannot be fingerprinted as JSON: {e}")))?;
        Ok(Self::of_value(&value, fields))
    }

    /// The fingerprint of bytes the caller already put in a canonical form of its own (an HTTP request as
    /// `sqsafe::api` reads it: its method, path, query, content type and body by its type): their SHA-256, with no
    /// field selection, so the engine's [`FingerprintFields`] never apply to it.
    pub fn of_canonical_bytes(canonical: &[u8]) -> Self {
        Self(sha256_hex(canonical))
    }

    /// A fingerprint read back from a store.
    pub fn from_stored(hex: impl Into<String>) -> Self {
        Self(hex.into())
    }

    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which fields of a payload define its intent.
///
/// # Default
/// [`FingerprintFields::All`]: the whole payload. Leave out what legitimately changes between deliveries of one intent
/// (a send timestamp, a trace id), or list only the fields that matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FingerprintFields {
    /// The whole payload.
    #[default]
    All,
    /// Only these fields, as JSON pointers (`/amount`, `/customer/id`).
    Only(Vec<String>),
    /// Everything but these object members, as JSON pointers (`/sent_at`).
    Except(Vec<String>),
}

impl FingerprintFields {
    /// Only these JSON pointers.
    pub fn only<I, S>(pointers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut pointers: Vec<String> = pointers.into_iter().map(Into::into).collect();
        // Sorted once here, as the canonical form orders them, rather than for every fingerprint.
        pointers.sort_unstable();
        pointers.dedup();
        Self::Only(pointers)
    }

    /// Everything but these JSON pointers.
    pub fn except<I, S>(pointers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Except(pointers.into_iter().map(Into::into).collect())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let pointers = match self {
            Self::All => return Ok(()),
            Self::Only(p) | Self::Except(p) => p,
        };
        if pointers.is_empty() {
            return Err(Error::Config(
                "fingerprint field list is empty: use FingerprintFields::All".into(),
            ));
        }
        match pointers.iter().find(|p| !p.starts_with('/')) {
            Some(bad) => Err(Error::Config(format!(
                "fingerprint field `{bad}` is not a JSON pointer (`/field`)"
            ))),
            None => Ok(()),
        }
    }
}

/// `value.pointer(pointer)` (RFC 6901, as serde_json reads it) without allocating for tokens that need no unescaping:
/// a fingerprint looks its fields up for every record.
fn lookup<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    if pointer.is_empty() {
        return Some(value);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(value, |target, token| {
            let token: std::borrow::Cow<'_, str> = if token.contains('~') {
                token.replace("~1", "/").replace("~0", "~").into()
            } else {
                token.into()
            };
            match target {
                Value::Object(map) => map.get(token.as_ref()),
                Value::Array(items) => array_index(&token).and_then(|i| items.get(i)),
                _ => None,
            }
        })
}

/// An array index token: digits, no sign, no leading zero (as serde_json's own pointer lookup).
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = if parent.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(parent)
    };
    if let Some(Value::Object(map)) = parent {
        map.remove(&last);
    }
}

/// Sorted keys, no whitespace, integral numbers written as integers.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    use std::io::Write;
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: integers up to here are exact in f64
    if let Some(f) = n.as_f64().filter(|_| !n.is_i64() && !n.is_u64())
        && f.is_finite()
        && f.fract() == 0.0
        && f.abs() <= EXACT
    {
        // `1.0` and `1` mean the same amount; write both as `1`. The cast is exact (checked above).
        #[allow(clippy::cast_possible_truncation)]
        let _ = write!(out, "{}", f as i64);
        return;
    }
    let _ = write!(out, "{n}");
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // serde_json's escaping is deterministic for a given string; writing into a Vec cannot fail.
    let _ = serde_json::to_writer(out, s);
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fp(v: &Value) -> String {
        Fingerprint::of_value(v, &FingerprintFields::All).0
    }

    #[test]
    fn lookup_reads_pointers_as_serde_json_does() {
        let doc = json!({
            "a": {"b": [10, {"c": "d"}]}, "x/y": 1, "t~n": 2, "": 3, "01": 4, "list": [0, 1, 2],
        });
        for pointer in [
            "",
            "/a",
            "/a/b",
            "/a/b/0",
            "/a/b/1/c",
            "/a/b/2",
            "/x~1y",
            "/t~0n",
            "/",
            "/01",
            "/list/01",
            "/list/+1",
            "/list/2",
            "/list/-",
            "/missing",
            "/a/b/c",
            "a",
            "/a/b/1/c/d",
        ] {
            assert_eq!(lookup(&doc, pointer), doc.pointer(pointer), "{pointer:?}");
        }
    }

    #[test]
    fn known_digest() {
        // sha256("{}")
        assert_eq!(
            fp(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#).expect("json");
        let b: Value =
            serde_json::from_str("{ \"a\" : { \"x\" : \"s\", \"y\" : [ 1 , 2 ] },\n \"b\" : 1 }")
                .expect("json");
        assert_eq!(fp(&a), fp(&b));
    }

    #[test]
    fn a_pointer_list_built_by_hand_in_any_order_gives_the_fingerprint_of_only() {
        let payload = json!({"a": 1, "b": {"c": "x"}, "d": [1, 2]});
        let only = FingerprintFields::only(["/d", "/a", "/b/c", "/a"]);
        assert_eq!(
            only,
            FingerprintFields::Only(vec!["/a".into(), "/b/c".into(), "/d".into()]),
            "only() keeps its pointers sorted and once"
        );
        let by_hand =
            FingerprintFields::Only(vec!["/d".into(), "/a".into(), "/b/c".into(), "/a".into()]);
        assert_eq!(
            Fingerprint::of_value(&payload, &by_hand),
            Fingerprint::of_value(&payload, &only)
        );
    }

    #[test]
    fn array_order_and_values_do_matter() {
        assert_ne!(fp(&json!({"a": [1, 2]})), fp(&json!({"a": [2, 1]})));
        assert_ne!(fp(&json!({"a": 1})), fp(&json!({"a": 2})));
        assert_ne!(fp(&json!({"a": "1"})), fp(&json!({"a": 1})));
    }

    #[test]
    fn integral_floats_equal_integers_but_fractions_do_not() {
        assert_eq!(fp(&json!({"amount": 100})), fp(&json!({"amount": 100.0})));
        assert_ne!(fp(&json!({"amount": 100})), fp(&json!({"amount": 100.5})));
        assert_eq!(fp(&json!({"n": -0.0})), fp(&json!({"n": 0})));
    }

    #[test]
    fn unicode_is_hashed_as_given() {
        assert_eq!(
            fp(&json!({"name": "Zoë 注文"})),
            fp(&json!({"name": "Zoë 注文"}))
        );
        assert_ne!(
            fp(&json!({"name": "\u{e9}"})),
            fp(&json!({"name": "e\u{301}"}))
        );
        // Escaped and literal forms of one character parse to the same string.
        let escaped: Value = serde_json::from_str(r#"{"name":"\u00e9"}"#).expect("json");
        assert_eq!(fp(&escaped), fp(&json!({"name": "é"})));
    }

    #[test]
    fn only_selected_fields_count() {
        let fields = FingerprintFields::only(["/amount", "/customer/id"]);
        let a = json!({"amount": 5, "customer": {"id": "c1", "name": "A"}, "sent_at": 1});
        let b = json!({"sent_at": 2, "customer": {"name": "B", "id": "c1"}, "amount": 5});
        let c = json!({"amount": 6, "customer": {"id": "c1"}});
        assert_eq!(
            Fingerprint::of_value(&a, &fields),
            Fingerprint::of_value(&b, &fields)
        );
        assert_ne!(
            Fingerprint::of_value(&a, &fields),
            Fingerprint::of_value(&c, &fields)
        );
        // Field list order does not matter.
        let reversed = FingerprintFields::only(["/customer/id", "/amount"]);
        assert_eq!(
            Fingerprint::of_value(&a, &fields),
            Fingerprint::of_value(&a, &reversed)
        );
    }

    #[test]
    fn a_missing_field_differs_from_null_and_from_present() {
        let fields = FingerprintFields::only(["/amount", "/note"]);
        let missing = Fingerprint::of_value(&json!({"amount": 5}), &fields);
        let null = Fingerprint::of_value(&json!({"amount": 5, "note": null}), &fields);
        let present = Fingerprint::of_value(&json!({"amount": 5, "note": "x"}), &fields);
        assert_ne!(missing, null);
        assert_ne!(missing, present);
        assert_ne!(null, present);
    }

    #[test]
    fn except_removes_fields_at_any_depth() {
        let fields = FingerprintFields::except(["/sent_at", "/meta/trace", "/a~1b"]);
        let a = json!({"x": 1, "sent_at": 1, "meta": {"trace": "t1", "v": 1}, "a/b": 1});
        let b = json!({"x": 1, "sent_at": 2, "meta": {"trace": "t2", "v": 1}, "a/b": 2});
        let c = json!({"x": 1, "meta": {"v": 2}});
        assert_eq!(
            Fingerprint::of_value(&a, &fields),
            Fingerprint::of_value(&b, &fields)
        );
        assert_ne!(
            Fingerprint::of_value(&a, &fields),
            Fingerprint::of_value(&c, &fields)
        );
    }

    #[test]
    fn field_lists_are_validated() {
        assert!(FingerprintFields::All.validate().is_ok());
        assert!(FingerprintFields::only(["/a"]).validate().is_ok());
        assert!(FingerprintFields::only(["a"]).validate().is_err());
        assert!(FingerprintFields::Only(vec![]).validate().is_err());
    }

    #[test]
    fn typed_payloads_hash_like_their_json() {
        #[derive(Serialize)]
        struct Payment {
            id: &'static str,
            amount: u64,
        }
        let typed = Fingerprint::of(&Payment { id: "p", amount: 3 }, &FingerprintFields::All)
            .expect("serialises");
        assert_eq!(
            typed,
            Fingerprint::of_value(&json!({"amount": 3, "id": "p"}), &FingerprintFields::All)
        );
    }
}
