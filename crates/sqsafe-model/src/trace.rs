//! Violations and examples as numbered, readable steps.

use sqsafe_idempotency::Status;
use stateright::{Model, Path};

use crate::model::action::Action;
use crate::model::world::{BASE_MS, ProtocolModel};
use crate::state::{Phase, State, Write};

/// An action in words.
pub fn describe_action(action: &Action) -> String {
    let lost = |lost: &bool| {
        if *lost {
            " (answer lost: the SDK will retry)"
        } else {
            ""
        }
    };
    match action {
        Action::Tick => "time passes one tick".into(),
        Action::Receive { instance, msg } => {
            format!("SQS delivers message {msg} to instance {instance}")
        }
        Action::Claim { instance, lost: l } => {
            format!("instance {instance} claims the key{}", lost(l))
        }
        Action::Read { instance } => format!("instance {instance} reads the record (keyed mode)"),
        Action::Send { instance } => format!("instance {instance} sends the effect downstream"),
        Action::Land { request, fail } => {
            if *fail {
                format!("the downstream fails request {request}")
            } else {
                format!("the downstream applies request {request}")
            }
        }
        Action::Beat { instance, lost: l } => format!(
            "instance {instance}'s heartbeat extends the lease{}",
            lost(l)
        ),
        Action::Complete { instance, lost: l } => {
            format!("instance {instance} completes{}", lost(l))
        }
        Action::Release { instance, lost: l } => {
            format!("instance {instance} releases the key{}", lost(l))
        }
        Action::Crash { instance } => format!("instance {instance} crashes"),
        Action::Deliver { write } => {
            format!("a write whose answer was lost lands late (pending #{write})")
        }
        Action::TtlDelete => "DynamoDB's TTL deletes the expired record".into(),
    }
}

fn secs(ms: u64) -> String {
    let rel = i128::from(ms) - i128::from(BASE_MS);
    if rel % 1_000 == 0 {
        format!("{}s", rel / 1_000)
    } else {
        format!("{:.1}s", rel as f64 / 1_000.0)
    }
}

/// The state in one line: time, record, instances, messages, in-flight writes and requests, applications.
pub fn describe_state(state: &State) -> String {
    let record = match &state.record {
        None => "none".to_owned(),
        Some(r) => match r.status {
            Status::InProgress => format!(
                "IN_PROGRESS token {} fp {} lease {} expires {}",
                r.token,
                r.fp,
                r.lease_ms.map_or("-".into(), secs),
                secs(r.expiration_s * 1_000)
            ),
            Status::Completed => format!(
                "COMPLETED token {} fp {} expires {}",
                r.token,
                r.fp,
                secs(r.expiration_s * 1_000)
            ),
        },
    };
    let instances: Vec<String> = state
        .instances
        .iter()
        .enumerate()
        .map(|(i, inst)| {
            let job = match &inst.job {
                None => "idle".to_owned(),
                Some(j) => {
                    let phase = match j.phase {
                        Phase::Read => "reading",
                        Phase::Claim => "claiming",
                        Phase::Effect { sent: false } => "owns",
                        Phase::Effect { sent: true } => "effect sent",
                        Phase::Complete => "completing",
                        Phase::Release => "releasing",
                    };
                    format!(
                        "msg {} token {} {phase}, deadline {}s",
                        j.msg, j.token, j.deadline
                    )
                }
            };
            format!("i{i}[clock {:+}s] {job}", inst.skew)
        })
        .collect();
    let messages: Vec<String> = state
        .messages
        .iter()
        .enumerate()
        .map(|(m, msg)| match msg.end {
            Some(end) => format!("m{m}(fp {}) {end:?}", msg.fp),
            None => format!(
                "m{m}(fp {}) received {}x, visible at {}s",
                msg.fp, msg.receives, msg.visible_at
            ),
        })
        .collect();
    let pending: Vec<String> = state
        .pending
        .iter()
        .map(|w| match w {
            Write::Claim { record, .. } => format!("claim(token {})", record.token),
            Write::Complete { token, .. } => format!("complete(token {token})"),
            Write::Extend {
                token, lease_ms, ..
            } => {
                format!("extend(token {token} to {})", secs(*lease_ms))
            }
            Write::Release { token } => format!("release(token {token})"),
            Write::KeyedPut { record, .. } => format!("put completed(token {})", record.token),
        })
        .collect();
    let mut line = format!(
        "t={}s | record: {record} | {} | {}",
        state.now,
        instances.join(", "),
        messages.join(", ")
    );
    if !pending.is_empty() {
        line.push_str(&format!(" | writes in flight: {}", pending.join(", ")));
    }
    if !state.requests.is_empty() {
        let requests: Vec<String> = state
            .requests
            .iter()
            .map(|r| format!("token {}", r.token))
            .collect();
        line.push_str(&format!(" | requests in flight: {}", requests.join(", ")));
    }
    line.push_str(&format!(
        " | applied this lifetime: {}",
        state.ghost.applied
    ));
    line
}

/// A path as numbered steps: the initial state, then each action and the state it leads to.
pub fn format_path(model: &ProtocolModel, path: &Path<State, Action>) -> String {
    format_steps(model, &path.clone().into_vec())
}

/// Steps (each state with the action taken from it) as numbered lines.
pub fn format_steps(model: &ProtocolModel, steps: &[(State, Option<Action>)]) -> String {
    let mut out = String::new();
    for (n, (state, action)) in steps.iter().enumerate() {
        if n == 0 {
            out.push_str(&format!("  0. start: {}\n", describe_state(state)));
        }
        if let Some(action) = action
            && let Some((next, _)) = steps.get(n + 1)
        {
            out.push_str(&format!(
                "  {:>2}. {}\n      -> {}\n",
                n + 1,
                model.format_action(action),
                describe_state(next)
            ));
        }
    }
    out
}
