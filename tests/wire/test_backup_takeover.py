"""Backup and restore jobs whose owner dies or stalls: takeover and fencing.

On a backend with a shared catalog (PostgreSQL, MongoDB, Cassandra), two
real `extenddb serve` processes share one catalog (a database or keyspace
of the test's own, on the suite's server) and one filesystem backup store.
A job whose owner is SIGKILLed at a step (the test-only kill hook) is taken
over exactly once by the other server; an owner that was stopped (SIGSTOP)
and resumes (SIGCONT) after the takeover cannot write: neither the backup
row nor the restore target's items.

On a single-process backend (memory, SQLite: one server owns the data;
the catalog here is a SQLite data directory, since the memory backend
keeps nothing across a restart) two servers cannot share a catalog, so
there is no second owner to fence. The same five scenarios then assert
what holds there: a server started on the data directory of a SIGKILLed
one takes its job over exactly once (and a third start finds nothing to
take over); while the owner is stopped a second server is refused the
data directory (so nobody takes the job over), and the owner, resumed,
finishes its job itself.

A stopped owner is stopped at its hold point before the other server
starts: a job held with a 30 s heartbeat must not race another server's
1 s stale_after on its way to the hold point (on FerretDB the load before
the first hold takes longer than that, and the takeover then fenced the
job before it got there).
"""

import concurrent.futures
import contextlib
import os
import random
import shlex
import signal
import socket
import struct
import subprocess
import time
from urllib.parse import urlparse, urlunparse

import pytest

from conftest import _build_binary, _free_port, _make_client, _stop, extra_server, server_env
from test_backups import S, objects, scan_all, wait_backup, wait_table
from wire_helpers import expect_error, raw_get

# Claims go stale after 1 s, the reconciler runs every 200 ms.
FAST = dict(EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="100ms", EXTENDDB__BACKUP__STALE_AFTER="1s",
            EXTENDDB__BACKUP__RECONCILE_INTERVAL="200ms")
# On MongoDB and Cassandra a heartbeat is a conditional write of several
# round trips (on FerretDB four, p90 0.4 s on a loaded machine, longer
# when queued behind the process's own restore writes): 1 s lets a live
# owner's claim go stale, so two live servers take the job from each
# other. 5 s is still 60 times shorter than the default (300 s).
FAST_SLOW_CATALOG = dict(EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="250ms", EXTENDDB__BACKUP__STALE_AFTER="5s",
                         EXTENDDB__BACKUP__RECONCILE_INTERVAL="500ms")
# A server whose job does not heartbeat for 30 s: another server takes the
# job over after its own stale_after (1 s, or 5 s), while this one, held or
# stopped, still believes it owns it; when it resumes it writes long before
# its first heartbeat would tell it otherwise, so only the fence stops it.
SLOW_HEARTBEAT = dict(EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="30s", EXTENDDB__BACKUP__STALE_AFTER="60s",
                      EXTENDDB__BACKUP__RECONCILE_INTERVAL="1h")
# A restore of 1000 items on FerretDB under a loaded machine takes tens of
# seconds (every item write is several round trips on a MongoDB-wire
# server without transactions).
LOAD_TIMEOUT = 180.0


# ------------------------------------------------------------- the catalog

def _serve_arg(args, flag):
    if flag in args and args.index(flag) + 1 < len(args):
        return args[args.index(flag) + 1]
    return None


def _suffix():
    return "_t" + "".join(random.choice("0123456789abcdef") for _ in range(8))


def _mongo_drop_database(uri, db):
    """dropDatabase by one OP_MSG (the suite has no MongoDB driver); best
    effort: a server that wants credentials keeps the database."""
    u = urlparse(uri)
    host, port = u.hostname or "127.0.0.1", u.port or 27017

    def cstr(s):
        return s.encode() + b"\0"
    body = (b"\x10" + cstr("dropDatabase") + struct.pack("<i", 1) +
            b"\x02" + cstr("$db") + struct.pack("<i", len(db) + 1) + cstr(db) + b"\0")
    doc = struct.pack("<i", len(body) + 4) + body
    msg = struct.pack("<I", 0) + b"\0" + doc
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(struct.pack("<iiii", 16 + len(msg), random.randint(1, 1 << 30), 0, 2013) + msg)
            head = s.recv(16)
            if len(head) == 16:
                left = struct.unpack("<i", head[:4])[0] - 16
                while left > 0:
                    chunk = s.recv(left)
                    if not chunk:
                        break
                    left -= len(chunk)
    except OSError:
        pass


