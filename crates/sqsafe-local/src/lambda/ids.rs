//! Names Lambda gives things: request ids, trace headers, ARNs, log streams, and the per-process crash seed.
//!
//! Nothing here is random: every id is derived from the instance id and a counter, so two runs of a test name the
//! same invocations the same way, and a log line says which instance and which invocation it came from.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The account in every ARN; the one AWS uses in its documentation examples.
const ACCOUNT: &str = "123456789012";

/// `arn:aws:lambda:<region>:123456789012:function:<name>`.
pub(crate) fn function_arn(region: &str, name: &str) -> String {
    format!("arn:aws:lambda:{region}:{ACCOUNT}:function:{name}")
}

/// A request id shaped like Lambda's (a version 4 UUID) that reads as `<instance>-0000-4000-8000-<invocation>`.
/// Unique within one [`FunctionInstance`](super::FunctionInstance), not across runs.
pub(crate) fn request_id(instance_id: usize, sequence: u64) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        instance_id & 0xffff_ffff,
        sequence & 0xffff_ffff_ffff
    )
}

/// An X-Ray trace header as Lambda passes it: `Root=1-<epoch seconds, 8 hex>-<24 hex>;Parent=<16 hex>;Sampled=0`.
pub(crate) fn trace_id(now: SystemTime, instance_id: usize, sequence: u64) -> String {
    let secs = epoch(now).as_secs() & 0xffff_ffff;
    let instance = instance_id & 0xffff_ffff;
    let parent = mix(sequence ^ ((instance as u64) << 32));
    format!("Root=1-{secs:08x}-{instance:08x}{sequence:016x};Parent={parent:016x};Sampled=0")
}

/// Lambda's log stream name: `YYYY/MM/DD/[$LATEST]<32 hex>`, the hex naming the instance and its cold start.
pub(crate) fn log_stream_name(now: SystemTime, instance_id: usize, cold_start: u64) -> String {
    let days = epoch(now).as_secs() / 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}/{month:02}/{day:02}/[$LATEST]{:08x}{cold_start:024x}",
        instance_id & 0xffff_ffff
    )
}

/// Milliseconds since the Unix epoch, as in `Lambda-Runtime-Deadline-Ms`.
pub(crate) fn epoch_ms(at: SystemTime) -> u128 {
    epoch(at).as_millis()
}

/// The crash seed given to the `cold_start`-th process (1 for the first) of instance `instance_id`, when the
/// function's environment sets `SQSAFE_CRASH_SEED=base`.
///
/// ```text
/// s = mix(base ^ instance_id)
/// seed = mix(s ^ cold_start)
/// ```
///
/// `mix(x)` is the first output of [`fastrand::Rng`] seeded with `x`. So a restarted process draws new crash
/// decisions instead of crashing at the same record again, different instances draw different ones, and the whole
/// run is still replayed by the same base seed.
pub fn derive_crash_seed(base: u64, instance_id: usize, cold_start: u64) -> u64 {
    mix(mix(base ^ instance_id as u64) ^ cold_start)
}

/// Scrambles `x` into a well-spread 64-bit value, the same one for the same `x`.
fn mix(x: u64) -> u64 {
    fastrand::Rng::with_seed(x).u64(..)
}

/// A clock set before 1970 counts as 1970: the ids only need to be well-formed.
fn epoch(at: SystemTime) -> Duration {
    at.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian; Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn request_ids_are_uuid_shaped_and_name_instance_and_invocation() {
        let id = request_id(3, 18);
        assert_eq!(id, "00000003-0000-4000-8000-000000000012");
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_ne!(request_id(3, 18), request_id(4, 18));
    }

    #[test]
    fn trace_ids_look_like_x_ray_headers() {
        let trace = trace_id(at(1_542_409_706), 2, 7);
        let (root, rest) = trace.split_once(';').expect("three parts");
        let root = root.strip_prefix("Root=1-").expect("Root=1-");
        let (secs, unique) = root.split_once('-').expect("epoch-unique");
        assert_eq!(secs, format!("{:08x}", 1_542_409_706));
        assert_eq!(unique.len(), 24);
        assert!(unique.chars().all(|c| c.is_ascii_hexdigit()));
        let (parent, sampled) = rest.split_once(';').expect("parent;sampled");
        assert_eq!(parent.len(), "Parent=".len() + 16);
        assert_eq!(sampled, "Sampled=0");
    }

    #[test]
    fn log_stream_names_carry_the_utc_date() {
        // 2024-02-29T12:00:00Z: a leap day.
        assert_eq!(
            log_stream_name(at(1_709_208_000), 1, 2),
            "2024/02/29/[$LATEST]00000001000000000000000000000002"
        );
        assert!(log_stream_name(at(0), 0, 1).starts_with("1970/01/01/"));
        assert!(log_stream_name(at(951_782_400), 0, 1).starts_with("2000/02/29/"));
        assert!(log_stream_name(at(4_107_542_399), 0, 1).starts_with("2100/02/28/"));
    }

    #[test]
    fn crash_seeds_differ_per_process_and_per_instance_and_are_stable() {
        let seeds: Vec<u64> = (1..=3).map(|n| derive_crash_seed(42, 0, n)).collect();
        assert_ne!(seeds[0], seeds[1]);
        assert_ne!(seeds[1], seeds[2]);
        assert_ne!(derive_crash_seed(42, 0, 1), derive_crash_seed(42, 1, 1));
        assert_ne!(derive_crash_seed(42, 0, 1), derive_crash_seed(43, 0, 1));
        assert_eq!(derive_crash_seed(42, 0, 1), derive_crash_seed(42, 0, 1));
        // Pinned, so a change to the derivation is a visible decision (old runs no longer replay).
        assert_eq!(derive_crash_seed(42, 0, 1), 17_753_518_869_653_443_198);
    }

    #[test]
    fn arns_name_the_region_and_function() {
        assert_eq!(
            function_arn("us-east-1", "charge-payment"),
            "arn:aws:lambda:us-east-1:123456789012:function:charge-payment"
        );
    }
}
