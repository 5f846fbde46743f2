//! A role's policy as the IAM rules read it: its statements, their actions and resources, what each kind of
//! resource needs and what each action is for.

use serde_norway::Value;

use super::template::{as_list, get, has, is_empty, is_str, refs, show};
use super::{Checker, Consumer};

/// The services whose actions must name their resources.
pub(super) const DATA_PLANE_SERVICES: [&str; 3] = ["dynamodb", "kinesis", "sqs"];
/// The one action a function may hold on its source queue only.
pub(super) const CHANGE_VISIBILITY: &str = "sqs:changemessagevisibility";
/// Actions on a stream ARN (GetAtt Table.StreamArn), not on a table.
pub(super) const STREAM_ACTIONS: [&str; 4] = [
    "dynamodb:describestream",
    "dynamodb:getrecords",
    "dynamodb:getsharditerator",
    "dynamodb:liststreams",
];
/// The kinds of policy resource that attach statements to a role.
pub(super) const POLICY_KINDS: [&str; 3] = [
    "AWS::IAM::Policy",
    "AWS::IAM::ManagedPolicy",
    "AWS::IAM::RolePolicy",
];

/// The environment variables whose resources the permissions rule demands exact actions on; environment-grants
/// covers the others.
pub(super) const WIRED: [&str; 8] = [
    "QUEUE_URL",
    "DLQ_URL",
    "IDEMPOTENCY_TABLE",
    "LEDGER_TABLE",
    "EFFECT_TABLE",
    "OUTBOX_TABLE",
    "OUTBOX_DESTINATIONS",
    "FAILURE_QUEUE_URL",
];

/// The idempotency table of a function whose `SQSAFE_IDEMPOTENCY_MODE` may be `keyed`: set, and not the literal
/// `claim` (a parameter's reference may resolve to either).
pub(super) const KEYED_IDEMPOTENCY_TABLE: &str = "IDEMPOTENCY_TABLE, SQSAFE_IDEMPOTENCY_MODE keyed";

/// What an environment-grants message suggests granting, by service (the actions depend on the code, not the
/// template).
pub(super) fn grant_example(service: &str) -> (&'static str, &'static str) {
    if service == "sqs" {
        ("SQS", "sqs:SendMessage")
    } else {
        ("DynamoDB", "dynamodb:GetItem")
    }
}

/// What each kind of resource a function touches requires (the permissions rule).
pub(super) fn required(kind: &str) -> &'static [&'static str] {
    match kind {
        "(source)" => &[
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        ],
        "QUEUE_URL" => &["sqs:ChangeMessageVisibility"],
        "DLQ_URL" | "(on-failure)" | "OUTBOX_DESTINATIONS" | "FAILURE_QUEUE_URL" => {
            &["sqs:SendMessage"]
        }
        // Both kinds of consumer claim with a PutItem; UpdateItem and DeleteItem only serve the claim's
        // completion, extension and release (see `used`).
        "IDEMPOTENCY_TABLE" | "EFFECT_TABLE" => &["dynamodb:PutItem"],
        // The keyed mode reads a batch's records before any effect, then completes with a PutItem.
        KEYED_IDEMPOTENCY_TABLE => &["dynamodb:PutItem", "dynamodb:BatchGetItem"],
        "LEDGER_TABLE" => &["dynamodb:PutItem", "dynamodb:UpdateItem"],
        "(stream)" => &[
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
        ],
        // What Lambda's poller calls with the function's role (standard iterators; SubscribeToShard is for a
        // consumer with enhanced fan-out, which the mapping names instead of the stream).
        "(kinesis)" => &[
            "kinesis:DescribeStream",
            "kinesis:DescribeStreamSummary",
            "kinesis:GetRecords",
            "kinesis:GetShardIterator",
            "kinesis:ListShards",
        ],
        "OUTBOX_TABLE" => &["dynamodb:UpdateItem"],
        "OUTBOX_TABLE (sweeper)" => &["dynamodb:Query", "dynamodb:UpdateItem"],
        _ => &[],
    }
}

/// Everything the code ever calls on each kind of resource (the grant-only-what-is-used rule); None for kinds the
/// rule does not cover.
pub(super) fn used(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "IDEMPOTENCY_TABLE" => &[
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ],
        KEYED_IDEMPOTENCY_TABLE => &[
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
        ],
        "LEDGER_TABLE" => &["dynamodb:PutItem", "dynamodb:UpdateItem"],
        "EFFECT_TABLE" => &["dynamodb:PutItem"],
        // The relay marks items sent (a conditional UpdateItem) and publishes to its destinations.
        "OUTBOX_TABLE" => &["dynamodb:UpdateItem"],
        "OUTBOX_DESTINATIONS" => &["sqs:SendMessage"],
        // The sweeper reads the pending index (Query) and marks like the relay.
        "OUTBOX_TABLE (sweeper)" => &["dynamodb:Query", "dynamodb:UpdateItem"],
        _ => return None,
    })
}

