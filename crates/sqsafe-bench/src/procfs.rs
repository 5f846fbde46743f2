//! CPU time, threads and peak memory of a process, read from `/proc/<pid>`.

use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sample {
    /// User CPU time, all threads (dead ones included).
    pub(crate) user: Duration,
    /// System CPU time, all threads.
    pub(crate) system: Duration,
    /// Threads now.
    pub(crate) threads: u64,
    /// Peak resident set (`VmHWM`), KiB.
    pub(crate) peak_rss_kib: u64,
}

impl Sample {
    /// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`. `tick` is the kernel's clock tick (`getconf CLK_TCK`).
    pub(crate) fn read(pid: u32, tick: Duration) -> std::io::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let (user, system) = cpu_ticks(&stat)
            .ok_or_else(|| std::io::Error::other(format!("unreadable /proc/{pid}/stat")))?;
        let field = |name| status_kib(&status, name).unwrap_or(0);
        Ok(Self {
            user: tick * u32::try_from(user).unwrap_or(u32::MAX),
            system: tick * u32::try_from(system).unwrap_or(u32::MAX),
            threads: field("Threads:"),
            peak_rss_kib: field("VmHWM:"),
        })
    }

    /// CPU used since `earlier`: (user, system).
    pub(crate) fn since(&self, earlier: &Sample) -> (Duration, Duration) {
        (
            self.user.saturating_sub(earlier.user),
            self.system.saturating_sub(earlier.system),
        )
    }
}

/// The kernel's clock tick, the unit of `utime` and `stime`: 10 ms almost everywhere.
pub(crate) fn clock_tick() -> Duration {
    let hz = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|hz| *hz > 0)
        .unwrap_or(100);
    Duration::from_nanos(1_000_000_000 / hz)
}

/// `utime` and `stime` (fields 14 and 15). The command name (field 2) may hold spaces and parentheses, so fields
/// are counted after its closing parenthesis.
fn cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// A number from a `/proc/<pid>/status` line such as `VmHWM: 10240 kB` or `Threads: 3` (tab-separated).
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat =
            "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 37 12 0 0 20 0 3 0 1234 0 0";
        assert_eq!(cpu_ticks(stat), Some((37, 12)));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn status_numbers_are_read_by_name() {
        let status = "Name:\tcharge-payment\nVmHWM:\t   10240 kB\nThreads:\t3\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(10240));
        assert_eq!(status_kib(status, "Threads:"), Some(3));
        assert_eq!(status_kib(status, "VmRSS:"), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let me = Sample::read(std::process::id(), clock_tick()).expect("own /proc entry");
        assert!(me.threads >= 1 && me.peak_rss_kib > 0);
    }
}
