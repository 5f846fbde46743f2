//! The template parameters `up` gives the functions: `--parameter NAME=VALUE`, checked against the template before
//! anything starts.

use std::collections::BTreeMap;

use crate::stack::TemplateSpec;

/// Checks the given parameters against the template: each is declared, and every parameter without a Default that
/// a function's environment uses is given (`supplied`: those `up` gives itself, a local stand-in's URL for an API).
/// One line that says what to pass otherwise.
pub(super) fn check(
    spec: &TemplateSpec,
    given: &BTreeMap<String, String>,
    supplied: &[&str],
) -> Result<(), String> {
    if let Some(unknown) = given.keys().find(|name| !spec.declares_parameter(name)) {
        return Err(format!(
            "--parameter {unknown}: the template declares no such parameter"
        ));
    }
    let mut known = given.clone();
    known.extend(
        supplied
            .iter()
            .map(|name| ((*name).to_owned(), String::new())),
    );
    let unset = spec.unset_parameters(&known);
    if unset.is_empty() {
        return Ok(());
    }
    let uses: Vec<String> = unset
        .iter()
        .map(|u| format!("{}'s {} is !Ref {}", u.binary, u.variable, u.parameter))
        .collect();
    let mut names: Vec<&str> = unset.iter().map(|u| u.parameter.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let pass: Vec<String> = names
        .iter()
        .map(|n| format!("--parameter {n}=VALUE"))
        .collect();
    Err(format!(
        "{}: {} without a Default in the template; pass {}",
        uses.join(", "),
        if names.len() == 1 {
            "a parameter"
        } else {
            "parameters"
        },
        pass.join(" "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TemplateSpec {
        TemplateSpec::parse(
            r#"
Parameters:
  PaymentsApiUrl: {Type: String}
  Region: {Type: String, Default: eu-west-1}
Resources:
  Queue: {Type: AWS::SQS::Queue}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: charge-payment}}
    Properties:
      Environment: {Variables: {PAYMENTS_API_URL: !Ref PaymentsApiUrl}}
      Events: {Sqs: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}}
"#,
        )
        .expect("parses")
    }

    #[test]
    fn an_unset_parameter_is_named_with_what_to_pass() {
        let message = check(&spec(), &BTreeMap::new(), &[]).expect_err("unset");
        assert!(
            message.starts_with("charge-payment's PAYMENTS_API_URL is !Ref PaymentsApiUrl: ")
                && message.contains("pass --parameter PaymentsApiUrl=VALUE")
                && !message.contains('\n'),
            "{message}"
        );
        let given =
            BTreeMap::from([("PaymentsApiUrl".to_owned(), "http://127.0.0.1:9".to_owned())]);
        assert_eq!(check(&spec(), &given, &[]), Ok(()));
        assert_eq!(
            check(&spec(), &BTreeMap::new(), &["PaymentsApiUrl"]),
            Ok(())
        );
    }

    #[test]
    fn a_parameter_the_template_does_not_declare_is_refused() {
        let given = BTreeMap::from([("PaymentApiUrl".to_owned(), "x".to_owned())]);
        let message = check(&spec(), &given, &["PaymentsApiUrl"]).expect_err("typo");
        assert!(message.contains("PaymentApiUrl"), "{message}");
        let default = BTreeMap::from([("Region".to_owned(), "us-east-1".to_owned())]);
        assert_eq!(check(&spec(), &default, &["PaymentsApiUrl"]), Ok(()));
    }
}
