//! The choices a harness offers beyond the template: what a test changes on purpose.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::PathBuf;

use sqsafe::Consumer;

use super::{Harness, HarnessError};

/// Builds a [`Harness`]: from [`Harness::builder`].
///
/// # Default
/// The project's template.yaml, its parameters and environment as they are, no fake API, the local AWS's DynamoDB
/// client, `events/<NAME>.json` as the sample.
#[must_use = "a builder does nothing until it is started"]
pub struct HarnessBuilder<C> {
    pub(super) fake_api: Option<String>,
    pub(super) parameters: BTreeMap<String, String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) dynamodb: Option<aws_sdk_dynamodb::Client>,
    pub(super) sample: Option<String>,
    pub(super) template: Option<PathBuf>,
    consumer: PhantomData<fn() -> C>,
}

impl<C> std::fmt::Debug for HarnessBuilder<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessBuilder")
            .field("fake_api", &self.fake_api)
            .field("parameters", &self.parameters)
            .field("env", &self.env)
            .field("dynamodb", &self.dynamodb.is_some())
            .field("sample", &self.sample)
            .field("template", &self.template)
            .finish()
    }
}

impl<C: Consumer> HarnessBuilder<C> {
    pub(super) fn new() -> Self {
        Self {
            fake_api: None,
            parameters: BTreeMap::new(),
            env: Vec::new(),
            dynamodb: None,
            sample: None,
            template: None,
            consumer: PhantomData,
        }
    }

    /// Starts a [`FakeDownstream`](sqsafe_testkit::FakeDownstream) ([`Harness::api`]) and gives its URL to the
    /// template's parameter `parameter`, which the function's environment must refer to.
    pub fn fake_api(mut self, parameter: &str) -> Self {
        self.fake_api = Some(parameter.to_owned());
        self
    }

    /// Gives the template's parameter `name` the value `value` (an API of the test's own, for example).
    pub fn parameter(mut self, name: &str, value: impl Into<String>) -> Self {
        self.parameters.insert(name.to_owned(), value.into());
        self
    }

    /// Sets the environment variable `name` to `value` over what the template sets (a setting under test).
    pub fn env(mut self, name: &str, value: impl Into<String>) -> Self {
        self.env.push((name.to_owned(), value.into()));
        self
    }

    /// The DynamoDB client the consumer and the harness's reads use (a proxy's, or one whose requests are counted);
    /// the tables are created through it too.
    pub fn dynamodb(mut self, client: aws_sdk_dynamodb::Client) -> Self {
        self.dynamodb = Some(client);
        self
    }

    /// `events/<file>` as the sample event instead of `events/<NAME>.json`.
    pub fn sample(mut self, file: &str) -> Self {
        self.sample = Some(file.to_owned());
        self
    }

    /// The SAM template at `path` instead of the project's template.yaml ([`crate::stack::template_path`]).
    pub fn template(mut self, path: impl Into<PathBuf>) -> Self {
        self.template = Some(path.into());
        self
    }

    /// Creates the resources and builds the consumer (see [`Harness::start`]).
    pub async fn start(self) -> Result<Harness<C>, HarnessError> {
        Harness::create(self).await
    }
}
