"""Proves that a team can take sqsafe home: a new project from the project template, outside this workspace, as
`make test` runs it (scripts/test.sh).

1. renders templates/project with the ecosystem's own tool, `sam init --location templates/project` (cookiecutter),
   into a temporary folder outside the workspace, with sqsafe as a path dependency (a team's comes from a git tag);
   and once more as a team renders it, sqsafe from a git tag, resolved by cargo from a bare clone of this repository
   (git_tag_render: file://, nothing downloaded);
2. checks what the project builds (scripts/dependents-check.py --project: no workspace-hack, clap, server, test-util);
   then runs the project's own `make test` on a fresh machine's PATH (the system's folders and cargo's: no .venv/bin,
   no sqsafe): it installs the project's pinned sqsafe into .tools (from the checkout's path here, a git tag for a
   team) and passes; and with the role's DLQ grant (sqs:SendMessage) taken out of template.yaml it must fail, sqsafe
   check naming the rule (permissions). Every later step runs that installed sqsafe;
3. its consumer: formatted, clippy-clean, built, its tests pass against moto and a fake of its API; then its effect
   is broken in each way a real one could be (BREAKS: it calls the API twice, ignores the Idempotency-Key, swallows
   a 5xx; the transactional one refuses every record) and its tests must FAIL each time, the test named for that
   way among them: a generated test that passes with a broken effect proves nothing;
4. its template: sam validate --lint, sam validate, cfn-lint on the translated template (scripts/template-checks.sh
   with SQSAFE_TEMPLATE), and the rules, `sqsafe check` in the project; it must fail on a copy without the DLQ alarm
   (in a copy of the nested sqsafe/consumer.yaml);
5. `sqsafe new consumer --fifo --transact --envelope eventbridge` run a second time, from a folder inside the project
   (it finds the workspace and the template upward), and 3 and 4 again for the new consumer (the first one is
   rendered behind an SNS subscription, `envelope: sns`: both consumers' sample events, tests and deliveries go
   through an envelope); then `sqsafe new consumer --envelope s3` a third time, and 3 for it (its payload is the
   object notification's `sqsafe::S3Object`); then `sqsafe new consumer --source kinesis` and `--source
   dynamodb-stream`, and 3 for each; then `sqsafe new api` (an HTTP API behind sqsafe::api's layer): its
   crate checked as in 3, its tests failing, every one, with the layer taken out of its handler, and 4 again; then
   `sqsafe local up --watch` serving it on a loopback port: a request sent twice is replayed byte for byte, other
   content under its key refused; then the two stream consumers' tests once more, against a copy of this checkout
   whose sqsafe-batch runs a shard's later records after a failed one (STOP_RULE): they must fail;
6. the local pipeline on the project's template with both consumers under `cargo lambda watch`
   (`sqsafe local up --watch`, the sqsafe a team installs: no test servers): each sample message sent twice, one effect per intent, and the standard queue's second
   delivery answered from the record (replayed or skipped by the cache), not applied again;
7. its debug binary against charge-payment's built inside the workspace (within 10%: no workspace-hack bloat);
8. the project's own deploy build, `make build` of its first consumer (sam build: release, cargo lambda, the
   architecture the workspace's template checks build: arm64 where the aarch64 std is installed), on a fresh
   machine's PATH as in 2 (make build must find the pinned cargo-lambda itself), in a copy of the project made right
   after rendering (the steps above edit the project while it compiles) and a target folder of its own, beside steps
   2 to 6; its bootstrap is left in TARGET/project-release for `scripts/size-check.py --built`, which make test runs
   once the workspace's own sam build is done (release binaries within 10%);
9. removes the project and its binaries.

Cargo builds the project into SQSAFE_PROJECT_TARGET (default: the workspace's target folder, CARGO_TARGET_DIR), with
the workspace's linker, and the project resolves with a copy of the workspace's Cargo.lock (the same versions, nothing
new downloaded). make test gives it a folder of its own (target/project-check): it then runs beside cargo doc and
cargo test without waiting for their lock; it would share little anyway (a dependent gets its own features, without
the hack, so nearly every crate compiles anew). The folder outlives the check, less the project's own crates: on a warm
tree the next run compiles only what changed. Expects what scripts/test.sh sets up: the venv, moto
server with AWS_ENDPOINT_URL exported, and the workspace's charge-payment binary built. The sqsafe it runs is the one
the project's make test installs (cargo install, into SQSAFE_PROJECT_TARGET too): a team's, without the test servers;
the check fails when that sqsafe starts a payments API.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import boto3

import build_arch as build_arch_module  # scripts/build_arch.py: this script's folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "probe-shop"
NAME = "ship-order"
NAME_TRANSACT = "book-shipment"
NAME_S3 = "scan-upload"
NAME_KINESIS = "track-order"
NAME_CHANGES = "audit-order"
API = "orders-api"
# An API's tests, each of which must fail when the idempotency layer is taken out of its handler.rs (api_checks).
API_TESTS = [
    "the_first_request_runs_the_handler_once_and_keeps_its_answer",
    "a_repeat_replays_the_first_answer_byte_for_byte",
    "other_content_under_the_key_is_refused",
    "two_callers_with_one_key_are_two_requests",
]
LAYER = re.compile(r"\s*\.layer\(IdempotencyLayer::new\([^;]*?\)\?\)(?=\))")
# Each generated handler's effect broken on purpose, as a real effect could be: (how it is broken, the text replaced,
# its replacement, a test that must then fail). A plain consumer's effect is one call to its API (sqsafe::http); a
# transactional one's is a write committed with the record. Its tests must fail for each.
CALL = "let answer = self.api.post_json("
BREAKS = [
    ("calls the API twice", CALL,
     'let _twice = self.api.post_json("/{name}", &p, cx).await?;\n        ' + CALL,
     "the_sample_event_calls_the_api_once_per_intent_and_its_redelivery_is_replayed"),
    ("ignores the Idempotency-Key (sends it under a header the API does not read)",
     '.name("{name} API")', '.name("{name} API").idempotency_header("X-Unread-Key")',
     "a_503_then_success_is_one_effect_under_one_key"),
    ("swallows a 5xx (a failed call counts as applied)",
     ".await?.json()?;", ".await.ok().and_then(|r| r.json().ok()).unwrap_or_default();",
     "a_503_then_success_is_one_effect_under_one_key"),
    ("refuses every record (permanent error)",
     # (str.format text: braces doubled.)
     "Ok(Effect::writes(writes, Applied {{ id: p.id }}).refused(|_index, _item| refused))",
     'let _ = (writes, refused);\n        Err(RecordError::permanent("insufficient_stock", "broken on purpose"))',
     "the_sample_event_applies_once_and_its_redelivery_is_replayed"),
]
# A Kinesis consumer's effect is a plain consumer's call; its tests are the stream's (tests/stream.rs.jinja): each of
# the call's breaks must fail one of them. (Its stop at a shard's first failure is sqsafe's, not the handler's: see
# STOP_RULE.)
KINESIS_BREAKS = [
    (how, old, new, {
        "the_sample_event_calls_the_api_once_per_intent_and_its_redelivery_is_replayed":
            "the_sample_batch_calls_the_api_once_per_intent_and_its_redelivery_is_replayed",
        "a_503_then_success_is_one_effect_under_one_key":
            "a_failure_stops_the_shard_and_the_records_handed_over_again_apply_once_in_order",
    }[test])
    for how, old, new, test in BREAKS if test != "the_sample_event_applies_once_and_its_redelivery_is_replayed"
]
# A DynamoDB-stream consumer's effect is a call with the change (src/change.rs.jinja); its tests the changes'.
CHANGE_CALL = "let sent = self.api.post_json("
CHANGES_BREAKS = [
    ("calls the API twice", CHANGE_CALL,
     'let _twice = self.api.post_json("/{name}", &body, cx).await?;\n            ' + CHANGE_CALL,
     "the_sample_changes_call_the_api_once_each_and_their_redelivery_is_replayed"),
    ("ignores the Idempotency-Key (sends it under a header the API does not read)",
     '.name("{name} API")', '.name("{name} API").idempotency_header("X-Unread-Key")',
     "a_failure_stops_the_shard_and_the_changes_handed_over_again_apply_once_in_order"),
    ("swallows a 5xx (a failed call counts as applied)",
     ".await?;\n            let answer = sent.json()?;",
     ".await;\n            let answer = sent.ok().and_then(|r| r.json().ok()).unwrap_or_default();",
     "a_failure_stops_the_shard_and_the_changes_handed_over_again_apply_once_in_order"),
]
# The stop at a shard's first failure is sqsafe-batch's (its ordered path), not a generated handler's: the stream
# consumers' generated tests prove it only if they fail without it. stop_rule_checks runs them once more against a
# copy of this checkout with the rule taken out (a record after a reported one of its shard then runs in the same
# invocation) and each must fail, the test named here among its failures.
STOP_RULE = ("crates/sqsafe-batch/src/processor/fifo.rs",
             "                if report.disposition.is_reported() {\n",
             "                if report.disposition.is_reported() && !stream {\n")
STOP_RULE_TESTS = {
    NAME_KINESIS: "a_failure_stops_the_shard_and_the_records_handed_over_again_apply_once_in_order",
    NAME_CHANGES: "a_failure_stops_the_shard_and_the_changes_handed_over_again_apply_once_in_order",
}
# The workspace's binaries (sqsafe, charge-payment) are in TARGET; the project builds in PROJECT_TARGET.
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()
# The sqsafe the steps run: the project's own, installed by its make test (make_test), as a team's is.
SQSAFE = ""
PROJECT_TARGET = Path(os.environ.get("SQSAFE_PROJECT_TARGET", TARGET)).resolve()
VENV = ROOT / ".venv"
# The project's release bootstrap and how it was built (build.json), for scripts/size-check.py --built.
RELEASE_OUT = TARGET / "project-release"
# Where the project's make build compiles: SQSAFE_PROJECT_RELEASE_TARGET, else a folder of its own under
# PROJECT_TARGET. make test names the workspace's sam build's (target/sam): both release builds then compile each
# third-party crate once (the functions resolve their features as a team's consumer does: Cargo.toml's
# default-members, and no workspace-hack for the Lambda target).
RELEASE_TARGET = Path(os.environ["SQSAFE_PROJECT_RELEASE_TARGET"]).resolve() \
    if os.environ.get("SQSAFE_PROJECT_RELEASE_TARGET") else None


# Each step's wall time and CPU time (of the processes it waited for: the background make build counts where it is
# waited for, in its last step), printed as a table at the end: where the project check's time goes.
STEPS: list[list] = []


def cpu_seconds() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def step(text: str) -> None:
    now, cpu = time.monotonic(), cpu_seconds()
    if STEPS:
        STEPS[-1][1] = now - STEPS[-1][1]
        STEPS[-1][2] = cpu - STEPS[-1][2]
    STEPS.append([text.split(":")[0].split(" (")[0], now, cpu])
    print(f"\n--> project: {text}", flush=True)


def step_table() -> None:
    step("end")
    STEPS.pop()
    print("\nproject check, wall and CPU time per step:", flush=True)
    for name, wall, cpu in STEPS:
        print(f"  {wall:5.0f} s  {cpu:5.0f} s  {name}", flush=True)


def run(*args: str, cwd: Path, env: dict | None = None) -> None:
    print("$ " + " ".join(args), flush=True)
    subprocess.run(args, cwd=cwd, env=env, check=True)


def pascal(name: str) -> str:
    """A consumer's name as its template resources spell it: ship-order -> ShipOrder."""
    return "".join(part.capitalize() for part in name.split("-"))


