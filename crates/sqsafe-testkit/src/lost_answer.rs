use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::client::orchestrator::{HttpResponse, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;

const INTERNAL_ERROR: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost (test)"}"#;

/// Makes a write land on the server and its answer get lost: the server applied the request, the client sees
/// `500 InternalServerError` and its SDK retries the same request, which then meets the write's own result. This is
/// the ambiguous write a real region produces (a timeout or a 5xx after the write was applied).
///
/// Install it with the service config builder's `.interceptor(lost.clone())`, then [`arm`](Self::arm) it.
#[derive(Debug, Clone, Default)]
pub struct LostAnswer(Arc<Mutex<Vec<String>>>);

impl LostAnswer {
    /// Loses the answer of the next successful request of `operation` (e.g. `PutItem`); arm several times for more.
    pub fn arm(&self, operation: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(operation.to_owned());
    }

    /// Operations armed but not yet met.
    pub fn pending(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Intercept for LostAnswer {
    fn name(&self) -> &'static str {
        "LostAnswer"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(operation) = cfg.load::<Metadata>().map(|m| m.name().to_owned()) else {
            return Ok(());
        };
        // Only a request the server applied (2xx) can have its answer lost in the sense that matters here.
        if !context.response().status().is_success() {
            return Ok(());
        }
        let mut armed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = armed.iter().position(|o| *o == operation) {
            armed.remove(i);
            let mut lost = HttpResponse::new(
                StatusCode::try_from(500u16).map_err(|e| BoxError::from(e.to_string()))?,
                SdkBody::from(INTERNAL_ERROR),
            );
            lost.headers_mut()
                .insert("content-type", "application/x-amz-json-1.0");
            *context.response_mut() = lost;
        }
        Ok(())
    }
}
