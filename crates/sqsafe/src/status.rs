//! What an HTTP status means to both ends of an `Idempotency-Key`: one table that the client (`sqsafe::http`, feature
//! `http`) and the server (`sqsafe::api`, feature `api`) both read, so that what the client retries is exactly what
//! the server releases and never stores, and what the client takes as final is exactly what the server stores and
//! replays.
//!
//! | status | [`StatusClass`] | the client (`sqsafe::http`) | the server (`sqsafe::api`) |
//! |---|---|---|---|
//! | 2xx | `Success` | `Ok` | stored, replayed |
//! | 409 | `InFlight` | transient `downstream_in_flight` | the handler's: key released, answer passed through |
//! | 408, 425, 429, 5xx | `Unavailable` | transient `downstream_unavailable` (its `Retry-After` kept) | key released, answer passed through (its `Retry-After` with it) |
//! | 422 | `KeyReused` | permanent `downstream_key_reused` | stored, replayed |
//! | other 4xx, 1xx, 3xx | `Rejected` | permanent `downstream_rejected` | stored, replayed |
//!
//! ```
//! use sqsafe::status::StatusClass;
//!
//! assert!(StatusClass::of(429).is_retried());
//! assert!(!StatusClass::of(404).is_retried());
//! assert_eq!(StatusClass::of(201), StatusClass::Success);
//! ```

/// The class of an HTTP status, as both ends of a key read it: see the [module](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusClass {
    /// 2xx: done.
    Success,
    /// 409: the same key is in flight (the IETF Idempotency-Key draft), or a conflict of the moment: retry later.
    InFlight,
    /// 408, 425, 429 and 5xx: the server could not do it now: retry later.
    Unavailable,
    /// 422: the key was used with other content: no retry can fix it.
    KeyReused,
    /// Every other status (other 4xx; 1xx and 3xx, which the client does not follow): the request as built is
    /// refused, finally.
    Rejected,
}

impl StatusClass {
    /// The class of `status` (any number: those outside 100 to 599 are `Rejected`).
    pub const fn of(status: u16) -> Self {
        match status {
            200..=299 => StatusClass::Success,
            409 => StatusClass::InFlight,
            422 => StatusClass::KeyReused,
            408 | 425 | 429 | 500..=599 => StatusClass::Unavailable,
            _ => StatusClass::Rejected,
        }
    }

    /// `true` when the client retries the request (with the same key): the server must release the key and must
    /// never store the answer.
    pub const fn is_retried(self) -> bool {
        matches!(self, StatusClass::InFlight | StatusClass::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_one_class_and_only_409_408_425_429_and_5xx_are_retried() {
        for status in 0..=1000u16 {
            let class = StatusClass::of(status);
            let retried = status == 408
                || status == 409
                || status == 425
                || status == 429
                || (500..=599).contains(&status);
            assert_eq!(class.is_retried(), retried, "{status}");
            if (200..=299).contains(&status) {
                assert_eq!(class, StatusClass::Success, "{status}");
            }
        }
        assert_eq!(StatusClass::of(422), StatusClass::KeyReused);
        assert_eq!(StatusClass::of(303), StatusClass::Rejected);
        assert_eq!(StatusClass::of(101), StatusClass::Rejected);
        assert_eq!(StatusClass::of(404), StatusClass::Rejected);
    }
}