def sam_env(scratch: Path) -> dict:
    """SAM CLI without telemetry and without its version check (it would call pypi.org): loopback only."""
    home = scratch / "sam-cli-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "metadata.json").write_text(json.dumps({"telemetryEnabled": False, "lastVersionCheck": int(time.time())}))
    return {**os.environ, "SAM_CLI_TELEMETRY": "0", "__SAM_CLI_APP_DIR": str(home)}


# A fresh machine's PATH, before anything of the project's is on it (bare_env).
SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]


# What a fresh machine has in cargo's folder (~/.cargo/bin): rustup and its proxies, nothing installed by hand.
RUSTUP_PROXIES = ("cargo", "rustc", "rustdoc", "rustup", "rustfmt", "cargo-fmt", "cargo-clippy", "clippy-driver")


@functools.cache
def fresh_cargo_bin(cargo_bin: str) -> str:
    """A folder holding links to rustup's proxies in `cargo_bin` and nothing else: whatever else was installed into
    ~/.cargo/bin on this machine (cargo-lambda, an sqsafe of `cargo install`) is not on the bare PATH."""
    folder = Path(tempfile.mkdtemp(prefix="sqsafe-cargo-bin-"))
    for tool in RUSTUP_PROXIES:
        if (Path(cargo_bin) / tool).exists():
            (folder / tool).symlink_to(Path(cargo_bin) / tool)
    return str(folder)


def bare_env(env: dict) -> dict:
    """`env` with the PATH of a fresh machine: the system's folders and rustup's proxies (links to those of the folder
    holding cargo, see fresh_cargo_bin), without .venv/bin, any sqsafe, or anything else installed into cargo's folder:
    the project's Makefile must find its pinned tools itself. PYTHON, the Python the project's Makefile runs
    (install-sqsafe.py, `sqsafe local venv`), is the linked venv's own: the same version, so `sqsafe local venv` finds
    the venv made from the same pins and keeps it."""
    cargo = shutil.which("cargo", path=env.get("PATH"))
    if cargo is None:
        raise SystemExit("project: cargo is not on PATH")
    path = os.pathsep.join([*SYSTEM_PATH, fresh_cargo_bin(str(Path(cargo).parent))])
    for tool in ("rustup", "make"):
        if shutil.which(tool, path=path) is None:
            raise SystemExit(f"project: no {tool} on a fresh machine's PATH ({path})")
    for tool in ("sam", "cargo-lambda", "zig", "sqsafe"):
        if found := shutil.which(tool, path=path):
            raise SystemExit(f"project: {found} is on the bare PATH ({path}): the project's make would not have to "
                             "find its own")
    bare = {k: v for k, v in env.items() if k != "VIRTUAL_ENV"}
    return {**bare, "PATH": path, "PYTHON": str(VENV / "bin" / "python")}


