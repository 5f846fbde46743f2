//! An exhaustive breadth-first check of a small model (the outbox relay's, the stream consumer's), each property
//! broken found again alone so that its trace is a shortest one.

use stateright::Model;

/// What one exhaustive run found.
#[derive(Debug, Clone)]
pub struct Found {
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique_states: usize,
    /// Longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: std::time::Duration,
    /// Each property broken: its name, the trace's steps and the trace in words.
    pub violations: Vec<(&'static str, usize, String)>,
}

/// Explores every state of `model`, breadth first.
pub(crate) fn explore<M>(model: M) -> Found
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: std::fmt::Debug + Clone + std::hash::Hash + Eq + Send + Sync,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync,
{
    use stateright::Checker;
    let started = std::time::Instant::now();
    let checker = model.clone().checker().spawn_bfs().join();
    let elapsed = started.elapsed();
    let mut violations = Vec::new();
    for property in model.properties() {
        if checker.discovery(property.name).is_none() {
            continue;
        }
        // Looked for again alone, stopping at its first discovery: BFS makes that trace a shortest one.
        let only =
            stateright::HasDiscoveries::AnyOf(std::collections::BTreeSet::from([property.name]));
        let alone = model.clone().checker().finish_when(only).spawn_bfs().join();
        if let Some(path) = alone.discovery(property.name) {
            let steps = path.into_vec();
            let mut trace = String::new();
            for (n, (state, action)) in steps.iter().enumerate() {
                if let Some(action) = action {
                    trace.push_str(&format!("  {:>2}. {action:?}\n", n + 1));
                } else {
                    trace.push_str(&format!("      -> {state:?}\n"));
                }
            }
            violations.push((property.name, steps.len().saturating_sub(1), trace));
        }
    }
    Found {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        violations,
    }
}
