"""Fixtures for the extenddb black-box wire suite.

The suite talks to a DynamoDB-compatible endpoint with boto3 and raw HTTP.

* EXTENDDB_ENDPOINT set: test that endpoint (nothing is started).
* otherwise: build ``bin/extenddb`` (or use EXTENDDB_BIN), start
  ``extenddb serve --listen 127.0.0.1:<free port> --memory`` and stop it at
  the end of the session. Under pytest-xdist every worker starts its own
  server (they share nothing, so there is nothing to coordinate).

EXTENDDB_TEST_BACKEND names the backend under test (default ``memory``, the
native in-memory backend that ``--memory`` opens). Any other backend needs
EXTENDDB_ENDPOINT or EXTENDDB_SERVE_ARGS; the suite fails rather than
silently testing the memory backend instead.
"""

import contextlib
import fcntl
import os
import random
import re
import shlex
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
from wire_helpers import ACCESS_KEY, REGION, SECRET_KEY
BACKEND = os.environ.get("EXTENDDB_TEST_BACKEND", "memory")

_server = {"endpoint": None, "proc": None, "log": None}


# ------------------------------------------------------- declared capabilities
#
# A backend may declare a capability absent (e.g. one without the snapshot
# capability or a backup catalog takes no backups). A test that
# needs such a capability carries @pytest.mark.capability("backups"). On a
# server that declares the capability absent, the test's body does not
# run: instead the test asserts the declaration itself (every operation of
# the capability answers a ValidationException naming the missing
# capability, never a 5xx or a silent success) and says so loudly in its
# output. It passes only when the declaration is exact; it is never skipped.

_capability_probe = {}


def _backups_absent(endpoint):
    """The server's declaration that it takes no backups ("" when it does)."""
    if "backups" not in _capability_probe:
        client = _make_client(endpoint, validate=False)
        msg = ""
        try:
            client.create_backup(TableName="capability-probe-no-such-table", BackupName="probe")
        except client.exceptions.ClientError as e:
            err = e.response.get("Error", {})
            if err.get("Code") == "ValidationException" and "does not support backups" in err.get("Message", ""):
                msg = err["Message"]
        _capability_probe["backups"] = msg
    return _capability_probe["backups"]