class Catalog:
    """Where the test's servers keep their catalog: args for `serve`;
    shared: whether two servers can use it at once."""

    def __init__(self, kind, args, shared, fast=FAST):
        self.kind, self.args, self.shared, self.fast = kind, args, shared, fast
        # Past stale_after and a few reconciler passes.
        self.stale = float(fast["EXTENDDB__BACKUP__STALE_AFTER"].rstrip("s")) + 0.5


@pytest.fixture
def catalog(tmp_path):
    args = shlex.split(os.environ.get("EXTENDDB_SERVE_ARGS", ""))
    backend = os.environ.get("EXTENDDB_TEST_BACKEND", "memory")
    binary = _build_binary()
    if backend == "postgres" and _serve_arg(args, "--dsn"):
        u = urlparse(_serve_arg(args, "--dsn"))
        name = u.path.lstrip("/") + _suffix()
        admin = urlunparse(u._replace(path="/postgres"))
        subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        own = ["--backend", "postgres", "--dsn", urlunparse(u._replace(path="/" + name))]
        try:
            subprocess.run([binary, "migrate", *own], check=True, capture_output=True)
            yield Catalog("postgres", own, True)
        finally:
            subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)
        return
    if backend == "mongodb" and _serve_arg(args, "--mongodb-uri"):
        uri = _serve_arg(args, "--mongodb-uri")
        db = (_serve_arg(args, "--mongodb-database") or "extenddb") + _suffix()
        own = ["--backend", "mongodb", "--mongodb-uri", uri, "--mongodb-database", db]
        try:
            subprocess.run([binary, "migrate", *own], check=True, capture_output=True)
            yield Catalog("mongodb", own, True, FAST_SLOW_CATALOG)
        finally:
            _mongo_drop_database(uri, db)
        return
    if backend == "cassandra" and _serve_arg(args, "--cassandra-keyspace"):
        # A keyspace of the test's own; like the suite's keyspace
        # (scripts/wire-cassandra.sh) it is left on the node.
        ks = _serve_arg(args, "--cassandra-keyspace") + _suffix()
        own = ["--backend", "cassandra", "--cassandra-hosts", _serve_arg(args, "--cassandra-hosts") or "127.0.0.1:9042",
               "--cassandra-keyspace", ks]
        subprocess.run([binary, "migrate", *own], check=True, capture_output=True)
        yield Catalog("cassandra", own, True, FAST_SLOW_CATALOG)
        return
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    yield Catalog("sqlite", ["--data-dir", str(data)], False)


# ------------------------------------------------------------- servers

class Server:
    def __init__(self, client, proc, endpoint):
        self.c, self.proc, self.ep = client, proc, endpoint

    def metric(self, name, **labels):
        """A counter's value (0 when absent)."""
        want = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
        for line in raw_get(self.ep, "/metrics").body.decode().splitlines():
            if line.startswith(want + " "):
                return float(line.split()[-1])
        return 0.0

    def finished(self, kind, results=("ok", "fenced", "store", "verify", "shutdown", "other")):
        return sum(self.metric("extenddb_backup_jobs_finished_total", kind=kind, result=r) for r in results)


def _env(tmp_path, cat, store, name, env):
    full = dict(cat.fast)
    spool = tmp_path / f"spool-{name}"  # each server its own, as on two hosts
    spool.mkdir(mode=0o700, exist_ok=True)
    full.update(EXTENDDB__BACKUP__STORE__KIND="filesystem", EXTENDDB__BACKUP__STORE__ROOT=str(store),
                EXTENDDB__BACKUP__SPOOL_DIR=str(spool))
    full.update(env)
    return server_env(tmp_path, **full)


@contextlib.contextmanager
def serve(tmp_path, cat, store, name, **env):
    with extra_server(tmp_path, cat.args, _env(tmp_path, cat, store, name, env), f"server-{name}-{{port}}.log") as (ep, proc):
        yield Server(_make_client(ep), proc, ep)


