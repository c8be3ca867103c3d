"""Point-in-time recovery: UpdateContinuousBackups, DescribeContinuousBackups
and the history shipped to the backup store.

The suite's server keeps backups in a filesystem store (conftest.server_env),
so point-in-time recovery can be turned on; its history (head, base,
chained segments) appears under <account>/<table>/pitr/ in the store
(docs/backup-design.md section 7). A server without a store refuses it.
"""

import contextlib
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
