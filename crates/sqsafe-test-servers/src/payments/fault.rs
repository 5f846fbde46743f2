use std::collections::{HashMap, VecDeque};

/// What the payments API does to one new charge request, besides charging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault: charge and answer `201`.
    None,
    /// Answer `503` before charging and forget the idempotency key, so a retry charges.
    Before,
    /// Charge and store the `201` for replay, but answer `503`: the client sees a failure although the money moved,
    /// and only a retry with the same key tells it what happened.
    After,
}

/// Decides the fault for each new request: forced outcomes first, in order, then the seeded RNG.
#[derive(Debug)]
pub(crate) struct FaultPlan {
    rng: fastrand::Rng,
    fail_before_rate: f64,
    fail_after_rate: f64,
    forced: VecDeque<Fault>,
    forced_for: HashMap<String, VecDeque<Fault>>,
}

impl FaultPlan {
    pub(crate) fn new(seed: u64, fail_before_rate: f64, fail_after_rate: f64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            fail_before_rate,
            fail_after_rate,
            forced: VecDeque::new(),
            forced_for: HashMap::new(),
        }
    }

    pub(crate) fn force(&mut self, fault: Fault) {
        self.forced.push_back(fault);
    }

    pub(crate) fn force_for(&mut self, payment_id: &str, fault: Fault) {
        self.forced_for
            .entry(payment_id.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// The next fault for a new request of `payment_id`: one forced for that payment first, then [`Self::next`].
    pub(crate) fn next_for(&mut self, payment_id: &str) -> Fault {
        if let Some(fault) = self
            .forced_for
            .get_mut(payment_id)
            .and_then(VecDeque::pop_front)
        {
            return fault;
        }
        self.next()
    }

    /// A forced outcome does not draw from the RNG, so forcing never shifts the seeded sequence of later requests.
    pub(crate) fn next(&mut self) -> Fault {
        if let Some(forced) = self.forced.pop_front() {
            return forced;
        }
        // Two draws every time, whatever the rates, so one seed gives one sequence of draws; `fail_after_rate` applies
        // to the requests that got past `fail_before_rate`.
        let before = self.rng.f64();
        let after = self.rng.f64();
        if before < self.fail_before_rate {
            Fault::Before
        } else if after < self.fail_after_rate {
            Fault::After
        } else {
            Fault::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(plan: &mut FaultPlan, n: usize) -> Vec<Fault> {
        (0..n).map(|_| plan.next()).collect()
    }

    #[test]
    fn same_seed_gives_same_faults() {
        let a = sequence(&mut FaultPlan::new(42, 0.3, 0.3), 200);
        let b = sequence(&mut FaultPlan::new(42, 0.3, 0.3), 200);
        let c = sequence(&mut FaultPlan::new(43, 0.3, 0.3), 200);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rates_are_roughly_respected() {
        let faults = sequence(&mut FaultPlan::new(7, 0.2, 0.5), 10_000);
        let before = faults.iter().filter(|f| **f == Fault::Before).count();
        let after = faults.iter().filter(|f| **f == Fault::After).count();
        // Expected 2_000 and 0.8 * 0.5 * 10_000 = 4_000; the seed is fixed, so this cannot flake.
        assert!((1_800..2_200).contains(&before), "before = {before}");
        assert!((3_700..4_300).contains(&after), "after = {after}");
    }

    #[test]
    fn zero_and_one_are_exact() {
        assert!(
            sequence(&mut FaultPlan::new(1, 0.0, 0.0), 1_000)
                .iter()
                .all(|f| *f == Fault::None)
        );
        assert!(
            sequence(&mut FaultPlan::new(1, 1.0, 0.0), 1_000)
                .iter()
                .all(|f| *f == Fault::Before)
        );
        assert!(
            sequence(&mut FaultPlan::new(1, 0.0, 1.0), 1_000)
                .iter()
                .all(|f| *f == Fault::After)
        );
    }

    #[test]
    fn a_fault_forced_for_a_payment_waits_for_that_payment() {
        let mut plan = FaultPlan::new(9, 0.0, 0.0);
        plan.force_for("p-2", Fault::After);
        assert_eq!(plan.next_for("p-1"), Fault::None);
        assert_eq!(plan.next_for("p-2"), Fault::After);
        assert_eq!(plan.next_for("p-2"), Fault::None, "used once");
    }

    #[test]
    fn forced_faults_come_first_and_do_not_shift_the_seeded_sequence() {
        let unforced = sequence(&mut FaultPlan::new(9, 0.5, 0.5), 10);
        let mut plan = FaultPlan::new(9, 0.5, 0.5);
        plan.force(Fault::After);
        plan.force(Fault::None);
        assert_eq!(plan.next(), Fault::After);
        assert_eq!(plan.next(), Fault::None);
        assert_eq!(sequence(&mut plan, 10), unforced);
    }
}
