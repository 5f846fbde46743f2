//! Roles and policies: least-privilege, permissions, environment-grants, change-message-visibility,
//! grant-only-what-is-used, idempotency-leading-keys.

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

use super::policy::{
    DATA_PLANE_SERVICES, KEYED_IDEMPOTENCY_TABLE, POLICY_KINDS, STREAM_ACTIONS, WIRED, actions,
    allows, grant_example, grants_visibility, may_be_keyed, required, service, sid, used,
};
use super::template::{as_list, get, has, is_str, mentions, refs, show, stream_refs};
use super::{Checker, Consumer};

impl Checker<'_> {
    /// idempotency-leading-keys: item actions on the idempotency table only on the consumer's own key prefix.
    fn check_leading_keys(&mut self, c: &Consumer, statements: &[Value]) {
        if !has(c.env(), "IDEMPOTENCY_TABLE") {
            return;
        }
        let Some(table) = refs(c.var("IDEMPOTENCY_TABLE")).into_iter().next() else {
            return;
        };
        let binary = self
            .t
            .binary(&c.function)
            .unwrap_or_else(|| "None".to_owned());
        let want = format!("{binary}#*");
        let owner = c.role.clone().unwrap_or_else(|| c.function.clone());
        for st in statements.iter().filter(|st| allows(st)) {
            let dynamo: Vec<&str> = actions(st)
                .into_iter()
                .filter(|a| a.to_lowercase().starts_with("dynamodb:"))
                .collect();
            let on_table = as_list(get(Some(st), "Resource"))
                .into_iter()
                .any(|r| !r.is_string() && refs(Some(r)).contains(&table));
            if dynamo.is_empty() || !on_table {
                continue;
            }
            let keys = get(
                get(get(Some(st), "Condition"), "ForAllValues:StringLike"),
                "dynamodb:LeadingKeys",
            );
            let got = as_list(keys);
            if !(got.len() == 1 && is_str(Some(got[0]), &want)) {
                self.fail(
                    "idempotency-leading-keys",
                    &owner,
                    format!(
                        "statement {:?} grants [{}] on {table} for keys {}, not only [\"{want}\"] (add Condition: \
                         ForAllValues:StringLike: dynamodb:LeadingKeys: [\"{want}\"])",
                        sid(st),
                        dynamo.join(", "),
                        if got.is_empty() { "of any consumer".to_owned() } else { show(keys) }
                    ),
                );
            }
        }
    }

    /// least-privilege, change-message-visibility, permissions, grant-only-what-is-used, environment-grants (and,
    /// once the role's statements are known, idempotency-leading-keys and message-size) for one function.
    pub(super) fn check_privileges(&mut self, c: &Consumer) {
        let Some(statements) = self.statements(c) else {
            return;
        };
        self.check_leading_keys(c, &statements);
        self.check_message_sizes(c);
        let f = c.name();
        let owner = c.role.clone().unwrap_or_else(|| c.function.clone());
        let env_refs: BTreeSet<String> = c
            .env()
            .and_then(Value::as_mapping)
            .into_iter()
            .flatten()
            .flat_map(|(_, v)| refs(Some(v)))
            .collect();
        // Another stack's tables and queues, named by the String parameters its environment uses: reached through
        // those (a Number or a list cannot name one).
        let elsewhere = env_refs.iter().filter(|x| self.t.is_string_parameter(x));
        let own_tables: BTreeSet<String> = env_refs
            .iter()
            .filter(|x| self.is_table(x))
            .chain(elsewhere.clone())
            .cloned()
            .collect();
        // Its source queue and DLQ, its on-failure queue, and the queues its environment names.
        let own_queues: BTreeSet<String> = [&c.queue, &c.dlq, &c.on_failure]
            .into_iter()
            .flatten()
            .chain(env_refs.iter().filter(|x| self.is_queue(x)))
            .chain(elsewhere)
            .cloned()
            .collect();

        // The Kinesis stream it reads.
        let own_streams: BTreeSet<String> = c.kinesis_stream.iter().cloned().collect();

        let mut granted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut granted_stream: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        // What ChangeMessageVisibility reaches besides the source queue.
        let mut visibility_elsewhere: BTreeSet<String> = BTreeSet::new();
        for st in statements.iter().filter(|st| allows(st)) {
            if has(Some(st), "NotAction") || has(Some(st), "NotResource") {
                self.fail(
                    "least-privilege",
                    &owner,
                    format!(
                        "statement {:?} uses NotAction/NotResource: name what it allows",
                        sid(st)
                    ),
                );
                continue;
            }
            let resources = as_list(get(Some(st), "Resource"));
            for action in actions(st) {
                let service = service(action);
                if grants_visibility(action) {
                    for resource in &resources {
                        let targets = if resource.is_string() {
                            BTreeSet::new()
                        } else {
                            refs(Some(resource))
                        };
                        if resource.is_string() || targets.is_empty() {
                            visibility_elsewhere.insert(show(Some(resource)));
                        }
                        visibility_elsewhere
                            .extend(targets.into_iter().filter(|x| c.queue.as_ref() != Some(x)));
                    }
                }
                if action == "*" {
                    self.fail(
                        "least-privilege",
                        &owner,
                        format!("statement {:?} allows Action '*'", sid(st)),
                    );
                    continue;
                }
                if !DATA_PLANE_SERVICES.contains(&service.as_str()) {
                    continue;
                }
                if action.contains(['*', '?']) {
                    self.fail(
                        "least-privilege",
                        &owner,
                        format!("wildcard action {action:?} on the {service} data plane: name the actions"),
                    );
                }
                if STREAM_ACTIONS.contains(&action.to_lowercase().as_str()) {
                    for resource in &resources {
                        let streams = if resource.is_string() {
                            BTreeSet::new()
                        } else {
                            stream_refs(Some(resource))
                        };
                        let own = c.stream_table.as_ref().is_some_and(|s| {
                            streams.len() == 1
                                && streams.contains(s)
                                && refs(Some(resource)) == streams
                        });
                        if !own {
                            self.fail(
                                "least-privilege",
                                &owner,
                                format!(
                                    "{action} reaches {}, not only {f}'s own stream ({})",
                                    show(Some(resource)),
                                    c.stream_table.as_deref().unwrap_or("it reads none")
                                ),
                            );
                        }
                        for x in streams {
                            granted_stream
                                .entry(x)
                                .or_default()
                                .insert(action.to_owned());
                        }
                    }
                    continue;
                }
                let allowed = match service.as_str() {
                    "sqs" => &own_queues,
                    "kinesis" => &own_streams,
                    _ => &own_tables,
                };
                for resource in &resources {
                    if !resource.is_string() && !stream_refs(Some(resource)).is_empty() {
                        self.fail(
                            "least-privilege",
                            &owner,
                            format!(
                                "{action} on a stream ARN {}: item and queue actions name the table or queue itself",
                                show(Some(resource))
                            ),
                        );
                        continue;
                    }
                    if let Some(literal) = resource.as_str() {
                        let what = if literal == "*" {
                            "Resource '*'".to_owned()
                        } else {
                            format!("literal resource {literal:?}")
                        };
                        self.fail(
                            "least-privilege",
                            &owner,
                            format!("{action} on {what}: name the function's own {service} resources with Ref/GetAtt"),
                        );
                        continue;
                    }
                    let targets = refs(Some(resource));
                    let others: Vec<&String> = targets.difference(allowed).collect();
                    if !others.is_empty() || targets.is_empty() {
                        let reached = if others.is_empty() {
                            show(Some(resource))
                        } else {
                            super::template::names(others)
                        };
                        self.fail(
                            "least-privilege",
                            &owner,
                            format!(
                                "{action} reaches {reached}, not only {f}'s own {}",
                                super::template::names(allowed)
                            ),
                        );
                    }
                    if let Some(sub) = get(Some(resource), "Fn::Sub")
                        && mentions(sub, "*")
                    {
                        self.fail(
                            "least-privilege",
                            &owner,
                            format!("{action} on a wildcard ARN {}", show(Some(sub))),
                        );
                    }
                    for x in targets {
                        granted.entry(x).or_default().insert(action.to_owned());
                    }
                }
            }
        }

        // change-message-visibility: on the source queue and nowhere else; nowhere for a function without one.
        let elsewhere = super::template::names(&visibility_elsewhere);
        match &c.queue {
            None if !visibility_elsewhere.is_empty() => self.fail(
                "change-message-visibility",
                &owner,
                format!("sqs:ChangeMessageVisibility reaches {elsewhere}: {f} consumes no queue; remove it"),
            ),
            None => {}
            Some(queue) => {
                let on_source = granted
                    .get(queue)
                    .is_some_and(|actions| actions.iter().any(|a| grants_visibility(a)));
                if !on_source {
                    self.fail(
                        "change-message-visibility",
                        &owner,
                        format!("{f} needs sqs:ChangeMessageVisibility on its source queue {queue}"),
                    );
                }
                if !visibility_elsewhere.is_empty() {
                    self.fail(
                        "change-message-visibility",
                        &owner,
                        format!(
                            "sqs:ChangeMessageVisibility reaches {elsewhere}: only {f}'s source queue {queue} may \
                             have its messages' visibility changed"
                        ),
                    );
                }
            }
        }

        // permissions: what the function needs, on exactly its resources.
        let mut needs: Vec<(&str, String)> = Vec::new();
        if let Some(q) = &c.queue {
            needs.push(("(source)", q.clone()));
        }
        if let Some(table) = &c.stream_table {
            needs.push(("(stream)", table.clone()));
        }
        if let Some(stream) = &c.kinesis_stream {
            needs.push(("(kinesis)", stream.clone()));
        }
        if let Some(q) = &c.on_failure {
            needs.push(("(on-failure)", q.clone()));
        }
        for var in WIRED {
            for x in refs(c.var(var)) {
                if self.is_queue(&x) || self.is_table(&x) {
                    let kind = if var == "OUTBOX_TABLE" && c.schedule.is_some() {
                        "OUTBOX_TABLE (sweeper)"
                    } else if var == "IDEMPOTENCY_TABLE" && may_be_keyed(c) {
                        KEYED_IDEMPOTENCY_TABLE
                    } else {
                        var
                    };
                    needs.push((kind, x));
                }
            }
        }
        let none = BTreeSet::new();
        for (kind, x) in needs {
            // "on Queue (QUEUE_URL)", "on Queue (source)".
            let why = if kind.starts_with('(') {
                format!("{x} {kind}")
            } else {
                format!("{x} ({kind})")
            };
            let have = if kind == "(stream)" {
                granted_stream.get(&x)
            } else {
                granted.get(&x)
            }
            .unwrap_or(&none);
            let missing: Vec<&str> = required(kind)
                .iter()
                .copied()
                .filter(|a| !have.contains(*a))
                .collect();
            if !missing.is_empty() {
                self.fail(
                    "permissions",
                    &owner,
                    format!("{f} needs [{}] on {why}: grant them", missing.join(", ")),
                );
            }
            if let Some(used) = used(kind) {
                let unused: Vec<&String> = granted
                    .get(&x)
                    .into_iter()
                    .flatten()
                    .filter(|a| !used.iter().any(|u| u.eq_ignore_ascii_case(a)))
                    .collect();
                if !unused.is_empty() {
                    self.fail(
                        "grant-only-what-is-used",
                        &owner,
                        format!(
                            "{f} is granted {} on {why}, which its code never calls: remove them",
                            super::template::names(unused)
                        ),
                    );
                }
            }
        }
        self.check_environment_grants(c, &granted, &granted_stream);
    }

    /// environment-grants: a table or queue of the template that a function's environment names, and its role grants
    /// nothing on, is one its code calls and would be refused (a hand-added table without its statement).
    fn check_environment_grants(
        &mut self,
        c: &Consumer,
        granted: &BTreeMap<String, BTreeSet<String>>,
        granted_stream: &BTreeMap<String, BTreeSet<String>>,
    ) {
        let f = c.name();
        let owner = c.role.clone().unwrap_or_else(|| c.function.clone());
        let grants = if c.role.is_some() {
            "grants"
        } else {
            "its Policies grant"
        };
        let variables = c.env().and_then(Value::as_mapping).into_iter().flatten();
        for (var, value) in variables {
            let var = super::template::text(Some(var));
            if WIRED.contains(&var.as_str()) {
                continue;
            }
            let streams = stream_refs(Some(value));
            for x in refs(Some(value)) {
                // A parameter or a literal names another stack's resource, not one of this template.
                let wanted = if self.is_table(&x) {
                    "dynamodb"
                } else if self.is_queue(&x) {
                    "sqs"
                } else {
                    continue;
                };
                let on_resource = granted.get(&x).into_iter().flatten();
                let on_stream = granted_stream
                    .get(&x)
                    .filter(|_| streams.contains(&x))
                    .into_iter()
                    .flatten();
                if !on_resource.chain(on_stream).any(|a| service(a) == wanted) {
                    let (kind, example) = grant_example(wanted);
                    self.fail(
                        "environment-grants",
                        &owner,
                        format!(
                            "{grants} nothing on {x}, which {f}'s {var} names: add a statement allowing the {kind} \
                             actions its code calls (for example {example}) on !GetAtt {x}.Arn"
                        ),
                    );
                }
            }
        }
    }

    /// least-privilege everywhere: Action '*' and data-plane wildcards in any policy, also ones no function uses.
    pub(super) fn check_policy_documents(&mut self) {
        let mut documents: Vec<(String, Value)> = Vec::new();
        for (id, resource) in self.t.resources() {
            let p = get(Some(resource), "Properties");
            let kind = get(Some(resource), "Type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if kind == "AWS::IAM::Role" {
                for policy in as_list(get(p, "Policies")) {
                    let doc = get(Some(policy), "PolicyDocument")
                        .cloned()
                        .unwrap_or_default();
                    documents.push((id.to_owned(), doc));
                }
            } else if POLICY_KINDS.contains(&kind) {
                documents.push((
                    id.to_owned(),
                    get(p, "PolicyDocument").cloned().unwrap_or_default(),
                ));
            } else if kind == "AWS::Serverless::Function" {
                for policy in as_list(get(p, "Policies")) {
                    if policy.is_mapping() && has(Some(policy), "Statement") {
                        documents.push((id.to_owned(), policy.clone()));
                    }
                }
            }
        }
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        for (id, doc) in documents {
            for st in as_list(get(Some(&doc), "Statement"))
                .into_iter()
                .filter(|st| allows(st))
            {
                let on_anything = as_list(get(Some(st), "Resource"))
                    .into_iter()
                    .any(|r| is_str(Some(r), "*"));
                for action in actions(st) {
                    let service = service(action);
                    let data_plane = DATA_PLANE_SERVICES.contains(&service.as_str());
                    let bad = action == "*" || (data_plane && action.contains('*'));
                    if bad && seen.insert((id.clone(), action.to_owned())) {
                        self.fail(
                            "least-privilege",
                            &id,
                            format!("allows {action:?}: name the actions"),
                        );
                    }
                    if data_plane && on_anything && seen.insert((id.clone(), format!("{action}@*")))
                    {
                        self.fail(
                            "least-privilege",
                            &id,
                            format!("allows {action} on Resource '*': name the resources"),
                        );
                    }
                }
            }
        }
    }
}
