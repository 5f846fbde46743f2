//! HTTP API functions (`sqsafe new api`): api-function. Their table grant is idempotency-leading-keys' and
//! grant-only-what-is-used's, their errors alarm alarm-function-errors', as for every function.

use sqsafe_telemetry::api_metrics::{API_DIMENSION, RequestOutcome};

use super::alarms::dimension;
use super::template::{get, is_only, is_str, refs, show};
use super::{Checker, Consumer};

impl Checker<'_> {
    /// api-function, for a function with an HttpApi event.
    pub(super) fn check_api(&mut self, c: &Consumer) {
        let f = c.name();
        let event = c.api.as_ref();
        let api_ref = get(event, "ApiId");
        let apis: Vec<String> = refs(api_ref)
            .into_iter()
            .filter(|x| self.t.is_type(x, "AWS::Serverless::HttpApi"))
            .collect();
        let [api] = apis.as_slice() else {
            self.fail(
                "api-function",
                f,
                format!(
                    "its HttpApi event's ApiId is {}, not an AWS::Serverless::HttpApi of this template (SAM's \
                     implicit API has no authorizer and no alarm)",
                    show(api_ref)
                ),
            );
            return;
        };
        let event_authorizer = get(get(event, "Auth"), "Authorizer");
        let default_authorizer = get(get(self.t.props(api), "Auth"), "DefaultAuthorizer");
        let authorizer = event_authorizer.or(default_authorizer);
        if authorizer.is_none() || is_str(authorizer, "NONE") {
            self.fail(
                "api-function",
                f,
                format!(
                    "its route on {api} needs no authorizer ({}): the idempotency layer keeps keys per caller, and \
                     an open route has none (every guarded request answered 401); set the API's \
                     Auth.DefaultAuthorizer (AWS_IAM, or a JWT authorizer)",
                    show(authorizer)
                ),
            );
        }
        let tables = refs(c.var("IDEMPOTENCY_TABLE"));
        if !tables.iter().any(|t| self.is_table(t)) {
            self.fail(
                "api-function",
                f,
                format!(
                    "IDEMPOTENCY_TABLE is {}, not a table of this template: the layer keeps its records there",
                    show(c.var("IDEMPOTENCY_TABLE"))
                ),
            );
        }
        let alarms: Vec<String> = self
            .alarms
            .iter()
            .filter(|a| {
                let ap = self.t.props(a);
                is_str(get(ap, "Namespace"), "AWS/ApiGateway")
                    && is_str(get(ap, "MetricName"), "5xx")
                    && is_only(&refs(dimension(get(ap, "Dimensions"), "ApiId")), api)
            })
            .cloned()
            .collect();
        if alarms.is_empty() {
            self.fail(
                "api-function",
                api.as_str(),
                "no alarm on its AWS/ApiGateway 5xx (ApiId dimension): add one (Sum > 0, notifying an SNS topic)",
            );
        }
        for a in alarms {
            self.require_notifies("api-function", &a);
        }
        self.check_api_store_failed(c);
    }

    /// api-function: an alarm on the layer's `RequestsStoreFailed` (namespace sqsafe, `api` = the function's binary,
    /// the name the generated handler gives its records): the one outcome that can let a handler run twice.
    fn check_api_store_failed(&mut self, c: &Consumer) {
        let f = c.name();
        let binary = self.t.binary(f);
        let metric = RequestOutcome::StoreFailed.metric_name();
        let alarms: Vec<String> = self
            .alarms
            .iter()
            .filter(|a| {
                let ap = self.t.props(a);
                is_str(get(ap, "Namespace"), "sqsafe")
                    && is_str(get(ap, "MetricName"), metric)
                    && binary
                        .as_deref()
                        .is_some_and(|b| is_str(dimension(get(ap, "Dimensions"), API_DIMENSION), b))
            })
            .cloned()
            .collect();
        if alarms.is_empty() {
            self.fail(
                "api-function",
                f,
                format!(
                    "no alarm on sqsafe {metric} ({API_DIMENSION} = {}): a request whose answer could not be stored \
                     may run its handler again, unseen; add one (Sum > 0, notifying an SNS topic)",
                    binary.as_deref().unwrap_or("unset")
                ),
            );
        }
        for a in alarms {
            self.require_notifies("api-function", &a);
        }
    }
}
