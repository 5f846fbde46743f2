//! What `cargo lambda watch` is doing with its function, read from its output line by line.
//!
//! These lines say it: cargo's status lines while it builds (`Compiling sqsafe v0.1.0`, `Blocking waiting for file
//! lock`, `Finished ...`), cargo's `Running `target/debug/NAME`` just before the function's process starts, cargo's
//! `error: could not compile ...` when the build failed, and cargo-lambda's `ERROR command exited code=N` (or
//! `command killed`) when the process ended on its own (a crash, an init error, a build error). The function's own
//! lines (JSON logs) change nothing. Cargo-lambda does not always report a failed build as an exit (a second file
//! event can turn it into its own kill), hence cargo's line. A build begins with cargo's first status line after the
//! function ran, exited or had not started, or with watch's kill of a build under way (`ForceStop`), which watch
//! then begins again.

use std::time::Instant;

/// Cargo's status words that mean a build is under way (cargo right-aligns them to 12 columns).
const BUILD_WORDS: [&str; 8] = [
    "Compiling ",
    "Checking ",
    "Blocking waiting for file lock",
    "Finished `",
    "Fresh ",
    "Locking ",
    "Updating ",
    "Downloaded ",
];
/// What cargo prints when `cargo run` starts the binary.
const RUNNING: &str = "Running `";
/// What cargo prints last when the build failed.
const BUILD_FAILED: &str = "error: could not compile";
/// The ends cargo-lambda reports for the command it runs (its watcher's `ProcessEnd` cases).
const ENDS: [&str; 4] = [
    "command exited",
    "command killed",
    "command stopped",
    "command ended by exception",
];
/// Watch's kill when it notices a save: of the running process or of the build under way (a build and a new start
/// follow).
const FORCE_STOP: &str = "code=ForceStop";
/// Kills that watch itself made: [`FORCE_STOP`], and `Terminate` and `Interrupt` when it shuts down. The function
/// did not end on its own.
const WATCH_OWN_KILLS: [&str; 3] = [FORCE_STOP, "code=Terminate", "code=Interrupt"];

/// Where the function stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `cargo lambda watch` listens; nothing has been started yet (it starts the function on the first invoke).
    Idle,
    /// cargo is building (the first start, or a reload after a saved change).
    Building,
    /// The function's process runs (or is about to: cargo printed `Running`).
    Running,
    /// The process ended on its own and stays down until a saved change makes watch rebuild and restart it.
    Exited,
    /// `cargo lambda watch` itself is gone.
    Stopped,
}

/// The phase, and what led to it.
#[derive(Debug, Clone)]
pub struct Status {
    /// Where the function stands.
    pub phase: Phase,
    /// When this phase began.
    pub since: Instant,
    /// Processes started so far (the first start, then one per reload or restart).
    pub starts: u64,
    /// Builds seen so far: cargo's lines after the function ran, exited or had not started (a build that watch
    /// stopped and began again counts once).
    pub builds: u64,
    /// Cargo's latest status line (`Compiling sqsafe-batch v0.1.0 (...)`), for progress reports.
    pub build_line: Option<String>,
    /// The line that reported the end of the process, while [`Phase::Exited`] (or [`Phase::Stopped`]).
    pub exit: Option<String>,
    /// When the latest build began: its first status line, or watch's kill of the build before it (see
    /// [`Status::after_save`]).
    pub build_began: Option<Instant>,
}

/// Where the function stands with a saved change ([`Status::after_save`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSave {
    /// Nothing to wait for: the process was built by a build begun after the save, or that build failed (it stays
    /// down until the next save), or no process was started yet (the first start builds what is saved), or watch is
    /// gone.
    Ready,
    /// Watch is building, in a build begun after the save.
    Building,
    /// No build begun since the save: watch has not noticed it yet (it does so seconds later; meanwhile a build begun
    /// before the save goes on, and starts the code from before it), or ignores the file.
    Unnoticed,
}

