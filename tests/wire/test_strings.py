"""Strings arrive exactly as sent or not at all: invalid UTF-8 and lone
UTF-16 surrogate escapes are rejected with a SerializationException,
never rewritten to U+FFFD (which made different keys address one item).
Raw HTTP, since an SDK would refuse to send such bodies."""

import pytest

from wire_helpers import check_crc, raw_call

SERIALIZATION = "com.amazon.coral.service#SerializationException"


def put_body(table, pk_json, extra=""):
    return ('{"TableName":"%s","Item":{"pk":{"S":%s}%s}}' % (table, pk_json, extra)).encode()


def get_body(table, pk_json):
    return ('{"TableName":"%s","Key":{"pk":{"S":%s}},"ConsistentRead":true}' % (table, pk_json)).encode()


def assert_serialization(r):
    assert r.status == 400, r
    check_crc(r)
    assert r.headers.get("x-amzn-requestid"), r.headers
    body = r.json()
    assert body["__type"] == SERIALIZATION, body
    assert body["message"], body
    return body


# The raw JSON string literals (quotes included) that must be refused.
BAD_STRINGS = [
    pytest.param(b'"k\xff"', id="invalid-byte-ff"),
    pytest.param(b'"k\xfe"', id="invalid-byte-fe"),
    pytest.param(b'"k\xc3"', id="truncated-sequence"),
    pytest.param(b'"k\xc0\xaf"', id="overlong"),
    pytest.param(b'"k\xed\xa0\x80"', id="utf8-encoded-surrogate"),
    pytest.param(b'"k\\ud800"', id="lone-high-surrogate"),
    pytest.param(b'"k\\udfff"', id="lone-low-surrogate"),
    pytest.param(b'"k\\ud800x"', id="high-surrogate-then-text"),
    pytest.param(b'"k\\udc00\\ud800"', id="reversed-pair"),
]


def raw(endpoint, op, body):
    return raw_call(endpoint, op, body)


@pytest.mark.parametrize("bad", BAD_STRINGS)
def test_put_item_key_rejected(endpoint, table, bad):
    r = raw(endpoint, "PutItem", b'{"TableName":"' + table.encode() + b'","Item":{"pk":{"S":' + bad + b'}}}')
    assert_serialization(r)
    # Nothing was stored under the replacement character either.
    r = raw(endpoint, "GetItem", get_body(table, '"k\\ufffd"'))
    assert r.status == 200 and "Item" not in r.json(), r


def test_invalid_keys_do_not_alias(endpoint, table):
    """The defect: PutItem pk "k\\xff", then GetItem "k\\xfe" or "k\\ud800"
    returned it. Now every one of them is refused, and a key holding the
    real U+FFFD character is its own item."""
    assert_serialization(raw(endpoint, "PutItem", b'{"TableName":"' + table.encode() + b'","Item":{"pk":{"S":"k\xff"}}}'))
    assert_serialization(raw(endpoint, "GetItem", b'{"TableName":"' + table.encode() + b'","Key":{"pk":{"S":"k\xfe"}}}'))
    assert_serialization(raw(endpoint, "GetItem", get_body(table, '"k\\ud800"')))
    r = raw(endpoint, "PutItem", put_body(table, '"k\\ufffd"'))
    assert r.status == 200, r
    r = raw(endpoint, "GetItem", get_body(table, '"k\\ufffd"'))
    assert r.json()["Item"]["pk"]["S"] == "k\ufffd"


def test_valid_surrogate_pair_accepted(endpoint, table):
    r = raw(endpoint, "PutItem", put_body(table, '"k\\ud83d\\ude00"'))
    assert r.status == 200, r
    r = raw(endpoint, "GetItem", get_body(table, '"k\U0001F600"'))
    assert r.json()["Item"]["pk"]["S"] == "k\U0001F600", r


@pytest.mark.parametrize("where", [
    "non-key-S", "SS-member", "nested-map-value", "list-element", "attribute-name", "nested-map-key",
])
@pytest.mark.parametrize("bad", [pytest.param(b'"x\xff"', id="ff"), pytest.param(b'"x\\ud800"', id="ud800")])
def test_everywhere_in_an_item(endpoint, table, where, bad):
    attr = {
        "non-key-S": b'"a":{"S":' + bad + b'}',
        "SS-member": b'"a":{"SS":["ok",' + bad + b']}',
        "nested-map-value": b'"a":{"M":{"b":{"M":{"c":{"S":' + bad + b'}}}}}',
        "list-element": b'"a":{"L":[{"S":"ok"},{"S":' + bad + b'}]}',
        "attribute-name": bad + b':{"S":"v"}',
        "nested-map-key": b'"a":{"M":{' + bad + b':{"S":"v"}}}',
    }[where]
    body = b'{"TableName":"' + table.encode() + b'","Item":{"pk":{"S":"p"},' + attr + b'}}'
    assert_serialization(raw(endpoint, "PutItem", body))
    r = raw(endpoint, "GetItem", get_body(table, '"p"'))
    assert "Item" not in r.json(), r


@pytest.mark.parametrize("bad", [pytest.param(b'"x\xff"', id="ff"), pytest.param(b'"x\\ud800"', id="ud800")])
def test_everywhere_in_a_request(endpoint, table, bad):
    t = table.encode()
    bodies = {
        "TableName": (b"DescribeTable", b'{"TableName":' + bad + b'}'),
        "ExpressionAttributeNames": (b"GetItem", b'{"TableName":"' + t + b'","Key":{"pk":{"S":"p"}},'
                                     b'"ProjectionExpression":"#a","ExpressionAttributeNames":{"#a":' + bad + b'}}'),
        "ExpressionAttributeValues": (b"Scan", b'{"TableName":"' + t + b'","FilterExpression":"a = :v",'
                                      b'"ExpressionAttributeValues":{":v":{"S":' + bad + b'}}}'),
        "ExclusiveStartKey": (b"Scan", b'{"TableName":"' + t + b'","ExclusiveStartKey":{"pk":{"S":' + bad + b'}}}'),
        "ConditionExpression": (b"PutItem", b'{"TableName":"' + t + b'","Item":{"pk":{"S":"p"}},'
                                b'"ConditionExpression":' + bad + b'}'),
        "IndexName": (b"Query", b'{"TableName":"' + t + b'","IndexName":' + bad + b','
                      b'"KeyConditionExpression":"pk = :v","ExpressionAttributeValues":{":v":{"S":"p"}}}'),
        "BatchGetItem table key": (b"BatchGetItem", b'{"RequestItems":{' + bad + b':{"Keys":[{"pk":{"S":"p"}}]}}}'),
        "AttributesToGet": (b"GetItem", b'{"TableName":"' + t + b'","Key":{"pk":{"S":"p"}},"AttributesToGet":[' + bad + b']}'),
    }
    for name, (op, body) in bodies.items():
        r = raw(endpoint, op.decode(), body)
        assert r.status == 400 and r.json()["__type"] == SERIALIZATION, (name, r)
