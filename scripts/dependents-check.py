"""Fails when a crate outside this workspace that depends on sqsafe would get more than it uses.

A team's consumer lives in its own repository and depends on `sqsafe` by git or path. Inside this workspace every
binary member depends on crates/sqsafe-workspace-hack (one set of third-party features whatever cargo builds); the
libraries a team depends on must not, or the hack's union (clap, a hyper server, the DynamoDB Streams SDK, tokio's and
the AWS crates' `test-util`) is compiled into every dependent. This script writes a consumer crate in a temporary
directory outside the repository (the dependencies of a consumer made by `cargo xtask new-consumer`, sqsafe by path),
resolves it with this workspace's Cargo.lock (offline: nothing new is downloaded), and checks what cargo would build:

- its build (`-e normal,build`): none of the packages or features named in FORBIDDEN_* (aws-config itself turns on
  `test-util` of aws-credential-types and two smithy crates for every SDK user: a feature a crate that depends on
  aws-config alone also gets is upstream's, not sqsafe's, and is not counted);
- its test build (`-e normal,build,dev`, with sqsafe-testkit and sqsafe-local as dev-dependencies, as a generated
  consumer's tests have them): no workspace-hack and no sqsafe-test-servers either.

And what a team installs, `cargo install --git <this repository> sqsafe-cli` (the `sqsafe` command, `sqsafe local`
included): resolved alone, as cargo install builds it, with every feature of sqsafe-cli on, it has sqsafe-local but
not this repository's test servers (TEST_SERVERS, a member of this workspace, so that a rename cannot hide it); and
sqsafe-local declares no features (the test servers were once features of it) and depends on no test server.

Prints the number of packages the dependent builds. Run by scripts/test.sh; `--keep DIR` writes the crate to DIR
instead (to build it by hand, for example for its release binary's size). `--project DIR` checks an existing project
instead of writing one: a project made from templates/project (scripts/project-check.py), its whole workspace.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import build_arch  # scripts/build_arch.py: this script's folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent

# Packages a consumer never uses (the workspace's own tooling, test servers, the outbox relay's stream SDK).
FORBIDDEN_PACKAGES = {
    "sqsafe-workspace-hack": "the workspace-hack is this workspace's build tool, not a dependency of its libraries",
    "clap": "command-line parsing is the CLI's, not the library's",
    "axum": "the local pipeline's HTTP routes are sqsafe-local's",
    "aws-sdk-dynamodbstreams": "only the outbox relay's tests read DynamoDB Streams",
    "sqsafe-local": "the local pipeline is for a consumer's tests ([dev-dependencies]), not its binary",
    "criterion": "benchmarks are this workspace's",
    "sqsafe-test-servers": "the fake payments API and the DynamoDB fault proxy are this repository's test servers",
}
# Forbidden in a consumer's test build too, not only in its binary.
FORBIDDEN_IN_TESTS = {"sqsafe-workspace-hack", "sqsafe-test-servers"}
# Features of third-party packages a consumer's binary never uses.
FORBIDDEN_FEATURES = {
    "test-util": "test helpers (tokio's paused clock, the AWS crates' test clients) belong in tests only",
    "server": "a consumer serves nothing: lambda_runtime is an HTTP client of the Runtime API",
}

# The crate of this repository's test servers: never in what a team installs or depends on.
TEST_SERVERS = "sqsafe-test-servers"

CONSUMER_MAIN = """\
use sqsafe::App;

fn main() {
    // Only the dependency tree matters here; the crate is resolved, not built.
    let _ = std::any::type_name::<App>();
}
"""


def write_baseline(directory: Path) -> None:
    """What any user of the AWS SDK for Rust gets: aws-config alone, with the features the workspace uses."""
    (directory / "src").mkdir(parents=True, exist_ok=True)
    (directory / "Cargo.toml").write_text(
        """\
[package]
name = "aws-config-alone"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
aws-config = { version = "1", default-features = false, features = ["behavior-version-latest", "rt-tokio"] }
"""
    )
    (directory / "src" / "main.rs").write_text("fn main() {}\n")
    shutil.copy(ROOT / "Cargo.lock", directory / "Cargo.lock")


def write_consumer(directory: Path) -> None:
    sqsafe = ROOT / "crates"
    (directory / "src").mkdir(parents=True, exist_ok=True)
    (directory / "Cargo.toml").write_text(
        f"""\
[package]
name = "outside-consumer"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
sqsafe = {{ path = "{sqsafe / 'sqsafe'}" }}
tokio = {{ version = "1", features = ["macros", "rt-multi-thread"] }}
tracing = "0.1"