impl Status {
    /// Nothing started yet.
    pub fn new(now: Instant) -> Self {
        Self {
            phase: Phase::Idle,
            since: now,
            starts: 0,
            builds: 0,
            build_line: None,
            exit: None,
            build_began: None,
        }
    }

    /// Whether the function runs what was saved at `saved` (as seen by [`Saves`](super::Saves)).
    ///
    /// A build includes the save when it began after it: watch notices a save seconds later, stops the running
    /// process or the build under way, and begins a new build. Until then a build begun before the save goes on,
    /// prints its status lines and starts its process: those come after the save but have the code from before.
    pub fn after_save(&self, saved: Instant) -> AfterSave {
        let began_since = self.build_began.is_some_and(|at| at >= saved);
        match self.phase {
            Phase::Idle | Phase::Stopped => AfterSave::Ready,
            Phase::Running | Phase::Exited if began_since => AfterSave::Ready,
            Phase::Building if began_since => AfterSave::Building,
            Phase::Running | Phase::Exited | Phase::Building => AfterSave::Unnoticed,
        }
    }

    /// Takes one line of watch's output into account; `true` when the phase changed.
    pub fn observe(&mut self, line: &str, now: Instant) -> bool {
        let text = line.trim();
        if text.starts_with(RUNNING) && line.starts_with(' ') {
            self.starts += 1;
            self.exit = None;
            self.enter(Phase::Running, now);
            return true;
        }
        if line.starts_with(' ') && BUILD_WORDS.iter().any(|w| text.starts_with(w)) {
            self.build_line = Some(text.to_owned());
            if self.phase != Phase::Building {
                self.builds += 1;
                self.build_began = Some(now);
                self.enter(Phase::Building, now);
                return true;
            }
            return false;
        }
        if self.phase == Phase::Building && text.starts_with("ERROR") && text.ends_with(FORCE_STOP)
        {
            // Watch killed the process that ran before this build (logged a throttle late, while the build runs), or
            // this build, which it then began again for a newer save: cargo's lines do not tell the two builds
            // apart. Either way a build began at the kill, and no save that watch acts on came between the kill and
            // this line: watch takes such a save in the same action as the kill, and then logs no kill.
            self.build_began = Some(now);
            return false;
        }
        if line.starts_with(BUILD_FAILED) {
            self.exit = Some(format!("build failed: {text}"));
            self.enter(Phase::Exited, now);
            return true;
        }
        if text.starts_with("ERROR")
            && self.phase != Phase::Exited
            && ENDS.iter().any(|end| text.contains(end))
            && !WATCH_OWN_KILLS.iter().any(|kill| text.ends_with(kill))
        {
            self.exit = Some(text.trim_start_matches("ERROR").trim().to_owned());
            self.enter(Phase::Exited, now);
            return true;
        }
        false
    }

    /// `cargo lambda watch` itself ended (`how`: its exit status).
    pub fn stopped(&mut self, how: String, now: Instant) {
        self.exit = Some(how);
        self.enter(Phase::Stopped, now);
    }

