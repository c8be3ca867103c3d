"""Point-in-time recovery: UpdateContinuousBackups, DescribeContinuousBackups
and the history shipped to the backup store.

The suite's server keeps backups in a filesystem store (conftest.server_env),
so point-in-time recovery can be turned on; its history (head, base,
chained segments) appears under <account>/<table>/pitr/ in the store
(docs/backup-design.md section 7). A server without a store refuses it.
"""

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import _make_client, extra_server, server_env
from wire_helpers import expect_error, raw_get, validation

ACCOUNT = "000000000000"


def spec(enabled, days=None):
    s = {"PointInTimeRecoveryEnabled": enabled}
    if days is not None:
        s["RecoveryPeriodInDays"] = days
    return s


def pitr_desc(ddb, table):
    return ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]


def test_recovery_period_bounds(ddb_raw, table):
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 0),
               message="1 validation error detected: Value '0' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value greater than or equal to 1")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 36),
               message="1 validation error detected: Value '36' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value less than or equal to 35")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification={},
               match="pointInTimeRecoverySpecification.pointInTimeRecoveryEnabled' failed to satisfy constraint: Member must not be null")


def test_disable_when_off_is_a_no_op(ddb, table):
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(False, 5))
    assert res["ContinuousBackupsDescription"] == {"ContinuousBackupsStatus": "ENABLED",
                                                   "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}


@pytest.mark.capability("backups")
def test_enable_ships_and_describes_the_window(ddb, table, backup_root):
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
    d = res["ContinuousBackupsDescription"]
    assert d["ContinuousBackupsStatus"] == "ENABLED"
    assert d["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    assert d["PointInTimeRecoveryDescription"]["RecoveryPeriodInDays"] == 35
    # The history starts with its first base (within a ship interval);
    # what is written after it goes to segments.
    deadline = time.monotonic() + 30
    while "LatestRestorableDateTime" not in pitr_desc(ddb, table):
        assert time.monotonic() < deadline, "no base shipped"
        time.sleep(0.2)
    for i in range(20):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}})
    written = datetime.now(timezone.utc)
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": {"pk": {"S": "t1"}}}},
        {"Delete": {"TableName": table, "Key": {"pk": {"S": "absent"}}}}])
    deadline = time.monotonic() + 30
    while True:
        p = pitr_desc(ddb, table)
        latest = p.get("LatestRestorableDateTime")
        if latest is not None and latest >= written:
            break
        assert time.monotonic() < deadline, f"window never reached the writes: {p}"
        time.sleep(0.2)
    assert p["EarliestRestorableDateTime"] <= p["LatestRestorableDateTime"] <= datetime.now(timezone.utc)
    hist = list((Path(backup_root) / ACCOUNT / table / "pitr").iterdir())
    assert len(hist) == 1, hist
    assert (hist[0] / "pitr.json").is_file()
    segs = sorted((hist[0] / "segments").glob("*.jsonl.zst"))
    assert segs and all(Path(str(s) + ".sha256").is_file() for s in segs)
    assert list((hist[0] / "bases").glob("*/extenddb-base.json"))
    lag = [l for l in raw_get(ddb.meta.endpoint_url, "/metrics").body.decode().splitlines()
           if l.startswith("extenddb_pitr_lag_seconds{") and f'table="{table}"' in l]
    assert len(lag) == 1 and 0 <= float(lag[0].split()[-1]) < 60, lag

    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True, 7))
    assert res["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]["RecoveryPeriodInDays"] == 7
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(False))
    assert res["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}


def test_enable_without_a_store(tmp_path):
    with extra_server(tmp_path, ["--memory"], server_env(tmp_path, EXTENDDB__BACKUP__STORE__KIND="disabled"), "nostore.log") as (ep, _):
        c = _make_client(ep)
        c.create_table(TableName="pitr_nostore", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        info = expect_error(c.update_continuous_backups, "ContinuousBackupsUnavailableException", TableName="pitr_nostore",
                            PointInTimeRecoverySpecification=spec(True))
        assert info.message == ("Point-in-time recovery is unavailable on this server: "
                                "no backup store is configured ([backup.store])")
        assert pitr_desc(c, "pitr_nostore") == {"PointInTimeRecoveryStatus": "DISABLED"}


# ------------------------------------------------------------- crashes

def history_check(store, table):
    """Checks a table's history in a filesystem store as a reader would:
    every segment with its sidecar, the sidecar's hash of the segment, the
    chain of sidecar hashes, ascending disjoint ranges. Returns the number
    of records and the head."""
    import hashlib
    import json
    hists = list((Path(store) / ACCOUNT / table / "pitr").iterdir())
    assert len(hists) == 1, hists
    head = json.loads((hists[0] / "pitr.json").read_text())
    prev, last, total = "0" * 64, head["start"], 0
    for seg in sorted((hists[0] / "segments").glob("*.jsonl.zst")):
        side = Path(str(seg) + ".sha256").read_bytes()
        lines = side.decode().split("\n")
        assert lines[0] == hashlib.sha256(seg.read_bytes()).hexdigest() + "  " + seg.name, seg
        assert lines[1] == "# prev " + prev, f"{seg}: chain broken"
        first, end = map(int, lines[2].split()[2:4])
        assert first == int(seg.name.split(".")[0]) and first > last, (seg, first, last)
        total += int(lines[3].split()[2])
        prev, last = hashlib.sha256(side).hexdigest(), end
    return total, head


def wait_latest_after(c, table, when, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        latest = pitr_desc(c, table).get("LatestRestorableDateTime")
        if latest is not None and latest >= when:
            return
        assert time.monotonic() < deadline, f"latest restorable {latest} never reached {when}"
        time.sleep(0.2)


@pytest.mark.capability("backups")
@pytest.mark.parametrize("point", ["pitr.after-segment", "pitr.after-base"])
def test_ship_crash_loses_and_duplicates_nothing(tmp_path, point):
    """The server is killed (SIGKILL) between a segment and its sidecar, or
    between a base's backup and its position; after a restart the history
    holds every write after its start exactly once, in an unbroken chain."""
    from test_backups import file_server, scan_all
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    catalog = ["--data-dir", str(data)]
    table = "pitr_crash"
    writes = 0
    with file_server(tmp_path, catalog, store, EXTENDDB_TEST_KILL_AT=point) as (c, proc):
        c.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        c.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
        if point == "pitr.after-segment":
            deadline = time.monotonic() + 30
            while "LatestRestorableDateTime" not in pitr_desc(c, table):
                assert time.monotonic() < deadline, "no base shipped"
                time.sleep(0.1)
            try:
                for i in range(50):
                    c.put_item(TableName=table, Item={"pk": {"S": f"a{i}"}})
                    writes += 1
            except Exception:
                pass  # killed meanwhile: the writes acknowledged before count
        proc.wait(timeout=30)
        assert proc.returncode == -9, proc.returncode
    with file_server(tmp_path, catalog, store) as (c, _):
        for i in range(20):
            c.put_item(TableName=table, Item={"pk": {"S": f"b{i}"}})
            writes += 1
        wait_latest_after(c, table, datetime.now(timezone.utc))
        total, head = history_check(store, table)
        # Every put wrote a new key: the items are the writes that
        # committed (a put in flight at the kill may have committed
        # without its answer), each one record.
        items = len(scan_all(c, table))
        assert writes <= items <= writes + 1 and total == items, (total, items, writes, head["start"])
