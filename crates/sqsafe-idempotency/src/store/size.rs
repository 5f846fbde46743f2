//! DynamoDB's item size and the capacity units a request consumes, by its published sizing rules: what an
//! idempotency record costs to write and to read.
//!
//! - An item is the sum, over its attributes, of the name's UTF-8 bytes and the value's size.
//! - A string is its UTF-8 bytes; a binary its bytes; a boolean or a null 1 byte.
//! - A number is 1 byte per two significant digits (leading and trailing zeros trimmed), plus 1.
//! - A list or a map is 3 bytes, plus 1 byte per element, plus its elements (a map's: names and values).
//! - A write consumes 1 write unit per started KB of the item (a `PutItem` over an existing item: the larger of the
//!   two; a write refused by its condition: the existing item's, at least 1). A strongly consistent read consumes 1
//!   read unit per started 4 KB (each item of a `BatchGetItem` on its own); an eventually consistent read half that.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// One write unit covers this many bytes of an item.
pub const WRITE_UNIT_BYTES: usize = 1024;
/// One strongly consistent read unit covers this many bytes of an item.
pub const READ_UNIT_BYTES: usize = 4096;

/// An item's size in bytes, by DynamoDB's rules.
pub fn item_bytes(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

/// The write units one write of an item of `bytes` consumes (at least 1).
pub fn write_units(bytes: usize) -> u64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as u64
}

/// The read units one strongly consistent read of an item of `bytes` consumes (at least 1).
pub fn consistent_read_units(bytes: usize) -> u64 {
    bytes.div_ceil(READ_UNIT_BYTES).max(1) as u64
}

fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_bytes(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_bytes(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|e| 1 + value_bytes(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_bytes(e))
                .sum::<usize>()
        }
        // A kind this SDK does not know yet: counted as nothing rather than guessed.
        _ => 0,
    }
}

/// 1 byte per two significant digits, plus 1.
fn number_bytes(n: &str) -> usize {
    let mantissa = n
        .trim_start_matches(['-', '+'])
        .split(['e', 'E'])
        .next()
        .unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    significant.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn names_and_values_count_as_dynamodb_counts_them() {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: &str| AttributeValue::N(v.to_owned());
        assert_eq!(item_bytes(&item(&[("pk", s("abc"))])), 2 + 3);
        assert_eq!(item_bytes(&item(&[("é", s("é"))])), 2 + 2, "UTF-8 bytes");
        // 1796025600: 8 significant digits (trailing zeros trimmed) → 4 bytes + 1.
        assert_eq!(value_bytes(&n("1796025600")), 5);
        assert_eq!(value_bytes(&n("7")), 2);
        assert_eq!(
            value_bytes(&n("-0.0125")),
            3,
            "125: 3 significant digits, 2 bytes, plus 1"
        );
        assert_eq!(value_bytes(&n("0")), 1);
        assert_eq!(value_bytes(&AttributeValue::Bool(true)), 1);
        assert_eq!(
            value_bytes(&AttributeValue::M(HashMap::from([(
                "a".to_owned(),
                s("xy")
            )]))),
            3 + 1 + 1 + 2
        );
        assert_eq!(
            value_bytes(&AttributeValue::L(vec![s("x"), n("12")])),
            3 + 2 + 3
        );
    }

    #[test]
    fn units_are_per_started_kilobyte_written_and_four_read() {
        assert_eq!(write_units(0), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
        assert_eq!(consistent_read_units(1025), 1);
        assert_eq!(consistent_read_units(4097), 2);
    }
}
