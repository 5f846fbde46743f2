//! The pure part of the client: how long a request may take, and what an answer means. No I/O and no clock: the
//! client reads `SystemTime::now()` once per request and passes it in, so every rule here is tested without a
//! server or a sleep.

use std::time::{Duration, SystemTime};

use http::StatusCode;
use sqsafe_batch::RecordError;

use crate::status::StatusClass;

/// The time a request may take: the client's `timeout`, cut to what is left before the invocation's `deadline` less
/// `reserve`. `None` when nothing is left: the request must not be sent (it could land after the record was
/// reported, with no one to complete its record).
pub(crate) fn budget(
    timeout: Duration,
    deadline: Option<SystemTime>,
    reserve: Duration,
    now: SystemTime,
) -> Option<Duration> {
    let Some(deadline) = deadline else {
        return Some(timeout);
    };
    let left = deadline
        .duration_since(now)
        .unwrap_or(Duration::ZERO)
        .saturating_sub(reserve);
    (!left.is_zero()).then(|| left.min(timeout))
}

/// `Retry-After` (RFC 9110 section 10.2.3) as a point in time: delta-seconds from `now`, or an HTTP-date. `None` when
/// absent, unreadable or already past (the record's own backoff applies).
pub(crate) fn retry_after(value: Option<&str>, now: SystemTime) -> Option<SystemTime> {
    let value = value?.trim();
    let at = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // A number past what a SystemTime holds (one too large for u64 included) reads as no header: the record's
        // own backoff applies. A large one short of that is kept; the batch processor caps the wait at 12 h.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        now.checked_add(Duration::from_secs(seconds))?
    } else {
        httpdate::parse_http_date(value).ok()?
    };
    (at > now).then_some(at)
}

/// The API's error code (`{"error": "<code>"}`) when it looks like one: a short identifier, never free text (the
/// text of an error may echo what was sent: a card, a customer).
pub(crate) fn error_code(body: &[u8]) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = doc.get("error")?.as_str()?;
    let is_code = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'.' || b == b'-');
    is_code.then(|| code.to_owned())
}

/// What a complete answer means (the table in the module's docs). `Ok` for 2xx; otherwise an error whose message
/// carries `api`'s name, the status and the API's error code only, and, when transient, `retry_not_before`.
pub(crate) fn classify(
    api: &str,
    status: StatusCode,
    body: &[u8],
    retry_not_before: Option<SystemTime>,
) -> Result<(), RecordError> {
    let said = || match error_code(body) {
        Some(code) => format!("{api} answered {status} (error code {code})"),
        None => format!("{api} answered {status}"),
    };
    failure(status, said, retry_not_before).map_or(Ok(()), Err)
}

/// What an answer whose body is larger than `cap` means. The status decides, as for any answer: an error page too
/// large to read is still a 422 or a 503 (its `Retry-After` kept), only without a code. A 2xx is a transient
/// `downstream_bad_response`: the effect cannot read its body, and the retry, under the same key, gets the API's
/// replay.
pub(crate) fn over_cap(
    api: &str,
    status: StatusCode,
    cap: usize,
    retry_not_before: Option<SystemTime>,
) -> RecordError {
    let said = || format!("{api} answered {status} with a body larger than {cap} bytes");
    failure(status, said, retry_not_before)
        .unwrap_or_else(|| RecordError::transient("downstream_bad_response", said()))
}

/// The error `status` means, `None` for 2xx; `said` is its message.
fn failure(
    status: StatusCode,
    said: impl Fn() -> String,
    retry_not_before: Option<SystemTime>,
) -> Option<RecordError> {
    let transient = |kind: &'static str| {
        let error = RecordError::transient(kind, said());
        match retry_not_before {
            Some(at) => error.with_retry_not_before(at),
            None => error,
        }
    };
    // One table for both ends of the key (crate::status): what is retried here, sqsafe::api never stores.
    match StatusClass::of(status.as_u16()) {
        StatusClass::Success => None,
        // The IETF Idempotency-Key draft: a request with this key is still being processed.
        StatusClass::InFlight => Some(transient("downstream_in_flight")),
        // The draft again: the key was used with another payload. No retry can fix that.
        StatusClass::KeyReused => Some(RecordError::permanent("downstream_key_reused", said())),
        StatusClass::Unavailable => Some(transient("downstream_unavailable")),
        // Other 4xx, and what this client does not follow (1xx, 3xx): the request as built is refused.
        StatusClass::Rejected => Some(RecordError::permanent("downstream_rejected", said())),
    }
}

