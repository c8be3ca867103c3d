"""Backup plans ([[backup.plans]], docs/backup.md "Backup plans"): a plan
due every minute runs once per slot across every server sharing the
catalog (three processes on the suite's PostgreSQL; one server on SQLite,
whose catalog one process owns), backing up each covered table under the
plan's name with BackupType AWS_BACKUP, and `extenddb backup plans`
reports it."""

import subprocess
import time

from conftest import _build_binary
from test_backups import catalog, file_server, _pg_dsn_from_serve_args  # noqa: F401 (fixture)

PLAN = """
[backup]
plans_check_interval = "200ms"

[[backup.plans]]
name = "minutely"
tables = ["pl-*"]
cron = "* * * * *"
keep_last = 2
"""


def test_plan_runs_once_per_slot_across_servers(tmp_path, catalog):  # noqa: F811
    conf = tmp_path / "plans.toml"
    conf.write_text(PLAN)
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    n = 3 if _pg_dsn_from_serve_args() else 1
    servers = []
    try:
        for _ in range(n):
            cm = file_server(tmp_path, ["--config", str(conf), *catalog], store)
            servers.append((cm, cm.__enter__()))
        c = servers[0][1][0]
        for name in ("pl-a", "pl-b", "other"):
            c.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                           AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
            c.put_item(TableName=name, Item={"pk": {"S": "x"}})
        # The first slot after the plan was first seen: within a minute.
        deadline = time.monotonic() + 90
        while True:
            got = c.list_backups(BackupType="AWS_BACKUP")["BackupSummaries"]
            avail = [b for b in got if b["BackupStatus"] == "AVAILABLE"]
            if {b["TableName"] for b in avail} == {"pl-a", "pl-b"}:
                break
            assert time.monotonic() < deadline, f"no plan backups after 90 s: {got}"
            time.sleep(0.2)
        time.sleep(1)  # every server has looked at the slot again
        got = c.list_backups(BackupType="AWS_BACKUP")["BackupSummaries"]
        slots = {b["BackupName"].rsplit("-", 1)[1] for b in got}
        per_slot = {}
        for b in got:
            per_slot.setdefault((b["TableName"], b["BackupName"]), []).append(b)
        # Exactly one backup per table and slot, whatever the servers.
        assert all(len(v) == 1 for v in per_slot.values()), per_slot
        assert {t for t, _ in per_slot} == {"pl-a", "pl-b"}
        for b in got:
            assert b["BackupName"].startswith(f"minutely-{b['TableName']}-") and b["BackupType"] == "AWS_BACKUP"
        assert not c.list_backups(BackupType="USER")["BackupSummaries"]
        assert len(c.list_backups(BackupType="ALL")["BackupSummaries"]) == len(got)
        # The CLI reports the plan from any server's view.
        ep = servers[-1][1][0].meta.endpoint_url
        out = subprocess.run([_build_binary(), "backup", "plans", "--config", str(conf), "--endpoint", ep],
                             check=True, capture_output=True, text=True).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("minutely"))
        assert "succeeded" in line and "* * * * *" in line and "keep_last 2" in line, out
        assert "minutely keeps:" in out and "pl-a" in out and "pl-b" in out, out
        assert slots
    finally:
        for cm, _ in reversed(servers):
            cm.__exit__(None, None, None)
