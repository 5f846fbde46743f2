//! What the server and its routes share: the ledger, the processing delay, the hold.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::config::ProcessingDelay;
use super::hold::Hold;
use super::ledger::{Charge, Ledger};

/// State shared by the server's connections and its [`RunningPayments`](super::RunningPayments) handle.
pub(crate) struct Shared {
    pub(crate) ledger: Mutex<Ledger>,
    pub(crate) delay: Option<Arc<dyn ProcessingDelay>>,
    pub(crate) hold: Option<Arc<Hold>>,
}

impl Shared {
    /// The lock is never held across an await, and every transition leaves the ledger consistent, so a panic while
    /// holding it (there is no code that panics there) would not leave anything half-done: poisoning is ignored.
    pub(crate) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn charges(&self) -> Vec<Charge> {
        self.ledger().charges().to_vec()
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("ledger", &self.ledger)
            .field("processing_delay", &self.delay.is_some())
            .field("hold", &self.hold)
            .finish()
    }
}
