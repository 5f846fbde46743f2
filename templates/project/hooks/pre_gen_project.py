"""Refuses names that cannot name a crate, a binary, queues and a log group, before anything is written (the API's
name is optional: empty for no API)."""

import re
import sys

CONSUMER = "{{ cookiecutter.consumer_name }}"
API = "{{ cookiecutter.api_name }}"
PROJECT = "{{ cookiecutter.project_name }}"
ENVELOPE = "{{ cookiecutter.envelope }}"
SOURCE = "{{ cookiecutter.source }}"

if not re.fullmatch(r"[a-z](?:[a-z0-9]|-(?=[a-z0-9])){1,39}", CONSUMER) or CONSUMER.startswith("sqsafe"):
    sys.exit(
        f"consumer_name `{CONSUMER}`: use 2-40 lower-case letters, digits and single `-`, starting with a letter "
        "and not with `sqsafe` (it names the crate, the binary, the queues and the log group)"
    )
if not re.fullmatch(r"[a-z][a-z0-9-]{0,39}", PROJECT):
    sys.exit(f"project_name `{PROJECT}`: use lower-case letters, digits and `-`, starting with a letter (at most 40)")
if API and (not re.fullmatch(r"[a-z](?:[a-z0-9]|-(?=[a-z0-9])){1,39}", API) or API.startswith("sqsafe")):
    sys.exit(
        f"api_name `{API}`: use 2-40 lower-case letters, digits and single `-`, starting with a letter and not with "
        "`sqsafe` (it names the crate, the binary, the function and its records' keys), or leave it empty for no API"
    )
if API == CONSUMER:
    sys.exit(f"api_name `{API}`: the consumer has that name already; give the API another")
if SOURCE != "sqs" and ENVELOPE != "sqs":
    sys.exit(f"source `{SOURCE}` with envelope `{ENVELOPE}`: an envelope is a queue's (a stream's record is the payload); "
             "keep envelope `sqs` for a stream consumer")
