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
}

/// Draws the fault of each eligible request from a seeded RNG: one draw per request, split by the rates.
#[derive(Debug)]
pub(crate) struct FaultPlan {
    rng: fastrand::Rng,
    throttle: f64,
    error_500: f64,
    after_write_500: f64,
}

impl FaultPlan {
    /// The rates are validated by the caller: each in `[0, 1]`, their sum at most 1.
    pub(crate) const fn new(
        seed: u64,
        throttle: f64,
        error_500: f64,
        after_write_500: f64,
    ) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            throttle,
            error_500,
            after_write_500,
        }
    }

    pub(crate) fn draw(&mut self) -> Fault {
        let u = self.rng.f64();
        if u < self.throttle {
            Fault::Throttle
        } else if u < self.throttle + self.error_500 {
            Fault::Error500
        } else if u < self.throttle + self.error_500 + self.after_write_500 {
            Fault::AfterWrite500
        } else {
            Fault::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(plan: &mut FaultPlan, n: usize) -> Vec<Fault> {
        (0..n).map(|_| plan.draw()).collect()
    }

    fn count(faults: &[Fault], which: Fault) -> usize {
        faults.iter().filter(|f| **f == which).count()
    }

    #[test]
    fn same_seed_gives_same_faults() {
        let a = sequence(&mut FaultPlan::new(42, 0.2, 0.2, 0.2), 200);
        let b = sequence(&mut FaultPlan::new(42, 0.2, 0.2, 0.2), 200);
        let c = sequence(&mut FaultPlan::new(43, 0.2, 0.2, 0.2), 200);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rates_are_roughly_respected() {
        let faults = sequence(&mut FaultPlan::new(7, 0.1, 0.2, 0.3), 10_000);
        // The seed is fixed, so these bounds cannot flake.
        assert!((900..1_100).contains(&count(&faults, Fault::Throttle)));
        assert!((1_800..2_200).contains(&count(&faults, Fault::Error500)));
        assert!((2_700..3_300).contains(&count(&faults, Fault::AfterWrite500)));
    }

    #[test]
    fn zero_and_one_are_exact() {
        let all = |plan: &mut FaultPlan, which| sequence(plan, 1_000).iter().all(|f| *f == which);
        assert!(all(&mut FaultPlan::new(1, 0.0, 0.0, 0.0), Fault::None));
        assert!(all(&mut FaultPlan::new(1, 1.0, 0.0, 0.0), Fault::Throttle));
        assert!(all(&mut FaultPlan::new(1, 0.0, 1.0, 0.0), Fault::Error500));
        assert!(all(
            &mut FaultPlan::new(1, 0.0, 0.0, 1.0),
            Fault::AfterWrite500
        ));
    }
}
