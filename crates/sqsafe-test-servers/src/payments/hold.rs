//! The kill point [`PaymentsApiBuilder::hold_in_flight`](super::PaymentsApiBuilder::hold_in_flight) sets: requests
//! held claimed and uncharged, and none left between its charge and its stored answer.

use std::sync::Arc;

use tokio::sync::watch;

#[derive(Debug, Default, Clone, Copy)]
struct HoldState {
    /// The held payment's request arrived: no request is charged from then on.
    holding: bool,
    /// Requests charged whose answer has not come back through the idempotency layer yet (its record not completed).
    uncharged_answers: usize,
    /// Requests waiting, claimed and not charged: the held payment's and every one that reached its charge since.
    waiting: usize,
    /// `holding`, and `uncharged_answers` reached 0: a kill now leaves no charge without its completed record. The
    /// requests waiting then.
    held: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct Hold {
    payment_id: String,
    state: watch::Sender<HoldState>,
}

/// A charge made under a hold's watch: dropped when its answer came back through the layer (or its request was
/// dropped), which the held request waits for.
#[derive(Debug)]
pub(crate) struct Charging(Arc<Hold>);

impl Drop for Charging {
    fn drop(&mut self) {
        self.0.state.send_modify(|s| {
            s.uncharged_answers = s.uncharged_answers.saturating_sub(1);
        });
    }
}

impl Hold {
    pub(crate) fn new(payment_id: String) -> Self {
        Self {
            payment_id,
            state: watch::Sender::new(HoldState::default()),
        }
    }

    /// Called by a request just before its charge: returns at once while no hold is on (the request then charges,
    /// watched until its [`Charging`] is dropped); never returns for the held payment's request or once it came.
    pub(crate) async fn before_charge(self: &Arc<Self>, payment_id: &str) -> Charging {
        let mut charge_now = false;
        let mut hold_here = false;
        self.state.send_modify(|s| {
            if s.holding {
                s.waiting += 1;
                return;
            }
            if payment_id == self.payment_id {
                s.holding = true;
                s.waiting += 1;
                hold_here = true;
            } else {
                s.uncharged_answers += 1;
                charge_now = true;
            }
        });
        if charge_now {
            return Charging(Arc::clone(self));
        }
        if hold_here {
            let mut state = self.state.subscribe();
            // The sender lives as long as this hold: the wait ends only when the count reaches 0.
            let _ = state.wait_for(|s| s.uncharged_answers == 0).await;
            self.state.send_modify(|s| s.held = Some(s.waiting));
            tracing::info!(
                payment_id,
                "holding the payment in flight, every other charge done or waiting"
            );
        }
        std::future::pending::<Charging>().await
    }

    /// The requests waiting now, claimed and not charged (the held one among them).
    pub(crate) fn waiting(&self) -> usize {
        self.state.borrow().waiting
    }

    /// Resolves once the hold is in place, with the requests waiting then (see
    /// [`RunningPayments::held`](super::RunningPayments::held)).
    pub(crate) async fn held(&self) -> usize {
        let mut state = self.state.subscribe();
        let held = state
            .wait_for(|s| s.held.is_some())
            .await
            .ok()
            .and_then(|s| s.held);
        held.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_hold_waits_for_charges_under_way_and_stops_the_later_ones() {
        let hold = Arc::new(Hold::new("p-held".into()));
        let Poll::Ready(charging) = poll(pin!(hold.before_charge("p-1"))) else {
            panic!("no hold yet: charges at once");
        };
        let mut held_request = pin!(hold.before_charge("p-held"));
        assert!(poll(held_request.as_mut()).is_pending());
        let mut held = pin!(hold.held());
        assert!(poll(held.as_mut()).is_pending(), "p-1's answer is not back");
        let mut later = pin!(hold.before_charge("p-2"));
        assert!(
            poll(later.as_mut()).is_pending(),
            "no charge once the hold came"
        );
        drop(charging);
        assert!(poll(held_request.as_mut()).is_pending(), "held for good");
        assert_eq!(poll(held.as_mut()), Poll::Ready(2), "p-held and p-2 wait");
        assert!(poll(later.as_mut()).is_pending());
    }
}
