//! Payload errors that say where and what, never the value.
//!
//! serde's messages quote the offending value (`invalid type: string "4111-1111-1111-1111", expected u64`), and a
//! record's error reaches the logs and the dead-letter context (`error`). These functions keep the field path (from
//! `serde_path_to_error`), the kind of value found and the type expected, and drop the rest.

use serde::de::DeserializeOwned;
use serde_json::error::Category;
use serde_path_to_error::{Path, Segment};

/// Longest `expected …` text kept (an enum with many variants lists them all).
const MAX_EXPECTED_CHARS: usize = 200;
/// Longest map key kept in a path; longer keys are shown as `<key>`.
const MAX_KEY_CHARS: usize = 64;

/// Parses `body` into `T` (named `type_name` in messages); the error describes the failure without quoting the
/// body.
pub(crate) fn from_json<T: DeserializeOwned>(body: &str, type_name: &str) -> Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_str(body);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Ok(value) => match deserializer.end() {
            Ok(()) => Ok(value),
            Err(e) => Err(describe(type_name, None, &e)),
        },
        Err(e) => Err(describe(type_name, Some(e.path()), e.inner())),
    }
}

/// Parses `body` once into JSON, then that value into `T`: for callers that also read fields of the body as sent (a
/// fingerprint), without scanning the text twice. Errors as in [`from_json`]; positions exist only in the text, so
/// an error of shape (read from the value) has its path but no position.
pub(crate) fn from_json_with_raw<T: DeserializeOwned>(
    body: &str,
    type_name: &str,
) -> Result<(T, serde_json::Value), String> {
    let raw: serde_json::Value =
        serde_json::from_str(body).map_err(|e| describe(type_name, None, &e))?;
    // The common case first, without tracking the path; only a body that does not match is read again for it.
    if let Ok(value) = T::deserialize(&raw) {
        return Ok((value, raw));
    }
    match serde_path_to_error::deserialize::<_, T>(&raw) {
        Ok(value) => Ok((value, raw)),
        Err(e) => Err(describe(type_name, Some(e.path()), e.inner())),
    }
}

/// Reads an already parsed `value` (a payload taken out of an envelope) into `T`; errors as in [`from_json`], with
/// the path and no position.
pub(crate) fn from_value<T: DeserializeOwned>(
    value: &serde_json::Value,
    type_name: &str,
) -> Result<T, String> {
    if let Ok(t) = T::deserialize(value) {
        return Ok(t);
    }
    serde_path_to_error::deserialize::<_, T>(value)
        .map_err(|e| describe(type_name, Some(e.path()), e.inner()))
}

fn describe(type_name: &str, path: Option<&Path>, e: &serde_json::Error) -> String {
    // Line 0: the error came from a parsed value, not from text.
    let position = match e.line() {
        0 => String::new(),
        line => format!(" (line {line}, column {})", e.column()),
    };
    match e.classify() {
        Category::Syntax | Category::Io => format!("body is not valid JSON{position}"),
        Category::Eof => format!("body is not valid JSON: it ends early{position}"),
        Category::Data => {
            let detail = data_detail(&e.to_string());
            match path.map(render_path).filter(|p| !p.is_empty()) {
                Some(path) => {
                    format!("body does not match {type_name} at `{path}`: {detail}{position}")
                }
                None => format!("body does not match {type_name}: {detail}{position}"),
            }
        }
    }
}

/// The path as `items[2].price`. Map keys come from the body: a key that does not look like a field name is shown
/// as `<key>`.
fn render_path(path: &Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(if is_field_name(key) { key } else { "<key>" });
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    out
}

fn is_field_name(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= MAX_KEY_CHARS
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// serde's standard data errors, reduced to what they say about the type. Anything else (a custom message from a
/// type's own `Deserialize`) may quote the value, so it is replaced as a whole.
fn data_detail(message: &str) -> String {
    // serde_json appends the position; it is reported separately.
    let message = message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at]);
    for field_error in ["missing field `", "duplicate field `"] {
        if let Some(rest) = message.strip_prefix(field_error)
            && let Some(name) = rest.strip_suffix('`')
            && is_field_name(name)
        {
            // The name comes from the type (its derive), not from the body.
            return message.to_owned();
        }
    }
    let expected = message
        .rfind(", expected ")
        .map(|at| (at, truncate(&message[at + ", expected ".len()..])));
    let Some((at, expected)) = expected else {
        return "the payload type rejected a value".to_owned();
    };
    for (prefix, label) in [
        ("invalid type: ", "invalid type"),
        ("invalid value: ", "invalid value"),
    ] {
        if let Some(found) = message[..at].strip_prefix(prefix) {
            return format!("{label}: {}, expected {expected}", value_kind(found));
        }
    }
    for (prefix, label) in [
        ("invalid length ", "invalid length"),
        ("unknown variant ", "unknown variant"),
        ("unknown field ", "unknown field"),
    ] {
        if message.starts_with(prefix) {
            return format!("{label}, expected {expected}");
        }
    }
    "the payload type rejected a value".to_owned()
}

