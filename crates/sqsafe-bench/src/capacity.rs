//! What each DynamoDB request costs in capacity units, counted at the proxy two ways:
//!
//! - **by DynamoDB's sizing rules** (what on-demand mode bills): a write consumes 1 write unit per started KB of the
//!   larger of the item before and after it (`PutItem`, `UpdateItem`); a write refused by its condition still
//!   consumes: the minimum when no item was there, else the larger of the item met and the item sent (a refused
//!   `UpdateItem`: the item met); a `DeleteItem` the item it deleted; a strongly consistent read 1 read unit per started 4 KB of
//!   each item (a `BatchGetItem` counts each key as a `GetItem`, and a key without an item still consumes the
//!   minimum), an eventually consistent read half that; a transaction twice its items' units. Item sizes are
//!   `sqsafe_idempotency::size::item_bytes` of the item. The proxy keeps the size of each item it saw written, and
//!   after an `UpdateItem` reads the item back from moto (out of band: not counted, not in the client's timing).
//! - **as moto reports them** (`ReturnConsumedCapacity: TOTAL`, added to each request that did not ask): moto 5.x
//!   answers a flat 1 unit per write whatever the size, and the number of keys for a `BatchGetItem`, consistent or
//!   not. Kept beside the rules' figure so a reader can see the two and why they differ.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use serde_json::Value;
use sqsafe::layers::idempotency::size;

/// Read and write units of one request, or summed over several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Units {
    pub(crate) read: f64,
    pub(crate) write: f64,
}

impl Units {
    pub(crate) fn add(&mut self, other: Units) {
        self.read += other.read;
        self.write += other.write;
    }
}

/// DynamoDB's read operations (their units are read units).
pub(crate) fn is_read(operation: &str) -> bool {
    matches!(
        operation,
        "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems"
    )
}

/// The operations whose units are counted.
const MEASURED: [&str; 6] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "GetItem",
    "BatchGetItem",
    "TransactWriteItems",
];

pub(crate) fn is_measured(operation: &str) -> bool {
    MEASURED.contains(&operation)
}

/// The request with `ReturnConsumedCapacity: TOTAL` when it did not ask for any (or `None` to send it unchanged).
pub(crate) fn asking_for_capacity(operation: &str, body: &[u8]) -> Option<Vec<u8>> {
    if !is_measured(operation) {
        return None;
    }
    let mut request: Value = serde_json::from_slice(body).ok()?;
    let object = request.as_object_mut()?;
    if object.contains_key("ReturnConsumedCapacity") {
        return None;
    }
    object.insert("ReturnConsumedCapacity".into(), Value::from("TOTAL"));
    serde_json::to_vec(&request).ok()
}

/// The units moto's answer reports (`ConsumedCapacity`: one object, or one per table).
pub(crate) fn reported(operation: &str, answer: &Value) -> Option<Units> {
    let consumed = answer.get("ConsumedCapacity")?;
    let total: f64 = match consumed {
        Value::Array(list) => list
            .iter()
            .filter_map(|c| c.get("CapacityUnits").and_then(Value::as_f64))
            .sum(),
        other => other.get("CapacityUnits").and_then(Value::as_f64)?,
    };
    Some(if is_read(operation) {
        Units {
            read: total,
            write: 0.0,
        }
    } else {
        Units {
            read: 0.0,
            write: total,
        }
    })
}

/// An item in DynamoDB's JSON (`{"pk": {"S": "..."}}`) as the SDK's attribute values, for `size::item_bytes`. A
/// binary is counted by its decoded length; a value of a kind not known here counts as nothing.
fn attributes(item: &Value) -> HashMap<String, AttributeValue> {
    item.as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), attribute(v))).collect())
        .unwrap_or_default()
}

fn attribute(value: &Value) -> AttributeValue {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return AttributeValue::Null(true);
    };
    let text = || inner.as_str().unwrap_or_default().to_owned();
    let texts = || -> Vec<String> {
        inner
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let blob = |b64: &str| Blob::new(vec![0u8; base64_len(b64)]);
    match kind.as_str() {
        "S" => AttributeValue::S(text()),
        "N" => AttributeValue::N(text()),
        "B" => AttributeValue::B(blob(inner.as_str().unwrap_or_default())),
        "BOOL" => AttributeValue::Bool(inner.as_bool().unwrap_or_default()),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(texts()),
        "NS" => AttributeValue::Ns(texts()),
        "BS" => AttributeValue::Bs(texts().iter().map(|b| blob(b)).collect()),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .map(|a| a.iter().map(attribute).collect())
                .unwrap_or_default(),
        ),
        "M" => AttributeValue::M(attributes(inner)),
        _ => AttributeValue::Null(true),
    }
}

