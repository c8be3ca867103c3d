"""The DynamoDB JSON wire protocol, spoken with raw HTTP (no SDK)."""

import http.client
import json
import os
import random
import socket
import time
import zlib
from urllib.parse import urlparse

import pytest

from wire_helpers import (check_crc, post_streaming, raw_call, raw_get, raw_post,
                          signed_headers)

T = "DynamoDB_20120810."
VALIDATE = "com.amazon.coral.validate#ValidationException"
SERIALIZATION = "com.amazon.coral.service#SerializationException"
UNKNOWN_OP = "com.amazon.coral.service#UnknownOperationException"
DDB = "com.amazonaws.dynamodb.v20120810#"


def assert_error(resp, type_, status=400):
    assert resp.status == status, resp
    check_crc(resp)
    assert resp.headers.get("x-amzn-requestid"), resp.headers
    body = resp.json()
    assert body["__type"] == type_, body
    if type_ != SERIALIZATION:
        # The key case of SerializationException is checked once, in
        # test_serialization_error_message_key_is_lowercase.
        assert "Message" not in body, f"error message key must be lowercase 'message': {body}"
    return body


# ------------------------------------------------------------- routing

def test_list_tables_raw_ok(endpoint):
    r = raw_call(endpoint, "ListTables", {})
    assert r.status == 200, r
    check_crc(r)
    assert r.headers.get("x-amzn-requestid")
    assert r.headers["content-type"].startswith("application/x-amz-json-1.0")
    body = r.json()
    assert isinstance(body["TableNames"], list)


def test_request_ids_are_unique(endpoint):
    ids = {raw_call(endpoint, "ListTables", {}).headers["x-amzn-requestid"] for _ in range(5)}
    assert len(ids) == 5


@pytest.mark.parametrize("target", [
    T + "NoSuchOperation",
    T + "listtables",            # operation names are case-sensitive
    "DynamoDB_20991231.ListTables",
    "Foo.ListTables",
    "ListTables",
    T,
])
def test_unknown_operation(endpoint, target):
    r = raw_post(endpoint, b"{}", target=target)
    assert_error(r, UNKNOWN_OP)


def test_missing_target_is_unknown_operation(endpoint):
    r = raw_post(endpoint, b"{}", target=None)
    assert_error(r, UNKNOWN_OP)


@pytest.mark.parametrize("body", [
    b"{",
    b"not json",
    b'{"TableName": }',
    b'{"TableName" "x"}',
    b"{'TableName': 'x'}",
    b'{"TableName": "x",}',
    b"[1, 2",
    b'\xff\xfe{"TableName": "x"}',
])
def test_malformed_json_is_serialization_exception(endpoint, body):
    r = raw_post(endpoint, body, target=T + "DescribeTable")
    assert_error(r, SERIALIZATION)


@pytest.mark.parametrize("op,payload", [
    ("ListTables", {"Limit": "abc"}),
    ("DescribeTable", {"TableName": {"nested": "map"}}),
    ("DescribeTable", {"TableName": ["list"]}),
    ("GetItem", {"TableName": "abc", "Key": ["not", "a", "map"]}),
    ("ListTables", {"Limit": {"N": "1"}}),
])
def test_wrong_json_type_is_serialization_exception(endpoint, op, payload):
    r = raw_call(endpoint, op, payload)
    assert_error(r, SERIALIZATION)


def test_serialization_error_message_key_is_lowercase(endpoint):
    # extenddb's error bodies always use the lowercase "message" key
    # (docs/compatibility.md, "Errors use the service's __type prefixes");
    # SDKs accept either case.
    r = raw_call(endpoint, "ListTables", {"Limit": "abc"})
    body = assert_error(r, SERIALIZATION)
    assert "Message" not in body, body
    assert isinstance(body.get("message"), str) and body["message"], body


# ------------------------------------------------------------- error shapes

def test_validation_exception_prefix_and_message(endpoint):
    r = raw_call(endpoint, "DescribeTable", {"TableName": "ab"})
    body = assert_error(r, VALIDATE)
    assert isinstance(body["message"], str) and body["message"]