def committed_lock(project: Path) -> None:
    """The project's README says to commit Cargo.lock with the rest: its .gitignore must not leave it out (nor the
    sources), in a repository of its own made as the README's first commit does."""
    with tempfile.TemporaryDirectory(prefix="sqsafe-gitignore-") as folder:
        shutil.copy(project / ".gitignore", Path(folder) / ".gitignore")
        subprocess.run(["git", "init", "-q", folder], check=True)
        ignored = subprocess.run(
            ["git", "-C", folder, "check-ignore", "--no-index", "Cargo.lock", "Cargo.toml", "functions/x/src/main.rs"],
            capture_output=True, text=True).stdout.split()
    if ignored:
        raise SystemExit(f"project: its .gitignore leaves out {ignored}, which its README says to commit")
    print("the project's .gitignore keeps Cargo.lock in (its README says to commit it)", flush=True)


def render(scratch: Path) -> Path:
    # Its consumer behind an SNS subscription: the sample event is notifications, and every later step (its tests,
    # the breaks, the local pipeline) runs the payload out of the envelope.
    context = {"project_name": PROJECT, "consumer_name": NAME, "sqsafe_path": str(ROOT), "envelope": "sns"}
    run(
        str(VENV / "bin" / "sam"), "init", "--location", str(ROOT / "templates" / "project"), "--no-input",
        "--output-dir", str(scratch), "--extra-context", json.dumps(context),
        cwd=scratch, env=sam_env(scratch),
    )
    project = scratch / PROJECT
    if not (project / "Cargo.toml").is_file() or not (project / "functions" / NAME / "src" / "handler.rs").is_file():
        raise SystemExit(f"project: sam init did not write the project at {project}")
    leftovers = [
        str(p.relative_to(project)) for p in project.rglob("*")
        if p.is_file() and re.search(r"\{\{ *cookiecutter\.", p.read_text(errors="replace"))
    ]
    if leftovers:
        raise SystemExit(f"project: template syntax left in {leftovers}")
    committed_lock(project)
    # Rendered with sqsafe_path: nothing may point a team at the default git URL (the README named it).
    default_git = json.loads((ROOT / "templates" / "project" / "cookiecutter.json").read_text())["sqsafe_git"]
    naming = [str(p.relative_to(project)) for p in project.rglob("*")
              if p.is_file() and default_git in p.read_text(errors="replace")]
    if naming:
        raise SystemExit(f"project: rendered with sqsafe_path, {naming} still name {default_git}")
    # A team's own render: sqsafe from a git tag (not fetched here: the manifest must say so and parse).
    defaults = scratch / "defaults"
    defaults.mkdir()
    run(
        str(VENV / "bin" / "sam"), "init", "--location", str(ROOT / "templates" / "project"), "--no-input",
        "--output-dir", str(defaults), cwd=scratch, env=sam_env(scratch),
    )
    manifest = tomllib.loads((defaults / "my-consumers" / "Cargo.toml").read_text())
    for name in ("sqsafe", "sqsafe-local", "sqsafe-testkit"):
        dep = manifest["workspace"]["dependencies"][name]
        if set(dep) != {"git", "tag"}:
            raise SystemExit(f"project: a default render's {name} dependency is {dep}, not a git tag")
    print(f"a default render depends on sqsafe by git tag: {manifest['workspace']['dependencies']['sqsafe']}")
    git_tag_render(scratch)
    # The same versions as the workspace (already downloaded); a team resolves its own.
    shutil.copy(ROOT / "Cargo.lock", project / "Cargo.lock")
    # The project's pinned tools are the workspace's (the same requirements file): link the venv, do not install it.
    (project / ".venv").symlink_to(VENV)
    return project