def _assert_backups_declared_absent(endpoint, why):
    client = _make_client(endpoint, validate=False)
    arn = "arn:aws:dynamodb:us-east-1:000000000000:table/t/backup/01234567890123-abcdefgh"
    calls = [
        lambda: client.create_backup(TableName="capability-t", BackupName="capability-b"),
        lambda: client.describe_backup(BackupArn=arn),
        lambda: client.list_backups(),
        lambda: client.delete_backup(BackupArn=arn),
        lambda: client.restore_table_from_backup(TargetTableName="capability-t2", BackupArn=arn),
    ]
    for call in calls:
        with pytest.raises(client.exceptions.ClientError) as ei:
            call()
        err = ei.value.response["Error"]
        assert err["Code"] == "ValidationException", err
        assert err["Message"] == why, err
    print(f"\nCAPABILITY ABSENT on {BACKEND}: backups: {why} "
          "(the test asserted this declaration instead of its body)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "capability(name): the test needs a capability a backend may declare absent")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    mark = pyfuncitem.get_closest_marker("capability")
    if mark is None or "backups" not in mark.args:
        return None
    endpoint = pyfuncitem.funcargs.get("endpoint") or _server.get("endpoint")
    if endpoint is None:
        return None
    why = _backups_absent(endpoint)
    if not why:
        return None
    _assert_backups_declared_absent(endpoint, why)
    return True


# ---------------------------------------------------------------- reporting

def pytest_report_header(config):
    ep = os.environ.get("EXTENDDB_ENDPOINT")
    lines = [f"extenddb backend under test: {BACKEND}"]
    if ep:
        lines.append(f"extenddb endpoint: {ep} (from EXTENDDB_ENDPOINT)")
    else:
        binary = os.environ.get("EXTENDDB_BIN") or str(REPO / "bin" / "extenddb")
        extra = os.environ.get("EXTENDDB_SERVE_ARGS", "--memory")
        lines.append(
            f"extenddb endpoint: started by the suite: {binary} serve "
            f"--listen 127.0.0.1:<free port> {extra} (one per xdist worker)")
    return lines


def _log_tail(n=60):
    log = _server.get("log")
    if not log or not Path(log).exists():
        return ""
    lines = Path(log).read_text(errors="replace").splitlines()
    return "\n".join(lines[-n:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _server.get("log"):
        rep.sections.append(
            ("extenddb server stderr (tail)", _log_tail() or "<empty>"))
        if _server["proc"] is not None and _server["proc"].poll() is not None:
            rep.sections.append(
                ("extenddb server", f"server process exited with code {_server['proc'].returncode}"))


# ---------------------------------------------------------------- server

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build_binary():
    binary = os.environ.get("EXTENDDB_BIN")
    if binary:
        if not os.access(binary, os.X_OK):
            pytest.fail(f"EXTENDDB_BIN={binary} is not an executable file")
        return binary
    out = REPO / "bin" / "extenddb"
    out.parent.mkdir(exist_ok=True)
    # Several xdist workers may get here at once: build under a lock.
    with open(REPO / "bin" / ".wire-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = subprocess.run(
            ["go", "build", "-o", str(out), "./cmd/extenddb"],
            cwd=REPO, capture_output=True, text=True)
        if res.returncode != 0:
            pytest.fail("go build ./cmd/extenddb failed:\n" + res.stdout + res.stderr,
                        pytrace=False)
    return str(out)


def _wait_health(endpoint, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"server exited with code {proc.returncode} before becoming healthy"
        try:
            with urllib.request.urlopen(endpoint + "/health", timeout=2) as r:
                if r.status == 200:
                    return None
                last = f"status {r.status}"
        except urllib.error.HTTPError as e:
            last = f"status {e.code}"
        except OSError as e:
            last = repr(e)
        time.sleep(0.1)
    return f"GET /health did not answer 200 within {timeout}s (last: {last})"


def _stop(proc):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _check_server_log(log):
    """The server logs a broken storage contract (backend.Checked) as an
    internal error instead of failing the request loudly; the suite fails
    on any such line."""
    text = Path(log).read_text(errors="replace") if Path(log).exists() else ""
    bad = [line for line in text.splitlines() if "storage contract violation" in line]
    assert not bad, "server log has storage contract violations:\n" + "\n".join(bad[:20])


def server_env(logdir, store_root=None, main=False, **extra):
    """The environment of a server the suite starts: backups go to a fresh
    filesystem store (store_root, default under logdir), unless the caller
    configured one with EXTENDDB__BACKUP__STORE__* or
    EXTENDDB_TEST_BACKUP_STORE=disabled. Only the suite's own server
    (main) sets the backup_root fixture: a test's extra server must not
    re-point it for the tests that run after it on the worker."""
    env = dict(os.environ)
    if (os.environ.get("EXTENDDB_TEST_BACKUP_STORE") != "disabled"
            and "EXTENDDB__BACKUP__STORE__KIND" not in env
            and "EXTENDDB__BACKUP__STORE__KIND" not in extra):
        root = Path(store_root or Path(logdir) / "backup-store")
        root.mkdir(mode=0o700, exist_ok=True)
        env["EXTENDDB__BACKUP__STORE__KIND"] = "filesystem"
        env["EXTENDDB__BACKUP__STORE__ROOT"] = str(root)
        if main:
            _server["backup_root"] = str(root)
    if not any(k.startswith("EXTENDDB__S3__") for k in list(env) + list(extra)):
        env.update(s3_env(logdir, main))
    env.update(extra)
    return env


def s3_env(logdir, main=False):
    """The [s3] section of a server the suite starts, where the buckets
    named by ExportTableToPointInTime and ImportTable live: moto when
    EXTENDDB_TEST_S3=moto (its endpoint in EXTENDDB_TEST_MOTO_ENDPOINT),
    else a fresh filesystem_root under logdir. The suite's own server
    (main) records it for the s3_buckets fixture."""
    if os.environ.get("EXTENDDB_TEST_S3") == "moto":
        ep = os.environ.get("EXTENDDB_TEST_MOTO_ENDPOINT", "").rstrip("/")
        assert ep, "EXTENDDB_TEST_S3=moto needs EXTENDDB_TEST_MOTO_ENDPOINT"
        if main:
            _server["s3"] = {"kind": "moto", "endpoint": ep}
        return {"EXTENDDB__S3__ENDPOINT": ep, "EXTENDDB__S3__REGION": "us-east-1",
                "EXTENDDB__S3__ACCESS_KEY_ID": "extenddb-test", "EXTENDDB__S3__SECRET_ACCESS_KEY": "extenddb-test-secret"}
    root = Path(logdir) / "buckets"
    root.mkdir(mode=0o700, exist_ok=True)
    if main:
        _server["s3"] = {"kind": "fs", "root": str(root)}
    return {"EXTENDDB__S3__FILESYSTEM_ROOT": str(root)}


@contextlib.contextmanager
def extra_server(log_dir, args, env, log_name="server-{port}.log"):
    """Starts a server of a test's own, `extenddb serve --listen
    127.0.0.1:PORT *args` with the environment env (whole, see server_env;
    log_name may name the port), waits until it is healthy and yields
    (endpoint, process); stops it afterwards (continuing it first, should
    the test have stopped it)."""
    binary = _build_binary()
    port = _free_port()
    ep = f"http://127.0.0.1:{port}"
    log = open(Path(log_dir) / log_name.format(port=port), "wb")
    proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        err = _wait_health(ep, proc)
        assert err is None, err
        yield ep, proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # never leave a stopped process
        _stop(proc)
        log.close()


@pytest.fixture(scope="session")
def endpoint(request, tmp_path_factory):
    ep = os.environ.get("EXTENDDB_ENDPOINT")
    if ep:
        _server["endpoint"] = ep.rstrip("/")
        return _server["endpoint"]
    extra = os.environ.get("EXTENDDB_SERVE_ARGS")
    if BACKEND != "memory" and not extra:
        pytest.fail(f"EXTENDDB_TEST_BACKEND={BACKEND} needs EXTENDDB_ENDPOINT or "
                    f"EXTENDDB_SERVE_ARGS; refusing to test the memory backend instead", pytrace=False)
    binary = _build_binary()
    port = _free_port()
    ep = f"http://127.0.0.1:{port}"
    logdir = tmp_path_factory.mktemp("extenddb-server")
    log = logdir / "stderr.log"
    cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}"]
    cmd += shlex.split(extra) if extra else ["--memory"]
    logf = open(log, "wb")
    # A short body deadline, so that the tests of clients that stop
    # sending (test_protocol.py) finish quickly; they read the same value.
    os.environ.setdefault("EXTENDDB__SERVER__BODY_READ_TIMEOUT", "5s")
    # One catalog binds one store: the servers of xdist workers that share
    # one database (PostgreSQL, MongoDB or a Cassandra keyspace in EXTENDDB_SERVE_ARGS) share one store of
    # this run; servers with a database each have a store each.
    store_root = None
    if extra and ("postgres" in extra or "mongodb" in extra or "cassandra" in extra) and os.environ.get("PYTEST_XDIST_WORKER"):
        store_root = Path(tmp_path_factory.getbasetemp()).parent / "backup-store"
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=REPO,
                            env=server_env(logdir, store_root, main=True))
    _server.update(endpoint=ep, proc=proc, log=str(log))
    request.addfinalizer(lambda: (_stop(proc), logf.close(), _check_server_log(log)))
    err = _wait_health(ep, proc)
    if err:
        _stop(proc)
        logf.flush()
        pytest.fail(f"{' '.join(cmd)}: {err}\n--- server output (tail) ---\n{_log_tail()}",
                    pytrace=False)
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"extenddb: started {' '.join(cmd)} -> {ep} (log {log})")
    return ep


# ---------------------------------------------------------------- clients

def _check_response_headers(http_response, **kwargs):
    """Every DynamoDB response carries x-amzn-RequestId and a correct x-amz-crc32."""
    if http_response is None:
        return
    h = http_response.headers
    assert h.get("x-amzn-RequestId"), "response without x-amzn-RequestId header"
    crc = h.get("x-amz-crc32")
    assert crc is not None, "response without x-amz-crc32 header"
    assert int(crc) == zlib.crc32(http_response.content), (
        f"x-amz-crc32 {crc} != crc32 of body {zlib.crc32(http_response.content)}")


def _client_config(validate=True):
    return Config(region_name=REGION, retries={"max_attempts": 1, "mode": "standard"},
                  parameter_validation=validate, connect_timeout=10, read_timeout=60)


def _connect_args(endpoint, validate=True):
    """The endpoint, region, credentials and config of the suite's clients."""
    return dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                aws_secret_access_key=SECRET_KEY, config=_client_config(validate))


