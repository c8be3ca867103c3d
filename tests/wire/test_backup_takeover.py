"""Two servers on one PostgreSQL database: job takeover and fencing.

Two real `extenddb serve` processes share one catalog (a PostgreSQL
database of the test's own) and one filesystem backup store. A job whose
owner is SIGKILLed at a step (the test-only kill hook) is taken over
exactly once by the other server; an owner that was stopped (SIGSTOP) and
resumes (SIGCONT) after the takeover cannot write: neither the backup row
nor the restore target's items.

Runs only when the suite runs on PostgreSQL (SQLite is one process per
database file).
"""

import contextlib
import os
import signal
import time

import pytest

from conftest import _make_client, extra_server, server_env
from test_backups import (_pg_dsn_from_serve_args, catalog, fill, objects, scan_all,  # noqa: F401 (fixture)
                          wait_backup, wait_table, S)
from wire_helpers import expect_error, raw_get

pytestmark = pytest.mark.skipif(_pg_dsn_from_serve_args() is None,
                                reason="two servers on one catalog need PostgreSQL (EXTENDDB_TEST_BACKEND=postgres)")

# Claims go stale after 1 s, the reconciler runs every 200 ms.
FAST = dict(EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="100ms", EXTENDDB__BACKUP__STALE_AFTER="1s",
            EXTENDDB__BACKUP__RECONCILE_INTERVAL="200ms")
# A server whose job does not heartbeat for 30 s: another server takes the
# job over after 1 s (its own stale_after), while this one, held or
# stopped, still believes it owns it; when it resumes it writes long before
# its first heartbeat would tell it otherwise, so only the fence stops it.
SLOW_HEARTBEAT = dict(EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="30s", EXTENDDB__BACKUP__STALE_AFTER="60s",
                      EXTENDDB__BACKUP__RECONCILE_INTERVAL="1h")


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


@contextlib.contextmanager
def serve(tmp_path, catalog_args, store, name, **env):
    full = dict(FAST)
    spool = tmp_path / f"spool-{name}"  # each server its own, as on two hosts
    spool.mkdir(mode=0o700, exist_ok=True)
    full.update(EXTENDDB__BACKUP__STORE__KIND="filesystem", EXTENDDB__BACKUP__STORE__ROOT=str(store),
                EXTENDDB__BACKUP__SPOOL_DIR=str(spool))
    full.update(env)
    with extra_server(tmp_path, catalog_args, server_env(tmp_path, **full), f"server-{name}-{{port}}.log") as (ep, proc):
        yield Server(_make_client(ep), proc, ep)


def until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def reached(hold):
    """Waits until a job is held at the hook's hold point."""
    marker = hold.with_name(hold.name + ".reached")
    until(marker.exists, f"a job reaches the hold point ({hold})")
    marker.unlink()


def make_source(c, name, n):
    c.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                   AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
    fill(c, name, n)


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "store"
    d.mkdir(mode=0o700)
    return d


RESUMED = ("extenddb_backup_reconciler_actions_total", {"action": "resumed_restore"})
FAILED_STALE = ("extenddb_backup_reconciler_actions_total", {"action": "failed_stale_backup"})


def test_dead_restore_owner_taken_over_once(tmp_path, catalog, store):
    with serve(tmp_path, catalog, store, "b") as b:
        make_source(b.c, "tsrc", 350)
        arn = b.c.create_backup(TableName="tsrc", BackupName="takeover")["BackupDetails"]["BackupArn"]
        wait_backup(b.c, arn)
        with serve(tmp_path, catalog, store, "a", EXTENDDB_TEST_KILL_AT="restore.mid-load") as a:
            try:
                a.c.restore_table_from_backup(TargetTableName="tdst", BackupArn=arn)
            except Exception:
                pass  # killed before it answered
            a.proc.wait(timeout=30)
            assert a.proc.returncode == -9, a.proc.returncode
        t = wait_table(b.c, "tdst", timeout=60)
        assert t["RestoreSummary"]["RestoreInProgress"] is False
        assert scan_all(b.c, "tdst") == scan_all(b.c, "tsrc")
        assert b.metric(*RESUMED[:1], **RESUMED[1]) == 1
        # The dead server comes back (a new process, a new owner): nothing
        # is left to take over, by either server.
        with serve(tmp_path, catalog, store, "a2") as a2:
            time.sleep(1.5)  # several reconciler passes of both servers, past stale_after
            assert a2.metric(*RESUMED[:1], **RESUMED[1]) == 0
            assert b.metric(*RESUMED[:1], **RESUMED[1]) == 1


