/// What the proxy does to one eligible DynamoDB request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Forward it and return the upstream's answer.
    None,
    /// Answer `400 ThrottlingException` without forwarding.
    Throttle,
    /// Answer `500 InternalServerError` without forwarding.
    Error500,
    /// Forward it, then answer `500 InternalServerError` whatever the upstream said.
    AfterWrite500,
    /// A `BatchGetItem`: answer `200` with every requested key unprocessed, without forwarding.
    UnprocessedKeys,
}

/// The one operation [`Fault::UnprocessedKeys`] applies to.
pub(crate) const BATCH_GET_ITEM: &str = "BatchGetItem";

/// Draws the fault of each eligible request from a seeded RNG: one draw per request, split by the rates.
#[derive(Debug)]
pub(crate) struct FaultPlan {
    rng: fastrand::Rng,
    throttle: f64,
    error_500: f64,
    after_write_500: f64,
    unprocessed_keys: f64,
}

impl FaultPlan {
    /// The rates are validated by the caller: each in `[0, 1]`, their sum at most 1.
    pub(crate) const fn new(
        seed: u64,
        throttle: f64,
        error_500: f64,
        after_write_500: f64,
        unprocessed_keys: f64,
    ) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            throttle,
            error_500,
            after_write_500,
            unprocessed_keys,
        }
    }

    /// The fault of one request of `operation`. Every request takes one draw, whatever its operation, so the
    /// unprocessed-keys band, which only a `BatchGetItem` gets, changes no other operation's faults.
    pub(crate) fn draw(&mut self, operation: &str) -> Fault {
        let u = self.rng.f64();
        let written = self.throttle + self.error_500 + self.after_write_500;
        if u < self.throttle {
            Fault::Throttle
        } else if u < self.throttle + self.error_500 {
            Fault::Error500
        } else if u < written {
            Fault::AfterWrite500
        } else if u < written + self.unprocessed_keys && operation == BATCH_GET_ITEM {
            Fault::UnprocessedKeys
        } else {
            Fault::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(plan: &mut FaultPlan, n: usize) -> Vec<Fault> {
        sequence_of(plan, "PutItem", n)
    }

    fn sequence_of(plan: &mut FaultPlan, operation: &str, n: usize) -> Vec<Fault> {
        (0..n).map(|_| plan.draw(operation)).collect()
    }

    fn count(faults: &[Fault], which: Fault) -> usize {
        faults.iter().filter(|f| **f == which).count()
    }

    #[test]
    fn same_seed_gives_same_faults() {
        let a = sequence(&mut FaultPlan::new(42, 0.2, 0.2, 0.2, 0.0), 200);
        let b = sequence(&mut FaultPlan::new(42, 0.2, 0.2, 0.2, 0.0), 200);
        let c = sequence(&mut FaultPlan::new(43, 0.2, 0.2, 0.2, 0.0), 200);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rates_are_roughly_respected() {
        let faults = sequence(&mut FaultPlan::new(7, 0.1, 0.2, 0.3, 0.0), 10_000);
        // The seed is fixed, so these bounds cannot flake.
        assert!((900..1_100).contains(&count(&faults, Fault::Throttle)));
        assert!((1_800..2_200).contains(&count(&faults, Fault::Error500)));
        assert!((2_700..3_300).contains(&count(&faults, Fault::AfterWrite500)));
    }

    #[test]
    fn zero_and_one_are_exact() {
        let all = |plan: &mut FaultPlan, which| sequence(plan, 1_000).iter().all(|f| *f == which);
        assert!(all(&mut FaultPlan::new(1, 0.0, 0.0, 0.0, 0.0), Fault::None));
        assert!(all(
            &mut FaultPlan::new(1, 1.0, 0.0, 0.0, 0.0),
            Fault::Throttle
        ));
        assert!(all(
            &mut FaultPlan::new(1, 0.0, 1.0, 0.0, 0.0),
            Fault::Error500
        ));
        assert!(all(
            &mut FaultPlan::new(1, 0.0, 0.0, 1.0, 0.0),
            Fault::AfterWrite500
        ));
    }

    #[test]
    fn only_a_batch_get_item_gets_its_keys_unprocessed() {
        let all_unprocessed = sequence_of(
            &mut FaultPlan::new(1, 0.0, 0.0, 0.0, 1.0),
            BATCH_GET_ITEM,
            1_000,
        );
        assert!(all_unprocessed.iter().all(|f| *f == Fault::UnprocessedKeys));
        let puts = sequence(&mut FaultPlan::new(1, 0.0, 0.0, 0.0, 1.0), 1_000);
        assert!(puts.iter().all(|f| *f == Fault::None));
    }

    #[test]
    fn the_unprocessed_keys_band_leaves_other_faults_as_they_were() {
        let without = sequence(&mut FaultPlan::new(9, 0.1, 0.1, 0.1, 0.0), 1_000);
        let with = sequence(&mut FaultPlan::new(9, 0.1, 0.1, 0.1, 0.3), 1_000);
        assert_eq!(
            without, with,
            "a PutItem never draws the BatchGetItem fault"
        );
        let reads = sequence_of(
            &mut FaultPlan::new(9, 0.1, 0.1, 0.1, 0.3),
            BATCH_GET_ITEM,
            10_000,
        );
        // The seed is fixed, so these bounds cannot flake.
        assert!((2_700..3_300).contains(&count(&reads, Fault::UnprocessedKeys)));
        assert!((900..1_100).contains(&count(&reads, Fault::Throttle)));
    }
}