/// Bytes encoded by a base64 string.
fn base64_len(b64: &str) -> usize {
    let trimmed = b64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// An item's size by DynamoDB's rules.
pub(crate) fn item_bytes(item: &Value) -> usize {
    size::item_bytes(&attributes(item))
}

fn write_units(bytes: usize) -> f64 {
    size::write_units(bytes) as f64
}

fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = size::consistent_read_units(bytes) as f64;
    if consistent { units } else { units / 2.0 }
}

/// The item sizes the proxy has seen written, by table and key.
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    /// Partition key attribute of each table.
    keys: HashMap<String, String>,
    sizes: HashMap<(String, String), usize>,
}

impl Shadow {
    pub(crate) fn new(keys: HashMap<String, String>) -> Self {
        Self {
            keys,
            sizes: HashMap::new(),
        }
    }

    /// The key of `item` (or of a request's `Key`) in `table`, as text.
    fn key(&self, table: &str, item_or_key: &Value) -> Option<(String, String)> {
        let name = self.keys.get(table)?;
        let value = item_or_key.get(name)?;
        Some((table.to_owned(), value.to_string()))
    }

    fn size(&self, key: &Option<(String, String)>) -> usize {
        key.as_ref()
            .and_then(|k| self.sizes.get(k))
            .copied()
            .unwrap_or(0)
    }

    fn set(&mut self, key: Option<(String, String)>, bytes: usize) {
        if let Some(key) = key {
            if bytes == 0 {
                self.sizes.remove(&key);
            } else {
                self.sizes.insert(key, bytes);
            }
        }
    }

    /// The item an `UpdateItem` request names, for the proxy to read back after it: (table, key).
    pub(crate) fn updated(request: &Value) -> Option<(String, Value)> {
        Some((
            request.get("TableName")?.as_str()?.to_owned(),
            request.get("Key")?.clone(),
        ))
    }

