"""Refuses names that cannot name a crate, a binary, queues and a log group, before anything is written."""

import re
import sys

CONSUMER = "{{ cookiecutter.consumer_name }}"
PROJECT = "{{ cookiecutter.project_name }}"

if not re.fullmatch(r"[a-z](?:[a-z0-9]|-(?=[a-z0-9])){1,39}", CONSUMER) or CONSUMER.startswith("sqsafe"):
    sys.exit(
        f"consumer_name `{CONSUMER}`: use 2-40 lower-case letters, digits and single `-`, starting with a letter "
        "and not with `sqsafe` (it names the crate, the binary, the queues and the log group)"
    )
if not re.fullmatch(r"[a-z][a-z0-9-]{0,39}", PROJECT):
    sys.exit(f"project_name `{PROJECT}`: use lower-case letters, digits and `-`, starting with a letter (at most 40)")