_session = None


def _boto_session():
    """One boto3 session per test process: botocore caches the service
    models it loads per session, and loading them again for every client
    (endpoints.json, the service's model) costs tens of milliseconds of
    CPU. Each client still gets its own event hooks and configuration;
    xdist runs each worker in its own process."""
    global _session
    if _session is None:
        _session = boto3.session.Session()
    return _session


def _make_client(endpoint, validate=True, service="dynamodb"):
    """A client of service ("dynamodb" or "dynamodbstreams") that checks
    every response's headers."""
    c = _boto_session().client(service, **_connect_args(endpoint, validate))
    c.meta.events.register(f"after-call.{service}", _check_response_headers)
    return c


@pytest.fixture(scope="session")
def ddb(endpoint):
    """boto3 DynamoDB client (client-side parameter validation on)."""
    return _make_client(endpoint)


@pytest.fixture(scope="session")
def ddb_raw(endpoint):
    """boto3 client with client-side parameter validation off, so invalid
    input reaches the server."""
    return _make_client(endpoint, validate=False)


@pytest.fixture(scope="session")
def ddb_resource(endpoint):
    r = _boto_session().resource("dynamodb", **_connect_args(endpoint))
    r.meta.client.meta.events.register("after-call.dynamodb", _check_response_headers)
    return r


# ---------------------------------------------------------------- tables

