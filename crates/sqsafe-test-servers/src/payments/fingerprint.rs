use serde_json::Value;
use sqsafe_idempotency::{Fingerprint, FingerprintFields};

/// SHA-256 (lower-case hex) of the canonical JSON of a request body (keys sorted, no whitespace), the same canonical
/// form sqsafe fingerprints messages with: two bodies that differ only in key order or layout are the same request.
pub(crate) fn fingerprint(body: &Value) -> String {
    Fingerprint::of_value(body, &FingerprintFields::All)
        .as_str()
        .to_owned()
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
}
