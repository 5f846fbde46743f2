//! Recognises a conditional write whose retry met the client's own earlier write.
//!
//! After a [500 after the write](super::FaultProxyConfig::after_write_500_rate) the client cannot know that its write
//! landed; the SDK retries it, and the retry's condition fails on the write's own result. sqsafe's idempotency store
//! fences every write with a claim token and asks for the old item when a condition fails (`ALL_OLD`), so the answer
//! shows whose write the retry met:
//!
//! | request | its token | self-met when the `ConditionalCheckFailedException` carries |
//! |---|---|---|
//! | `PutItem` (claim) | `Item.token` | an old `Item` with the same `token` |
//! | `UpdateItem` (complete, extend) | `ExpressionAttributeValues[":token"]` | an old `Item` with the same `token` |
//! | `DeleteItem` (release) | `ExpressionAttributeValues[":token"]` | the same, or no `Item` at all (already gone) |
//! | `TransactWriteItems` (record + effect) | the `Put` whose `Item` has a `token` | a `CancellationReasons` entry whose old `Item` has that `token` |
//!
//! To keep this cheap and exact, only writes that follow an after-write 500 are inspected: the 500's request is
//! remembered by (operation, table, partition key, token), and a later request with the same identity (the SDK's retry
//! carries the same body; sqsafe's own completion retries the same token) has its answer read. The attribute names are
//! sqsafe-idempotency's `DynamoDbStore` defaults: partition key `pk`, token `token`, placeholder `:token`. Writes to
//! other tables, or without a token, are never inspected.

use serde_json::Value;

/// The partition key attribute of sqsafe's idempotency table.
const KEY_ATTRIBUTE: &str = "pk";
/// The claim token attribute of sqsafe's idempotency records.
const TOKEN_ATTRIBUTE: &str = "token";
/// The placeholder that carries the token in sqsafe's fenced updates and deletes.
const TOKEN_PLACEHOLDER: &str = ":token";

/// Which write of which attempt: a remembered after-write-500 request, matched by its retries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct WriteId {
    pub(crate) operation: String,
    pub(crate) table: String,
    pub(crate) key: String,
    pub(crate) token: String,
}

/// The identity of a fenced write, or `None` when the request is not one (another operation, another table layout,
/// no token, or a body that does not parse).
pub(crate) fn write_id(operation: &str, body: &[u8]) -> Option<WriteId> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let (table, item_or_key, token) = match operation {
        "PutItem" => {
            let item = request.get("Item")?;
            (
                request.get("TableName")?,
                item,
                string(item.get(TOKEN_ATTRIBUTE)?)?,
            )
        }
        "UpdateItem" | "DeleteItem" => (
            request.get("TableName")?,
            request.get("Key")?,
            string(
                request
                    .get("ExpressionAttributeValues")?
                    .get(TOKEN_PLACEHOLDER)?,
            )?,
        ),
        "TransactWriteItems" => {
            // The record's Put: the one item of the transaction that carries a token.
            let put = request
                .get("TransactItems")?
                .as_array()?
                .iter()
                .filter_map(|i| i.get("Put"))
                .find(|p| p.get("Item").and_then(|i| i.get(TOKEN_ATTRIBUTE)).is_some())?;
            let item = put.get("Item")?;
            (
                put.get("TableName")?,
                item,
                string(item.get(TOKEN_ATTRIBUTE)?)?,
            )
        }
        _ => return None,
    };
    Some(WriteId {
        operation: operation.to_owned(),
        table: table.as_str()?.to_owned(),
        key: string(item_or_key.get(KEY_ATTRIBUTE)?)?.to_owned(),
        token: token.to_owned(),
    })
}

/// Whether the upstream's answer to `id`'s request (HTTP `status`, JSON `body`) is a failed condition that met the
/// write's own earlier result (the table above).
pub(crate) fn met_own_write(id: &WriteId, status: u16, body: &[u8]) -> bool {
    if status != 400 {
        return false;
    }
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let error_type = answer
        .get("__type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.operation == "TransactWriteItems" {
        return error_type.ends_with("TransactionCanceledException")
            && answer
                .get("CancellationReasons")
                .and_then(Value::as_array)
                .is_some_and(|reasons| {
                    reasons
                        .iter()
                        .any(|r| token_of(r.get("Item")) == Some(id.token.as_str()))
                });
    }
    if !error_type.ends_with("ConditionalCheckFailedException") {
        return false;
    }
    match answer.get("Item") {
        Some(item) => token_of(Some(item)) == Some(id.token.as_str()),
        // A fenced delete that finds nothing: its first try removed the record.
        None => id.operation == "DeleteItem",
    }
}