def test_dead_backup_owner_taken_over_once(tmp_path, catalog, store):
    with serve(tmp_path, catalog, store, "b") as b:
        with serve(tmp_path, catalog, store, "a", EXTENDDB_TEST_KILL_AT="backup.mid-data") as a:
            make_source(a.c, "bsrc", 300)
            try:
                arn = a.c.create_backup(TableName="bsrc", BackupName="dies")["BackupDetails"]["BackupArn"]
            except Exception:
                arn = None
            a.proc.wait(timeout=30)
            assert a.proc.returncode == -9, a.proc.returncode
        until(lambda: b.metric(*FAILED_STALE[:1], **FAILED_STALE[1]) == 1, "the other server fails the dead job")
        until(lambda: not objects(store, "bsrc") and not b.c.list_backups(TableName="bsrc")["BackupSummaries"],
              "the dead job's objects and row are gone")
        if arn:
            expect_error(b.c.describe_backup, "BackupNotFoundException", BackupArn=arn)
        time.sleep(1.5)
        assert b.metric(*FAILED_STALE[:1], **FAILED_STALE[1]) == 1
        assert len(scan_all(b.c, "bsrc")) == 300


def test_stale_restore_owner_is_fenced(tmp_path, catalog, store):
    """A restore owner stopped mid-load resumes after another server took
    its job over and finished it: none of its later writes lands (an item
    changed since on the restored table keeps its new value), and it does
    not touch the job or the table."""
    hold = tmp_path / "hold"
    hold.write_text("")
    with serve(tmp_path, catalog, store, "b") as b:
        make_source(b.c, "fsrc", 1000)
        arn = b.c.create_backup(TableName="fsrc", BackupName="fenced")["BackupDetails"]["BackupArn"]
        wait_backup(b.c, arn)
        with serve(tmp_path, catalog, store, "a", EXTENDDB_TEST_HOLD_AT="restore.mid-load",
                   EXTENDDB_TEST_HOLD_FILE=str(hold), **SLOW_HEARTBEAT) as a:
            a.c.restore_table_from_backup(TargetTableName="fdst", BackupArn=arn)
            reached(hold)
            os.kill(a.proc.pid, signal.SIGSTOP)
            wait_table(b.c, "fdst", timeout=60)
            assert b.metric(*RESUMED[:1], **RESUMED[1]) == 1
            # The restored table is in use: an item changes.
            b.c.put_item(TableName="fdst", Item={"pk": S("k00001"), "v": S("changed after the restore")})
            b.c.delete_item(TableName="fdst", Key={"pk": S("k00900")})
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: sum(a.metric("extenddb_backup_jobs_finished_total", kind="restore", result=r)
                              for r in ("ok", "fenced", "store", "verify", "shutdown", "other")) >= 1,
                  "the stale owner's restore ends")
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 0
        got = {it["pk"]["S"]: it for it in scan_all(b.c, "fdst")}
        assert got["k00001"]["v"] == S("changed after the restore")
        assert "k00900" not in got
        assert len(got) == 999
        t = b.c.describe_table(TableName="fdst")["Table"]
        assert t["TableStatus"] == "ACTIVE" and t["RestoreSummary"]["RestoreInProgress"] is False
        assert b.metric(*RESUMED[:1], **RESUMED[1]) == 1