def git_tag_render(scratch: Path) -> None:
    """A team's render with sqsafe from a git repository at a tag, resolved by cargo: the repository is a bare clone of
    this one (file://) with the template's default tag on its HEAD, and cargo goes through a proxy that does not
    exist (loopback port 9), so nothing but that clone and the local registry cache is read. Each sqsafe crate must
    resolve from the tag, at this commit, and cargo must print no error or warning while it looks for them (it reads
    every Cargo.toml in the repository)."""
    defaults = json.loads((ROOT / "templates" / "project" / "cookiecutter.json").read_text())
    tag, consumer = defaults["sqsafe_tag"], defaults["consumer_name"]
    bare = scratch / "sqsafe.git"
    run("git", "clone", "--quiet", "--bare", str(ROOT), str(bare), cwd=scratch)
    run("git", "-C", str(bare), "tag", "--force", tag, "HEAD", cwd=scratch)
    head = subprocess.run(["git", "-C", str(bare), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    out = scratch / "git-tag"
    out.mkdir()
    context = {"project_name": "git-shop", "sqsafe_git": f"file://{bare}", "sqsafe_tag": tag}
    run(str(VENV / "bin" / "sam"), "init", "--location", str(ROOT / "templates" / "project"), "--no-input",
        "--output-dir", str(out), "--extra-context", json.dumps(context), cwd=scratch, env=sam_env(scratch))
    project = out / "git-shop"
    shutil.copy(ROOT / "Cargo.lock", project / "Cargo.lock")
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    git_dirs = [cargo_home / "git" / "db", cargo_home / "git" / "checkouts"]
    before = {p for d in git_dirs if d.is_dir() for p in d.iterdir()}
    dead = "http://127.0.0.1:9"
    env = {**os.environ, "CARGO_HTTP_PROXY": dead, "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "ALL_PROXY": dead,
           "CARGO_NET_GIT_FETCH_WITH_CLI": "false"}
    env.pop("CARGO_MANIFEST_DIR", None)
    print(f"$ cargo metadata   (in {project}, sqsafe from file://{bare} at {tag})", flush=True)
    try:
        # This machine's packages only: the workspace has downloaded those, not Windows' or macOS' (schannel, ...).
        host = re.search(r"^host: (\S+)$", subprocess.run(["rustc", "-vV"], capture_output=True, text=True,
                                                          check=True).stdout, re.MULTILINE).group(1)
        meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--filter-platform", host], cwd=project,
                              env=env, capture_output=True, text=True)
    finally:
        # cargo's copy of this throw-away repository (its URL is new each run): not left in CARGO_HOME.
        for leftover in {p for d in git_dirs if d.is_dir() for p in d.iterdir()} - before:
            shutil.rmtree(leftover, ignore_errors=True)
    noise = [line for line in meta.stderr.splitlines() if re.match(r"\s*(error|warning)\b", line)]
    if meta.returncode != 0 or noise:
        raise SystemExit(f"project: resolving sqsafe from a git tag (exit {meta.returncode}) printed:\n{meta.stderr}")
    packages = json.loads(meta.stdout)["packages"]
    sources = {p["name"]: p["source"] for p in packages if p["name"].startswith("sqsafe")}
    want = f"git+file://{bare}?tag={tag}#{head}"
    wrong = {name: source for name, source in sources.items() if source != want}
    if "sqsafe" not in sources or wrong or consumer not in {p["name"] for p in packages}:
        raise SystemExit(f"project: sqsafe's crates did not all resolve from {want}: {sources}")
    print(f"a render with sqsafe from a git tag resolves {', '.join(sorted(sources))} from the tag {tag} "
          f"({head[:8]}), with nothing printed", flush=True)


def make_test(project: Path, env: dict) -> str:
    """The project's own `make test`, as a team runs it on a fresh machine (bare_env): it installs its pinned sqsafe
    into .tools (scripts/install-sqsafe.py: cargo install from the sqsafe Cargo.toml names, here the checkout's path)
    and must pass; then, with the DLQ grant taken out of template.yaml (the role may no longer send to its DLQ), it must
    fail, `sqsafe check` naming the rule. Returns the installed sqsafe, which the later steps run."""
    bare = bare_env(env)
    print(f"$ make test   (in {project}, PATH={bare['PATH']})", flush=True)
    started = time.monotonic()
    usage_before = os.times()
    subprocess.run(["make", "test"], cwd=project, env=bare, check=True)
    usage = os.times()
    cpu = usage.children_user + usage.children_system - usage_before.children_user - usage_before.children_system
    sqsafe = project / ".tools" / "bin" / "sqsafe"
    if not sqsafe.is_file():
        raise SystemExit(f"project: make test left no {sqsafe}")
    print(f"the project's make test passed in {time.monotonic() - started:.0f} s ({cpu:.0f} s of CPU), its sqsafe "
          "installed into .tools", flush=True)
    template = project / "template.yaml"
    text = template.read_text()
    grant = re.search(r"^( +)- Sid: DeadLetter\n(?:\1  .*\n)*", text, re.MULTILINE)
    if grant is None or "sqs:SendMessage" not in grant.group(0):
        raise SystemExit(f"project: {template} has no DeadLetter statement granting sqs:SendMessage")
    template.write_text(text[:grant.start()] + text[grant.end():])
    try:
        print("$ make test   (without the role's DeadLetter grant, sqs:SendMessage on its DLQ: must fail)", flush=True)
        broken = subprocess.run(["make", "test"], cwd=project, env=bare, capture_output=True, text=True)
    finally:
        template.write_text(text)
    out = broken.stdout + broken.stderr
    want = f"[permissions] {pascal(NAME)}Role: {pascal(NAME)}Function needs [sqs:SendMessage] on {pascal(NAME)}DeadLetterQueue"
    if broken.returncode == 0 or want not in out:
        raise SystemExit(f"project: make test without the DLQ grant (exit {broken.returncode}) did not fail naming "
                         f"{want!r}:\n{out[-3000:]}")
    print(f"without the DLQ grant the project's make test fails as it must: "
          f"{next(line for line in out.splitlines() if want in line)}", flush=True)
    return str(sqsafe)


def failed_tests(out: str) -> list[str]:
    """The tests `cargo test` printed as FAILED, sorted, each once."""
    return sorted(set(re.findall(r"^test (\S+) \.\.\. FAILED$", out, re.MULTILINE)))


def crate_checks(project: Path, env: dict, name: str, breaks_of: list = BREAKS) -> None:
    """The generated crate: formatted, clippy-clean, its tests pass; with its effect broken in each way that applies
    to it (BREAKS, a Kinesis consumer's KINESIS_BREAKS), its tests fail, the test named for that way among them."""
    run("cargo", "fmt", "--check", "-p", name, cwd=project, env=env)
    run("cargo", "clippy", "-p", name, "--all-targets", "--", "-D", "warnings", cwd=project, env=env)
    run("cargo", "test", "-p", name, cwd=project, env=env)
    handler = project / "functions" / name / "src" / "handler.rs"
    original = handler.read_text()
    breaks = [(how, old.format(name=name), new.format(name=name), test) for how, old, new, test in breaks_of
              if old.format(name=name) in original]
    if not breaks:
        raise SystemExit(f"project: {handler} has no effect to break (looked for {[b[1] for b in breaks_of]})")
    try:
        for how, old, new, test in breaks:
            if original.count(old) != 1:
                raise SystemExit(f"project: {handler}: {old!r} is not there exactly once")
            handler.write_text(original.replace(old, new))
            print(f"$ cargo test -p {name}   (its effect {how}: the tests must fail)", flush=True)
            broken = subprocess.run(
                ["cargo", "test", "-p", name, "--no-fail-fast"], cwd=project, env=env, capture_output=True, text=True
            )
            out = broken.stdout + broken.stderr
            if "could not compile" in out:
                raise SystemExit(f"project: {name} with its effect broken ({how}) does not compile:\n{out[-3000:]}")
            if broken.returncode == 0:
                raise SystemExit(f"project: {name}'s tests passed with its effect broken ({how}):\n{out[-3000:]}")
            failed = failed_tests(out)
            if test not in failed:
                raise SystemExit(f"project: {name}: {test} did not fail with its effect broken ({how}):\n{out[-3000:]}")
            print(f"its effect {how}: {name}'s tests fail as they must: {', '.join(failed)}", flush=True)
    finally:
        handler.write_text(original)
    # `cargo test` built the function's binary from the broken source too: build it again from the restored one,
    # or the pipeline would run the broken binary.
    run("cargo", "build", "-q", "-p", name, "--bins", cwd=project, env=env)


# The one third-party crate whose features may differ between what `cargo test -p CRATE` and the whole workspace
# build, or change when a crate is added: aws_lambda_events' follow the event types a crate reads (an API's HTTP
# events), and what depends on it is sqsafe's own crates (and lambda_http): a difference recompiles those, not the AWS
# SDK. Any other crate's features are in the build hash of everything above it: tokio's or bytes' changing recompiled
# tokio, hyper and the AWS SDK (41 and 67 crates, a minute or two of CPU each time, for clippy and again for the tests).
FEATURES_MAY_DIFFER = {"aws_lambda_events"}


def stop_rule_checks(scratch: Path, project: Path, env: dict) -> None:
    """The stream consumers' tests against sqsafe without its stop at a shard's first failure (STOP_RULE): a copy of
    this checkout's sources with the rule taken out, and a copy of the project that depends on it, built in the
    project's target folder (the third-party crates are shared; sqsafe's crates and the two consumers compile anew,
    and what they leave there is removed after). Every consumer in STOP_RULE_TESTS must fail its named test."""
    checkout = scratch / "sqsafe-without-the-stop-rule"
    # The sources only: not what the steps beside this one write while it copies (builds, the venv, caches).
    skipped = {ROOT / name for name in ("target", ".venv", ".tools", ".git", ".aws-sam", "book/book")}
    shutil.copytree(ROOT, checkout, symlinks=True, ignore=lambda folder, names: [
        n for n in names if Path(folder) / n in skipped or n in ("__pycache__", ".pytest_cache")])
    path, old, new = STOP_RULE
    source = (checkout / path).read_text()
    if source.count(old) != 1:
        raise SystemExit(f"project: {path}: the stop rule {old.strip()!r} is not there exactly once")
    (checkout / path).write_text(source.replace(old, new))
    mutant = scratch / f"{PROJECT}-without-the-stop-rule"
    shutil.copytree(project, mutant, symlinks=True, ignore=shutil.ignore_patterns(".tools", ".aws-sam", "target"))
    manifest = mutant / "Cargo.toml"
    text = manifest.read_text()
    pointed = text.count(f'path = "{ROOT}/crates/')
    if pointed != 3:
        raise SystemExit(f"project: {manifest} names {ROOT}/crates {pointed} times, not 3 (sqsafe, -local, -testkit)")
    manifest.write_text(text.replace(f'path = "{ROOT}/crates/', f'path = "{checkout}/crates/'))
    debug = PROJECT_TARGET / "debug"
    kept = {folder: set(os.listdir(debug / folder)) for folder in ("deps", ".fingerprint", "build")
            if (debug / folder).is_dir()}
    args = ["cargo", "test", "--no-fail-fast"] + [a for name in STOP_RULE_TESTS for a in ("-p", name)]
    print(f"$ {' '.join(args)}   (in {mutant}: sqsafe-batch without its stop rule; the tests must fail)", flush=True)
    try:
        broken = subprocess.run(args, cwd=mutant, env=env, capture_output=True, text=True)
    finally:
        for folder, names in kept.items():
            for leftover in set(os.listdir(debug / folder)) - names:
                target = debug / folder / leftover
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        shutil.rmtree(mutant, ignore_errors=True)
        shutil.rmtree(checkout, ignore_errors=True)
    out = broken.stdout + broken.stderr
    if "could not compile" in out:
        raise SystemExit(f"project: the stream consumers without the stop rule do not compile:\n{out[-3000:]}")
    failed = failed_tests(out)
    missing = sorted(test for test in STOP_RULE_TESTS.values() if test not in failed)
    if broken.returncode == 0 or missing:
        raise SystemExit(f"project: without the stop rule, {missing or 'the tests'} did not fail:\n{out[-3000:]}")
    print(f"without the stop at a shard's first failure the stream consumers' tests fail as they must: "
          f"{', '.join(failed)}", flush=True)


def third_party_features(project: Path, env: dict, package: str | None = None) -> dict[str, str]:
    """Each third-party package (name and version) of the project's build for tests, or of `-p PACKAGE`'s alone,
    with the features cargo resolved for it (cargo tree: normal, dev and build dependencies, this machine's target)."""
    args = ["cargo", "tree", "--prefix", "none", "--format", "{p}|{f}", "-e", "normal,dev,build"]
    if package:
        args += ["-p", package]
    out = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, check=True).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        package_id, _, features = line.removesuffix(" (*)").partition("|")
        if package_id and "(/" not in package_id:
            found[package_id.removesuffix(" (proc-macro)")] = features
    return found


