#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod check;
mod cli;
mod clock;
mod consumer_templates;
mod error;
mod inspect;
mod letter;
mod new_api;
mod queue;
mod redrive;
mod scaffold;
mod scan;
mod setup;
mod time;

pub use check::{CheckArgs, run_check};
pub use cli::{
    Cli, Command, DlqCommand, InspectArgs, NewApiArgs, NewCommand, NewConsumerArgs, RedriveArgs,
    ScanArgs, Status, run, run_new,
};
pub use clock::{Clock, SystemClock};
pub use error::Error;
pub use inspect::{InspectOptions, KindGroup, Listed, Report, inspect};
pub use letter::{AgeFrom, DeadLetter, DlqCopy, Entry, NO_CONTEXT};
pub use new_api::{API_DEPENDENCIES, ApiSpec, generate_api};
pub use redrive::{Line, Outcome, RedriveOptions, RedriveReport, redrive};
pub use scaffold::{
    ConsumerEnvelope, ConsumerSource, Generated, OUTPUTS_MARKER, Project, RESOURCES_MARKER,
    ScaffoldError, Spec, add_to_template, generate,
};
pub use scan::{ScanOptions, Scanned, Stopped, scan};
pub use setup::check_aws;
pub use time::{human_duration, parse_duration};