def test_stale_backup_owner_is_fenced(tmp_path, catalog, store):
    """A backup owner stopped mid-data resumes after another server failed
    its job: its finish does not make the backup AVAILABLE, and what it
    uploads late is removed."""
    hold = tmp_path / "hold"
    hold.write_text("")
    with serve(tmp_path, catalog, store, "b") as b:
        with serve(tmp_path, catalog, store, "a", EXTENDDB_TEST_HOLD_AT="backup.mid-data",
                   EXTENDDB_TEST_HOLD_FILE=str(hold), **SLOW_HEARTBEAT) as a:
            make_source(a.c, "gsrc", 300)
            arn = a.c.create_backup(TableName="gsrc", BackupName="stale")["BackupDetails"]["BackupArn"]
            reached(hold)
            os.kill(a.proc.pid, signal.SIGSTOP)
            until(lambda: b.metric(*FAILED_STALE[:1], **FAILED_STALE[1]) == 1, "the other server fails the job")
            hold.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: sum(a.metric("extenddb_backup_jobs_finished_total", kind="backup", result=r)
                              for r in ("ok", "fenced", "store", "verify", "shutdown", "other")) >= 1,
                  "the stale owner's backup job ends")
            assert a.metric("extenddb_backup_jobs_finished_total", kind="backup", result="ok") == 0
        expect_error(b.c.describe_backup, "BackupNotFoundException", BackupArn=arn)
        assert b.c.list_backups(TableName="gsrc")["BackupSummaries"] == []
        until(lambda: not objects(store, "gsrc"), "the late uploads are removed")
        assert b.metric(*FAILED_STALE[:1], **FAILED_STALE[1]) == 1


def test_stale_restore_owner_cannot_finish_a_taken_over_restore(tmp_path, catalog, store):
    """The stale owner resumes while the new owner is mid-load: it must not
    flip the target ACTIVE under the new owner (whose next writes would then
    be refused, failing the restore and dropping the target). The new owner
    finishes: the target is ACTIVE with every item."""
    hold_a, hold_b = tmp_path / "hold-a", tmp_path / "hold-b"
    hold_a.write_text("")
    hold_b.write_text("")
    with serve(tmp_path, catalog, store, "b", EXTENDDB_TEST_HOLD_AT="restore.mid-load",
               EXTENDDB_TEST_HOLD_FILE=str(hold_b)) as b:
        make_source(b.c, "hsrc", 1000)
        arn = b.c.create_backup(TableName="hsrc", BackupName="early-flip")["BackupDetails"]["BackupArn"]
        wait_backup(b.c, arn)
        with serve(tmp_path, catalog, store, "a", EXTENDDB_TEST_HOLD_AT="restore.before-active",
                   EXTENDDB_TEST_HOLD_FILE=str(hold_a), **SLOW_HEARTBEAT) as a:
            a.c.restore_table_from_backup(TargetTableName="hdst", BackupArn=arn)
            reached(hold_a)  # every item loaded, not yet ACTIVE
            os.kill(a.proc.pid, signal.SIGSTOP)
            # B takes the job over and stops after its first batch.
            reached(hold_b)
            assert b.metric(*RESUMED[:1], **RESUMED[1]) == 1
            hold_a.unlink()
            os.kill(a.proc.pid, signal.SIGCONT)
            until(lambda: sum(a.metric("extenddb_backup_jobs_finished_total", kind="restore", result=r)
                              for r in ("ok", "fenced", "store", "verify", "shutdown", "other")) >= 1,
                  "the stale owner's restore ends")
            assert a.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 0
            assert b.c.describe_table(TableName="hdst")["Table"]["TableStatus"] == "CREATING"
            hold_b.unlink()
            t = wait_table(b.c, "hdst", timeout=60)
        assert t["RestoreSummary"]["RestoreInProgress"] is False
        assert scan_all(b.c, "hdst") == scan_all(b.c, "hsrc")
        assert b.metric("extenddb_backup_jobs_finished_total", kind="restore", result="ok") == 1
