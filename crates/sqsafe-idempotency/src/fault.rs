//! Crash points for fault-injection tests, compiled only with the `fault-injection` feature.
//!
//! A process started with `SQSAFE_CRASH_POINTS=after_claim,after_effect,after_complete`, `SQSAFE_CRASH_RATE=0.05` and
//! `SQSAFE_CRASH_SEED=42` kills itself with SIGKILL at each listed point with that probability (seeded, so a run can
//! be replayed), after printing one line `sqsafe-fault: SIGKILL at <point> key=<key>` to stderr. No destructor runs,
//! no record is completed or released: exactly what a crashed or timed-out Lambda leaves behind.

use std::sync::{Mutex, OnceLock};

use crate::key::IdempotencyKey;

/// The points a claim passes (named for what has just happened, hence the shared prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub(crate) enum Point {
    /// The claim is written; the effect has not started.
    AfterClaim,
    /// The effect succeeded; its record is not completed yet.
    AfterEffect,
    /// The record is completed (or the transaction committed); the caller has not been answered.
    AfterComplete,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::AfterClaim => "after_claim",
            Point::AfterEffect => "after_effect",
            Point::AfterComplete => "after_complete",
        }
    }
}

struct Plan {
    points: Vec<String>,
    rate: f64,
    rng: Mutex<fastrand::Rng>,
}

fn plan() -> &'static Option<Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(|| {
        let points: Vec<String> = std::env::var("SQSAFE_CRASH_POINTS")
            .ok()?
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        let rate = std::env::var("SQSAFE_CRASH_RATE")
            .ok()?
            .parse::<f64>()
            .ok()?
            .clamp(0.0, 1.0);
        let seed = std::env::var("SQSAFE_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Some(Plan {
            points,
            rate,
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
        })
    })
}

/// Kills this process at `point` if the plan says so.
pub(crate) fn point(point: Point, key: &IdempotencyKey) {
    let Some(plan) = plan() else { return };
    if !plan.points.iter().any(|p| p == point.name()) {
        return;
    }
    let draw = plan.rng.lock().unwrap_or_else(|p| p.into_inner()).f64();
    if draw >= plan.rate {
        return;
    }
    eprintln!("sqsafe-fault: SIGKILL at {} key={key}", point.name());
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    // `kill` failed (no such binary): abort is the next best thing, still no destructor and no cleanup.
    std::process::abort();
}