[dev-dependencies]
sqsafe-local = {{ path = "{sqsafe / 'sqsafe-local'}" }}
sqsafe-testkit = {{ path = "{sqsafe / 'sqsafe-testkit'}" }}
tokio = {{ version = "1", features = ["test-util"] }}

[profile.release]
debug = false
"""
    )
    (directory / "src" / "main.rs").write_text(CONSUMER_MAIN)
    # The same versions as the workspace: cargo drops what the consumer does not use and downloads nothing.
    shutil.copy(ROOT / "Cargo.lock", directory / "Cargo.lock")


def tree(directory: Path, edges: str, *extra: str) -> list[tuple[str, set[str]]]:
    out = subprocess.run(
        ["cargo", "tree", "--offline", "-e", edges, "--prefix", "none", "--format", "{p}|{f}", *extra],
        cwd=directory,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = []
    for line in out.splitlines():
        line = line.removesuffix(" (*)").strip()
        if not line:
            continue
        package, _, features = line.partition("|")
        packages.append((package.replace(" (proc-macro)", ""), {f for f in features.split(",") if f}))
    return packages


def problems_in(
    packages: list[tuple[str, set[str]]], what: str, dev: bool, upstream: set[tuple[str, str]] = frozenset()
) -> list[str]:
    problems = []
    for package, features in packages:
        name = package.split(" ")[0]
        if name in FORBIDDEN_PACKAGES and (not dev or name in FORBIDDEN_IN_TESTS):
            problems.append(f"{what}: {package}: {FORBIDDEN_PACKAGES[name]}")
        if dev:
            continue
        for feature in sorted(features & FORBIDDEN_FEATURES.keys()):
            if (name, feature) in upstream:
                continue
            problems.append(f"{what}: {package} with feature `{feature}`: {FORBIDDEN_FEATURES[feature]}")
    return sorted(set(problems))


# The Lambda target: what template.yaml deploys (arm64), and what sam build compiles for unless make test decided
# otherwise (scripts/build_arch.py, SQSAFE_BUILD_ARCH: x86_64 on a machine without the aarch64 std).
LAMBDA_TARGET = "aarch64-unknown-linux-gnu"


def lambda_target() -> str:
    """The target of make test's release builds: its one decision, read when a project is checked, not at import."""
    return build_arch.triple(build_arch.current())


# Crates a project's consumer may get with other features than this workspace's functions, in their release build for
# LAMBDA_TARGET, and why: the outbox relay reads DynamoDB stream events. Only crates built on serde follow them (not
# the AWS SDK, tokio, hyper, rustls): a few seconds of compiling, where a difference anywhere else costs minutes.
RELEASE_SHARE_EXCEPTIONS = {
    "aws_lambda_events": "the outbox relay's events also have `dynamodb` and `streams`",
    "serde_core": "serde_dynamo, under the relay's stream events, asks for its `default`",
    "serde_dynamo": "the relay asks for its `aws-sdk-dynamodb+1` (its items as the SDK's); a consumer's stream "
                    "changes (sqsafe-batch) need none",
}


def release_tree(directory: Path) -> dict[str, set[str]]:
    """Third-party packages (`name version`) and their features, as `cargo build --release --target LAMBDA_TARGET`
    resolves the packages cargo selects in `directory` (a workspace's default members)."""
    return {package: features for package, features in tree(directory, "normal,build", "--target", lambda_target())
            if "(/" not in package}


def release_share_problems(project: Path) -> list[str]:
    """make test builds a new project's consumer for the Lambda (its make build) in the target folder of this
    workspace's own sam build: every third-party crate both need must resolve with the same features, or it compiles
    twice, and with it every crate built on it (the AWS SDK, when tokio differs)."""
    if lambda_target() != LAMBDA_TARGET:
        # On x86_64 the workspace-hack applies to this workspace's functions (its cfg leaves out aarch64 Linux only),
        # not to the project's: the two release builds cannot share their crates, and nothing here says they do.
        print(f"dependents-check: NOTE: the release builds are for {lambda_target()} (SQSAFE_BUILD_ARCH=x86_64), "
              f"where the workspace-hack applies to this workspace's functions: their crates are shared only for "
              f"{LAMBDA_TARGET}, not checked here")
        return []
    ours = release_tree(ROOT)
    problems = []
    for package, features in sorted(release_tree(project).items()):
        name = package.split(" ")[0]
        if name in RELEASE_SHARE_EXCEPTIONS or ours.get(package) == features:
            continue
        have = "not built" if package not in ours else ", ".join(sorted(ours[package])) or "no features"
        problems.append(f"release build for {LAMBDA_TARGET}: {package} with [{', '.join(sorted(features))}], this "
                        f"workspace's functions with [{have}]: compiled twice by make test (the workspace-hack must "
                        "stay off for this target, and a function's dependencies ask what a consumer's ask)")
    return problems


