use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall-clock time, injected so that tests control expiry and leases without sleeping.
///
/// Closures `Fn() -> SystemTime` are clocks too.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

impl<F> Clock for F
where
    F: Fn() -> SystemTime + Send + Sync + 'static,
{
    fn now(&self) -> SystemTime {
        self()
    }
}

/// The system's clock. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `epoch_millis` milliseconds after the Unix epoch.
    pub fn at_millis(epoch_millis: u64) -> Self {
        Self {
            millis: Arc::new(AtomicU64::new(epoch_millis)),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.millis.fetch_add(duration_millis(by), Ordering::SeqCst);
    }

    /// Sets the clock to `epoch_millis`.
    pub fn set_millis(&self, epoch_millis: u64) {
        self.millis.store(epoch_millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.millis.load(Ordering::SeqCst))
    }
}

/// Source of claim tokens: a fresh, unguessable id per claim attempt. Closures `Fn() -> String` are token sources too.
pub trait TokenSource: Send + Sync + 'static {
    /// A new token.
    fn token(&self) -> String;
}

impl<F> TokenSource for F
where
    F: Fn() -> String + Send + Sync + 'static,
{
    fn token(&self) -> String {
        self()
    }
}

/// Random version-4 UUIDs. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomTokens;

impl TokenSource for RandomTokens {
    fn token(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

pub(crate) fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(duration_millis)
        .unwrap_or(0)
}

#[cfg(feature = "dynamodb")]
pub(crate) fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

pub(crate) fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