/// Whether the function may run in the keyed mode: its `SQSAFE_IDEMPOTENCY_MODE` is set to anything but `claim`.
pub(super) fn may_be_keyed(c: &Consumer) -> bool {
    c.var("SQSAFE_IDEMPOTENCY_MODE")
        .is_some_and(|mode| mode.as_str().is_none_or(|m| m.trim() != "claim"))
}

/// Whether an IAM action (any case, wildcards allowed: `sqs:Change*`, `*`) allows ChangeMessageVisibility.
pub(super) fn grants_visibility(action: &str) -> bool {
    let action = action.to_lowercase();
    match glob::Pattern::new(&action) {
        Ok(pattern) => pattern.matches(CHANGE_VISIBILITY),
        Err(_) => action == CHANGE_VISIBILITY,
    }
}

pub(super) fn service(action: &str) -> String {
    action.split(':').next().unwrap_or_default().to_lowercase()
}

pub(super) fn allows(st: &Value) -> bool {
    st.is_mapping() && is_str(get(Some(st), "Effect"), "Allow")
}

pub(super) fn sid(st: &Value) -> String {
    get(Some(st), "Sid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A statement's actions that are strings.
pub(super) fn actions(st: &Value) -> Vec<&str> {
    as_list(get(Some(st), "Action"))
        .into_iter()
        .filter_map(Value::as_str)
        .collect()
}

impl Checker<'_> {
    /// The statements of a function's role, or None when they cannot all be seen (a violation says why).
    pub(super) fn statements(&mut self, c: &Consumer) -> Option<Vec<Value>> {
        let f = c.name();
        let p = Some(&c.props);
        let mut statements = Vec::new();
        if let Some(role_value) = get(p, "Role") {
            let Some(role) = &c.role else {
                self.fail(
                    "least-privilege",
                    f,
                    format!(
                        "Role {} is not an AWS::IAM::Role of this template; its policies cannot be checked",
                        show(Some(role_value))
                    ),
                );
                return None;
            };
            let rp = self.t.props(role);
            if let Some(managed) = get(rp, "ManagedPolicyArns").filter(|m| !is_empty(Some(m))) {
                self.fail(
                    "least-privilege",
                    role,
                    format!(
                        "ManagedPolicyArns {}: managed policies cannot be checked; write the statements inline",
                        show(Some(managed))
                    ),
                );
            }
            for policy in as_list(get(rp, "Policies")) {
                statements.extend(
                    as_list(get(get(Some(policy), "PolicyDocument"), "Statement"))
                        .into_iter()
                        .cloned(),
                );
            }
            for kind in POLICY_KINDS {
                for id in self.t.of_type(kind) {
                    let pp = self.t.props(&id);
                    if refs(get(pp, "Roles")).contains(role)
                        || refs(get(pp, "RoleName")).contains(role)
                    {
                        statements.extend(
                            as_list(get(get(pp, "PolicyDocument"), "Statement"))
                                .into_iter()
                                .cloned(),
                        );
                    }
                }
            }
            return Some(statements);
        }
        // SAM generates the role; its SQS or DynamoDB event attaches a managed policy on Resource '*'.
        if c.queue.is_some() {
            self.fail(
                "least-privilege",
                f,
                "no Role: SAM's SQS event would attach AWSLambdaSQSQueueExecutionRole (Resource '*'); give the \
                 function its own AWS::IAM::Role",
            );
        }
        if c.stream_table.is_some() {
            self.fail(
                "least-privilege",
                f,
                "no Role: SAM's DynamoDB event would attach AWSLambdaDynamoDBExecutionRole (Resource '*'); give the \
                 function its own AWS::IAM::Role",
            );
        }
        if c.kinesis_stream.is_some() {
            self.fail(
                "least-privilege",
                f,
                "no Role: SAM's Kinesis event would attach AWSLambdaKinesisExecutionRole (Resource '*'); give the \
                 function its own AWS::IAM::Role",
            );
        }
        for policy in as_list(get(p, "Policies")) {
            if policy.is_mapping() && has(Some(policy), "Statement") {
                statements.extend(as_list(get(Some(policy), "Statement")).into_iter().cloned());
            } else {
                self.fail(
                    "least-privilege",
                    f,
                    format!(
                        "policy {} is a managed policy or SAM policy template; write the statements out",
                        show(Some(policy))
                    ),
                );
            }
        }
        Some(statements)
    }
}