def test_missing_required_member_is_validation(endpoint):
    r = raw_call(endpoint, "DescribeTable", {})
    body = assert_error(r, VALIDATE)
    assert "tableName" in body["message"] or "TableName" in body["message"], body


def test_resource_not_found_prefix(endpoint, table_name):
    r = raw_call(endpoint, "DescribeTable", {"TableName": table_name})
    body = assert_error(r, DDB + "ResourceNotFoundException")
    assert body["message"] == f"Requested resource not found: Table: {table_name} not found"


def test_resource_in_use_prefix(endpoint, table):
    payload = {"TableName": table, "BillingMode": "PAY_PER_REQUEST",
               "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
               "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]}
    r = raw_call(endpoint, "CreateTable", payload)
    body = assert_error(r, DDB + "ResourceInUseException")
    assert body["message"] == f"Table already exists: {table}"


def test_conditional_check_failed_prefix_and_item(endpoint, ddb, table):
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"N": "1"}})
    r = raw_call(endpoint, "PutItem", {
        "TableName": table, "Item": {"pk": {"S": "a"}},
        "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    body = assert_error(r, DDB + "ConditionalCheckFailedException")
    assert body["message"] == "The conditional request failed"
    assert body["Item"] == {"pk": {"S": "a"}, "v": {"N": "1"}}


# ------------------------------------------------------------- crc / ids

def test_crc32_on_non_ascii_body(endpoint, ddb, table):
    item = {"pk": {"S": "k"}, "s": {"S": "h\u00e9llo \u4e16\u754c \U0001F600 \"q\" \\ \n"},
            "b": {"B": "AAEC/w=="}}
    r = raw_call(endpoint, "PutItem", {"TableName": table, "Item": item})
    assert r.status == 200, r
    check_crc(r)
    r = raw_call(endpoint, "GetItem", {"TableName": table, "Key": {"pk": {"S": "k"}}})
    assert r.status == 200, r
    check_crc(r)
    assert r.json()["Item"] == item


def test_crc32_matches_on_error_and_success(endpoint):
    for payload in ({}, {"Limit": 0}, {"Limit": 5}):
        r = raw_call(endpoint, "ListTables", payload)
        check_crc(r)
        assert int(r.headers["x-amz-crc32"]) == zlib.crc32(r.body)


# ------------------------------------------------------------- limits, health

def test_body_over_16mb_is_413(endpoint):
    body = b'{"TableName":"abc","Item":{"pk":{"S":"' + b"x" * (17 * 1024 * 1024) + b'"}}}'
    headers = signed_headers(endpoint, body, target=T + "PutItem")
    assert post_streaming(endpoint, headers, body) == 413


def test_health(endpoint):
    r = raw_get(endpoint, "/health")
    assert r.status == 200, r


def test_ready(endpoint):
    r = raw_get(endpoint, "/ready")
    assert r.status == 200, r


# ------------------------------------------------------------- fuzz

_FUZZ_OPS = ["PutItem", "GetItem", "UpdateItem", "DeleteItem", "Query", "Scan",
             "DescribeTable", "ListTables"]


def _base_payload(op, table):
    key = {"pk": {"S": "k1"}, "sk": {"N": "1"}}
    return {
        "PutItem": {"TableName": table, "Item": dict(key, a={"L": [{"S": "x"}, {"M": {"n": {"NS": ["1", "2"]}}}]}),
                    "ConditionExpression": "attribute_not_exists(#a) OR size(#a) > :z",
                    "ExpressionAttributeNames": {"#a": "a"}, "ExpressionAttributeValues": {":z": {"N": "0"}},
                    "ReturnValues": "ALL_OLD"},
        "GetItem": {"TableName": table, "Key": key, "ProjectionExpression": "a[0], #b.c",
                    "ExpressionAttributeNames": {"#b": "b"}, "ConsistentRead": True},
        "UpdateItem": {"TableName": table, "Key": key,
                       "UpdateExpression": "SET a = list_append(if_not_exists(a, :e), :l) ADD n :one REMOVE z[0]",
                       "ExpressionAttributeValues": {":e": {"L": []}, ":l": {"L": [{"BOOL": True}]},
                                                     ":one": {"N": "1"}},
                       "ReturnValues": "UPDATED_NEW"},
        "DeleteItem": {"TableName": table, "Key": key, "ConditionExpression": "n BETWEEN :lo AND :hi",
                       "ExpressionAttributeValues": {":lo": {"N": "0"}, ":hi": {"N": "9"}}},
        "Query": {"TableName": table, "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
                  "FilterExpression": "contains(a, :s)",
                  "ExpressionAttributeValues": {":p": {"S": "k1"}, ":a": {"N": "0"}, ":b": {"N": "5"},
                                                ":s": {"S": "x"}},
                  "Limit": 10, "ScanIndexForward": False, "Select": "ALL_ATTRIBUTES"},
        "Scan": {"TableName": table, "Segment": 0, "TotalSegments": 2, "Limit": 5,
                 "ExclusiveStartKey": key, "Select": "COUNT"},
        "DescribeTable": {"TableName": table},
        "ListTables": {"Limit": 3, "ExclusiveStartTableName": table},
    }[op]


_WEIRD = [None, True, False, 0, -1, 1e308, 2 ** 70, "", "\u0000", "x" * 300, [], {}, [None],
          {"S": None}, {"N": "1e999"}, {"N": "abc"}, {"B": "!!notbase64"}, {"SS": []},
          {"NS": ["1", "1"]}, {"M": None}, {"L": {}}, {"NULL": False}, {"BOOL": "yes"},
          {"S": "a", "N": "1"}, {"Q": "1"}, ":", "#", "(((", "a.b[", "SET", "a = = b",
          {"pk": {"S": ""}}]


def _mutate(rng, obj, depth=0):
    if isinstance(obj, dict) and obj and rng.random() < 0.8:
        k = rng.choice(list(obj))
        choice = rng.random()
        out = dict(obj)
        if choice < 0.25:
            del out[k]
        elif choice < 0.6:
            out[k] = rng.choice(_WEIRD)
        else:
            out[k] = _mutate(rng, obj[k], depth + 1)
        if rng.random() < 0.1:
            out[rng.choice(["Extra", "ReturnValues", "Select", "Key", "Item"])] = rng.choice(_WEIRD)
        return out
    if isinstance(obj, list) and obj and rng.random() < 0.8:
        out = list(obj)
        i = rng.randrange(len(out))
        out[i] = _mutate(rng, out[i], depth + 1) if rng.random() < 0.5 else rng.choice(_WEIRD)
        return out
    if isinstance(obj, str) and obj and rng.random() < 0.7:
        i = rng.randrange(len(obj) + 1)
        return obj[:i] + rng.choice(["(", ")", ",", " ", ":", "#", "[", "]", ".", "\"", "AND"]) + obj[i:]
    return rng.choice(_WEIRD)


def _fuzz_bodies(rng, base, n):
    out = []
    text = json.dumps(base).encode()
    for i in range(n):
        kind = i % 5
        if kind == 0:  # structural mutation
            out.append(json.dumps(_mutate(rng, base)).encode())
        elif kind == 1:  # byte flips
            b = bytearray(text)
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(bytes(b))
        elif kind == 2:  # truncation
            out.append(text[: rng.randrange(len(text))])
        elif kind == 3:  # random bytes / random json
            if rng.random() < 0.5:
                out.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
            else:
                out.append(json.dumps(rng.choice(_WEIRD)).encode())
        else:  # double mutation
            out.append(json.dumps(_mutate(rng, _mutate(rng, base))).encode())
    return out


@pytest.mark.parametrize("op", _FUZZ_OPS)
def test_fuzz_never_5xx(endpoint, make_table, op):
    table = make_table(range_key=("sk", "N"))
    rng = random.Random(f"extenddb-{op}")
    base = _base_payload(op, table)
    bad = []
    for body in _fuzz_bodies(rng, base, 45):
        r = raw_post(endpoint, body, target=T + op)
        if r.status >= 500:
            bad.append((body[:200], r.status, r.body[:200]))
            continue
        check_crc(r)
        if r.status >= 400:
            assert r.json().get("__type"), (body, r)
    assert not bad, f"{len(bad)} fuzz bodies produced 5xx: {bad[:5]}"


@pytest.mark.parametrize("body", [
    b"[" * 20000 + b"]" * 20000,
    b'{"TableName":"abc","Key":' + b'{"M":{"a":' * 5000 + b'{"S":"x"}' + b"}}" * 5000 + b"}",
    b'{"TableName":"abc","Key":{"pk":{"N":"' + b"9" * 100000 + b'"}}}',
    b'{"TableName":"abc","Key":{"pk":{"S":"\\ud800"}}}',
    b'{"TableName":"abc","Key":{"pk":{"S":"x"}},"TableName":"abc"}',
])
def test_pathological_bodies_never_5xx(endpoint, body):
    r = raw_post(endpoint, body, target=T + "GetItem")
    assert 400 <= r.status < 500, r
    check_crc(r)


# ------------------------------------------------------------- HTTP edges
#
# Requests the HTTP layer cannot parse or that stop half-way: each one the
# server can still answer gets a DynamoDB error (JSON __type and message,
# x-amzn-RequestId, x-amz-crc32), never a plain-text answer, a redirect or
# a hang past the body deadline (server.body_read_timeout).


def _body_deadline():
    v = os.environ.get("EXTENDDB__SERVER__BODY_READ_TIMEOUT", "30s")
    return float(v[:-1]) * (60 if v.endswith("m") else 1)


def raw_exchange(endpoint, data, timeout):
    """Send raw bytes on a fresh connection, read one response (status,
    lower-case headers, body) within timeout seconds."""
    u = urlparse(endpoint)
    sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
    start = time.monotonic()
    try:
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server may answer and close before taking it all
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, time.monotonic() - start
    finally:
        sock.close()


_LT = (b"X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
       b"Content-Type: application/x-amz-json-1.0\r\n")

_HTTP_EDGES = [
    # (name, raw request, status, __type or None for success)
    ("double slash", b"POST // HTTP/1.1\r\nHost: x\r\n" + _LT + b"Content-Length: 2\r\n\r\n{}", 200, None),
    ("gzip, chunked", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, SERIALIZATION),
    ("bad content-length", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Content-Length: 1x\r\n\r\n{}", 400, SERIALIZATION),
    ("two content-lengths", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}", 400, SERIALIZATION),
    ("NUL in header", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"X-A: a\x00b\r\nContent-Length: 2\r\n\r\n{}", 400, SERIALIZATION),
    ("CR in header", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"X-A: a\rb\r\nContent-Length: 2\r\n\r\n{}", 400, SERIALIZATION),
    ("missing host", b"POST / HTTP/1.1\r\n" + _LT + b"Content-Length: 2\r\n\r\n{}", 400, SERIALIZATION),
    ("bad chunk", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, SERIALIZATION),
    ("headers over 1 MB", b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * ((1 << 20) + 8192) + b"\r\n\r\n", 413,
     "com.amazon.coral.service#RequestEntityTooLargeException"),
    ("declared over 16 MB", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Content-Length: 16777217\r\n\r\n{}", 413,
     "com.amazon.coral.service#RequestEntityTooLargeException"),
    ("content-length larger than body", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Content-Length: 50\r\n\r\n{}", 408,
     "com.amazon.coral.service#RequestTimeoutException"),
    ("chunked body never ends", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", 408,
     "com.amazon.coral.service#RequestTimeoutException"),
    ("unsupported Expect", b"POST / HTTP/1.1\r\nHost: x\r\n" + _LT + b"Expect: x\r\nContent-Length: 2\r\n\r\n{}", 417, SERIALIZATION),
]


@pytest.mark.parametrize("name,raw,status,type_", _HTTP_EDGES, ids=[c[0] for c in _HTTP_EDGES])
def test_http_edges_answer_in_protocol(endpoint, name, raw, status, type_):
    limit = _body_deadline() + 5
    st, headers, body, took = raw_exchange(endpoint, raw, timeout=limit)
    assert took < limit, (name, took)
    assert st == status, (name, st, body)
    assert headers.get("x-amzn-requestid"), headers
    assert int(headers["x-amz-crc32"]) == zlib.crc32(body), headers
    doc = json.loads(body)
    if type_ is None:
        assert "__type" not in doc, doc
        return
    assert doc["__type"] == type_, doc
    assert isinstance(doc.get("message"), str) and doc["message"], doc
