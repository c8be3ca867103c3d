"""Helpers shared by the wire tests (imported as a plain module)."""

import http.client
import json
import re
import socket
import threading
import zlib
from urllib.parse import urlparse

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

REGION = "us-east-1"
ACCESS_KEY = "AKIDEXTENDDBTEST"
SECRET_KEY = "extenddb-wire-test-secret"


# ---------------------------------------------------------------- streams

def read_shard(streams, arn, shard_id, typ="TRIM_HORIZON", limit=1000):
    """The records of one shard, page after page (a dynamodbstreams client)."""
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, ShardIteratorType=typ)["ShardIterator"]
    out = []
    for _ in range(50):
        res = streams.get_records(ShardIterator=it, Limit=limit)
        out += res["Records"]
        it = res.get("NextShardIterator")
        if it is None or not res["Records"]:
            break
    return out


def read_stream(streams, arn):
    """The records of every shard of the stream."""
    out = []
    for sh in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        out += read_shard(streams, arn, sh["ShardId"])
    return out


# ---------------------------------------------------------------- helpers

class ErrorInfo:
    def __init__(self, err):
        self.err = err
        self.response = err.response
        self.code = err.response["Error"]["Code"]
        self.message = err.response["Error"].get("Message", "")
        self.status = err.response["ResponseMetadata"]["HTTPStatusCode"]

    def __repr__(self):
        return f"<{self.code} {self.status}: {self.message!r}>"


def expect_error(fn, code, message=None, match=None, status=400, **kwargs):
    """Call fn(**kwargs), assert it fails with the given error code (and
    exact message, or regex match), return ErrorInfo."""
    try:
        res = fn(**kwargs)
    except ClientError as e:
        info = ErrorInfo(e)
    else:
        raise AssertionError(f"expected {code}, call succeeded: {res!r}")
    assert info.code == code, f"expected {code}, got {info!r}"
    if status is not None:
        assert info.status == status, f"expected HTTP {status}, got {info!r}"
    if message is not None:
        assert info.message == message, f"message mismatch: {info.message!r} != {message!r}"
    if match is not None:
        assert re.search(match, info.message), f"message {info.message!r} !~ {match!r}"
    return info


def validation(fn, message=None, match=None, **kwargs):
    return expect_error(fn, "ValidationException", message=message, match=match, **kwargs)


def cond(op, *vals):
    """A legacy Condition / ExpectedAttributeValue with ComparisonOperator
    op and, when given, AttributeValueList vals."""
    d = {"ComparisonOperator": op}
    if vals:
        d["AttributeValueList"] = list(vals)
    return d


# ---------------------------------------------------------------- raw HTTP

class RawResponse:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # dict with lower-case keys
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return f"<HTTP {self.status} {self.body[:300]!r}>"


def signed_headers(endpoint, body, target=None, content_type="application/x-amz-json-1.0",
                   extra=None):
    """Headers of a SigV4-signed POST / with the given raw body bytes."""
    headers = {"Content-Type": content_type}
    if target is not None:
        headers["X-Amz-Target"] = target
    if extra:
        headers.update(extra)
    req = AWSRequest(method="POST", url=endpoint + "/", data=body, headers=headers)
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "dynamodb", REGION).add_auth(req)
    return dict(req.headers.items())


def raw_post(endpoint, body, target=None, content_type="application/x-amz-json-1.0",
             extra_headers=None, sign=True, timeout=30):
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode("utf-8")
    if sign:
        headers = signed_headers(endpoint, body, target, content_type, extra_headers)
    else:
        headers = {"Content-Type": content_type}
        if target is not None:
            headers["X-Amz-Target"] = target
        headers.update(extra_headers or {})
    u = urlparse(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", "/", body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        return RawResponse(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def raw_call(endpoint, operation, payload, **kw):
    return raw_post(endpoint, payload, target=f"DynamoDB_20120810.{operation}", **kw)


def raw_get(endpoint, path, timeout=10):
    u = urlparse(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return RawResponse(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def post_streaming(endpoint, headers, body, timeout=60):
    """POST a (large) body over a raw socket, sending from a thread while
    reading the response, so a server that answers early (413) and closes
    is observed instead of a broken pipe. Returns the HTTP status code."""
    u = urlparse(endpoint)
    sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
    head = "POST / HTTP/1.1\r\nHost: %s:%d\r\n" % (u.hostname, u.port)
    for k, v in headers.items():
        if k.lower() in ("host", "content-length", "transfer-encoding"):
            continue
        head += f"{k}: {v}\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"

    def send():
        try:
            sock.sendall(head.encode("latin-1"))
            view = memoryview(body)
            for i in range(0, len(body), 1 << 16):
                sock.sendall(view[i:i + (1 << 16)])
        except OSError:
            pass

    t = threading.Thread(target=send, daemon=True)
    t.start()
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    finally:
        try:
            sock.close()
        except OSError:
            pass
    t.join(timeout=5)
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    m = re.match(r"HTTP/1\.[01] (\d{3})", line)
    assert m, f"no HTTP status line in response: {data[:200]!r}"
    return int(m.group(1))


def check_crc(resp):
    crc = resp.headers.get("x-amz-crc32")
    assert crc is not None, f"missing x-amz-crc32: {resp!r}"
    assert int(crc) == zlib.crc32(resp.body), (crc, zlib.crc32(resp.body), resp)