    /// The units of one request by DynamoDB's sizing rules, from the request, whether it was applied (`ok`: HTTP
    /// 200), the answer, and for an `UpdateItem` the item's size after it (read back by the proxy). `None` for an
    /// operation not counted or a request that does not parse.
    pub(crate) fn units(
        &mut self,
        operation: &str,
        request: &Value,
        ok: bool,
        answer: &Value,
        after_update: Option<usize>,
    ) -> Option<Units> {
        let write = |w: f64| Units {
            read: 0.0,
            write: w,
        };
        let table = || request.get("TableName").and_then(Value::as_str);
        // A write refused by its condition answers the old item when it asked (`ALL_OLD`).
        let old_in_answer = answer.get("Item").map(item_bytes);
        match operation {
            "PutItem" => {
                let item = request.get("Item")?;
                let key = self.key(table()?, item);
                let new = item_bytes(item);
                let before = old_in_answer.unwrap_or_else(|| self.size(&key));
                if ok {
                    self.set(key, new);
                    Some(write(write_units(new.max(before))))
                } else if before == 0 {
                    // Refused with no item there (a condition that needed one): the minimum.
                    Some(write(write_units(0)))
                } else {
                    // Refused over an item: AWS's pages name the item sent or the item met; the larger of the two
                    // is the bound of both readings (every item the peers write is under 1 KB, so both give 1).
                    Some(write(write_units(new.max(before))))
                }
            }
            "UpdateItem" => {
                let key = self.key(table()?, request.get("Key")?);
                let before = old_in_answer.unwrap_or_else(|| self.size(&key));
                let after = if ok {
                    after_update.unwrap_or(before)
                } else {
                    before
                };
                self.set(key, after);
                Some(write(write_units(before.max(after))))
            }
            "DeleteItem" => {
                let key = self.key(table()?, request.get("Key")?);
                let before = old_in_answer.unwrap_or_else(|| self.size(&key));
                if ok {
                    self.set(key, 0);
                }
                Some(write(write_units(before)))
            }
            "GetItem" => {
                let consistent =
                    request.get("ConsistentRead").and_then(Value::as_bool) == Some(true);
                let bytes = answer.get("Item").map_or(0, item_bytes);
                Some(Units {
                    read: read_units(bytes, consistent),
                    write: 0.0,
                })
            }
            "BatchGetItem" => {
                let mut read = 0.0;
                for (table, asked) in request.get("RequestItems")?.as_object()? {
                    let consistent =
                        asked.get("ConsistentRead").and_then(Value::as_bool) == Some(true);
                    let keys = asked.get("Keys").and_then(Value::as_array)?;
                    let unprocessed = answer
                        .pointer(&format!("/UnprocessedKeys/{table}/Keys"))
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    let items: Vec<&Value> = answer
                        .pointer(&format!("/Responses/{table}"))
                        .and_then(Value::as_array)
                        .map(|a| a.iter().collect())
                        .unwrap_or_default();
                    // Each key read (found or not) consumes at least the minimum; unprocessed keys were not read.
                    let missing = keys.len().saturating_sub(unprocessed + items.len());
                    read += items
                        .iter()
                        .map(|i| read_units(item_bytes(i), consistent))
                        .sum::<f64>();
                    read += missing as f64 * read_units(0, consistent);
                }
                Some(Units { read, write: 0.0 })
            }
            "TransactWriteItems" => {
                let mut units = 0.0;
                for action in request.get("TransactItems")?.as_array()? {
                    let (kind, body) = action.as_object()?.iter().next()?;
                    let table = body.get("TableName").and_then(Value::as_str)?;
                    let bytes = match kind.as_str() {
                        "Put" => {
                            let item = body.get("Item")?;
                            let key = self.key(table, item);
                            let new = item_bytes(item);
                            let before = self.size(&key);
                            if ok {
                                self.set(key, new);
                            }
                            new.max(before)
                        }
                        _ => body
                            .get("Key")
                            .map(|k| self.size(&self.key(table, k)))
                            .unwrap_or(0),
                    };
                    units += 2.0 * write_units(bytes);
                }
                Some(write(units))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shadow() -> Shadow {
        Shadow::new(HashMap::from([("t".to_owned(), "pk".to_owned())]))
    }

    #[test]
    fn dynamodb_json_is_sized_as_the_sdk_values_are() {
        let item = json!({
            "pk": {"S": "charge-payment#v1#acme#payment:p-1"},
            "expiration": {"N": "1796025600"},
            "ok": {"BOOL": true},
            "tags": {"SS": ["a", "bc"]},
            "nested": {"M": {"a": {"S": "xy"}, "l": {"L": [{"N": "12"}, {"NULL": true}]}}},
            "bin": {"B": "AAECAw=="}
        });
        let sdk: HashMap<String, AttributeValue> = HashMap::from([
            (
                "pk".to_owned(),
                AttributeValue::S("charge-payment#v1#acme#payment:p-1".to_owned()),
            ),
            (
                "expiration".to_owned(),
                AttributeValue::N("1796025600".to_owned()),
            ),
            ("ok".to_owned(), AttributeValue::Bool(true)),
            (
                "tags".to_owned(),
                AttributeValue::Ss(vec!["a".to_owned(), "bc".to_owned()]),
            ),
            (
                "nested".to_owned(),
                AttributeValue::M(HashMap::from([
                    ("a".to_owned(), AttributeValue::S("xy".to_owned())),
                    (
                        "l".to_owned(),
                        AttributeValue::L(vec![
                            AttributeValue::N("12".to_owned()),
                            AttributeValue::Null(true),
                        ]),
                    ),
                ])),
            ),
            (
                "bin".to_owned(),
                AttributeValue::B(Blob::new(vec![0, 1, 2, 3])),
            ),
        ]);
        assert_eq!(item_bytes(&item), size::item_bytes(&sdk));
        assert_eq!(base64_len("AAECAw=="), 4);
    }

    /// DynamoDB JSON converted and sized, against the SDK values built by hand and sized by the same
    /// `item_bytes`, and against sizes worked out from the rules by hand.
    #[test]
    fn more_items_are_sized_as_the_sdk_values_are_and_as_the_rules_say() {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: &str| AttributeValue::N(v.to_owned());
        let cases: Vec<(Value, HashMap<String, AttributeValue>, Option<usize>)> = vec![
            // 2 + 3.
            (
                json!({"pk": {"S": "abc"}}),
                HashMap::from([("pk".to_owned(), s("abc"))]),
                Some(5),
            ),
            // 1 + (5 significant digits: 3 bytes, + 1); 1 + (leading and trailing zeros trimmed: "12": 1 + 1);
            // 1 + ("1": 1 + 1).
            (
                json!({"a": {"N": "123.45"}, "b": {"N": "0.001200"}, "c": {"N": "-1E+10"}}),
                HashMap::from([
                    ("a".to_owned(), n("123.45")),
                    ("b".to_owned(), n("0.001200")),
                    ("c".to_owned(), n("-1E+10")),
                ]),
                Some(5 + 3 + 3),
            ),
            // 1 + 3 + (1 + 1 + 1): a map of one boolean (its name, the element's byte, its name, the value).
            (
                json!({"m": {"M": {"a": {"BOOL": false}}}}),
                HashMap::from([(
                    "m".to_owned(),
                    AttributeValue::M(HashMap::from([(
                        "a".to_owned(),
                        AttributeValue::Bool(false),
                    )])),
                )]),
                Some(7),
            ),
            // 1 + 3 + (1 + 1) + (1 + 1): a list of a string and a null; then empty ones, 1 + 3 each.
            (
                json!({"l": {"L": [{"S": "x"}, {"NULL": true}]}, "e": {"L": []}, "f": {"M": {}}}),
                HashMap::from([
                    (
                        "l".to_owned(),
                        AttributeValue::L(vec![s("x"), AttributeValue::Null(true)]),
                    ),
                    ("e".to_owned(), AttributeValue::L(vec![])),
                    ("f".to_owned(), AttributeValue::M(HashMap::new())),
                ]),
                Some(8 + 4 + 4),
            ),
            // UTF-8 bytes, not characters: "é" is 2 bytes, "€" 3.
            (
                json!({"é": {"S": "€uro"}}),
                HashMap::from([("é".to_owned(), s("€uro"))]),
                Some(2 + 6),
            ),
            // A record shaped like sqsafe's completed intent and one like Powertools' (sizes from item_bytes only).
            (
                json!({
                    "pk": {"S": "charge-payment#v1#acme#payment:p-42"},
                    "status": {"S": "COMPLETED"},
                    "expiration": {"N": "1798675200"},
                    "fingerprint": {"S": "sha256:9f86d081884c7d659a2feaa0c55ad015"},
                    "result": {"S": "{\"chargeId\":\"ch_1\",\"amount\":1250}"},
                    "attempt": {"N": "1"},
                    "bins": {"BS": ["AAEC", "AwQF"]},
                    "tags": {"NS": ["1", "22", "333"]}
                }),
                HashMap::from([
                    ("pk".to_owned(), s("charge-payment#v1#acme#payment:p-42")),
                    ("status".to_owned(), s("COMPLETED")),
                    ("expiration".to_owned(), n("1798675200")),
                    (
                        "fingerprint".to_owned(),
                        s("sha256:9f86d081884c7d659a2feaa0c55ad015"),
                    ),
                    (
                        "result".to_owned(),
                        s("{\"chargeId\":\"ch_1\",\"amount\":1250}"),
                    ),
                    ("attempt".to_owned(), n("1")),
                    (
                        "bins".to_owned(),
                        AttributeValue::Bs(vec![
                            Blob::new(vec![0, 1, 2]),
                            Blob::new(vec![3, 4, 5]),
                        ]),
                    ),
                    (
                        "tags".to_owned(),
                        AttributeValue::Ns(vec!["1".to_owned(), "22".to_owned(), "333".to_owned()]),
                    ),
                ]),
                None,
            ),
            (
                json!({
                    "id": {"S": "powertools#handler.record_handler#5d41402abc4b2a76b9719d911017c592"},
                    "expiration": {"N": "1798675200"},
                    "in_progress_expiration": {"N": "1796083200123"},
                    "status": {"S": "COMPLETED"},
                    "data": {"S": "{\"status\": 201}"}
                }),
                HashMap::from([
                    (
                        "id".to_owned(),
                        s("powertools#handler.record_handler#5d41402abc4b2a76b9719d911017c592"),
                    ),
                    ("expiration".to_owned(), n("1798675200")),
                    ("in_progress_expiration".to_owned(), n("1796083200123")),
                    ("status".to_owned(), s("COMPLETED")),
                    ("data".to_owned(), s("{\"status\": 201}")),
                ]),
                None,
            ),
        ];
        for (json_item, sdk, by_hand) in cases {
            assert_eq!(
                item_bytes(&json_item),
                size::item_bytes(&sdk),
                "{json_item}"
            );
            if let Some(bytes) = by_hand {
                assert_eq!(item_bytes(&json_item), bytes, "{json_item}");
            }
        }
        assert_eq!(base64_len("AAEC"), 3);
        assert_eq!(base64_len("AAECAw"), 4);
        assert_eq!(base64_len(""), 0);
    }

    #[test]
    fn writes_count_the_larger_item_and_refusals_still_consume() {
        let mut s = shadow();
        let small = json!({"TableName": "t", "Item": {"pk": {"S": "k"}, "v": {"S": "x"}}});
        let big_value = "x".repeat(1500);
        let big = json!({"TableName": "t", "Item": {"pk": {"S": "k"}, "v": {"S": big_value}}});
        let write = |w: f64| {
            Some(Units {
                read: 0.0,
                write: w,
            })
        };
        assert_eq!(
            s.units("PutItem", &small, true, &json!({}), None),
            write(1.0)
        );
        assert_eq!(s.units("PutItem", &big, true, &json!({}), None), write(2.0));
        // Back to small over the big one: the larger of the two.
        assert_eq!(
            s.units("PutItem", &small, true, &json!({}), None),
            write(2.0)
        );
        // Refused, the old (small) item in the answer: the larger of the item met and the item sent.
        let old = json!({"Item": {"pk": {"S": "k"}, "v": {"S": "x"}}});
        assert_eq!(s.units("PutItem", &big, false, &old, None), write(2.0));
        assert_eq!(s.units("PutItem", &small, false, &old, None), write(1.0));
        // Refused with no item there (`attribute_exists` failed): the minimum, whatever the size sent.
        let nobody =
            json!({"TableName": "t", "Item": {"pk": {"S": "none"}, "v": {"S": "x".repeat(3000)}}});
        assert_eq!(
            s.units("PutItem", &nobody, false, &json!({}), None),
            write(1.0)
        );
        let update = json!({"TableName": "t", "Key": {"pk": {"S": "k"}}});
        assert_eq!(
            s.units("UpdateItem", &update, true, &json!({}), Some(1100)),
            write(2.0)
        );
        assert_eq!(
            s.units("DeleteItem", &update, true, &json!({}), None),
            write(2.0)
        );
        assert_eq!(
            s.units("DeleteItem", &update, false, &json!({}), None),
            write(1.0)
        );
    }

    #[test]
    fn a_batch_read_counts_each_key_and_a_missing_one_at_the_minimum() {
        let mut s = shadow();
        let request = json!({"RequestItems": {"t": {"ConsistentRead": true, "Keys": [
            {"pk": {"S": "a"}}, {"pk": {"S": "b"}}, {"pk": {"S": "c"}}
        ]}}});
        let big_value = "x".repeat(5000);
        let answer = json!({
            "Responses": {"t": [{"pk": {"S": "a"}, "v": {"S": big_value}}]},
            "UnprocessedKeys": {"t": {"Keys": [{"pk": {"S": "c"}}]}}
        });
        // a: 2 units (over 4 KB); b: missing, 1; c: unprocessed, nothing.
        assert_eq!(
            s.units("BatchGetItem", &request, true, &answer, None),
            Some(Units {
                read: 3.0,
                write: 0.0
            })
        );
        let eventual = json!({"RequestItems": {"t": {"Keys": [{"pk": {"S": "b"}}]}}});
        assert_eq!(
            s.units("BatchGetItem", &eventual, true, &json!({}), None),
            Some(Units {
                read: 0.5,
                write: 0.0
            })
        );
    }

    #[test]
    fn moto_s_figure_is_read_from_the_answer_and_asked_for_when_missing() {
        let asked = asking_for_capacity("PutItem", br#"{"TableName":"t"}"#).expect("added");
        let asked: Value = serde_json::from_slice(&asked).expect("json");
        assert_eq!(asked["ReturnConsumedCapacity"], "TOTAL");
        assert!(asking_for_capacity("PutItem", br#"{"ReturnConsumedCapacity":"NONE"}"#).is_none());
        assert!(asking_for_capacity("DescribeTable", b"{}").is_none());
        let one = json!({"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}});
        assert_eq!(
            reported("PutItem", &one),
            Some(Units {
                read: 0.0,
                write: 1.0
            })
        );
        let list = json!({"ConsumedCapacity": [{"CapacityUnits": 10}]});
        assert_eq!(
            reported("BatchGetItem", &list),
            Some(Units {
                read: 10.0,
                write: 0.0
            })
        );
    }
}