/// The kind of value serde found (`string`, `integer`, …), without the value itself.
fn value_kind(unexpected: &str) -> &'static str {
    const KINDS: [&str; 17] = [
        "boolean",
        "integer",
        "floating point",
        "character",
        "string",
        "byte array",
        "unit value",
        "null",
        "Option value",
        "newtype struct",
        "sequence",
        "map",
        "unit variant",
        "newtype variant",
        "tuple variant",
        "struct variant",
        "enum",
    ];
    KINDS
        .into_iter()
        .find(|kind| unexpected.starts_with(kind))
        .unwrap_or("a value")
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_EXPECTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Payment {
        amount: u64,
        card: Card,
        items: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Card {
        last4: u16,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        price: u32,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    enum Kind {
        Card,
        Transfer,
    }

    const SECRET: &str = "4111-1111-1111-1111";

    fn error<T: DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        let e = from_json::<T>(body, "T").expect_err("does not parse");
        assert!(!e.contains(SECRET), "{e}");
        assert!(!e.contains("4111"), "{e}");
        e.strip_prefix("body does not match T")
            .map_or(e.clone(), |rest| {
                rest.trim_start_matches([' ', ':']).to_owned()
            })
    }

    #[test]
    fn a_mistyped_field_names_its_path_and_type_never_its_value() {
        let e = error::<Payment>(&format!(
            r#"{{"amount":"{SECRET}","card":{{"last4":1}},"items":[]}}"#
        ));
        assert_eq!(
            e,
            "at `amount`: invalid type: string, expected u64 (line 1, column 31)"
        );
        let e = error::<Payment>(&format!(
            r#"{{"amount":1,"card":{{"last4":1}},"items":[{{"price":1}},{{"price":"{SECRET}"}}]}}"#
        ));
        assert!(
            e.starts_with("at `items[1].price`: invalid type: string, expected u32"),
            "{e}"
        );
        let e = error::<Payment>(r#"{"amount":1,"card":{"last4":4111111},"items":[]}"#);
        assert!(
            e.starts_with("at `card.last4`: invalid value: integer, expected u16"),
            "{e}"
        );
    }

    #[test]
    fn one_pass_gives_the_value_and_the_raw_body_and_the_same_errors_without_a_position() {
        let body = r#"{"amount":5,"card":{"last4":1},"items":[],"note":"extra"}"#;
        let (payment, raw) = from_json_with_raw::<Payment>(body, "T").expect("parses");
        assert_eq!(payment.amount, 5);
        assert_eq!(
            raw["note"], "extra",
            "the raw body keeps what the type ignores"
        );
        let mistyped = format!(r#"{{"amount":"{SECRET}","card":{{"last4":1}},"items":[]}}"#);
        let e = from_json_with_raw::<Payment>(&mistyped, "T").expect_err("mistyped");
        assert_eq!(
            e,
            "body does not match T at `amount`: invalid type: string, expected u64"
        );
        let e = from_json_with_raw::<Payment>(r#"{"amount":"#, "T").expect_err("cut");
        assert_eq!(
            e,
            "body is not valid JSON: it ends early (line 1, column 10)"
        );
    }

    #[test]
    fn variants_map_keys_and_missing_fields_do_not_leak_either() {
        let e = error::<Kind>(&format!(r#""{SECRET}""#));
        assert!(
            e.starts_with("unknown variant, expected `Card` or `Transfer`"),
            "{e}"
        );
        let e = error::<BTreeMap<String, u8>>(&format!(r#"{{"{SECRET}":"x"}}"#));
        assert!(
            e.starts_with("at `<key>`: invalid type: string, expected u8"),
            "{e}"
        );
        let e = error::<Payment>(r#"{"card":{"last4":1},"items":[]}"#);
        assert!(e.starts_with("missing field `amount`"), "{e}");
    }

    #[test]
    fn syntax_errors_keep_only_the_position() {
        let e = error::<Payment>(&format!(r#"{{"amount": {SECRET}}}"#));
        assert!(
            e.starts_with("body is not valid JSON (line 1, column"),
            "{e}"
        );
        let e = error::<Payment>(&format!(r#"{{"amount": "{SECRET}"#));
        assert!(e.starts_with("body is not valid JSON"), "{e}");
        let e = error::<u64>(&format!("1 {SECRET}"));
        assert!(e.starts_with("body is not valid JSON"), "{e}");
    }

    #[test]
    fn custom_messages_are_replaced_as_a_whole() {
        #[derive(Debug)]
        struct Luhn;
        impl<'de> Deserialize<'de> for Luhn {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Err(serde::de::Error::custom(format!(
                    "{s} fails the Luhn check"
                )))
            }
        }
        let e = error::<Luhn>(&format!(r#""{SECRET}""#));
        assert!(e.starts_with("the payload type rejected a value"), "{e}");
        // A value that imitates serde's own shape cannot smuggle itself into the `expected` part.
        let e = error::<u64>(&format!(r#""{SECRET}, expected {SECRET}""#));
        assert!(e.starts_with("invalid type: string, expected u64"), "{e}");
    }
}
