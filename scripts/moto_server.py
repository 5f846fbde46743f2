"""moto_server, with DynamoDB's writes applied one at a time, in the order they came.

moto's DynamoDB backend checks a write's condition and then applies the write with nothing held between the two:
under CPU load two conditional PutItems on one key can both pass `attribute_not_exists` (seen here: 2 of 40 trials of
20 racing claims had two winners with six busy loops beside the server). DynamoDB itself evaluates a condition and
its write atomically, and sqsafe's claim protocol depends on that, so this launcher runs DynamoDB's writes (every action
but the reads in _READS) one at a time, in the order they came (FifoLock, around the backend call). Reads, DynamoDB
Streams and the other services (SQS long polls among them) are untouched.

It also gives moto's nested CloudFormation stacks (AWS::CloudFormation::Stack, what a SAM nested application such as
sqsafe/consumer.yaml becomes) their `Fn::GetAtt <Stack>.Outputs.<Name>`: moto 5.2.5 creates the nested stack from its
TemplateURL but has no attribute lookup on it, so a parent reading the child's outputs fails with HTTP 500. Only when
moto lacks it: a moto that resolves them itself is left alone. The patch is made on the first (signed) CloudFormation
request, not at start: importing moto's CloudFormation models loads nearly every backend (about 2 s of CPU), and every
test harness starts a moto that never sees CloudFormation.

Run it as moto_server: `python moto_server.py -H 127.0.0.1 -p PORT` (the same arguments).
"""

import collections
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main

# DynamoDB actions that only read: they need no lock (a write replaces an item in one step).
_READS = frozenset(
    ["GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable", "DescribeTimeToLive",
     "ListTables", "ListTagsOfResource", "DescribeContinuousBackups", "DescribeEndpoints", "DescribeLimits"]
)


class FifoLock:
    """A lock handed to its waiters in the order they came. threading.Lock wakes any waiter, so under a burst of
    writes (hundreds at once) one could wait far longer than the others and time out; here the longest wait is the
    work queued ahead of it, as without a lock."""

    def __init__(self):
        self._guard = threading.Lock()
        self._held = False
        self._waiters = collections.deque()

    def __enter__(self):
        with self._guard:
            if not self._held:
                self._held = True
                return self
            turn = threading.Event()
            self._waiters.append(turn)
        # Set by the holder's release: the lock is then ours (it never becomes free in between).
        turn.wait()
        return self

    def __exit__(self, *exc):
        with self._guard:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._held = False

    def waiting(self):
        with self._guard:
            return len(self._waiters)


_WRITES_LOCK = FifoLock()
_dispatch = DomainDispatcherApplication.__call__


def _serialised(self, environ, start_response):
    # A signed request names its service in its credential scope (".../us-east-1/cloudformation/aws4_request").
    if not _nested_stacks_patched and "/cloudformation/" in environ.get("HTTP_AUTHORIZATION", ""):
        _patch_nested_stacks()
    # X-Amz-Target is "DynamoDB_20120810.PutItem"; DynamoDB Streams' ("DynamoDBStreams_...") only read.
    service, _, action = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
    if service.startswith("DynamoDB_") and action not in _READS:
        with _WRITES_LOCK:
            # The backend does its work in this call; the body it returns is already built.
            return list(_dispatch(self, environ, start_response))
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialised


_nested_stacks_patched = False
_patch_lock = threading.Lock()


def _patch_nested_stacks():
    global _nested_stacks_patched
    with _patch_lock:
        if _nested_stacks_patched:
            return
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
        from moto.cloudformation.models import Stack as NestedStack

        def nested_stack_output(self, name):
            if name.startswith("Outputs."):
                key = name[len("Outputs."):]
                for output in self.output_map.values():
                    if output and output.key == key:
                        return output.value
            # What moto answers for an attribute a resource does not have (CloudFormation: "Template error").
            raise UnformattedGetAttTemplateException()

        if not hasattr(NestedStack, "get_cfn_attribute"):
            NestedStack.get_cfn_attribute = nested_stack_output
        _nested_stacks_patched = True


if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())