def installed_cli_packages() -> set[str]:
    """The packages of sqsafe-cli built alone, as `cargo install` builds it, with every feature it has on."""
    out = subprocess.run(
        ["cargo", "tree", "--offline", "-p", "sqsafe-cli", "--all-features", "-e", "normal,build", "--prefix", "none",
         "--format", "{p}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return {line.split(" ")[0] for line in out.splitlines() if line.strip()}


def installed_cli_problems() -> list[str]:
    """The sqsafe a team installs has sqsafe-local and no test servers, whatever features it is built with."""
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--offline", "--no-deps", "--format-version", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout)
    members = {p["name"]: p for p in metadata["packages"]}
    if TEST_SERVERS not in members:
        raise SystemExit(f"dependents-check: no workspace member is named {TEST_SERVERS}: this check would see nothing "
                         f"(rename TEST_SERVERS with the crate)")
    packages = installed_cli_packages()
    if "sqsafe-local" not in packages:
        raise SystemExit("dependents-check: sqsafe-cli does not depend on sqsafe-local (sqsafe local)")
    problems = []
    if TEST_SERVERS in packages:
        why = FORBIDDEN_PACKAGES[TEST_SERVERS]
        problems.append(f"cargo install sqsafe-cli (--all-features): {TEST_SERVERS}: {why}")
    local = members["sqsafe-local"]
    if local["features"]:
        problems.append(f"sqsafe-local declares features {', '.join(sorted(local['features']))}: what only this "
                        f"repository's tests use belongs in {TEST_SERVERS}, not behind a feature of what teams get")
    if any(d["name"] == TEST_SERVERS for d in local["dependencies"]):
        problems.append(f"sqsafe-local depends on {TEST_SERVERS} (of any kind): it must not")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="write the consumer crate here and keep it")
    parser.add_argument("--project", type=Path, help="check this project (a Cargo workspace with a Cargo.lock) instead")
    parser.add_argument("--print-arch", action="store_true",
                        help="the architecture --project's release build check is for (scripts/build_arch.py --check)")
    args = parser.parse_args()
    if args.print_arch:
        print(build_arch.current())
        return 0
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="sqsafe-dependent-"))
    directory = args.project or scratch
    try:
        if args.project is None:
            write_consumer(directory)
        write_baseline(scratch / "baseline")
        upstream = {
            (package.split(" ")[0], feature)
            for package, features in tree(scratch / "baseline", "normal,build")
            for feature in features
        }
        build = tree(directory, "normal,build")
        test = tree(directory, "normal,build,dev")
        problems = problems_in(build, "cargo build", dev=False, upstream=upstream)
        problems += problems_in(test, "cargo test", dev=True)
        if args.project is None:
            problems += installed_cli_problems()
        else:
            problems += release_share_problems(directory)
        distinct = {package for package, _ in build}
        if problems:
            print(f"dependents-check: a crate outside the workspace depending on sqsafe ({directory}) gets:",
                  file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
            print("fix: the libraries a team depends on must not depend on sqsafe-workspace-hack "
                  "(.config/hakari.toml final-excludes) nor enable these features outside [dev-dependencies]; "
                  f"the test servers live in {TEST_SERVERS}, which neither sqsafe-cli nor sqsafe-local depends on",
                  file=sys.stderr)
            return 1
        what = f"the project {directory}" if args.project else "a crate outside the workspace depending on sqsafe"
        print(f"dependents-check: {what} builds {len(distinct)} packages, "
              f"none of {', '.join(sorted(FORBIDDEN_PACKAGES))}, no `test-util` or `server` feature")
        if args.project is not None:
            print(f"dependents-check: its release build for {lambda_target()} resolves every third-party crate as this "
                  f"workspace's functions do, but {', '.join(sorted(RELEASE_SHARE_EXCEPTIONS))}")
        if args.project is None:
            print(f"dependents-check: the sqsafe a team installs (cargo install sqsafe-cli, every feature on) has "
                  f"sqsafe-local and no {TEST_SERVERS}; sqsafe-local declares no features")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
