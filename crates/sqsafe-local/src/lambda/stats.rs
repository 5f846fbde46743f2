use std::collections::BTreeMap;

/// What one [`FunctionInstance`](super::FunctionInstance) has seen so far, over all its processes.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct InstanceStats {
    /// Calls to `invoke`, whatever their outcome.
    pub invocations: u64,
    /// Processes started (the first invoke, and the first after each crash, timeout or failed init).
    pub cold_starts: u64,
    /// Invocations that ended with [`InvokeError::Crashed`](super::InvokeError::Crashed).
    pub crashes: u64,
    /// Invocations that ended with [`InvokeError::Timeout`](super::InvokeError::Timeout).
    pub timeouts: u64,
    /// Invocations that ended with [`InvokeError::FunctionError`](super::InvokeError::FunctionError).
    pub function_errors: u64,
    /// Invocations that ended with [`InvokeError::InitFailed`](super::InvokeError::InitFailed).
    pub init_failures: u64,
    /// Lines `sqsafe-fault: SIGKILL at <point> ...` printed by a fault-injection build, by point (`after_claim`).
    pub fault_markers: BTreeMap<String, u64>,
    /// Sums of the metrics in the EMF lines the function printed (`RecordsProcessed`, `RecordsReplayed`, ...).
    pub emf: BTreeMap<String, f64>,
}

impl InstanceStats {
    /// How many times the process announced a crash at `point`; 0 if never.
    pub fn fault_marker_count(&self, point: &str) -> u64 {
        self.fault_markers.get(point).copied().unwrap_or(0)
    }

    /// The sum of EMF metric `name` over every line printed; 0 if never printed.
    pub fn emf_sum(&self, name: &str) -> f64 {
        self.emf.get(name).copied().unwrap_or(0.0)
    }
}
