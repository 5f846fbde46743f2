//! The layer model checked breadth first: its report, with a shortest trace for each property broken.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model};

use super::config::HttpConfig;
use super::world::HttpModel;

/// What one run of the layer model found.
#[derive(Debug, Clone)]
pub struct HttpReport {
    /// The configuration checked.
    pub config: HttpConfig,
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Each property broken: its name, the trace's steps and the trace.
    pub violations: Vec<(&'static str, usize, String)>,
    /// The examples found (each reachable in this configuration), by name.
    pub examples: Vec<&'static str>,
}

impl HttpReport {
    /// A summary line: states, depth, time.
    pub fn summary(&self) -> String {
        format!(
            "{} states ({} distinct), depth {}, {:.1?}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )
    }
}

/// Checks the layer model breadth first on `threads` threads (exhaustively, or up to the first violation for a
/// mutant); each property broken comes with a shortest trace, looked for again alone.
pub fn check_http(config: HttpConfig, first_failure: bool, threads: usize) -> HttpReport {
    let model = HttpModel::new(config.clone());
    let started = Instant::now();
    let finish = if first_failure {
        HasDiscoveries::AnyFailures
    } else {
        HasDiscoveries::All
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
    let mut examples = Vec::new();
    for property in model.properties() {
        if checker.discovery(property.name).is_none() {
            continue;
        }
        if property.expectation == Expectation::Sometimes {
            examples.push(property.name);
            continue;
        }
        let only = HasDiscoveries::AnyOf(BTreeSet::from([property.name]));
        let alone = model.clone().checker().finish_when(only).spawn_bfs().join();
        if let Some(path) = alone.discovery(property.name) {
            let mut steps = path.into_vec();
            // Cut at the first violating state.
            if let Some(first) = steps
                .iter()
                .position(|(state, _)| !(property.condition)(&model, state))
            {
                steps.truncate(first + 1);
            }
            let mut trace = String::new();
            for (n, (state, action)) in steps.iter().enumerate() {
                if n + 1 == steps.len() {
                    trace.push_str(&format!("      -> {state:?}\n"));
                } else if let Some(action) = action {
                    trace.push_str(&format!("  {:>2}. {action:?}\n", n + 1));
                }
            }
            violations.push((property.name, steps.len().saturating_sub(1), trace));
        }
    }
    HttpReport {
        config,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        violations,
        examples,
    }
}