def refused(tmp_path, cat, store, name):
    """A second server on a single-process catalog whose owner lives
    (stopped): it must refuse to start, naming the other process."""
    binary = _build_binary()
    port = _free_port()
    path = tmp_path / f"server-{name}-{port}.log"
    with open(path, "wb") as log:
        proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", *cat.args],
                                stdout=log, stderr=subprocess.STDOUT, env=_env(tmp_path, cat, store, name, {}))
        try:
            rc = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                _stop(proc)
    text = path.read_text(errors="replace")
    assert rc != 0, text
    assert "in use by another extenddb process" in text, text


def until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def reached(hold, timeout=LOAD_TIMEOUT):
    """Waits until a job is held at the hook's hold point."""
    marker = hold.with_name(hold.name + ".reached")
    until(marker.exists, f"a job reaches the hold point ({hold})", timeout)
    marker.unlink()


def make_source(c, name, n):
    c.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                   AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")

    def put(start):
        c.batch_write_item(RequestItems={name: [
            {"PutRequest": {"Item": {"pk": S(f"k{i:05d}"), "v": S("v")}}} for i in range(start, min(n, start + 25))]})
    with concurrent.futures.ThreadPoolExecutor(4) as ex:  # a slow backend: four requests at once
        list(ex.map(put, range(0, n, 25)))
    assert len(scan_all(c, name)) == n


def make_backup(tmp_path, cat, store, table, n, name):
    """A source table and its AVAILABLE backup, made by a server that is
    gone when this returns (the servers of the scenario start later)."""
    with serve(tmp_path, cat, store, "maker", **SLOW_HEARTBEAT) as m:
        make_source(m.c, table, n)
        arn = m.c.create_backup(TableName=table, BackupName=name)["BackupDetails"]["BackupArn"]
        wait_backup(m.c, arn, timeout=LOAD_TIMEOUT)
        return arn


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "store"
    d.mkdir(mode=0o700)
    return d


RESUMED = ("extenddb_backup_reconciler_actions_total", {"action": "resumed_restore"})
FAILED_STALE = ("extenddb_backup_reconciler_actions_total", {"action": "failed_stale_backup"})


def resumed(s):
    return s.metric(RESUMED[0], **RESUMED[1])


def failed_stale(s):
    return s.metric(FAILED_STALE[0], **FAILED_STALE[1])


# ------------------------------------------------------------- the scenarios

@pytest.mark.capability("backups")
def test_dead_restore_owner_taken_over_once(tmp_path, catalog, store, endpoint):
    cat = catalog
    if not cat.shared:
        # The restart is the takeover: the killed server's job is taken
        # over by the next server on its data directory, once.
        arn = make_backup(tmp_path, cat, store, "tsrc", 350, "takeover")
        with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_KILL_AT="restore.mid-load") as a:
            try:
                a.c.restore_table_from_backup(TargetTableName="tdst", BackupArn=arn)
            except Exception:
                pass  # killed before it answered
            a.proc.wait(timeout=LOAD_TIMEOUT)
            assert a.proc.returncode == -9, a.proc.returncode
        with serve(tmp_path, cat, store, "b") as b:
            t = wait_table(b.c, "tdst", timeout=LOAD_TIMEOUT)
            assert "RestoreSummary" not in t
            assert scan_all(b.c, "tdst") == scan_all(b.c, "tsrc")
            assert resumed(b) == 1
        with serve(tmp_path, cat, store, "a2") as a2:
            time.sleep(cat.stale)  # several reconciler passes, past stale_after
            assert resumed(a2) == 0
            assert len(scan_all(a2.c, "tdst")) == 350
        return
    with serve(tmp_path, cat, store, "b") as b:
        make_source(b.c, "tsrc", 350)
        arn = b.c.create_backup(TableName="tsrc", BackupName="takeover")["BackupDetails"]["BackupArn"]
        wait_backup(b.c, arn, timeout=LOAD_TIMEOUT)
        with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_KILL_AT="restore.mid-load") as a:
            try:
                a.c.restore_table_from_backup(TargetTableName="tdst", BackupArn=arn)
            except Exception:
                pass  # killed before it answered
            a.proc.wait(timeout=LOAD_TIMEOUT)
            assert a.proc.returncode == -9, a.proc.returncode
        t = wait_table(b.c, "tdst", timeout=LOAD_TIMEOUT)
        assert "RestoreSummary" not in t
        assert scan_all(b.c, "tdst") == scan_all(b.c, "tsrc")
        assert resumed(b) == 1
        # The dead server comes back (a new process, a new owner): nothing
        # is left to take over, by either server.
        with serve(tmp_path, cat, store, "a2") as a2:
            time.sleep(cat.stale)  # several reconciler passes of both servers, past stale_after
            assert resumed(a2) == 0
            assert resumed(b) == 1


