//! Tables: sse (tables), pitr, on-demand, idempotency-table.

use std::collections::BTreeSet;

use serde_norway::Value;

use super::template::{as_list, get, has, is_str, refs, show, truthy};
use super::{Checker, Consumer};

impl Checker<'_> {
    pub(super) fn check_tables(&mut self, consumers: &[Consumer]) {
        for tb in self.tables.clone() {
            let tp = self.t.props(&tb);
            if !truthy(get(get(tp, "SSESpecification"), "SSEEnabled")) {
                self.fail(
                    "sse",
                    &tb,
                    "SSESpecification.SSEEnabled is not true: encrypt it",
                );
            }
            if !truthy(get(
                get(tp, "PointInTimeRecoverySpecification"),
                "PointInTimeRecoveryEnabled",
            )) {
                self.fail(
                    "pitr",
                    &tb,
                    "PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled is not true",
                );
            }
            if !is_str(get(tp, "BillingMode"), "PAY_PER_REQUEST") {
                self.fail(
                    "on-demand",
                    &tb,
                    format!(
                        "BillingMode is {}, not PAY_PER_REQUEST",
                        show(get(tp, "BillingMode"))
                    ),
                );
            }
        }
        let mut idempotency = BTreeSet::new();
        for c in consumers {
            idempotency.extend(
                refs(c.var("IDEMPOTENCY_TABLE"))
                    .into_iter()
                    .filter(|x| self.is_table(x)),
            );
            if !has(c.env(), "IDEMPOTENCY_TABLE")
                && (c.stream_table.is_none() || c.stream_consumer)
                && c.schedule.is_none()
            {
                self.fail(
                    "idempotency-table",
                    c.name(),
                    "IDEMPOTENCY_TABLE is not set: name the table that holds its idempotency records",
                );
            }
        }
        for tb in idempotency {
            let tp = self.t.props(&tb);
            let keys = as_list(get(tp, "KeySchema"));
            let default_key = matches!(keys.as_slice(), [k]
                if is_str(get(Some(*k), "AttributeName"), "pk") && is_str(get(Some(*k), "KeyType"), "HASH"));
            if !default_key {
                let shown: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        format!(
                            "({} {})",
                            show(get(Some(*k), "AttributeName")),
                            show(get(Some(*k), "KeyType"))
                        )
                    })
                    .collect();
                self.fail(
                    "idempotency-table",
                    &tb,
                    format!(
                        "KeySchema [{}] is not the store's: pk HASH alone (no sort key)",
                        shown.join(", ")
                    ),
                );
            }
            let pk_type = as_list(get(tp, "AttributeDefinitions"))
                .into_iter()
                .rfind(|a| is_str(get(Some(*a), "AttributeName"), "pk"))
                .and_then(|a| get(Some(a), "AttributeType"));
            if !is_str(pk_type, "S") {
                self.fail(
                    "idempotency-table",
                    &tb,
                    format!("pk is {}, not S (String)", show(pk_type)),
                );
            }
            let ttl = get(tp, "TimeToLiveSpecification");
            if !(is_str(get(ttl, "AttributeName"), "expiration") && truthy(get(ttl, "Enabled"))) {
                self.fail(
                    "idempotency-table",
                    &tb,
                    format!(
                        "TimeToLiveSpecification {} is not enabled on 'expiration'",
                        show(ttl.or(Some(&Value::Null)))
                    ),
                );
            }
        }
    }
}
