"""Operating the server over the wire: CORS for browser clients and the
/metrics endpoint. The suite's server is the loopback development default
(no access keys), where every origin is allowed."""

import http.client
import os
import urllib.parse
import urllib.request

import pytest


def _request(endpoint, method, path="/", headers=None, body=None):
    u = urllib.parse.urlparse(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.fixture
def loopback_default(endpoint):
    if os.environ.get("EXTENDDB_ENDPOINT"):
        pytest.skip("CORS defaults depend on how the external server was configured")
    return endpoint


def test_cors_preflight_is_answered(loopback_default):
    st, h, body = _request(loopback_default, "OPTIONS", headers={
        "Origin": "http://localhost:3000",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-amz-target,x-amz-date,authorization,amz-sdk-invocation-id,amz-sdk-request",
    })
    assert st == 204, body
    assert h["access-control-allow-origin"] == "*"
    assert "POST" in h["access-control-allow-methods"]
    for name in ("x-amz-target", "authorization", "amz-sdk-invocation-id"):
        assert name in h["access-control-allow-headers"]


def test_cors_headers_on_api_responses(loopback_default):
    st, h, _ = _request(loopback_default, "POST", body=b"{}", headers={
        "Origin": "http://localhost:3000",
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Content-Type": "application/x-amz-json-1.0",
    })
    assert st == 200
    assert h["access-control-allow-origin"] == "*"
    exposed = h["access-control-expose-headers"].lower()
    assert "x-amzn-requestid" in exposed and "x-amz-crc32" in exposed


def test_no_cors_headers_without_origin(endpoint):
    st, h, _ = _request(endpoint, "POST", body=b"{}", headers={
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Content-Type": "application/x-amz-json-1.0",
    })
    assert st == 200
    assert not any(k.startswith("access-control-") for k in h)