def differing(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(f"{p}: [{a[p]}] against [{b[p]}]" for p in a.keys() & b.keys()
                  if a[p] != b[p] and p.split(" ")[0] not in FEATURES_MAY_DIFFER)


def shares_the_build(project: Path, env: dict, name: str, before: dict[str, str] | None) -> dict[str, str]:
    """A crate the project gains builds on what the project compiled before it: the third-party crates the workspace
    had (`before`; None for the crate the project was rendered with) keep their features, and `cargo test -p NAME`
    (what its README says) resolves each as the whole workspace does. Returns the workspace's features now, the next
    crate's `before`."""
    now = third_party_features(project, env)
    changed = differing(now, before) if before is not None else []
    if changed:
        raise SystemExit(f"project: adding {name} changed the features of {len(changed)} third-party crates, which "
                         "recompiles them and everything above them:\n  " + "\n  ".join(changed))
    alone = differing(third_party_features(project, env, name), now)
    if alone:
        raise SystemExit(f"project: cargo test -p {name} resolves {len(alone)} third-party crates with other "
                         "features than the workspace (it recompiles them and everything above them):\n  "
                         + "\n  ".join(alone))
    print(f"{name}: every third-party crate keeps its features, alone (-p) and in the workspace "
          f"({len(now)} crates)", flush=True)
    return now


def api_checks(project: Path, env: dict, name: str) -> None:
    """The generated API: formatted, clippy-clean, its tests pass; with the idempotency layer taken out of its
    handler.rs (the routes served bare), every one of its tests fails: none of them passes by the handler alone."""
    run("cargo", "fmt", "--check", "-p", name, cwd=project, env=env)
    run("cargo", "clippy", "-p", name, "--all-targets", "--", "-D", "warnings", cwd=project, env=env)
    run("cargo", "test", "-p", name, cwd=project, env=env)
    handler = project / "functions" / name / "src" / "handler.rs"
    original = handler.read_text()
    if len(LAYER.findall(original)) != 1:
        raise SystemExit(f"project: {handler} does not wrap its routes in IdempotencyLayer exactly once")
    try:
        handler.write_text(LAYER.sub("", original))
        print(f"$ cargo test -p {name}   (without the idempotency layer: every test must fail)", flush=True)
        broken = subprocess.run(
            ["cargo", "test", "-p", name, "--no-fail-fast"], cwd=project, env=env, capture_output=True, text=True
        )
        out = broken.stdout + broken.stderr
        if "could not compile" in out:
            raise SystemExit(f"project: {name} without its layer does not compile:\n{out[-3000:]}")
        failed = failed_tests(out)
        if broken.returncode == 0 or failed != sorted(API_TESTS):
            raise SystemExit(f"project: {name} without its layer: failed {failed}, expected {API_TESTS}:\n{out[-3000:]}")
        print(f"without the idempotency layer {name}'s tests fail as they must: {', '.join(failed)}", flush=True)
    finally:
        handler.write_text(original)


def api_local(project: Path, env: dict, name: str, streams: list[str]) -> None:
    """sqsafe local up --watch serves the generated API on a loopback port: a request sent twice is answered once
    and replayed byte for byte, other content under the key is refused, each request prints its line. The stream
    consumers run under watch too (`make local`, as the project's README says): `sqsafe local send NAME` of each
    one's sample is applied, its invocation's line printed."""
    import urllib.error
    import urllib.request

    cmd = [SQSAFE, "local", "up", "--watch", "--visibility-timeout", "5"]
    print("$ " + " ".join(cmd) + f"   (in {project}: its API)", flush=True)
    proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines: list[str] = []

    def read_until(pattern: str, limit: float) -> re.Match:
        deadline = time.monotonic() + limit
        for line in lines:
            if m := re.search(pattern, line):
                return m
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if m := re.search(pattern, line):
                return m
        raise SystemExit(f"project: sqsafe local up printed no line like {pattern!r}:\n{''.join(lines)}")

    def post(url: str, body: bytes) -> tuple[int, bool, bytes]:
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Idempotency-Key": "k-local-1", "content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                return answer.status, answer.headers.get("idempotent-replayed") == "true", answer.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("idempotent-replayed") == "true", e.read()

    try:
        url = read_until(rf"^{re.escape(name)}\s+API\s+(http://127\.0\.0\.1:\d+)", 600).group(1)
        read_until(r"^Under cargo lambda watch", 60)
        order = json.dumps({"sku": "tea", "quantity": 2}).encode()
        # The first request waits while watch builds and starts the function.
        first = post(f"{url}/orders", order)
        repeat = post(f"{url}/orders", order)
        other = post(f"{url}/orders", json.dumps({"sku": "tea", "quantity": 3}).encode())
        if first[:2] != (201, False) or repeat != (201, True, first[2]) or other[0] != 422:
            raise SystemExit(f"project: {name} under sqsafe local up: first {first}, repeat {repeat}, other "
                             f"content {other[0]}; expected 201, its replay byte for byte, 422:\n{''.join(lines)}")
        read_until(rf"^{re.escape(name)}\s+POST /orders 201 replayed", 10)
        print(f"{name} under sqsafe local up --watch at {url}: 201, then its replay byte for byte, then 422 for "
              "other content", flush=True)
        for consumer in streams:
            run(SQSAFE, "local", "send", consumer, cwd=project, env=env)
            # The first invocation waits while watch starts the function (built by the steps before).
            line = read_until(rf"^{re.escape(consumer)}\s+\d+ records?: \d+ applied", 600).group(0)
            print(f"{consumer} under sqsafe local up --watch: its sample sent, {line.strip()}", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        print("".join(lines[-6:]) + (out or "")[-1500:], flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"project: sqsafe local up (with the API) did not stop cleanly on SIGTERM (exit {proc.returncode})")


def template_checks(project: Path, env: dict) -> None:
    template = project / "template.yaml"
    run("bash", "scripts/template-checks.sh", cwd=ROOT, env={**env, "SQSAFE_TEMPLATE": str(template)})
    # The rules: `sqsafe check` in the project, against its own function crates.
    sqsafe = SQSAFE
    run(sqsafe, "check", "--template", str(template), cwd=project, env=env)
    # The rules can fail there too: the first consumer's DLQ alarm taken out of a copy must be named. The alarm is in
    # the nested application's template (sqsafe/consumer.yaml, the standard consumers'): the copy of the parent nests
    # a copy of it without the alarm.
    broken = project / "template.no-dlq-alarm.yaml"
    broken_child = project / "sqsafe" / "consumer.no-dlq-alarm.yaml"
    text = template.read_text()
    child = (project / "sqsafe" / "consumer.yaml").read_text()
    start = child.index("  DeadLetterAlarm:\n")
    end = re.compile(r"^  \S", re.MULTILINE).search(child, start + 3).start()
    broken_child.write_text(child[:start] + child[end:])
    location = "Location: sqsafe/consumer.yaml\n"
    if location not in text:
        raise SystemExit(f"project: {template} nests no sqsafe/consumer.yaml")
    broken.write_text(text.replace(location, f"Location: sqsafe/{broken_child.name}\n"))
    try:
        print(f"$ {sqsafe} check --template {broken}   (without {pascal(NAME)}DeadLetterAlarm: must fail)", flush=True)
        check = subprocess.run(
            [sqsafe, "check", "--template", str(broken)], cwd=project, env=env, capture_output=True, text=True
        )
    finally:
        broken.unlink()
        broken_child.unlink()
    want = f"[alarm-dlq] {pascal(NAME)}DeadLetterQueue: "
    if check.returncode != 1 or want not in check.stdout:
        raise SystemExit(
            f"project: sqsafe check did not catch a missing DLQ alarm (exit {check.returncode}, "
            f"expected 1 and {want!r}):\n{check.stdout}{check.stderr}"
        )
    print(f"without {pascal(NAME)}DeadLetterAlarm sqsafe check fails as it must: {check.stdout.splitlines()[0]}", flush=True)


def metric_count(log: Path, metric: str) -> int:
    """The sum of one EMF counter over a function's log lines."""
    total = 0
    if not log.is_file():
        return 0
    for line in log.read_text(errors="replace").splitlines():
        if f'"{metric}"' not in line or not line.startswith("{"):
            continue
        try:
            total += int(json.loads(line).get(metric, 0))
        except (ValueError, TypeError):
            continue
    return total


def pipeline(project: Path, env: dict) -> None:
    """sqsafe local up --watch on the project's template; each sample sent twice with the `sqsafe local send` line it
    printed; one effect per intent."""
    cmd = [SQSAFE, "local", "up", "--watch", "--visibility-timeout", "5"]
    print("$ " + " ".join(cmd) + f"   (in {project})", flush=True)
    proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    session = None
    try:
        endpoint = table = logs = None
        queues: dict[str, str] = {}
        dlqs: dict[str, str] = {}
        hints: dict[str, str] = {}
        records: dict[str, int] = {}
        exports: dict[str, str] = {}
        last_function = None
        deadline = time.monotonic() + 600
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("project: sqsafe local up stopped before it was ready:\n" + "".join(lines))
            lines.append(line)
            if line.startswith("payments API"):
                raise SystemExit(f"project: {SQSAFE} started a payments API: sqsafe local up knows none (this "
                                 "repository's fake one is sqsafe-test-servers', which scripts/local.sh runs beside it)")
            if m := re.match(r"moto server\s+(\S+)", line):
                endpoint = m.group(1)
            elif m := re.match(r"table\s+(\S+)\s+\(IdempotencyTable\)", line):
                table = m.group(1)
            elif m := re.match(r"function logs\s+(\S+)", line):
                logs = Path(m.group(1))
            elif m := re.match(r"(\S+)\s+queue\s+(\S+)", line):
                queues[m.group(1)] = m.group(2)
                last_function = m.group(1)
            elif (m := re.match(r"\s+DLQ\s+(\S+)", line)) and last_function:
                dlqs[last_function] = m.group(1)
            elif line.startswith("  export "):
                exports.update(pair.split("=", 1) for pair in line.split()[1:] if "=" in pair)
            elif m := re.match(r"  sqsafe local send (\S+)\s+# (\S+), (\d+) record", line):
                hints[m.group(1)] = m.group(2)
                records[m.group(1)] = int(m.group(3))
            elif line.startswith("Under cargo lambda watch"):
                break
        if not (endpoint and table and logs) or set(hints) != {NAME, NAME_TRANSACT}:
            raise SystemExit(f"project: sqsafe local up did not print the endpoint, table, logs and sends:\n{''.join(lines)}")
        session = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        sqs, dynamodb = boto3.client("sqs", **session), boto3.client("dynamodb", **session)
        # Each sample twice, every record of it, with the command sqsafe local up printed (the FIFO records carry their
        # group and deduplication id: SQS drops the second copies within the 5-minute deduplication window, as it
        # would in AWS; the standard queue shows the redelivery). In the project, with up's environment: send finds
        # the pipeline through the file up writes under the project's target folder.
        for name in (NAME, NAME_TRANSACT):
            send = [SQSAFE, "local", "send", name, "--times", "2"]
            print(f"$ sqsafe local send {name} --times 2   ({hints[name]}, {records[name]} records)", flush=True)
            subprocess.run(send, cwd=project, env=env, check=True)
        deadline = time.monotonic() + 600  # the first delivery builds and starts each function under watch
        completed: dict[str, list[str]] = {}
        settled = False
        while time.monotonic() < deadline and not settled:
            items = dynamodb.scan(TableName=table)["Items"]
            completed = {
                name: [i["pk"]["S"] for i in items
                       if i["status"]["S"] == "COMPLETED" and i["pk"]["S"].startswith(f"{name}#v1#")]
                for name in (NAME, NAME_TRANSACT)
            }
            answered = metric_count(logs / f"{NAME}.watch.log", "RecordsReplayed") + metric_count(
                logs / f"{NAME}.watch.log", "RecordsSkippedByCache")
            empty = all(
                all(v == "0" for v in sqs.get_queue_attributes(
                    QueueUrl=url,
                    AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                )["Attributes"].values())
                for name, url in queues.items() if name in (NAME, NAME_TRANSACT)
            )
            settled = (empty and all(len(completed[name]) == records[name] for name in completed)
                       and answered >= records[NAME])
            if not settled:
                time.sleep(1)
        applied = metric_count(logs / f"{NAME}.watch.log", "RecordsProcessed")
        answered = metric_count(logs / f"{NAME}.watch.log", "RecordsReplayed") + metric_count(
            logs / f"{NAME}.watch.log", "RecordsSkippedByCache")
        if not settled:
            raise SystemExit(f"project: the samples did not settle: completed {completed}, {NAME} applied {applied}, "
                             f"answered from the record {answered}\n{''.join(lines[-20:])}")
        if (any(len(pks) != records[name] for name, pks in completed.items()) or applied != records[NAME]
                or answered != records[NAME]):
            raise SystemExit(f"project: expected one effect per intent and one replay each ({records} records): "
                             f"completed {completed}, {NAME} applied {applied}, answered from the record {answered}")
        # The export lines it printed point sqsafe dlq at it: inspect the first consumer's DLQ with them alone.
        if "AWS_ENDPOINT_URL" not in exports or NAME not in dlqs:
            raise SystemExit(f"project: sqsafe local up printed no export lines or no DLQ for {NAME}:\n{''.join(lines)}")
        inspect = subprocess.run(
            [SQSAFE, "dlq", "inspect", "--queue", dlqs[NAME]],
            env={"PATH": os.environ["PATH"], "HOME": str(project), "AWS_EC2_METADATA_DISABLED": "true", **exports},
            capture_output=True, text=True,
        )
        if inspect.returncode != 0:
            raise SystemExit(f"project: sqsafe dlq inspect with the printed exports failed:\n{inspect.stdout}{inspect.stderr}")
        print(f"sqsafe dlq inspect with the printed export lines: {inspect.stdout.strip().splitlines()[-1]}", flush=True)
        intents = ", ".join(pk for pks in completed.values() for pk in pks)
        print(f"each sample sent twice: one COMPLETED intent per record ({intents}); "
              f"{NAME}: {records[NAME]} applied, their second deliveries answered from the record; the queues are "
              "empty", flush=True)
    finally:
        # SIGTERM, as a CI runner or `kill` sends it: sqsafe local up must stop everything it started, moto included.
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        print("".join(lines[-5:]) + (out or "")[-2000:], flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"project: sqsafe local up did not stop cleanly on SIGTERM (exit {proc.returncode})")
    # The effect as its API saw it: up's local stand-in for the first consumer's API (no value was given for its
    # parameter) got one call per intent, each under a key of its own, though every sample was sent twice.
    api = f"{pascal(NAME)}ApiUrl"
    want = f"{api}: {records[NAME]} call{'' if records[NAME] == 1 else 's'}, {records[NAME]} key"
    said = [line for line in (out or "").splitlines() if line.startswith(f"{api}: ")]
    if len(said) != 1 or not said[0].startswith(want):
        raise SystemExit(f"project: sqsafe local up's stand-in for {api} did not say {want!r} at stop: {said}")
    print(f"the local stand-in API: {said[0]}", flush=True)
    try:
        boto3.client("sqs", **session).list_queues()
    except Exception:  # noqa: BLE001 - any failure to connect means the server is gone
        print("sqsafe local up stopped on SIGTERM, and its moto server with it", flush=True)
    else:
        raise SystemExit(f"project: moto at {session['endpoint_url']} still answers after sqsafe local up got SIGTERM")


def build_arch() -> str:
    """The architecture of the project's release build: make test's one decision (scripts/build_arch.py, exported as
    SQSAFE_BUILD_ARCH by scripts/test.sh), the one the workspace's template checks build. size-check.py --built
    refuses to compare two architectures."""
    return build_arch_module.current()


def release_priority() -> None:
    """In the release build's process (before exec): the niceness SQSAFE_RELEASE_NICE gives (scripts/test.sh: -5
    where it runs as root), so that the longest chain of make test gets the cores first; unchanged without it."""
    nice = os.environ.get("SQSAFE_RELEASE_NICE")
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, int(nice))
        except (OSError, ValueError):
            pass


class ReleaseBuild:
    """The project's `make build` of its first consumer (sam build), as a team deploys it, running beside the other
    steps, with a PATH a fresh machine has (bare_env): make build must find the pinned cargo-lambda itself."""

    def __init__(self, project: Path, env: dict) -> None:
        scratch = project.parent
        folder = scratch / "release-build"
        # A copy as rendered: the other steps break and restore its handler and add a consumer while this compiles.
        copy = folder / project.name
        shutil.copytree(project, copy, symlinks=True)
        self.arch = build_arch()
        self.function = f"{pascal(NAME)}Function"
        self.build_dir = folder / "aws-sam-build"
        self.log = folder / "make-build.log"
        sam_args = [self.function, "--template-file", "template.yaml", "--build-dir", str(self.build_dir),
                    "--parameter-overrides", f"Architecture={self.arch}"]
        cmd = ["make", "build", "ARGS=" + " ".join(sam_args)]
        build_env = {
            **bare_env(env),
            # No update check (it would call pypi.org): loopback only. (Telemetry: make build turns it off itself.)
            "__SAM_CLI_APP_DIR": sam_env(scratch)["__SAM_CLI_APP_DIR"],
            # A release build shares nothing with the debug ones, and never waits on their lock: a target folder of
            # its own, or RELEASE_TARGET, the one the workspace's own sam build compiles in (make test's: the AWS SDK
            # compiled once for both, see crates/sqsafe-workspace-hack/Cargo.toml).
            "CARGO_TARGET_DIR": str(RELEASE_TARGET or PROJECT_TARGET / "project-release-build"),
        }
        print("$ " + " ".join(cmd) + f"   (in a copy of the project, in the background, PATH={build_env['PATH']}; "
              f"log {self.log})", flush=True)
        self.started = time.monotonic()
        with self.log.open("w") as out:
            # A session of its own: stopped early, it is stopped with the cargo and rustc processes it started.
            self.proc = subprocess.Popen(cmd, cwd=copy, env=build_env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=release_priority)

    def finish(self) -> None:
        """Waits for it; leaves its bootstrap in RELEASE_OUT."""
        rc = self.proc.wait()
        seconds = time.monotonic() - self.started
        if rc != 0:
            raise SystemExit(f"project: make build ({self.function}) failed (exit {rc}):\n"
                             f"{self.log.read_text(errors='replace')[-4000:]}")
        bootstrap = self.build_dir / self.function / "bootstrap"
        if not bootstrap.is_file():
            raise SystemExit(f"project: make build ({self.function}) left no {bootstrap}")
        built_for = build_arch_module.elf_arch(bootstrap)
        if built_for != self.arch:
            raise SystemExit(f"project: make build ({self.function}) was asked for {self.arch} and built a {built_for} "
                             f"bootstrap ({bootstrap})")
        shutil.rmtree(RELEASE_OUT, ignore_errors=True)
        RELEASE_OUT.mkdir(parents=True)
        shutil.copy2(bootstrap, RELEASE_OUT / "bootstrap")
        (RELEASE_OUT / "build.json").write_text(json.dumps(
            {"architecture": self.arch, "function": self.function, "binary": NAME, "seconds": round(seconds)}) + "\n")
        print(f"make build {self.function} ({self.arch}, release): {bootstrap.stat().st_size:,} B in {seconds:.0f} s "
              f"(beside the steps above); left in {RELEASE_OUT}", flush=True)


def sizes(b: int) -> None:
    """`b`: charge-payment's debug binary, read when the check started (make test builds it with fault injection
    later, under the same name)."""
    ours = PROJECT_TARGET / "debug" / NAME
    a = ours.stat().st_size
    print(f"debug binaries: {NAME} (outside project) {a:,} B, charge-payment (inside the workspace) {b:,} B", flush=True)
    if a > b * 1.10:
        raise SystemExit(f"project: {NAME}'s debug binary is more than 10% larger than charge-payment's: "
                         "something pulls in more than a consumer uses")


def discard_project_outputs(project_target: Path, release_target: Path | None, shared: bool) -> None:
    """What a run leaves in the target folders, less what the next run can use: the project's own crates, their
    binaries and their Lambda builds go (each run's project has a new path, so they would never be reused); its
    third-party crates and sqsafe's stay, so that make test on a warm tree compiles only what changed. `shared`: the
    folder is the workspace's too (CARGO_TARGET_DIR, the default), whose test binaries may share the templates' test
    target names (handler, api), so those are left there."""
    debug = project_target / "debug"
    for name in (NAME, NAME_TRANSACT, NAME_S3, NAME_KINESIS, NAME_CHANGES, API):
        under = name.replace("-", "_")
        for leftover in (*debug.glob(f"{name}*"), *(debug / "deps").glob(f"{under}-*"),
                         *(debug / "deps").glob(f"lib{under}-*"), *(debug / ".fingerprint").glob(f"{name}-*")):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        shutil.rmtree(project_target / "lambda" / name, ignore_errors=True)
        if release_target is not None:
            shutil.rmtree(release_target / "lambda" / name, ignore_errors=True)
    if not shared:
        # The templates' test targets (tests/handler.rs, tests/api.rs): in a folder of the project's own, only its
        # crates have them.
        for test_binary in (*(debug / "deps").glob("handler-*"), *(debug / "deps").glob("api-*")):
            test_binary.unlink(missing_ok=True)


def main() -> int:
    global SQSAFE
    scratch = Path(tempfile.mkdtemp(prefix="sqsafe-project-"))
    if scratch.resolve().is_relative_to(ROOT):
        raise SystemExit(f"project: {scratch} is inside the workspace; set TMPDIR elsewhere")
    env = {
        **os.environ,
        "CARGO_TARGET_DIR": str(PROJECT_TARGET),
        # The workspace's linker (its .cargo/config.toml): cargo's fingerprint includes it, and with another one the
        # crates both builds share would be rebuilt by each in turn.
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER": str(ROOT / "scripts" / "linker.sh"),
    }
    env.pop("CARGO_MANIFEST_DIR", None)
    inside = (TARGET / "debug" / "charge-payment").stat().st_size
    started = time.monotonic()
    release = None
    # An earlier run's bootstrap must not stand in for this run's (size-check.py --built reads it).
    shutil.rmtree(RELEASE_OUT, ignore_errors=True)
    try:
        step(f"sam init --location templates/project into {scratch} (outside the workspace)")
        project = render(scratch)
        step(f"make build: sam build {pascal(NAME)}Function (release, the project's deploy build), in the background")
        release = ReleaseBuild(project, env)
        step("what the project builds: scripts/dependents-check.py --project")
        run(str(VENV / "bin" / "python"), str(ROOT / "scripts" / "dependents-check.py"), "--project", str(project),
            cwd=ROOT, env=env)
        step("the project's make test (on a fresh machine's PATH: it installs its own sqsafe), and without the DLQ grant")
        SQSAFE = make_test(project, env)
        step(f"{NAME}: formatted, clippy-clean, built, tested; its tests fail when its effect breaks")
        features = shares_the_build(project, env, NAME, None)
        crate_checks(project, env, NAME)
        step("the project's template: sam validate --lint, cfn-lint, the rules, sqsafe check")
        template_checks(project, env)
        step(f"sqsafe new consumer {NAME_TRANSACT} --fifo --transact --envelope eventbridge, from a folder inside the "
             "project; the same checks")
        run(SQSAFE, "new", "consumer", NAME_TRANSACT, "--fifo", "--transact", "--envelope", "eventbridge",
            cwd=project / "functions", env=env)
        features = shares_the_build(project, env, NAME_TRANSACT, features)
        crate_checks(project, env, NAME_TRANSACT)
        template_checks(project, env)
        step("both consumers under cargo lambda watch behind the local SQS pipeline; each sample twice")
        pipeline(project, env)
        step(f"sqsafe new consumer {NAME_S3} --envelope s3: built, tested, its tests fail when its effect breaks (after the pipeline, which runs the first two)")
        run(SQSAFE, "new", "consumer", NAME_S3, "--envelope", "s3", cwd=project, env=env)
        features = shares_the_build(project, env, NAME_S3, features)
        crate_checks(project, env, NAME_S3)
        step(f"sqsafe new consumer {NAME_KINESIS} --source kinesis: built, tested (a shard stopped at its first "
             "failure), its tests fail when its effect breaks")
        run(SQSAFE, "new", "consumer", NAME_KINESIS, "--source", "kinesis", cwd=project, env=env)
        features = shares_the_build(project, env, NAME_KINESIS, features)
        crate_checks(project, env, NAME_KINESIS, KINESIS_BREAKS)
        step(f"sqsafe new consumer {NAME_CHANGES} --source dynamodb-stream: built, tested (changes stopped at their "
             "first failure), its tests fail when its effect breaks")
        run(SQSAFE, "new", "consumer", NAME_CHANGES, "--source", "dynamodb-stream", cwd=project, env=env)
        features = shares_the_build(project, env, NAME_CHANGES, features)
        crate_checks(project, env, NAME_CHANGES, CHANGES_BREAKS)
        step(f"sqsafe new api {API}: built, tested, its tests fail without the idempotency layer; the template checks")
        run(SQSAFE, "new", "api", API, cwd=project, env=env)
        shares_the_build(project, env, API, features)
        api_checks(project, env, API)
        template_checks(project, env)
        step(f"{API} served by sqsafe local up --watch on a loopback port: a repeat replayed; the stream consumers "
             f"{NAME_KINESIS} and {NAME_CHANGES} under watch, each sample applied")
        api_local(project, env, API, [NAME_KINESIS, NAME_CHANGES])
        step(f"{NAME_KINESIS} and {NAME_CHANGES} against sqsafe without its stop at a shard's first failure: their "
             "tests must fail")
        stop_rule_checks(scratch, project, env)
        step("binary size")
        sizes(inside)
        step(f"make build {pascal(NAME)}Function: its end (it ran beside the steps since the render)")
        release.finish()
        step_table()
        step(f"passed in {time.monotonic() - started:.0f} s; discarding the project")
        return 0
    finally:
        if release is not None and release.proc.poll() is None:
            os.killpg(release.proc.pid, signal.SIGKILL)
            release.proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)
        discard_project_outputs(PROJECT_TARGET, RELEASE_TARGET, shared=PROJECT_TARGET == TARGET)


if __name__ == "__main__" and sys.argv[1:] == ["--print-arch"]:
    # scripts/build_arch.py --check: the architecture this check's release build would be, and nothing else.
    print(build_arch())
    sys.exit(0)
if __name__ == "__main__":
    sys.exit(main())
