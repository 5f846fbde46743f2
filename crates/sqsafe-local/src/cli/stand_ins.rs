//! Local stand-ins for the APIs a template's functions call. A consumer made by `sqsafe new consumer` calls the API
//! at its `API_URL`, the template parameter `<Consumer>ApiUrl`, which has no Default (a deploy must name the real
//! API). For `up`, each such parameter (named `*ApiUrl`, used by a function's environment, given no value by
//! `--parameter`) is given the URL of a fake API on loopback instead: it answers every call
//! with `200` and `{"call": N, "idempotency_key": "<key>"}`, and `up` prints the calls it received per
//! `Idempotency-Key` when it stops. `--parameter NAME=URL` points the function at a real one instead.

use std::collections::BTreeMap;
use std::sync::Arc;

use sqsafe_testkit::FakeDownstream;

use crate::stack::TemplateSpec;

/// The ending of a parameter's name that makes it an API's URL.
pub(super) const SUFFIX: &str = "ApiUrl";

/// The fake APIs `up` runs, one per parameter.
pub(super) struct StandIns {
    apis: Vec<(String, Arc<FakeDownstream>)>,
}

/// The parameters a stand-in is started for: each `*ApiUrl` parameter that a function's environment uses with no
/// value from the template's Default or from `given`, sorted.
pub(super) fn needed(spec: &TemplateSpec, given: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<String> = spec
        .unset_parameters(given)
        .into_iter()
        .map(|u| u.parameter)
        .filter(|name| name.len() > SUFFIX.len() && name.ends_with(SUFFIX))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl StandIns {
    /// Starts a fake API for each of `names` and gives its URL as that parameter in `given`.
    pub(super) async fn start(
        names: &[String],
        given: &mut BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let mut apis = Vec::with_capacity(names.len());
        for name in names {
            let api = FakeDownstream::try_start()
                .await
                .map_err(|e| format!("a local stand-in for {name}: {e}"))?;
            given.insert(name.clone(), api.url());
            apis.push((name.clone(), Arc::new(api)));
        }
        Ok(Self { apis })
    }

    pub(super) fn print_endpoints(&self) {
        for (name, api) in &self.apis {
            println!(
                "{name:<16} {}  (a local stand-in: answers 200 to every call; --parameter {name}=URL for a real one)",
                api.url()
            );
        }
    }

    /// A counter of the calls received by the stand-ins a function with environment `env` calls (those whose URL
    /// is one of its values); `None` when it calls none.
    pub(super) fn calls_counter(
        &self,
        env: &[(String, String)],
    ) -> Option<impl Fn() -> usize + Send + Sync + 'static> {
        let apis: Vec<Arc<FakeDownstream>> = self
            .apis
            .iter()
            .filter(|(_, api)| env.iter().any(|(_, value)| *value == api.url()))
            .map(|(_, api)| Arc::clone(api))
            .collect();
        (!apis.is_empty()).then_some(move || apis.iter().map(|api| api.calls().len()).sum())
    }

    /// What each stand-in received, one line per API.
    pub(super) fn print_calls(&self) {
        for (name, api) in &self.apis {
            println!("{name}: {}", summary(api.calls().len(), &api.effects()));
        }
    }
}

/// `3 calls, 2 keys (k1 2, k2 1)`: how many calls each `Idempotency-Key` made.
fn summary(calls: usize, per_key: &BTreeMap<String, usize>) -> String {
    let keys: Vec<String> = per_key
        .iter()
        .map(|(key, n)| {
            let key = if key.is_empty() { "(no key)" } else { key };
            format!("{key} {n}")
        })
        .collect();
    format!(
        "{calls} call{}, {} key{}{}",
        if calls == 1 { "" } else { "s" },
        per_key.len(),
        if per_key.len() == 1 { "" } else { "s" },
        if keys.is_empty() {
            String::new()
        } else {
            format!(" ({})", keys.join(", "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TemplateSpec {
        TemplateSpec::parse(
            r#"
Parameters:
  SendInvoiceApiUrl: {Type: String}
  PricesApiUrl: {Type: String, Default: "https://prices.example"}
  ApiUrl: {Type: String, Default: x}
  UnusedApiUrl: {Type: String}
  TableName: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: send-invoice}}
    Properties:
      Environment:
        Variables:
          API_URL: !Ref SendInvoiceApiUrl
          PRICES_API_URL: !Ref PricesApiUrl
          TABLE: !Ref TableName
      Events: {Sqs: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}}
"#,
        )
        .expect("template")
    }

    #[test]
    fn only_unset_api_urls_that_a_function_uses_get_a_stand_in() {
        let spec = spec();
        let none = BTreeMap::new();
        assert_eq!(
            needed(&spec, &none),
            ["SendInvoiceApiUrl"],
            "a Default, an unused parameter and one not named *ApiUrl get none"
        );
        let given = BTreeMap::from([(
            "SendInvoiceApiUrl".to_owned(),
            "http://127.0.0.1:9".to_owned(),
        )]);
        assert_eq!(needed(&spec, &given), Vec::<String>::new());
    }

    #[test]
    fn the_summary_counts_calls_per_key() {
        assert_eq!(summary(0, &BTreeMap::new()), "0 calls, 0 keys");
        let per_key = BTreeMap::from([("k1".to_owned(), 2), (String::new(), 1)]);
        assert_eq!(summary(3, &per_key), "3 calls, 2 keys ((no key) 1, k1 2)");
        assert_eq!(
            summary(1, &BTreeMap::from([("k".to_owned(), 1)])),
            "1 call, 1 key (k 1)"
        );
    }

    #[tokio::test]
    async fn a_stand_in_is_given_as_the_parameter_and_answers() {
        let mut given = BTreeMap::new();
        let stand_ins = StandIns::start(&["SendInvoiceApiUrl".to_owned()], &mut given)
            .await
            .expect("started");
        let url = given.get("SendInvoiceApiUrl").expect("given").clone();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let (_, api) = &stand_ins.apis[0];
        assert_eq!(api.url(), url);
        assert!(api.calls().is_empty());
        let env = [("API_URL".to_owned(), url.clone())];
        let count = stand_ins
            .calls_counter(&env)
            .expect("its function calls it");
        assert_eq!(count(), 0);
        // One plain HTTP/1.1 call, answered before the connection closes.
        let mut stream = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
            .await
            .expect("connect");
        let request =
            "POST /v1/things HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
            .await
            .expect("send");
        let mut answer = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut answer)
            .await
            .expect("answer");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert_eq!(count(), 1);
        let other = [("API_URL".to_owned(), "http://127.0.0.1:9".to_owned())];
        assert!(stand_ins.calls_counter(&other).is_none());
    }
}
