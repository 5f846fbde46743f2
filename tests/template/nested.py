"""Nested applications whose template is a local file, inlined into the parent for the independent validators that
read template.yaml as one document (the SAM transform and cfn-lint through conftest's `translated`, test_structure.py,
the smoke deploy). sqsafe check and sqsafe local inline them in Rust (crates/sqsafe-local/src/stack/nested.rs);
test_nested.py holds both to the same renaming.

An AWS::Serverless::Application (Location) or AWS::CloudFormation::Stack (TemplateURL) naming a file (relative to
the parent template's folder) is replaced by the child's resources, each under `<AppId><ChildId>`: the child's Ref,
Fn::GetAtt and Fn::Sub are renamed to match, its parameters become the values the parent passes (or their
defaults), and the parent's `!GetAtt App.Outputs.Name` becomes the child output's value. Children are flattened the
same way first. Any other location (S3, the Serverless Application Repository) is left in place.

This runs on the parsed template.yaml (the SAM template itself, before sam_translate).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

NESTED = {"AWS::Serverless::Application": "Location", "AWS::CloudFormation::Stack": "TemplateURL"}

# ${Name} in Fn::Sub text, not ${!Literal}.
PLACEHOLDER = re.compile(r"\$\{([^!}][^}]*)\}")


class NestedTemplateError(ValueError):
    """A nested application that cannot be inlined: one line that says why."""


def location(resource: Any) -> tuple[bool, Any]:
    """(whether the resource nests a template, where that template is)."""
    if not isinstance(resource, dict) or resource.get("Type") not in NESTED:
        return False, None
    return True, (resource.get("Properties") or {}).get(NESTED[resource["Type"]])


def _local_path(where: Any) -> str | None:
    return where if isinstance(where, str) and "://" not in where else None


def flatten(doc: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`doc` with every nested application whose template is a local file inlined (`folder`: the parent template's
    folder). Raises NestedTemplateError for a child that cannot be read or inlined."""
    from sam_translate import load_template

    return _flatten(doc, Path(folder), [], load_template)


def _flatten(doc: dict[str, Any], folder: Path, open_: list[Path], load) -> dict[str, Any]:
    resources = doc.get("Resources")
    if not isinstance(resources, dict):
        return doc
    taken = set(resources)
    flat: dict[str, Any] = {}
    outputs: dict[str, dict[str, Any]] = {}
    for rid, resource in resources.items():
        nested, where = location(resource)
        path = _local_path(where) if nested else None
        if path is None:
            flat[rid] = resource
            continue
        child_resources, child_outputs = _read_child(rid, resource, folder / path, open_, load)
        for cid, child in child_resources.items():
            if cid in taken or cid in flat:
                raise NestedTemplateError(
                    f'nested application {rid}: a resource of it becomes "{cid}", which the template already has'
                )
            flat[cid] = child
        outputs[rid] = child_outputs
    if not outputs:
        return doc
    doc = dict(doc)
    doc["Resources"] = flat
    return _Rewrite(outputs=outputs).value(doc)


def _read_child(app: str, resource: dict, path: Path, open_: list[Path], load) -> tuple[dict, dict]:
    def fail(why: str) -> NestedTemplateError:
        return NestedTemplateError(f"nested application {app}: {why}")

    try:
        path.read_text(encoding="utf-8")
    except OSError as e:
        raise fail(f"cannot read its template {path}: {e}") from None
    canonical = path.resolve()
    if canonical in open_:
        raise fail(f"{path} nests itself")
    try:
        doc = load(path)
    except Exception as e:  # noqa: BLE001 - any YAML error, reported as the Rust checker does
        raise fail(f"cannot parse {path}: {e}") from None
    if not isinstance(doc, dict):
        raise fail(f"cannot parse {path}: the template is not a mapping")
    for section in ("Conditions", "Mappings", "Globals"):
        if doc.get(section):
            raise fail(f"{section} are not supported by sqsafe check ({path})")
    open_.append(canonical)
    try:
        doc = _flatten(doc, path.parent, open_, load)
    finally:
        open_.pop()

    declared = doc.get("Parameters") or {}
    passed = (resource.get("Properties") or {}).get("Parameters") or {}
    for name in passed:
        if name not in declared:
            raise fail(f"passes parameter {name}, which {path} does not declare")
    params: dict[str, Any] = {}
    for name, declaration in declared.items():
        if passed.get(name) is not None:
            params[name] = passed[name]
        elif isinstance(declaration, dict) and declaration.get("Default") is not None:
            params[name] = declaration["Default"]
        else:
            raise fail(f"parameter {name} of {path} has no value (pass it in Parameters or give it a Default)")

    child_resources = doc.get("Resources") or {}
    rw = _Rewrite(renames={cid: f"{app}{cid}" for cid in child_resources}, params=params)
    renamed: dict[str, Any] = {}
    for cid, child in child_resources.items():
        child = rw.value(child)
        if isinstance(child, dict) and "DependsOn" in child:
            child["DependsOn"] = rw.depends_on(child["DependsOn"])
        renamed[rw.renames[cid]] = child
    outputs = {
        name: rw.value(out["Value"])
        for name, out in (doc.get("Outputs") or {}).items()
        if isinstance(out, dict) and out.get("Value") is not None
    }
    return renamed, outputs


