"""Shared fixtures: the parsed SAM template and its translation to CloudFormation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sam_translate import load_template, translate


@pytest.fixture(scope="session")
def _sam_template() -> dict[str, Any]:
    return load_template()


@pytest.fixture
def sam_template(_sam_template) -> dict[str, Any]:
    """template.yaml, parsed (long-form intrinsics); a fresh copy per test, so tests may mutate it."""
    return copy.deepcopy(_sam_template)


@pytest.fixture(scope="session")
def translated(_sam_template) -> dict[str, Any]:
    """What CloudFormation would run: template.yaml through the SAM transform, parameter defaults."""
    return translate(_sam_template)
