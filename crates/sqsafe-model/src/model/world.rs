//! The protocol model's type and its clocks (true time, and each instance's skewed clock).

use crate::config::{Config, TICK_MS, ms};
use crate::state::State;

/// Epoch ms of tick 0, so that clocks running behind stay positive.
pub(crate) const BASE_MS: u64 = 100 * TICK_MS;

/// The protocol model for one [`Config`].
#[derive(Debug, Clone)]
pub struct ProtocolModel {
    /// What it explores.
    pub config: Config,
}

impl ProtocolModel {
    /// A model of `config`.
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    /// An instance's clock, epoch ms.
    pub(crate) fn local_ms(state: &State, instance: usize) -> u64 {
        let ticks = i64::from(state.now) + i64::from(state.instances[instance].skew);
        let offset = ticks * i64::try_from(TICK_MS).unwrap_or(i64::MAX);
        BASE_MS.saturating_add_signed(offset)
    }

    /// True time, epoch ms (DynamoDB's TTL and the Lambda service go by it).
    pub(crate) fn true_ms(state: &State) -> u64 {
        BASE_MS + ms(state.now)
    }

    /// Epoch ms of a tick.
    pub(crate) fn tick_ms(tick: u8) -> u64 {
        BASE_MS + ms(tick)
    }
}
