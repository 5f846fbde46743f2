"""Shared fixtures: the parsed SAM template and its translation to CloudFormation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nested import flatten
from sam_translate import ROOT, load_template, translate


@pytest.fixture(scope="session")
def _template_yaml() -> dict[str, Any]:
    """template.yaml as written: its consumers' queues, alarms and dashboards in nested applications."""
    return load_template()


@pytest.fixture(scope="session")
def _sam_template(_template_yaml) -> dict[str, Any]:
    # The rules, sqsafe check and sqsafe local read the template with its local nested applications inlined.
    return flatten(copy.deepcopy(_template_yaml), ROOT)


@pytest.fixture
def sam_template(_sam_template) -> dict[str, Any]:
    """template.yaml, parsed (long-form intrinsics) and flattened (nested.flatten: sqsafe/consumer.yaml's resources
    as ChargePaymentQueue, ChargePaymentDeadLetterQueue, ...), as the rules read it; a fresh copy per test, so tests
    may mutate it."""
    return copy.deepcopy(_sam_template)


@pytest.fixture(scope="session")
def translated(_sam_template) -> dict[str, Any]:
    """What CloudFormation would run, flattened: template.yaml with its nested applications inlined, through the SAM
    transform, parameter defaults. (The template as deployed, with AWS::CloudFormation::Stack resources, is what
    test_smoke_deploy.py creates in moto.)"""
    return translate(_sam_template)