@pytest.mark.capability("backups")
def test_dead_backup_owner_taken_over_once(tmp_path, catalog, store, endpoint):
    cat = catalog

    def killed(a):
        make_source(a.c, "bsrc", 300)
        try:
            arn = a.c.create_backup(TableName="bsrc", BackupName="dies")["BackupDetails"]["BackupArn"]
        except Exception:
            arn = None
        a.proc.wait(timeout=LOAD_TIMEOUT)
        assert a.proc.returncode == -9, a.proc.returncode
        return arn

    def check(b, arn):
        until(lambda: failed_stale(b) == 1, "the other server fails the dead job")
        until(lambda: not objects(store, "bsrc") and not b.c.list_backups(TableName="bsrc")["BackupSummaries"],
              "the dead job's objects and row are gone")
        if arn:
            expect_error(b.c.describe_backup, "BackupNotFoundException", BackupArn=arn)
        time.sleep(cat.stale)
        assert failed_stale(b) == 1
        assert len(scan_all(b.c, "bsrc")) == 300

    if not cat.shared:
        with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_KILL_AT="backup.mid-data") as a:
            arn = killed(a)
        with serve(tmp_path, cat, store, "b") as b:
            check(b, arn)
        return
    with serve(tmp_path, cat, store, "b") as b:
        with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_KILL_AT="backup.mid-data") as a:
            arn = killed(a)
        check(b, arn)


@pytest.mark.capability("backups")
def test_stale_restore_owner_is_fenced(tmp_path, catalog, store, endpoint):
    """A restore owner stopped mid-load resumes after another server took
    its job over and finished it: none of its later writes lands (an item
    changed since on the restored table keeps its new value), and it does
    not touch the job or the table."""
    cat = catalog
    hold = tmp_path / "hold"
    hold.write_text("")
    arn = make_backup(tmp_path, cat, store, "fsrc", 1000, "fenced")
    with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_HOLD_AT="restore.mid-load",
               EXTENDDB_TEST_HOLD_FILE=str(hold), **SLOW_HEARTBEAT) as a:
        a.c.restore_table_from_backup(TargetTableName="fdst", BackupArn=arn)
        reached(hold)
        os.kill(a.proc.pid, signal.SIGSTOP)
        if not cat.shared:
            # Nobody can take the job over: the data directory is the
            # stopped owner's. Resumed, it finishes its restore itself.
            refused(tmp_path, cat, store, "b")
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            t = wait_table(a.c, "fdst", timeout=LOAD_TIMEOUT)
            assert "RestoreSummary" not in t
            assert scan_all(a.c, "fdst") == scan_all(a.c, "fsrc")
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 1
            assert resumed(a) == 0
            return
        with serve(tmp_path, cat, store, "b") as b:
            wait_table(b.c, "fdst", timeout=LOAD_TIMEOUT)
            assert resumed(b) == 1
            # The restored table is in use: an item changes.
            b.c.put_item(TableName="fdst", Item={"pk": S("k00001"), "v": S("changed after the restore")})
            b.c.delete_item(TableName="fdst", Key={"pk": S("k00900")})
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: a.finished("restore") >= 1, "the stale owner's restore ends", LOAD_TIMEOUT)
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 0
            got = {it["pk"]["S"]: it for it in scan_all(b.c, "fdst")}
            assert got["k00001"]["v"] == S("changed after the restore")
            assert "k00900" not in got
            assert len(got) == 999
            t = b.c.describe_table(TableName="fdst")["Table"]
            assert t["TableStatus"] == "ACTIVE" and "RestoreSummary" not in t
            assert resumed(b) == 1