/// The `token` of an old item, if it has one.
fn token_of(item: Option<&Value>) -> Option<&str> {
    item.and_then(|i| i.get(TOKEN_ATTRIBUTE)).and_then(string)
}

/// `{"S": "..."}`'s string.
fn string(value: &Value) -> Option<&str> {
    value.get("S")?.as_str()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bytes(v: &Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    fn id(operation: &str, request: &Value) -> WriteId {
        write_id(operation, &bytes(request)).expect("a fenced write")
    }

    const FAILED: &str = "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException";

    #[test]
    fn a_retried_claim_meets_its_own_token() {
        let claim = id(
            "PutItem",
            &json!({"TableName": "idem", "Item": {"pk": {"S": "k"}, "token": {"S": "t1"}, "status": {"S": "IN_PROGRESS"}}}),
        );
        assert_eq!(
            (
                claim.table.as_str(),
                claim.key.as_str(),
                claim.token.as_str()
            ),
            ("idem", "k", "t1")
        );
        let mine = json!({"__type": FAILED, "Item": {"pk": {"S": "k"}, "token": {"S": "t1"}}});
        let theirs = json!({"__type": FAILED, "Item": {"pk": {"S": "k"}, "token": {"S": "t2"}}});
        assert!(met_own_write(&claim, 400, &bytes(&mine)));
        assert!(!met_own_write(&claim, 400, &bytes(&theirs)));
        assert!(!met_own_write(&claim, 200, b"{}"));
        assert!(!met_own_write(&claim, 400, b"<html>"));
    }

    #[test]
    fn updates_and_deletes_carry_the_token_as_a_placeholder() {
        let complete = id(
            "UpdateItem",
            &json!({"TableName": "idem", "Key": {"pk": {"S": "k"}},
                    "ExpressionAttributeValues": {":token": {"S": "t1"}, ":in_progress": {"S": "IN_PROGRESS"}}}),
        );
        let completed =
            json!({"__type": FAILED, "Item": {"token": {"S": "t1"}, "status": {"S": "COMPLETED"}}});
        assert!(met_own_write(&complete, 400, &bytes(&completed)));
        assert!(
            !met_own_write(&complete, 400, &bytes(&json!({"__type": FAILED}))),
            "no record: not an update's own write"
        );
        let release = id(
            "DeleteItem",
            &json!({"TableName": "idem", "Key": {"pk": {"S": "k"}}, "ExpressionAttributeValues": {":token": {"S": "t1"}}}),
        );
        assert!(
            met_own_write(&release, 400, &bytes(&json!({"__type": FAILED}))),
            "already gone"
        );
        let throttled = json!({"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"});
        assert!(!met_own_write(&release, 400, &bytes(&throttled)));
    }

    #[test]
    fn a_transaction_is_identified_by_its_record_put() {
        let request = json!({"TransactItems": [
            {"Put": {"TableName": "idem", "Item": {"pk": {"S": "k"}, "token": {"S": "t1"}}}},
            {"Put": {"TableName": "ledger", "Item": {"pk": {"S": "acct"}, "sk": {"S": "ENTRY#1"}}}},
            {"Update": {"TableName": "ledger", "Key": {"pk": {"S": "acct"}}}}
        ]});
        let tx = id("TransactWriteItems", &request);
        assert_eq!((tx.table.as_str(), tx.key.as_str()), ("idem", "k"));
        let cancelled = |token: &str| {
            json!({"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                   "CancellationReasons": [{"Code": "ConditionalCheckFailed", "Item": {"token": {"S": token}}},
                                           {"Code": "ConditionalCheckFailed"}, {"Code": "None"}]})
        };
        assert!(met_own_write(&tx, 400, &bytes(&cancelled("t1"))));
        assert!(!met_own_write(&tx, 400, &bytes(&cancelled("t2"))));
    }

    #[test]
    fn writes_without_a_token_are_not_fenced_writes() {
        let plain = json!({"TableName": "ledger", "Item": {"pk": {"S": "acct"}}});
        assert_eq!(write_id("PutItem", &bytes(&plain)), None);
        assert_eq!(write_id("GetItem", &bytes(&plain)), None);
        assert_eq!(write_id("PutItem", b"not json"), None);
    }
}
