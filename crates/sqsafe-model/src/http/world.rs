//! The layer model's type and its clocks.

use super::config::{HttpConfig, HttpMutation};
use super::state::{Attempt, HttpState};
use crate::config::{Fp, TICK_MS, ms};

/// Epoch ms of tick 0, so that clocks running behind stay positive.
const BASE_MS: u64 = 100 * TICK_MS;

/// The layer model for one [`HttpConfig`].
#[derive(Debug, Clone)]
pub struct HttpModel {
    /// What it explores.
    pub config: HttpConfig,
}

impl HttpModel {
    /// A model of `config`.
    pub fn new(config: HttpConfig) -> Self {
        Self { config }
    }

    /// The record a request of `caller` claims: the caller's own, or the key's alone under
    /// [`HttpMutation::NoCallerScope`].
    pub(super) fn scope(&self, caller: u8) -> usize {
        match self.config.mutation {
            Some(HttpMutation::NoCallerScope) => 0,
            _ => usize::from(caller),
        }
    }

    pub(super) fn scopes(&self) -> usize {
        self.config
            .requests
            .iter()
            .map(|&(caller, _)| usize::from(caller) + 1)
            .max()
            .unwrap_or(1)
    }

    pub(super) fn local_ms(now: u8, skew: i8) -> u64 {
        let ticks = i64::from(now) + i64::from(skew);
        BASE_MS.saturating_add_signed(ticks * i64::try_from(TICK_MS).unwrap_or(i64::MAX))
    }

    pub(super) fn true_ms(now: u8) -> u64 {
        BASE_MS + ms(now)
    }

    pub(super) fn request(&self, attempt: &Attempt) -> (u8, Fp) {
        self.config.requests[usize::from(attempt.request)]
    }

    /// The end of the horizon with nothing in flight.
    pub(super) fn settled(&self, s: &HttpState) -> bool {
        s.now == self.config.horizon() && s.attempts.is_empty()
    }
}