@pytest.mark.capability("backups")
def test_stale_backup_owner_is_fenced(tmp_path, catalog, store, endpoint):
    """A backup owner stopped mid-data resumes after another server failed
    its job: its finish does not make the backup AVAILABLE, and what it
    uploads late is removed."""
    cat = catalog
    hold = tmp_path / "hold"
    hold.write_text("")
    with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_HOLD_AT="backup.mid-data",
               EXTENDDB_TEST_HOLD_FILE=str(hold), **SLOW_HEARTBEAT) as a:
        make_source(a.c, "gsrc", 300)
        arn = a.c.create_backup(TableName="gsrc", BackupName="stale")["BackupDetails"]["BackupArn"]
        reached(hold)
        os.kill(a.proc.pid, signal.SIGSTOP)
        if not cat.shared:
            refused(tmp_path, cat, store, "b")
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            d = wait_backup(a.c, arn, timeout=LOAD_TIMEOUT)
            assert d["SourceTableDetails"]["ItemCount"] == 300
            assert a.metric("extenddb_backup_jobs_finished_total", kind="backup", result="ok") == 1
            assert failed_stale(a) == 0
            return
        with serve(tmp_path, cat, store, "b") as b:
            until(lambda: failed_stale(b) == 1, "the other server fails the job")
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: a.finished("backup") >= 1, "the stale owner's backup job ends", LOAD_TIMEOUT)
            assert a.metric("extenddb_backup_jobs_finished_total", kind="backup", result="ok") == 0
            expect_error(b.c.describe_backup, "BackupNotFoundException", BackupArn=arn)
            assert b.c.list_backups(TableName="gsrc")["BackupSummaries"] == []
            until(lambda: not objects(store, "gsrc"), "the late uploads are removed")
            assert failed_stale(b) == 1


@pytest.mark.capability("backups")
def test_stale_restore_owner_cannot_finish_a_taken_over_restore(tmp_path, catalog, store, endpoint):
    """The stale owner resumes while the new owner is mid-load: it must not
    flip the target ACTIVE under the new owner (whose next writes would then
    be refused, failing the restore and dropping the target). The new owner
    finishes: the target is ACTIVE with every item."""
    cat = catalog
    hold_a, hold_b = tmp_path / "hold-a", tmp_path / "hold-b"
    hold_a.write_text("")
    hold_b.write_text("")
    arn = make_backup(tmp_path, cat, store, "hsrc", 1000, "early-flip")
    with serve(tmp_path, cat, store, "a", EXTENDDB_TEST_HOLD_AT="restore.before-active",
               EXTENDDB_TEST_HOLD_FILE=str(hold_a), **SLOW_HEARTBEAT) as a:
        a.c.restore_table_from_backup(TargetTableName="hdst", BackupArn=arn)
        reached(hold_a)  # every item loaded, not yet ACTIVE
        os.kill(a.proc.pid, signal.SIGSTOP)
        if not cat.shared:
            refused(tmp_path, cat, store, "b")
            hold_a.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            t = wait_table(a.c, "hdst", timeout=LOAD_TIMEOUT)
            assert "RestoreSummary" not in t
            assert scan_all(a.c, "hdst") == scan_all(a.c, "hsrc")
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 1
            return
        with serve(tmp_path, cat, store, "b", EXTENDDB_TEST_HOLD_AT="restore.mid-load",
                   EXTENDDB_TEST_HOLD_FILE=str(hold_b)) as b:
            # B takes the job over and stops after its first batch.
            reached(hold_b)
            assert resumed(b) == 1
            hold_a.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: a.finished("restore") >= 1, "the stale owner's restore ends", LOAD_TIMEOUT)
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 0
            assert b.c.describe_table(TableName="hdst")["Table"]["TableStatus"] == "CREATING"
            hold_b.unlink()
            t = wait_table(b.c, "hdst", timeout=LOAD_TIMEOUT)
            assert "RestoreSummary" not in t
            assert scan_all(b.c, "hdst") == scan_all(b.c, "hsrc")
            assert b.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 1