def _inline(value: Any) -> str | None:
    """A value as Fn::Sub text, when it has one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.replace("${", "${!")
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "Ref" and isinstance(inner, str):
            return "${" + inner + "}"
        if key == "Fn::GetAtt" and isinstance(inner, list) and len(inner) == 2 and all(isinstance(p, str) for p in inner):
            return "${" + inner[0] + "." + inner[1] + "}"
    return None


class _Rewrite:
    def __init__(self, *, renames=None, params=None, outputs=None):
        self.renames: dict[str, str] = renames or {}
        self.params: dict[str, Any] = params or {}
        self.outputs: dict[str, dict[str, Any]] = outputs or {}

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict) and len(v) == 1:
            ((key, inner),) = v.items()
            if key == "Ref":
                return self.ref(inner)
            if key == "Fn::GetAtt":
                return self.get_att(inner)
            if key == "Fn::Sub":
                return self.sub(inner)
            return {key: self.value(inner)}
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v

    def ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            return {"Ref": name}
        if name in self.params:
            return copy.deepcopy(self.params[name])
        return {"Ref": self.renames.get(name, name)}

    def get_att(self, inner: Any) -> Any:
        if isinstance(inner, list) and len(inner) == 2 and all(isinstance(p, str) for p in inner):
            resource, attribute = inner
        elif isinstance(inner, str) and "." in inner:
            resource, attribute = inner.split(".", 1)
        else:
            return {"Fn::GetAtt": self.value(inner)}
        found, value = self.output(resource, attribute)
        if found:
            return value
        return {"Fn::GetAtt": [self.renames.get(resource, resource), attribute]}

    def output(self, resource: str, attribute: str) -> tuple[bool, Any]:
        if resource not in self.outputs or not attribute.startswith("Outputs."):
            return False, None
        name = attribute[len("Outputs."):]
        if name not in self.outputs[resource]:
            raise NestedTemplateError(
                f"nested application {resource} has no output {name} (GetAtt {resource}.{attribute})"
            )
        return True, copy.deepcopy(self.outputs[resource][name])

    def sub(self, inner: Any) -> Any:
        if isinstance(inner, str):
            text, variables = inner, {}
        elif isinstance(inner, list) and len(inner) == 2 and isinstance(inner[1], dict) and isinstance(inner[0], str):
            text, variables = inner
        else:
            return {"Fn::Sub": self.value(inner)}
        variables = {k: self.value(x) for k, x in variables.items()}
        own = set(variables)

        def replace(m: re.Match) -> str:
            name = m.group(1)
            if name in own:
                return m.group(0)
            head, _, attribute = name.partition(".")
            found, value = False, None
            if not attribute and head in self.params:
                found, value = True, copy.deepcopy(self.params[head])
            elif attribute:
                found, value = self.output(head, attribute)
            if found:
                text = _inline(value)
                if text is not None:
                    return text
                variable = name.replace(".", "")
                variables[variable] = value
                return "${" + variable + "}"
            if head in self.renames:
                return "${" + self.renames[head] + ("." + attribute if attribute else "") + "}"
            return m.group(0)

        out = PLACEHOLDER.sub(replace, text)
        return {"Fn::Sub": [out, variables] if variables else out}

    def depends_on(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.renames.get(x, x) if isinstance(x, str) else x for x in v]
        return self.renames.get(v, v) if isinstance(v, str) else v
