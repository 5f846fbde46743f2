use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::generate::*;
use super::project::*;
use super::spec::*;
use super::template::*;

#[test]
fn names_are_checked_and_derived() {
    let spec = Spec::new("send-invoice", false, false).expect("valid");
    assert_eq!(
        (spec.pascal.as_str(), spec.snake.as_str()),
        ("SendInvoice", "send_invoice")
    );
    for bad in [
        "",
        "x",
        "Send",
        "send_invoice",
        "-send",
        "send-",
        "a--b",
        "9lives",
        "sqsafe-x",
        "xtask",
    ] {
        assert!(Spec::new(bad, false, false).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn the_template_gets_resources_and_outputs_before_the_markers() {
    let template =
        format!("Resources:\n  A: 1\n{RESOURCES_MARKER}\n\nOutputs:\n  B: 2\n{OUTPUTS_MARKER}\n");
    let spec = Spec::new("send-invoice", true, true).expect("valid");
    let out = add_to_template(&template, &spec).expect("added");
    let app = out
        .find("  SendInvoice:\n")
        .expect("the nested application");
    let table = out.find("  SendInvoiceTable:").expect("table");
    let function = out.find("  SendInvoiceFunction:").expect("function");
    let marker = out.find(RESOURCES_MARKER).expect("marker kept");
    let output = out.find("  SendInvoiceQueueUrl:").expect("output");
    assert!(table < app && app < function && function < marker && marker < output);
    assert!(
        out.contains("Location: sqsafe/consumer-fifo.yaml"),
        "a FIFO consumer nests the FIFO child"
    );
    assert!(
        !out.contains("AWS::SQS::Queue") && !out.contains("AWS::CloudWatch::"),
        "the queues, alarms and dashboard are the child's"
    );
    assert!(
        !out.contains("MaximumBatchingWindowInSeconds"),
        "FIFO queues have no batching window"
    );
    assert!(!out.contains("{{"), "every placeholder filled");
    let missing = add_to_template("Resources:\n", &spec).expect_err("no markers");
    assert!(missing.to_string().contains("markers"), "{missing}");
}

/// A scratch workspace with the dependencies a consumer inherits, `extra` appended to its Cargo.toml, and
/// `template` as its template.yaml.
fn scratch_project(name: &str, extra: &str, template: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("sqsafe-new-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).expect("scratch");
    let deps: String = DEPENDENCIES
        .iter()
        .chain(DEV_DEPENDENCIES.iter())
        .map(|d| format!("{d} = \"1\"\n"))
        .collect();
    fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [\"functions/*\"]\n\n[workspace.dependencies]\n{deps}{extra}"
        ),
    )
    .expect("Cargo.toml");
    fs::write(root.join("template.yaml"), template).expect("template");
    root
}

fn markers_only() -> String {
    format!(
        "Parameters:\n  Other:\n    Type: String\n\nResources:\n{RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
    )
}

#[test]
fn a_plain_consumer_gets_its_api_parameter_at_the_end_of_parameters() {
    let template = format!(
        "Parameters:\n  Other:\n    Type: String\n    # a comment inside\n\n# a comment between\nConditions: {{}}\n\
         Resources:\n{RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
    );
    let spec = Spec::new("send-invoice", false, false).expect("valid");
    let out = with_consumer(&template, &spec).expect("added");
    let other = out.find("  Other:").expect("kept");
    let parameter = out
        .find("  SendInvoiceApiUrl:\n    Type: String")
        .expect("the parameter");
    let conditions = out.find("Conditions:").expect("kept");
    assert!(other < parameter && parameter < conditions, "{out}");
    assert!(
        out.contains("          API_URL: !Ref SendInvoiceApiUrl\n"),
        "{out}"
    );
    // A template that has the parameter already is refused, naming it.
    let taken = template.replace("  Other:", "  SendInvoiceApiUrl:");
    let refused = with_consumer(&taken, &spec).expect_err("the parameter exists");
    assert!(
        refused.to_string().contains("SendInvoiceApiUrl"),
        "{refused}"
    );
    // A transactional consumer calls no API.
    let transact = with_consumer(
        &template,
        &Spec::new("book-it", false, true).expect("valid"),
    )
    .expect("added");
    assert!(!transact.contains("ApiUrl"), "{transact}");
    let none = with_consumer(
        &format!("Resources:\n{RESOURCES_MARKER}\nOutputs:\n{OUTPUTS_MARKER}\n"),
        &spec,
    )
    .expect_err("no Parameters");
    assert!(none.to_string().contains("Parameters"), "{none}");
}

#[test]
fn a_consumer_whose_resources_exist_is_refused_before_writing() {
    // A resource that is not a consumer's: `outbox --transact` would add an `OutboxTable` too.
    let template = format!(
        "Parameters:\n  Other:\n    Type: String\n\nResources:\n  OutboxTable:\n    Type: AWS::DynamoDB::Table\n\
         {RESOURCES_MARKER}\n\nOutputs:\n{OUTPUTS_MARKER}\n"
    );
    let root = scratch_project("clash", "", &template);
    let project = Project::at(&root).expect("project");
    let spec = Spec::new("outbox", false, true).expect("valid");
    let refused = generate(&project, &spec).expect_err("clash");
    assert!(refused.to_string().contains("OutboxTable"), "{refused}");
    assert!(!root.join("functions").exists(), "nothing written");
    let without_table = Spec::new("outbox", false, false).expect("valid");
    assert!(
        with_consumer(&template, &without_table).is_ok(),
        "no clash without --transact"
    );
    // The child's queue becomes `OutboxQueue` where sqsafe check and sqsafe local read the template.
    let queue = template.replace("OutboxTable:", "OutboxQueue:");
    let refused = with_consumer(&queue, &without_table).expect_err("clash with a child's id");
    assert!(refused.to_string().contains("OutboxQueue"), "{refused}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn the_project_is_found_upward_from_a_folder_inside_it() {
    let root = scratch_project("find", "", &markers_only());
    let inside = root.join("functions").join("other").join("src");
    fs::create_dir_all(&inside).expect("a member's folder");
    // A member's own Cargo.toml (no [workspace]) is passed over, as cargo does.
    fs::write(
        root.join("functions/other/Cargo.toml"),
        "[package]\nname = \"other\"\n",
    )
    .expect("member");
    let project = Project::find(&inside).expect("found");
    assert_eq!(project.root, root.canonicalize().expect("root"));
    assert_eq!(project.template, project.root.join("template.yaml"));
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn no_workspace_or_no_template_is_refused_with_what_to_do() {
    let root = std::env::temp_dir().join(format!("sqsafe-new-none-{}", std::process::id()));
    fs::create_dir_all(&root).expect("scratch");
    fs::write(root.join("Cargo.toml"), "[package]\nname = \"alone\"\n").expect("a package");
    let refused = Project::at(&root).expect_err("not a workspace");
    assert!(refused.to_string().contains("[workspace]"), "{refused}");
    let _ = fs::remove_dir_all(&root);

    let root = scratch_project("no-template", "", "");
    fs::remove_file(root.join("template.yaml")).expect("no template");
    // (A template.yaml above the scratch folder, as in the system temp folder, would be found: there is none.)
    let refused = Project::at(&root).expect_err("no template");
    assert!(
        refused.to_string().contains("no template.yaml"),
        "{refused}"
    );
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_workspace_without_the_dependencies_is_refused_naming_each_and_nothing_is_written() {
    let root = scratch_project("deps", "", &markers_only());
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("manifest");
    let trimmed: String = manifest
        .lines()
        .filter(|l| !l.starts_with("sqsafe-local ") && !l.starts_with("tokio "))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(root.join("Cargo.toml"), trimmed).expect("manifest");
    let project = Project::at(&root).expect("project");
    let spec = Spec::new("send-invoice", false, false).expect("valid");
    let refused = generate(&project, &spec).expect_err("missing dependencies");
    let message = refused.to_string();
    assert!(
        message.contains("`tokio`") && message.contains("`sqsafe-local`"),
        "{message}"
    );
    assert!(
        !root.join("functions").exists() && !root.join("events").exists(),
        "nothing written"
    );
    assert_eq!(
        fs::read_to_string(root.join("template.yaml")).expect("template"),
        markers_only(),
        "template untouched"
    );
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn the_crate_inherits_what_the_workspace_offers_and_writes_out_the_rest() {
    let spec = Spec::new("send-invoice", false, false).expect("valid");
    let plain = scratch_project("plain", "", &markers_only());
    let text = Project::at(&plain)
        .expect("project")
        .cargo_toml(&spec)
        .expect("toml");
    assert!(
        text.contains("version = \"0.1.0\"") && text.contains("edition = \"2024\""),
        "{text}"
    );
    assert!(
        !text.contains("[lints]") && !text.contains(WORKSPACE_HACK),
        "{text}"
    );
    assert!(
        text.contains("sqsafe = { workspace = true, features = [\"http\"] }")
            && text.contains("sqsafe-testkit.workspace = true"),
        "{text}"
    );
    let _: toml::Table = text.parse().expect("valid TOML");
    let transact = Project::at(&plain)
        .expect("project")
        .cargo_toml(&Spec::new("book-it", false, true).expect("valid"))
        .expect("toml");
    assert!(
        transact.contains("sqsafe.workspace = true") && !transact.contains("http"),
        "a transactional consumer calls no API: {transact}"
    );

    let extra = format!(
        "{WORKSPACE_HACK} = {{ path = \"hack\" }}\n\n[workspace.package]\nversion = \"2.0.0\"\nedition = \"2024\"\n\n\
         [workspace.lints.rust]\nunsafe_code = \"forbid\"\n"
    );
    let full = scratch_project("full", &extra, &markers_only());
    let text = Project::at(&full)
        .expect("project")
        .cargo_toml(&spec)
        .expect("toml");
    assert!(
        text.contains("version.workspace = true") && text.contains("[lints]"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{WORKSPACE_HACK}.workspace = true")),
        "{text}"
    );
    assert!(
        text.contains("publish = false"),
        "not in [workspace.package]: written out: {text}"
    );
    let _: toml::Table = text.parse().expect("valid TOML");
    let _ = fs::remove_dir_all(&plain);
    let _ = fs::remove_dir_all(&full);
}

#[test]
fn a_crate_the_members_would_not_include_is_refused() {
    let root = scratch_project("members", "", &markers_only());
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("manifest");
    fs::write(
        root.join("Cargo.toml"),
        manifest.replace("members = [\"functions/*\"]", "members = [\"crates/*\"]"),
    )
    .expect("manifest");
    let spec = Spec::new("send-invoice", false, false).expect("valid");
    let refused = generate(&Project::at(&root).expect("project"), &spec).expect_err("not a member");
    assert!(refused.to_string().contains("functions/*"), "{refused}");
    assert!(glob_matches("functions/*", "functions/send-invoice"));
    assert!(glob_matches(
        "functions/send-invoice",
        "functions/send-invoice"
    ));
    assert!(
        !glob_matches("functions/*", "functions/a/b") && !glob_matches("crates/*", "functions/a")
    );
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn the_sample_event_is_json_in_every_variant() {
    for (fifo, transact) in [(false, false), (true, false), (false, true), (true, true)] {
        let spec = Spec::new("send-invoice", fifo, transact).expect("valid");
        let text = spec
            .render("consumer/events/event.json.jinja")
            .expect("rendered");
        let event: serde_json::Value =
            serde_json::from_str(&text).expect("the sample event is JSON");
        let records = event["Records"].as_array().expect("records");
        assert_eq!(records.len(), 2, "{event}");
        assert_eq!(
            records[1]["attributes"]["MessageGroupId"]
                .as_str()
                .is_some(),
            fifo,
            "{event}"
        );
    }
}

fn child_doc(fifo: bool) -> serde_norway::Value {
    let spec = Spec::new("send-invoice", fifo, false).expect("valid");
    crate::check::parse(child_template(&spec).1).expect("the child template parses")
}

fn keys(doc: &serde_norway::Value, section: &str) -> BTreeSet<String> {
    doc.get(section)
        .and_then(serde_norway::Value::as_mapping)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The repository's own template.yaml nests the children sqsafe ships, from its sqsafe/ folder as a project
/// does: those copies are the shipped files, byte for byte.
#[test]
fn the_repository_nests_the_children_sqsafe_ships() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for fifo in [false, true] {
        let (file, shipped) = child_template(&Spec::new("a-b", fifo, false).expect("valid"));
        let path = root.join(CHILD_DIR).join(file);
        let copy =
            std::fs::read_to_string(&path).expect("the repository's copy of a child template");
        assert!(
            copy == shipped,
            "{} differs from templates/project/templates/child/{file}: copy the shipped file over it",
            path.display()
        );
        let parent = std::fs::read_to_string(root.join("template.yaml")).expect("template.yaml");
        assert!(
            parent.contains(&format!("Location: {CHILD_DIR}/{file}")),
            "template.yaml nests {file}"
        );
    }
}

#[test]
fn the_fifo_child_is_the_standard_one_with_fifo_queues() {
    let (_, standard) = child_template(&Spec::new("a-b", false, false).expect("valid"));
    let (_, fifo) = child_template(&Spec::new("a-b", true, false).expect("valid"));
    // Past the header comment, the only differences are the queues' FIFO lines and names.
    let body = |text: &str| {
        text.lines()
            .skip_while(|l| l.starts_with('#'))
            .filter(|l| !l.contains("FifoQueue: true") && !l.contains("ContentBasedDeduplication"))
            .map(|l| l.replace(".fifo", "").replace("FIFO consumer", "consumer"))
            .collect::<Vec<_>>()
    };
    assert_eq!(body(standard), body(fifo));
    assert_eq!(fifo.matches("FifoQueue: true").count(), 2, "both queues");
    assert!(fifo.contains("ContentBasedDeduplication: true"));
    for text in [standard, fifo] {
        assert!(
            text.starts_with("# ") && text.contains("sqsafe ships this file"),
            "a header that says what it is"
        );
    }
}

#[test]
fn the_parent_reads_only_what_the_child_declares() {
    for fifo in [false, true] {
        let doc = child_doc(fifo);
        let ids: BTreeSet<String> = CHILD_IDS.iter().map(|id| (*id).to_owned()).collect();
        assert_eq!(
            keys(&doc, "Resources"),
            ids,
            "CHILD_IDS lists the child's resources"
        );
        assert!(
            keys(&doc, "Conditions").is_empty() && keys(&doc, "Mappings").is_empty(),
            "sqsafe check does not inline a child's Conditions or Mappings"
        );
        let spec = Spec::new("send-invoice", fifo, true).expect("valid");
        let parent = spec.render(RESOURCES_YAML).expect("resources")
            + &spec.render(OUTPUTS_YAML).expect("outputs");
        let outputs = keys(&doc, "Outputs");
        for used in parent.split("SendInvoice.Outputs.").skip(1) {
            let name: String = used
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            assert!(outputs.contains(&name), "the child has no output {name}");
        }
        let parameters = keys(&doc, "Parameters");
        let passed: BTreeSet<String> = parent
            .split("      Parameters:\n")
            .nth(1)
            .expect("the application's parameters")
            .lines()
            .take_while(|l| l.starts_with("        "))
            .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.to_owned()))
            .collect();
        assert!(passed.is_subset(&parameters), "{passed:?} ⊄ {parameters:?}");
        assert!(
            parameters
                .difference(&passed)
                .all(|p| { doc["Parameters"][p.as_str()].get("Default").is_some() }),
            "every parameter the parent does not pass has a default"
        );
        let function_name = "FunctionName: !Sub \"${AWS::StackName}-send-invoice\"";
        assert_eq!(
            parent.matches(function_name).count(),
            2,
            "the function and the application derive the same name"
        );
    }
}

#[test]
fn the_child_template_is_written_when_missing_and_never_overwritten() {
    let root = scratch_project("child", "", &markers_only());
    let project = Project::at(&root).expect("project");
    let child = root.join("sqsafe/consumer.yaml");

    let first =
        generate(&project, &Spec::new("first", false, false).expect("valid")).expect("generated");
    assert!(
        first.written.contains(&"sqsafe/consumer.yaml".to_owned()),
        "{first:?}"
    );
    assert_eq!(first.kept, None);
    let (_, shipped) = child_template(&Spec::new("first", false, false).expect("valid"));
    assert_eq!(fs::read_to_string(&child).expect("child"), shipped);

    let same =
        generate(&project, &Spec::new("second", false, false).expect("valid")).expect("generated");
    assert!(
        !same.written.iter().any(|p| p.starts_with("sqsafe/")) && same.kept.is_none(),
        "the same file: nothing to write or say: {same:?}"
    );

    let edited = shipped.replace(
        "MessageRetentionPeriod: 345600",
        "MessageRetentionPeriod: 300000",
    );
    fs::write(&child, &edited).expect("a team's edit");
    let kept =
        generate(&project, &Spec::new("third", false, false).expect("valid")).expect("generated");
    let said = kept.kept.expect("says it kept the team's file");
    assert!(
        said.contains("sqsafe/consumer.yaml") && said.contains("differs"),
        "{said}"
    );
    assert_eq!(
        fs::read_to_string(&child).expect("child"),
        edited,
        "left alone"
    );

    let fifo =
        generate(&project, &Spec::new("fourth", true, false).expect("valid")).expect("generated");
    assert!(
        fifo.written
            .contains(&"sqsafe/consumer-fifo.yaml".to_owned()),
        "{fifo:?}"
    );
    let _ = fs::remove_dir_all(&root);
}

/// The project template's template.yaml before its first consumer (templates/project in sqsafe's repository):
/// without the lines that include the consumer's parts, the project's name filled in.
fn project_base_template() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../templates/project/{{cookiecutter.project_name}}/template.yaml");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let base: String = text
        .split_inclusive('\n')
        .filter(|line| !line.starts_with("{%") && !line.starts_with("{#"))
        .collect();
    base.replace("{{ cookiecutter.project_name }}", "my-consumers")
}

/// `sqsafe check` on the scratch project at `root`: its exit code and output.
fn check_at(root: &Path) -> (u8, String) {
    let args = crate::CheckArgs {
        template: None,
        root: Some(root.to_path_buf()),
        list_rules: false,
    };
    let mut out = Vec::new();
    let code = crate::run_check(&args, &mut out).expect("checked");
    (code, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn a_generated_api_keeps_every_rule_and_each_break_is_named() {
    let extra = "axum = \"0.8\"\nlambda_http = \"1\"\nuuid = \"1\"\n";
    let root = scratch_project("api", extra, &project_base_template());
    let project = Project::at(&root).expect("project");
    generate(
        &project,
        &Spec::new("send-invoice", false, false).expect("valid"),
    )
    .expect("consumer");
    let api = crate::ApiSpec::new("orders-api").expect("valid");
    let generated = crate::generate_api(&project, &api).expect("generated");
    assert!(
        generated
            .written
            .contains(&"functions/orders-api/tests/api.rs".to_owned()),
        "{generated:?}"
    );
    assert!(root.join("events/orders-api.json").is_file());
    let again = crate::generate_api(&project, &api).expect_err("exists");
    assert!(
        again
            .to_string()
            .contains("functions/orders-api exists already"),
        "{again}"
    );
    let (code, out) = check_at(&root);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("all 44 rules hold for its 2 function(s)"),
        "{out}"
    );

    let good = fs::read_to_string(root.join("template.yaml")).expect("template");
    let without = |from: &str, to: &str| -> String {
        let start = good
            .find(from)
            .unwrap_or_else(|| panic!("{from} in the template"));
        let end = start
            + good[start..]
                .find(to)
                .unwrap_or_else(|| panic!("{to} after {from}"));
        format!("{}{}", &good[..start], &good[end..])
    };
    let breaks = [
        (
            "the grant for any consumer's keys",
            good.replace("dynamodb:LeadingKeys: [\"orders-api#*\"]", "dynamodb:LeadingKeys: [\"*\"]"),
            "[idempotency-leading-keys] OrdersApiRole",
        ),
        (
            "routes open to anyone",
            good.replace("        DefaultAuthorizer: AWS_IAM\n", ""),
            "[api-function] OrdersApiFunction",
        ),
        (
            "no 5xx alarm",
            without("  OrdersApiServerErrorsAlarm:", "  # The one way"),
            "[api-function] OrdersApiHttpApi",
        ),
        (
            "no alarm on answers not stored",
            without("  OrdersApiStoreFailedAlarm:", "  # ------"),
            "[api-function] OrdersApiFunction",
        ),
        (
            "the alarm on answers not stored watching another API",
            good.replace("        - Name: api\n          Value: orders-api\n", "        - Name: api\n          Value: other-api\n"),
            "[api-function] OrdersApiFunction",
        ),
        (
            "no errors alarm",
            without("  OrdersApiErrorsAlarm:", "  # 5xx answers"),
            "[alarm-function-errors] OrdersApiFunction",
        ),
        (
            "no idempotency table",
            good.replace("          IDEMPOTENCY_TABLE: !Ref IdempotencyTable\n          IDEMPOTENCY_WINDOW_DAYS", "          IDEMPOTENCY_WINDOW_DAYS"),
            "[api-function] OrdersApiFunction",
        ),
        (
            "may read every record",
            good.replace(
                "Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem]\n                Resource: !GetAtt IdempotencyTable.Arn\n                Condition:\n                  ForAllValues:StringLike:\n                    dynamodb:LeadingKeys: [\"orders-api#*\"]",
                "Action: [dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem, dynamodb:Scan]\n                Resource: !GetAtt IdempotencyTable.Arn\n                Condition:\n                  ForAllValues:StringLike:\n                    dynamodb:LeadingKeys: [\"orders-api#*\"]",
            ),
            "[grant-only-what-is-used] OrdersApiRole",
        ),
    ];
    for (how, broken, want) in breaks {
        assert_ne!(broken, good, "{how}: the break changed nothing");
        fs::write(root.join("template.yaml"), &broken).expect("template");
        let (code, out) = check_at(&root);
        assert!(
            code == 1 && out.contains(want),
            "{how}: expected {want} in:\n{out}"
        );
    }
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn generated_consumers_keep_every_rule_of_sqsafe_check() {
    let root = scratch_project("check", "", &project_base_template());
    let project = Project::at(&root).expect("project");
    for (name, fifo, transact) in [
        ("send-invoice", false, false),
        ("ship-order", true, false),
        ("book-refund", false, true),
        ("book-shipment", true, true),
    ] {
        generate(&project, &Spec::new(name, fifo, transact).expect("valid")).expect("generated");
    }
    let args = crate::CheckArgs {
        template: None,
        root: Some(root.clone()),
        list_rules: false,
    };
    let mut out = Vec::new();
    let code = crate::run_check(&args, &mut out).expect("checked");
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all 44 rules hold"), "{out}");

    // Not vacuous: the function renamed without its application, the child's alarms and dashboard watch nothing.
    let template = fs::read_to_string(root.join("template.yaml")).expect("template");
    let function_name = "\n      FunctionName: !Sub \"${AWS::StackName}-send-invoice\"";
    assert_eq!(
        template.matches(function_name).count(),
        1,
        "the function's own"
    );
    fs::write(
        root.join("template.yaml"),
        template.replace(
            function_name,
            "\n      FunctionName: !Sub \"${AWS::StackName}-renamed\"",
        ),
    )
    .expect("template");
    let mut out = Vec::new();
    let code = crate::run_check(&args, &mut out).expect("checked");
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 1, "{out}");
    for rule in [
        "[alarm-function-errors] SendInvoiceFunction",
        "[dashboard] SendInvoiceFunction",
    ] {
        assert!(out.contains(rule), "{rule} missing from:\n{out}");
    }
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_kinesis_consumer_refuses_what_only_a_queue_has_or_a_transaction() {
    let spec = |fifo, transact| Spec::new("track-order", fifo, transact).expect("valid");
    for (refused, said) in [
        (spec(true, false), "--fifo is a queue's"),
        (
            spec(false, false).envelope(ConsumerEnvelope::Sns),
            "--envelope is a queue's",
        ),
        (
            spec(false, true),
            "--transact is not made for stream consumers yet",
        ),
    ] {
        let err = refused
            .source(ConsumerSource::Kinesis)
            .expect_err(said)
            .to_string();
        assert!(
            err.starts_with("--source kinesis with ") && err.contains(said),
            "{err}"
        );
    }
    let err = spec(true, false)
        .source(ConsumerSource::DynamodbStream)
        .expect_err("fifo")
        .to_string();
    assert!(
        err.starts_with("--source dynamodb-stream with --fifo"),
        "{err}"
    );
    let plain = spec(false, false)
        .source(ConsumerSource::Kinesis)
        .expect("a plain Kinesis consumer");
    assert_eq!(plain.source, ConsumerSource::Kinesis);
}

/// A Kinesis consumer: its stream, failure queues, alarms, role and function in template.yaml itself (no nested
/// application, no child template written), its sample a Kinesis event, its tests the stream's; and every rule of
/// `sqsafe check` holds for it beside a queue's consumer. Without its on-failure destination, rule stream-consumer
/// names it.
#[test]
fn a_generated_kinesis_consumer_keeps_every_rule_and_a_missing_destination_is_named() {
    let root = scratch_project("kinesis", "", &project_base_template());
    let project = Project::at(&root).expect("project");
    generate(
        &project,
        &Spec::new("send-invoice", false, false).expect("valid"),
    )
    .expect("queue's");
    fs::remove_file(root.join("sqsafe/consumer.yaml")).expect("the queue consumer's child");
    let spec = Spec::new("track-order", false, false)
        .expect("valid")
        .source(ConsumerSource::Kinesis)
        .expect("kinesis");
    let generated = generate(&project, &spec).expect("generated");
    assert!(
        !generated.written.iter().any(|p| p.starts_with("sqsafe/")),
        "no child template: {:?}",
        generated.written
    );
    assert!(!root.join("sqsafe/consumer.yaml").exists());
    let template = fs::read_to_string(root.join("template.yaml")).expect("template");
    for resource in [
        "  TrackOrderStream:\n    Type: AWS::Kinesis::Stream",
        "  TrackOrderFailureQueue:\n",
        "  TrackOrderOnFailureQueue:\n",
        "  TrackOrderIteratorAgeAlarm:\n",
        "  TrackOrderApiUrl:\n",
        "          Type: Kinesis\n",
    ] {
        assert!(template.contains(resource), "{resource:?} missing");
    }
    let sample = fs::read_to_string(root.join("events/track-order.json")).expect("sample");
    let sample: serde_json::Value = serde_json::from_str(&sample).expect("JSON");
    assert_eq!(sample["Records"][0]["eventSource"], "aws:kinesis");
    let tests =
        fs::read_to_string(root.join("functions/track-order/tests/handler.rs")).expect("tests");
    assert!(
        tests.contains("fn a_failure_stops_the_shard_"),
        "the stream's tests"
    );

    // The queue consumer's child back (check reads it), then every rule holds.
    generate(
        &project,
        &Spec::new("send-receipt", false, false).expect("valid"),
    )
    .expect("child back");
    let (code, out) = check_at(&root);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all 44 rules hold"), "{out}");

    let template = fs::read_to_string(root.join("template.yaml")).expect("template");
    let destination = "            DestinationConfig:\n              OnFailure:\n                Destination: !GetAtt TrackOrderOnFailureQueue.Arn\n";
    assert_eq!(template.matches(destination).count(), 1);
    fs::write(
        root.join("template.yaml"),
        template.replace(destination, ""),
    )
    .expect("template");
    let (code, out) = check_at(&root);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[stream-consumer] TrackOrderFunction"),
        "{out}"
    );
    let _ = fs::remove_dir_all(&root);
}

/// A DynamoDB-stream consumer: the table whose changes it reads (with its stream), the failure queues, alarms, role and
/// function in template.yaml; its handler reads `Change<Item>` keyed by its record; its sample a DynamoDB Streams
/// batch; every rule of `sqsafe check` holds, and without its retry limit rule stream-consumer names it.
#[test]
fn a_generated_dynamodb_stream_consumer_keeps_every_rule_and_an_endless_retry_is_named() {
    let root = scratch_project("dynamodb-stream", "", &project_base_template());
    let project = Project::at(&root).expect("project");
    generate(
        &project,
        &Spec::new("send-invoice", false, false).expect("valid"),
    )
    .expect("queue's");
    let spec = Spec::new("audit-order", false, false)
        .expect("valid")
        .source(ConsumerSource::DynamodbStream)
        .expect("dynamodb-stream");
    generate(&project, &spec).expect("generated");
    let template = fs::read_to_string(root.join("template.yaml")).expect("template");
    for resource in [
        "  AuditOrderSourceTable:\n    Type: AWS::DynamoDB::Table",
        "        StreamViewType: NEW_AND_OLD_IMAGES\n",
        "          Type: DynamoDB\n",
        "            Stream: !GetAtt AuditOrderSourceTable.StreamArn\n",
        "  AuditOrderFailureQueue:\n",
    ] {
        assert!(template.contains(resource), "{resource:?} missing");
    }
    let handler =
        fs::read_to_string(root.join("functions/audit-order/src/handler.rs")).expect("handler");
    assert!(
        handler.contains("type Payload = Change<AuditOrderItem>;"),
        "{handler}"
    );
    assert!(handler.contains("Intent::of_record()"), "{handler}");
    let sample = fs::read_to_string(root.join("events/audit-order.json")).expect("sample");
    let sample: serde_json::Value = serde_json::from_str(&sample).expect("JSON");
    assert_eq!(sample["Records"][1]["eventName"], "MODIFY");
    let (code, out) = check_at(&root);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("all 44 rules hold"), "{out}");

    let retries = "            MaximumRetryAttempts: 10\n";
    let at = template.find("  AuditOrderFunction:").expect("function");
    let (before, after) = template.split_at(at);
    fs::write(
        root.join("template.yaml"),
        format!(
            "{before}{}",
            after.replacen(retries, "            MaximumRetryAttempts: -1\n", 1)
        ),
    )
    .expect("template");
    let (code, out) = check_at(&root);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[stream-consumer] AuditOrderFunction"),
        "{out}"
    );
    let _ = fs::remove_dir_all(&root);
}