    fn enter(&mut self, phase: Phase, now: Instant) {
        self.phase = phase;
        self.since = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(lines: &[&str]) -> Status {
        let mut status = Status::new(Instant::now());
        for line in lines {
            status.observe(line, Instant::now());
        }
        status
    }

    #[test]
    fn a_first_start_builds_then_runs() {
        let mut status = Status::new(Instant::now());
        assert!(!status.observe(
            " INFO starting Runtime server runtime_addr=127.0.0.1:9000",
            Instant::now()
        ));
        assert_eq!(status.phase, Phase::Idle);
        assert!(status.observe(
            "    Blocking waiting for file lock on artifact directory",
            Instant::now()
        ));
        assert_eq!(status.phase, Phase::Building);
        assert!(!status.observe(
            "   Compiling sqsafe v0.1.0 (/w/crates/sqsafe)",
            Instant::now()
        ));
        assert_eq!(
            status.build_line.as_deref(),
            Some("Compiling sqsafe v0.1.0 (/w/crates/sqsafe)")
        );
        status.observe(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 37.07s",
            Instant::now(),
        );
        assert!(status.observe("     Running `target/debug/charge-payment`", Instant::now()));
        assert_eq!(
            (status.phase, status.starts, status.builds),
            (Phase::Running, 1, 1)
        );
    }

    #[test]
    fn the_function_own_lines_change_nothing() {
        let status = feed(&[
            "     Running `target/debug/charge-payment`",
            r#"{"level":"INFO","message":"Compiling report","body":"Running `x`"}"#,
            "Compiling at column zero is not cargo",
            "probe v1 body=ERROR command exited",
        ]);
        assert_eq!(status.phase, Phase::Running);
        assert_eq!(status.starts, 1);
    }

    #[test]
    fn a_failed_build_is_an_exit_however_watch_reports_it() {
        for end in [
            "ERROR command exited code=101",
            "ERROR command killed code=ForceStop",
        ] {
            let status = feed(&[
                "     Running `target/debug/p`",
                "   Compiling p v0.1.0 (/tmp/p)",
                "error[E0425]: cannot find value `v3` in this scope",
                "error: could not compile `p` (bin \"p\") due to 1 previous error",
                end,
            ]);
            assert_eq!(status.phase, Phase::Exited, "{end}");
            assert_eq!(
                status.exit.as_deref(),
                Some(
                    "build failed: error: could not compile `p` (bin \"p\") due to 1 previous error"
                ),
                "{end}"
            );
        }
    }

    #[test]
    fn a_crash_by_signal_is_an_exit() {
        let status = feed(&[
            "     Running `target/debug/p`",
            "ERROR command killed code=Custom(6)",
        ]);
        assert_eq!(status.phase, Phase::Exited);
    }

    #[test]
    fn an_exit_holds_until_the_next_start() {
        let mut status = feed(&[
            "     Running `target/debug/charge-payment`",
            "Error: Idempotency(Config(\"table name `x` must be 3-255 characters\"))",
            "ERROR command exited code=1",
        ]);
        assert_eq!(status.phase, Phase::Exited);
        assert_eq!(status.exit.as_deref(), Some("command exited code=1"));
        status.observe("   Compiling charge-payment v0.1.0", Instant::now());
        status.observe("     Running `target/debug/charge-payment`", Instant::now());
        assert_eq!(
            (status.phase, status.starts, status.builds),
            (Phase::Running, 2, 1)
        );
        assert_eq!(status.exit, None);
    }

    #[test]
    fn a_save_is_ready_once_a_build_after_it_runs_or_fails() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        assert_eq!(
            status.after_save(at(1)),
            AfterSave::Ready,
            "no process yet: the first start builds what is saved"
        );
        status.observe(
            "    Finished `dev` profile [unoptimized] target(s) in 0.06s",
            at(2),
        );
        status.observe("     Running `target/debug/p`", at(3));
        let saved = at(10);
        assert_eq!(
            status.after_save(saved),
            AfterSave::Unnoticed,
            "the process runs the previous code"
        );
        status.observe(
            r#"{"level":"INFO","message":"   Compiling in the function's own log"}"#,
            at(11),
        );
        assert_eq!(status.after_save(saved), AfterSave::Unnoticed);
        status.observe(
            "    Blocking waiting for file lock on artifact directory",
            at(3000),
        );
        assert_eq!(status.after_save(saved), AfterSave::Building);
        status.observe("ERROR command killed code=ForceStop", at(3001));
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(3002));
        assert_eq!(status.after_save(saved), AfterSave::Building);
        status.observe("     Running `target/debug/p`", at(3600));
        assert_eq!(status.after_save(saved), AfterSave::Ready);
        assert_eq!(
            status.after_save(at(3700)),
            AfterSave::Unnoticed,
            "a later save waits for a build of its own"
        );
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(6000));
        status.observe(
            "error: could not compile `p` (bin \"p\") due to 1 previous error",
            at(6100),
        );
        assert_eq!(
            status.after_save(at(3700)),
            AfterSave::Ready,
            "a build that failed is all a save gets: the process stays down, held, until the next save"
        );
    }

    #[test]
    fn a_build_under_way_at_the_save_is_not_one_after_it() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(1));
        assert_eq!(status.after_save(at(2)), AfterSave::Unnoticed);
        status.observe("     Running `target/debug/p`", at(3));
        assert_eq!(status.after_save(at(2)), AfterSave::Unnoticed);
        let mut stopped = status.clone();
        stopped.stopped("exit status: 1".into(), at(4));
        assert_eq!(
            stopped.after_save(at(2)),
            AfterSave::Ready,
            "nothing to wait for"
        );
    }

    #[test]
    fn a_build_begun_before_the_save_does_not_count_for_it() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(1));
        let saved = at(2);
        // The build begun before the save goes on and starts its process before watch notices the save.
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(3));
        status.observe(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.27s",
            at(4),
        );
        assert_eq!(status.after_save(saved), AfterSave::Unnoticed);
        status.observe("     Running `target/debug/p`", at(5));
        assert_eq!(
            status.after_save(saved),
            AfterSave::Unnoticed,
            "the process runs the code from before the save"
        );
        // Watch notices the save: it stops that process, builds and starts again.
        status.observe(
            "    Blocking waiting for file lock on artifact directory",
            at(3000),
        );
        assert_eq!(status.after_save(saved), AfterSave::Building);
        status.observe("ERROR command killed code=ForceStop", at(3001));
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(3002));
        status.observe(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.27s",
            at(3500),
        );
        assert_eq!(status.after_save(saved), AfterSave::Building);
        status.observe("     Running `target/debug/p`", at(3600));
        assert_eq!(status.after_save(saved), AfterSave::Ready);
    }

    #[test]
    fn a_build_begun_before_the_save_that_fails_after_it_is_not_its_build() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(1));
        status.observe(
            "error: could not compile `p` (bin \"p\") due to 1 previous error",
            at(3),
        );
        assert_eq!(status.phase, Phase::Exited);
        assert_eq!(
            status.after_save(at(2)),
            AfterSave::Unnoticed,
            "the save may fix what failed: watch builds it once it notices"
        );
    }

    #[test]
    fn a_build_that_watch_stops_and_begins_again_begins_at_the_kill() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        status.observe("     Running `target/debug/p`", at(1));
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(1000));
        let saved = at(2000);
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(2500));
        // Watch notices the save while it builds: it kills that build and begins another, whose lines read like
        // the killed one's; the kill is logged (a throttle later) while the new build runs.
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(5000));
        assert_eq!(status.after_save(saved), AfterSave::Unnoticed);
        status.observe("ERROR command killed code=ForceStop", at(8000));
        assert_eq!(status.phase, Phase::Building);
        assert_eq!(status.after_save(saved), AfterSave::Building);
        status.observe(
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 6.27s",
            at(8100),
        );
        status.observe("     Running `target/debug/p`", at(8200));
        assert_eq!(status.after_save(saved), AfterSave::Ready);
        assert_eq!(
            status.after_save(at(8050)),
            AfterSave::Unnoticed,
            "a save after the kill waits for a build of its own"
        );
    }

    #[test]
    fn a_shutdown_kill_while_building_begins_no_build() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut status = Status::new(t0);
        status.observe("   Compiling p v0.1.0 (/tmp/p)", at(1));
        status.observe("ERROR command killed code=Terminate", at(3));
        assert_eq!(status.phase, Phase::Building);
        assert_eq!(status.after_save(at(2)), AfterSave::Unnoticed);
    }

    #[test]
    fn a_reload_is_a_build_then_a_new_start() {
        let status = feed(&[
            "     Running `target/debug/p`",
            "    Blocking waiting for file lock on artifact directory",
            // Watch's own SIGKILL of the old process, logged while the new build runs.
            "ERROR command killed code=ForceStop",
            "   Compiling p v0.1.0 (/tmp/p)",
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.27s",
            "     Running `target/debug/p`",
        ]);
        assert_eq!(
            (status.phase, status.starts, status.builds),
            (Phase::Running, 2, 1)
        );
    }
}
