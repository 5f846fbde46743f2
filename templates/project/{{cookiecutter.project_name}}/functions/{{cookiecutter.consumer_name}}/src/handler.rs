//! `{{ cookiecutter.consumer_name }}`: the payload, the intent that keys it, and the effect: one call to the API at `API_URL`.

use serde::{Deserialize, Serialize};
use sqsafe::http::HttpClient;
use sqsafe::{Consumer, Context, Intent, RecordError, Setup};

/// The event, versioned by its `version` tag: a body that does not parse, or an unknown version, is a permanent
/// `bad_payload` error before any effect.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "version")]
pub enum {{ cookiecutter.__consumer_pascal }}Requested {
    /// Version 1.
    #[serde(rename = "1")]
    V1({{ cookiecutter.__consumer_pascal }}V1),
}

/// Version 1 of the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct {{ cookiecutter.__consumer_pascal }}V1 {
    /// The tenant, as verified by the publisher.
    pub tenant: String,
    /// The id that names the intent: the same on every redelivery and every republish.
    pub id: String,
    /// What the effect is about.
    pub amount: u64,
}

/// What the effect returns: kept with the idempotency record and replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The intent's id.
    pub id: String,
    /// What the API answered (its JSON body).
    pub answer: serde_json::Value,
}

/// The consumer: a client of the API its effect calls, built once per process.
#[derive(Debug)]
pub struct {{ cookiecutter.__consumer_pascal }} {
    api: HttpClient,
}

impl Consumer for {{ cookiecutter.__consumer_pascal }} {
    const NAME: &'static str = "{{ cookiecutter.consumer_name }}";
    const EFFECT_VERSION: u32 = 1;
    const INTENT_FIELDS: &'static [&'static str] = &["/tenant", "/id", "/amount"];
    type Payload = {{ cookiecutter.__consumer_pascal }}Requested;
    type Output = Applied;

    /// `API_URL` (required, `http(s)://`): the template's `{{ cookiecutter.__consumer_pascal }}ApiUrl`. Read settings of your own with
    /// `setup.env.required("NAME")?`, build AWS clients from `setup.aws`.
    fn new(setup: &Setup) -> Result<Self, sqsafe::Error> {
        let api = HttpClient::builder(setup.env.url("API_URL")?)
            .name("{{ cookiecutter.consumer_name }} API")
            .build()?;
        Ok(Self { api })
    }

    fn intent(payload: &{{ cookiecutter.__consumer_pascal }}Requested) -> Intent {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        Intent::new(&p.tenant, "{{ cookiecutter.consumer_name }}", &p.id)
    }

    fn validate(payload: &{{ cookiecutter.__consumer_pascal }}Requested) -> Result<(), RecordError> {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        if p.amount == 0 {
            return Err(RecordError::permanent(
                "invalid_{{ cookiecutter.__consumer_snake }}",
                "amount must be positive",
            ));
        }
        Ok(())
    }

    async fn apply(
        &self,
        payload: {{ cookiecutter.__consumer_pascal }}Requested,
        cx: &Context<'_>,
    ) -> Result<Applied, RecordError> {
        let {{ cookiecutter.__consumer_pascal }}Requested::V1(p) = payload;
        // One POST carrying `Idempotency-Key: cx.downstream_key()` (the same on every redelivery) and the correlation
        // id, bounded by the invocation's deadline. `?` keeps the answer's meaning: 5xx, 408, 425, 429, 409 and
        // timeouts bring the record back, any other 4xx sends it to the DLQ (see `sqsafe::http`).
        let answer = self.api.post_json("/{{ cookiecutter.consumer_name }}", &p, cx).await?.json()?;
        tracing::info!(id = %p.id, amount = p.amount, "{{ cookiecutter.consumer_name }} applied");
        Ok(Applied { id: p.id, answer })
    }
}
