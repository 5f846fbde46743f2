//! What `redrive` did, a line per dead letter.

use std::io::Write;

/// What happened to one dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Sent to the source queue; its DLQ copies deleted, except those in `not_deleted` (DLQ message id, error).
    Moved {
        /// The new message's id in the source queue.
        new_message_id: String,
        /// DLQ copies that could not be deleted: they stay in the DLQ, and a later redrive sends a duplicate.
        not_deleted: Vec<(String, String)>,
    },
    /// A dry run would send it.
    WouldMove,
    /// Not moved, by rule: why.
    Refused(String),
    /// Not moved, because something failed: what. It stays in the DLQ.
    Failed(String),
}

/// One dead letter considered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The message id the consumer saw.
    pub original_message_id: String,
    /// Its error kind.
    pub kind: String,
    /// The queue it goes to (name), when known.
    pub target: Option<String>,
    /// Its copies in the DLQ.
    pub copies: usize,
    /// What happened.
    pub outcome: Outcome,
}

impl Line {
    pub(super) fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let (id, kind) = (&self.original_message_id, &self.kind);
        let to = self.target.as_deref().unwrap_or("?");
        match &self.outcome {
            Outcome::Moved {
                new_message_id,
                not_deleted,
            } => {
                write!(out, "moved {id} {kind} -> {to} as {new_message_id}")?;
                let deleted = self.copies - not_deleted.len();
                if deleted > 1 {
                    write!(out, " ({deleted} DLQ copies deleted)")?;
                }
                for (copy, error) in not_deleted {
                    write!(
                        out,
                        "; DLQ copy {copy} was NOT deleted ({error}): it stays in the DLQ, and a later redrive sends \
                         a duplicate, which the consumer replays"
                    )?;
                }
                writeln!(out)
            }
            Outcome::WouldMove => {
                write!(out, "would move {id} {kind} -> {to}")?;
                if self.copies > 1 {
                    write!(out, " ({} DLQ copies)", self.copies)?;
                }
                writeln!(out)
            }
            Outcome::Refused(why) => writeln!(out, "refused {id} {kind}: {why}"),
            Outcome::Failed(why) => writeln!(out, "failed {id} {kind}: {why}; it stays in the DLQ"),
        }
    }
}

/// What a redrive did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveReport {
    /// The DLQ's URL.
    pub queue: String,
    /// Every dead letter considered, in order.
    pub lines: Vec<Line>,
    /// Dead letters of the kinds asked for that were not considered because `max` was reached.
    pub left: usize,
    /// Dead letters in the DLQ (as far as the scan went), of any kind.
    pub dead_letters: usize,
    /// Messages made visible again.
    pub restored: usize,
    /// Messages that could not be made visible again at once.
    pub not_restored: usize,
    /// A dry run.
    pub dry_run: bool,
}

impl RedriveReport {
    /// Dead letters with the outcome `f` picks.
    pub fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.lines.iter().filter(|l| f(&l.outcome)).count()
    }

    /// Dead letters sent (or, in a dry run, that would be).
    pub fn moved(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Moved { .. } | Outcome::WouldMove))
    }

    /// Dead letters refused.
    pub fn refused(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Refused(_)))
    }

    /// Dead letters that failed to move, or moved without every copy deleted.
    pub fn failed(&self) -> usize {
        self.count(|o| match o {
            Outcome::Failed(_) => true,
            Outcome::Moved { not_deleted, .. } => !not_deleted.is_empty(),
            _ => false,
        })
    }

    pub(super) fn write_summary(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let considered = self.lines.len();
        if self.dry_run {
            write!(
                out,
                "summary (dry run): would move {}, refused {}, failed {} of {considered} dead letter{} considered; \
                 nothing was sent or deleted",
                self.moved(),
                self.refused(),
                self.failed(),
                if considered == 1 { "" } else { "s" }
            )?;
        } else {
            write!(
                out,
                "summary: moved {}, refused {}, failed {} of {considered} dead letter{} considered",
                self.moved(),
                self.refused(),
                self.failed(),
                if considered == 1 { "" } else { "s" }
            )?;
        }
        if self.left > 0 {
            write!(
                out,
                "; {} more of the kinds asked for left for a later run (--max)",
                self.left
            )?;
        }
        writeln!(out)?;
        write!(out, "left in the DLQ: {} made visible again", self.restored)?;
        if self.not_restored > 0 {
            write!(
                out,
                ", {} not (they come back after the visibility timeout)",
                self.not_restored
            )?;
        }
        writeln!(out)
    }
}
