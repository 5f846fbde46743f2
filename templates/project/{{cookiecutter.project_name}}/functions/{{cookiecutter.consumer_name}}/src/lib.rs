//! The `{{ cookiecutter.consumer_name }}` consumer. See the README for what it does and how to run it locally.
#![forbid(unsafe_code)]

mod handler;

pub use handler::*;
