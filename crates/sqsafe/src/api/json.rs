//! A JSON body in a canonical form that keeps its numbers exact: object members sorted by name, no whitespace,
//! strings re-escaped one way, and each number written as its exact decimal value (`1.0`, `1` and `10e-1` alike;
//! `12345678901234567890123` and `12345678901234567890124` apart, which an `f64` would round together).
//!
//! serde_json parses and validates the document and decodes strings; only the number literal is read here, from
//! the raw text serde_json hands over ([`RawValue`]), since its own numbers are `f64` or 64-bit integers.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// The canonical form of `body`, or `None` when it is not one JSON document in UTF-8.
pub(super) fn canonical(body: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    let mut out = Vec::with_capacity(body.len());
    write(raw.get(), &mut out).ok()?;
    Some(out)
}

fn write(raw: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    let raw = raw.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\r'));
    match raw.as_bytes().first() {
        Some(b'{') => {
            // Members sorted by name; a name given twice keeps its last value, as serde (and most parsers) read it.
            let members: BTreeMap<String, &RawValue> = serde_json::from_str(raw)?;
            out.push(b'{');
            for (i, (name, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, name)?;
                out.push(b':');
                write(value.get(), out)?;
            }
            out.push(b'}');
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(raw)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item.get(), out)?;
            }
            out.push(b']');
        }
        Some(b'"') => {
            let text: String = serde_json::from_str(raw)?;
            serde_json::to_writer(&mut *out, &text)?;
        }
        Some(b'-' | b'0'..=b'9') => write_number(raw, out),
        // true, false, null: as serde_json validated them.
        _ => out.extend_from_slice(raw.as_bytes()),
    }
    Ok(())
}

/// A JSON number literal (already validated) as its exact value: `[-]digits[eN]`, the digits without leading or
/// trailing zeros, zero as `0`. An exponent too large for an `i64` keeps the literal as written (exact, only not
/// normalised).
fn write_number(literal: &str, out: &mut Vec<u8>) {
    let (negative, rest) = match literal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, literal),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, "0"),
    };
    let Ok(exponent) = exponent.parse::<i64>() else {
        out.extend_from_slice(literal.as_bytes());
        return;
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        out.push(b'0');
        return;
    }
    let shift = i64::try_from(digits.len() - trimmed.len()).unwrap_or(i64::MAX);
    let fraction_len = i64::try_from(fraction.len()).unwrap_or(i64::MAX);
    let Some(exponent) = exponent
        .checked_sub(fraction_len)
        .and_then(|e| e.checked_add(shift))
    else {
        out.extend_from_slice(literal.as_bytes());
        return;
    };
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(trimmed.as_bytes());
    if exponent != 0 {
        out.push(b'e');
        out.extend_from_slice(exponent.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(json: &str) -> String {
        String::from_utf8(canonical(json.as_bytes()).expect("JSON")).expect("UTF-8")
    }

    #[test]
    fn key_order_spacing_and_escapes_do_not_count() {
        assert_eq!(
            canon(r#" { "b" : [1, 2], "a": "x\u0041" } "#),
            r#"{"a":"xA","b":[1,2]}"#
        );
        assert_eq!(
            canon(r#"{"a":{"d":null,"c":true}}"#),
            r#"{"a":{"c":true,"d":null}}"#
        );
        assert_eq!(canon("[]"), "[]");
        assert_eq!(canon("{}"), "{}");
    }

    #[test]
    fn numbers_are_compared_by_their_exact_value() {
        for (a, b) in [
            ("1", "1.0"),
            ("1", "10e-1"),
            ("100", "1e2"),
            ("0", "-0.0"),
            ("1.5", "15E-1"),
        ] {
            assert_eq!(canon(a), canon(b), "{a} = {b}");
        }
        for (a, b) in [
            ("12345678901234567890123", "12345678901234567890124"),
            ("0.1", "0.10000000000000001"),
            ("1", "-1"),
            ("9007199254740993", "9007199254740992"),
        ] {
            assert_ne!(canon(a), canon(b), "{a} != {b}");
        }
        assert_eq!(canon("-120.50"), "-1205e-1");
        assert_eq!(canon("1e99999999999999999999"), "1e99999999999999999999");
    }

    #[test]
    fn what_is_not_one_json_document_is_none() {
        for bad in ["", "abc", "{\"a\":1} x", "{\"a\":}", "\u{FEFF}{}"] {
            assert!(canonical(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(canonical(&[0xff, 0xfe]).is_none());
    }
}