#[cfg(test)]
mod tests {
    use sqsafe_batch::ErrorClass;

    use super::*;

    const API: &str = "payments API";

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).expect("status")
    }

    #[test]
    fn the_budget_is_the_timeout_cut_to_the_deadline_less_the_reserve() {
        let (timeout, reserve, now) = (Duration::from_secs(5), Duration::from_secs(2), at(1000));
        assert_eq!(
            budget(timeout, None, reserve, now),
            Some(timeout),
            "no deadline"
        );
        assert_eq!(
            budget(timeout, Some(at(1060)), reserve, now),
            Some(timeout),
            "plenty of time"
        );
        assert_eq!(
            budget(timeout, Some(at(1003)), reserve, now),
            Some(Duration::from_secs(1)),
            "3 s left, 2 s kept"
        );
        assert_eq!(
            budget(timeout, Some(at(1002)), reserve, now),
            None,
            "all kept"
        );
        assert_eq!(budget(timeout, Some(at(1001)), reserve, now), None);
        assert_eq!(budget(timeout, Some(at(900)), reserve, now), None, "past");
        assert_eq!(
            budget(
                timeout,
                Some(at(1000) + Duration::from_millis(1)),
                Duration::ZERO,
                now
            ),
            Some(Duration::from_millis(1)),
            "no reserve"
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates_and_ignores_the_rest() {
        let now = at(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(retry_after(Some("120"), now), Some(at(1_445_412_600)));
        assert_eq!(retry_after(Some(" 1 "), now), Some(at(1_445_412_481)));
        assert_eq!(
            retry_after(Some("Wed, 21 Oct 2015 07:30:00 GMT"), now),
            Some(at(1_445_412_600)),
            "IMF-fixdate"
        );
        assert_eq!(
            retry_after(Some("Wednesday, 21-Oct-15 07:30:00 GMT"), now),
            Some(at(1_445_412_600)),
            "RFC 850"
        );
        assert_eq!(
            retry_after(Some("Wed Oct 21 07:30:00 2015"), now),
            Some(at(1_445_412_600)),
            "asctime"
        );
        assert_eq!(
            retry_after(Some("99999999999999999999999"), now),
            None,
            "past what a SystemTime holds"
        );
        assert_eq!(
            retry_after(Some("1000000000000"), now),
            Some(now + Duration::from_secs(1_000_000_000_000)),
            "far off but held: kept, for the batch processor to cap"
        );
        for ignored in [
            None,
            Some(""),
            Some("0"),
            Some("-5"),
            Some("soon"),
            Some("1.5"),
        ] {
            assert_eq!(retry_after(ignored, now), None, "{ignored:?}");
        }
        assert_eq!(
            retry_after(Some("Wed, 21 Oct 2015 07:27:00 GMT"), now),
            None,
            "a date already past"
        );
    }

    #[test]
    fn every_status_is_mapped_as_the_table_says() {
        assert!(classify(API, status(200), b"", None).is_ok());
        assert!(classify(API, status(201), b"{}", None).is_ok());
        assert!(classify(API, status(204), b"", None).is_ok());
        for (code, kind, class) in [
            (409, "downstream_in_flight", ErrorClass::Transient),
            (422, "downstream_key_reused", ErrorClass::Permanent),
            (408, "downstream_unavailable", ErrorClass::Transient),
            (425, "downstream_unavailable", ErrorClass::Transient),
            (429, "downstream_unavailable", ErrorClass::Transient),
            (500, "downstream_unavailable", ErrorClass::Transient),
            (503, "downstream_unavailable", ErrorClass::Transient),
            (599, "downstream_unavailable", ErrorClass::Transient),
            (400, "downstream_rejected", ErrorClass::Permanent),
            (401, "downstream_rejected", ErrorClass::Permanent),
            (404, "downstream_rejected", ErrorClass::Permanent),
            (499, "downstream_rejected", ErrorClass::Permanent),
            (301, "downstream_rejected", ErrorClass::Permanent),
            (101, "downstream_rejected", ErrorClass::Permanent),
        ] {
            let err = classify(API, status(code), b"{}", None).expect_err("failure");
            assert_eq!((err.kind(), err.class()), (kind, class), "{code}");
            assert_eq!(err.retry_not_before(), None, "{code}");
        }
    }

    #[test]
    fn a_transient_answer_keeps_its_retry_after_and_a_permanent_one_drops_it() {
        let later = Some(at(2000));
        for code in [408, 409, 425, 429, 500, 503] {
            let err = classify(API, status(code), b"", later).expect_err("transient");
            assert_eq!(err.retry_not_before(), later, "{code}");
        }
        for code in [400, 422] {
            let err = classify(API, status(code), b"", later).expect_err("permanent");
            assert_eq!(err.class(), ErrorClass::Permanent, "{code}");
        }
    }

    /// A body over the cap changes nothing but the message: the status decides, and `Retry-After` is kept. Only a
    /// 2xx, whose body the effect reads, becomes an error.
    #[test]
    fn a_body_over_the_cap_is_mapped_by_its_status() {
        let later = Some(at(2000));
        let err = over_cap(API, status(200), 64, later);
        assert_eq!(
            (err.kind(), err.class()),
            ("downstream_bad_response", ErrorClass::Transient)
        );
        assert_eq!(
            err.message(),
            "payments API answered 200 OK with a body larger than 64 bytes"
        );
        for (code, kind, class) in [
            (422, "downstream_key_reused", ErrorClass::Permanent),
            (400, "downstream_rejected", ErrorClass::Permanent),
            (409, "downstream_in_flight", ErrorClass::Transient),
            (429, "downstream_unavailable", ErrorClass::Transient),
            (503, "downstream_unavailable", ErrorClass::Transient),
        ] {
            let err = over_cap(API, status(code), 64, later);
            assert_eq!((err.kind(), err.class()), (kind, class), "{code}");
            let kept = (class == ErrorClass::Transient).then_some(at(2000));
            assert_eq!(err.retry_not_before(), kept, "{code}");
            assert!(
                err.message().ends_with("with a body larger than 64 bytes"),
                "{}",
                err.message()
            );
        }
    }

    /// An error's message goes to the logs and the DLQ's context: it carries the status and the API's error code,
    /// never the text the API sent back (which may echo the request: a card, a customer).
    #[test]
    fn an_error_carries_the_status_and_code_never_the_response_text() {
        let echo =
            br#"{"error":"card_declined","message":"card 4111111111111111 of cus-7 declined"}"#;
        let err = classify(API, status(402), echo, None).expect_err("declined");
        assert_eq!(
            err.message(),
            "payments API answered 402 Payment Required (error code card_declined)"
        );
        let odd = classify(
            API,
            status(503),
            br#"{"error":"4111 1111 1111 1111"}"#,
            None,
        )
        .expect_err("503");
        assert_eq!(
            odd.message(),
            "payments API answered 503 Service Unavailable",
            "a code that is not a code is left out"
        );
        let long = format!(r#"{{"error":"{}"}}"#, "a".repeat(65));
        assert_eq!(error_code(long.as_bytes()), None, "too long for a code");
        assert_eq!(error_code(b"card_declined"), None, "not JSON");
        assert_eq!(error_code(br#"{"error":7}"#), None, "not a string");
        assert_eq!(
            error_code(br#"{"error":"key.reused-again"}"#).as_deref(),
            Some("key.reused-again")
        );
        assert_eq!(
            error_code(br#"{"error":"code4111"}"#),
            None,
            "no digits: a number may be a card's"
        );
    }

    /// The client keeps the call clear of the idempotency layer's own reserve: the completion that follows the call
    /// needs time of its own before the deadline.
    #[test]
    fn the_default_reserve_leaves_the_completion_its_own_time() {
        let completion = sqsafe_idempotency::CompletionRetry::default().reserve;
        assert!(super::super::DEFAULT_DEADLINE_RESERVE > completion);
    }
}