_NAME_OK = re.compile(r"[^a-zA-Z0-9_.-]")


def unique_table_name(test_name, suffix_len=8):
    base = _NAME_OK.sub("_", test_name).strip("_.-") or "t"
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=suffix_len))
    base = base[: 255 - suffix_len - 1]
    name = f"{base}-{suffix}"
    if len(name) < 3:
        name = "tbl" + name
    return name


def wait_active(client, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        desc = client.describe_table(TableName=name)["Table"]
        if desc["TableStatus"] == "ACTIVE":
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"table {name} not ACTIVE after {timeout}s: {desc['TableStatus']}")
        time.sleep(0.05)


def wait_deleted(client, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.describe_table(TableName=name)
        except client.exceptions.ResourceNotFoundException:
            return
        time.sleep(0.05)
    raise AssertionError(f"table {name} still exists after {timeout}s")


@pytest.fixture
def table_name(request):
    """A fresh unique table name (not created)."""
    return unique_table_name(request.node.name)


@pytest.fixture
def make_table(request, ddb):
    """Factory: make_table(hash_key=('pk','S'), range_key=None, **create_kwargs)
    creates a PAY_PER_REQUEST table with a unique name, waits for ACTIVE and
    returns its name. Tables are deleted after the test."""
    created = []

    def _make(hash_key=("pk", "S"), range_key=None, name=None, **kwargs):
        name = name or unique_table_name(request.node.name)
        ks = [{"AttributeName": hash_key[0], "KeyType": "HASH"}]
        ad = [{"AttributeName": hash_key[0], "AttributeType": hash_key[1]}]
        if range_key:
            ks.append({"AttributeName": range_key[0], "KeyType": "RANGE"})
            ad.append({"AttributeName": range_key[0], "AttributeType": range_key[1]})
        params = dict(TableName=name, KeySchema=ks, AttributeDefinitions=ad)
        if "ProvisionedThroughput" not in kwargs and "BillingMode" not in kwargs:
            params["BillingMode"] = "PAY_PER_REQUEST"
        params.update(kwargs)
        ddb.create_table(**params)
        created.append(name)
        wait_active(ddb, name)
        return name

    yield _make
    for name in created:
        try:
            ddb.delete_table(TableName=name)
        except ddb.exceptions.ResourceNotFoundException:
            pass


@pytest.fixture
def table(make_table):
    """A table with a string hash key 'pk'."""
    return make_table()


@pytest.fixture
def table_hr(make_table):
    """A table with string hash key 'pk' and string range key 'sk'."""
    return make_table(range_key=("sk", "S"))


@pytest.fixture(scope="session")
def backup_root(endpoint):
    """The filesystem backup store of the server the suite started (None
    when the suite tests an external endpoint or backups are disabled)."""
    return _server.get("backup_root")


class Buckets:
    """The buckets of the suite's server ([s3]): creates them and reads
    their objects, through boto3 on moto, from the directory tree on a
    filesystem_root."""

    def __init__(self, conf):
        self.conf = conf
        if conf["kind"] == "moto":
            import boto3
            self.s3 = boto3.client("s3", endpoint_url=conf["endpoint"], region_name="us-east-1",
                                   aws_access_key_id="extenddb-test", aws_secret_access_key="extenddb-test-secret")

    def create(self, name):
        if self.conf["kind"] == "moto":
            self.s3.create_bucket(Bucket=name)
        else:
            (Path(self.conf["root"]) / name).mkdir(mode=0o700)
        return name

    def keys(self, bucket, prefix=""):
        """Every key of the bucket under prefix, sorted."""
        if self.conf["kind"] == "moto":
            out, kw = [], {}
            while True:
                r = self.s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **kw)
                out += [o["Key"] for o in r.get("Contents", [])]
                if not r.get("IsTruncated"):
                    return sorted(out)
                kw = {"ContinuationToken": r["NextContinuationToken"]}
        root = Path(self.conf["root"]) / bucket
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and str(p.relative_to(root)).startswith(prefix))

    def get(self, bucket, key):
        if self.conf["kind"] == "moto":
            return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return (Path(self.conf["root"]) / bucket / key).read_bytes()


@pytest.fixture(scope="session")
def s3_buckets(endpoint):
    """The suite server's buckets (Buckets); skips only when the suite
    tests an external endpoint, whose [s3] it cannot know."""
    conf = _server.get("s3")
    if conf is None:
        pytest.skip("the suite tests an external endpoint: its [s3] buckets are unknown")
    return Buckets(conf)


@pytest.fixture(scope="session")
def buckets_root(endpoint):
    """The directory whose subdirectories are the suite's server's buckets
    ([s3] filesystem_root); None when the server's buckets are on moto or
    the suite tests an external endpoint."""
    conf = _server.get("s3") or {}
    return conf.get("root")
