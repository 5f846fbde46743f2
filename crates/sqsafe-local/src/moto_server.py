"""moto_server, with DynamoDB's requests answered one at a time.

moto's DynamoDB backend checks a write's condition and then applies the write with nothing held between the two:
under CPU load two conditional PutItems on one key can both pass `attribute_not_exists` (seen here: 2 of 40 trials of
20 racing claims had two winners with six busy loops beside the server). DynamoDB itself evaluates a condition and
its write atomically, and sqsafe's claim protocol depends on that, so this launcher serialises every DynamoDB and
DynamoDB Streams request (one lock around the backend call). Other services (SQS long polls among them) are untouched.

Run it as moto_server: `python moto_server.py -H 127.0.0.1 -p PORT` (the same arguments).
"""

import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main

_DYNAMODB_LOCK = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serialised(self, environ, start_response):
    # X-Amz-Target is "DynamoDB_20120810.PutItem" or "DynamoDBStreams_20120810.GetRecords".
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
        with _DYNAMODB_LOCK:
            # The backend does its work in this call; the body it returns is already built.
            return list(_dispatch(self, environ, start_response))
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialised

if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())
