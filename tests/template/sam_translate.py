"""Translates template.yaml (SAM) into the plain CloudFormation that CloudFormation itself would run, offline.

Used by scripts/template-checks.sh (the output goes to cfn-lint, which no longer runs the SAM transform itself and so
misses errors inside AWS::Serverless::Function) and by the tests in this directory (the structure test and the smoke
deploy into moto, which does not support the SAM transform).

    python tests/template/sam_translate.py [--template template.yaml] [--region us-east-1] --out translated.json

`CodeUri: ./` (a local path that `sam build` / `sam package` would replace) becomes `s3://BUCKET/<LogicalId>.zip`; the
smoke deploy uploads the built artifacts under exactly those keys. A nested application's local `Location`
(sqsafe/consumer.yaml, which `sam package` would upload) becomes `https://BUCKET.s3.amazonaws.com/<path>`, as
cfn-lint cannot follow a local path from the translated file; `--list-children` prints those local templates, for
cfn-lint to check on their own. Nothing here talks to AWS: the managed-policy loader
is a stub (the template uses no managed policies; a function that needs one fails translation loudly).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
DEFAULT_BUCKET = "sqsafe-template-checks"
DEFAULT_REGION = "us-east-1"


def refs(value: Any) -> set[str]:
    """Logical ids (and parameters) a value refers to: Ref, Fn::GetAtt, ${X} / ${X.Attr} in Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                if isinstance(inner, list) and inner and isinstance(inner[0], str):
                    found.add(inner[0])
                elif isinstance(inner, str):
                    found.add(inner.split(".", 1)[0])
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                if isinstance(text, str):
                    found.update(m.split(".", 1)[0] for m in re.findall(r"\$\{([^!][^}]*)\}", text))
                if isinstance(inner, list) and len(inner) > 1:
                    found.update(refs(inner[1]))
            else:
                found.update(refs(inner))
    elif isinstance(value, list):
        for item in value:
            found.update(refs(item))
    return {r for r in found if not r.startswith("AWS::")}


def function_crate_binaries(root: Path = ROOT) -> dict[str, str]:
    """Binary name -> crate directory, for every crate under functions/ (from [[bin]], else the package name)."""
    import tomllib

    binaries: dict[str, str] = {}
    for manifest in sorted((root / "functions").glob("*/Cargo.toml")):
        cargo = tomllib.loads(manifest.read_text(encoding="utf-8"))
        bins = [b["name"] for b in cargo.get("bin", []) if "name" in b] or [cargo["package"]["name"]]
        for name in bins:
            binaries[name] = str(manifest.parent.relative_to(root))
    return binaries


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """Parses a SAM/CloudFormation YAML template; short-form intrinsics become their long form
    (`!Ref X` -> {"Ref": "X"}, `!GetAtt A.B` -> {"Fn::GetAtt": ["A", "B"]}, `!Sub s` -> {"Fn::Sub": s})."""
    from samtranslator.yaml_helper import yaml_parse

    return yaml_parse(Path(path).read_text(encoding="utf-8"))


def artifact_key(logical_id: str) -> str:
    """The S3 key of a function's zip in the translated template (and in the smoke deploy's bucket)."""
    return f"{logical_id}.zip"


class _NoManagedPolicies:
    """Stands in for samtranslator's IAM-backed loader: offline, and the template must not need managed policies."""

    def load(self) -> dict[str, str]:
        return {}


def translate(
    template: dict[str, Any],
    *,
    bucket: str = DEFAULT_BUCKET,
    region: str = DEFAULT_REGION,
    parameters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The CloudFormation template the SAM transform makes of `template` (not modified), with every function's
    local CodeUri pointed at s3://bucket/<LogicalId>.zip. `parameters` are the values a deploy would pass (the
    transform resolves a few of them itself, e.g. in Architectures); the template's defaults apply otherwise."""
    from samtranslator.translator.transform import transform

    template = copy.deepcopy(template)
    for logical_id, resource in template.get("Resources", {}).items():
        location = (resource.get("Properties") or {}).get("Location")
        if resource.get("Type") == "AWS::Serverless::Application" and _is_local(location):
            resource["Properties"]["Location"] = f"https://{bucket}.s3.amazonaws.com/{location}"
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.setdefault("Properties", {})
        code_uri = props.get("CodeUri")
        if isinstance(code_uri, str) and not code_uri.startswith("s3://"):
            props["CodeUri"] = f"s3://{bucket}/{artifact_key(logical_id)}"

    # samtranslator reads the region from a boto3 session even when AWS::Region is given.
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    parameter_values: dict[str, Any] = {"AWS::Region": region}
    parameter_values.update(parameters or {})
    return transform(template, parameter_values, _NoManagedPolicies())


def _is_local(location: Any) -> bool:
    return isinstance(location, str) and "://" not in location


def local_children(template: dict[str, Any], folder: Path) -> list[Path]:
    """The templates of the nested applications whose Location is a local file (relative to `folder`)."""
    return sorted({
        folder / r["Properties"]["Location"]
        for r in template.get("Resources", {}).values()
        if r.get("Type") == "AWS::Serverless::Application" and _is_local((r.get("Properties") or {}).get("Location"))
    })


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--bucket", default=DEFAULT_BUCKET)
    parser.add_argument("--out", type=Path, help="where to write the translated template (JSON)")
    parser.add_argument("--list-children", action="store_true",
                        help="print the local templates of its nested applications, one a line, and translate nothing")
    args = parser.parse_args(argv)
    if args.list_children:
        for child in local_children(load_template(args.template), args.template.parent):
            print(child)
        return 0
    if args.out is None:
        parser.error("--out is required")

    from samtranslator.model.exceptions import InvalidDocumentException

    try:
        translated = translate(load_template(args.template), bucket=args.bucket, region=args.region)
    except InvalidDocumentException as e:
        for cause in e.causes:
            print(f"sam_translate: {cause.message}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(translated, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for resource in translated["Resources"].values():
        kinds[resource["Type"]] = kinds.get(resource["Type"], 0) + 1
    summary = ", ".join(f"{n} {t}" for t, n in sorted(kinds.items()))
    print(f"sam_translate: {args.template.name} -> {args.out} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
