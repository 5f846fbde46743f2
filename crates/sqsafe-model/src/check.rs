//! Running a check and reading its result.

use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use stateright::{Checker, Expectation, HasDiscoveries, Model, Property};

use crate::config::Config;
use crate::model::ProtocolModel;
use crate::properties;
use crate::state::State;
use crate::trace::format_steps;

/// What one run of the checker found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The configuration checked.
    pub config: Config,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Each property that failed, with its shortest trace (steps) and the trace in words.
    pub violations: Vec<Violation>,
    /// The shortest trace of a second application without a downstream key, if one exists.
    pub example: Option<Violation>,
}

/// A property that failed, or an example found.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The property's name.
    pub property: &'static str,
    /// Steps in the trace.
    pub steps: usize,
    /// The trace as numbered steps.
    pub trace: String,
}

impl Report {
    /// A summary line: states, depth, time.
    pub fn summary(&self) -> String {
        format!(
            "{} states ({} distinct), depth {}, {:.1?}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )
    }
}

/// How far a check goes.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// Explore everything (the bounded check): every property is decided.
    Exhaustive,
    /// Stop at the first failure (mutants, the skew sweep): BFS makes its trace a shortest one.
    FirstFailure,
}

/// Checks `config` breadth first on `threads` threads. Every property found broken (and the example) is then
/// looked for again alone, stopping at its first discovery: BFS makes that trace a shortest one (to within the
/// checker's blocks of 1,500 states), and it is cut at its first violating step.
pub fn check(config: Config, stop: Stop, threads: usize) -> Report {
    let model = ProtocolModel::new(config.clone());
    let started = Instant::now();
    let finish = match stop {
        Stop::Exhaustive => HasDiscoveries::All,
        Stop::FirstFailure => HasDiscoveries::AnyFailures,
    };
    let checker = model
        .clone()
        .checker()
        .threads(threads)
        .finish_when(finish)
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    let mut violations = Vec::new();
    let mut example = None;
    for property in model.properties() {
        if checker.discovery(property.name).is_none() {
            continue;
        }
        let Some(found) = shortest(&model, &property) else {
            continue;
        };
        if property.name == properties::EXAMPLE_SECOND_APPLICATION {
            example = Some(found);
        } else {
            violations.push(found);
        }
    }
    Report {
        config,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        violations,
        example,
    }
}

/// The shortest trace to `property`'s discovery, cut at its first violating (or, for an example, satisfying) step.
fn shortest(model: &ProtocolModel, property: &Property<ProtocolModel>) -> Option<Violation> {
    let only = HasDiscoveries::AnyOf(BTreeSet::from([property.name]));
    let checker = model
        .clone()
        .checker()
        .threads(1)
        .finish_when(only)
        .spawn_bfs()
        .join();
    let path = checker.discovery(property.name)?;
    let mut steps = path.into_vec();
    let found = |state: &State| match property.expectation {
        Expectation::Sometimes => (property.condition)(model, state),
        Expectation::Always | Expectation::Eventually => !(property.condition)(model, state),
    };
    if let Some(first) = steps.iter().position(|(state, _)| found(state)) {
        steps.truncate(first + 1);
    }
    Some(Violation {
        property: property.name,
        steps: steps.len().saturating_sub(1),
        trace: format_steps(model, &steps),
    })
}
