"""Point-in-time recovery: UpdateContinuousBackups and DescribeContinuousBackups.

Enabling point-in-time recovery needs the PITR service (a store and a
backend with the change log and snapshot capabilities, shipping the log to
the store; docs/backup-design.md section 7). Until the suite's server
ships, enabling answers ContinuousBackupsUnavailableException naming why;
the input rules hold either way.
"""

from wire_helpers import expect_error, validation


def spec(enabled, days=None):
    s = {"PointInTimeRecoveryEnabled": enabled}
    if days is not None:
        s["RecoveryPeriodInDays"] = days
    return s


def test_recovery_period_bounds(ddb_raw, table):
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 0),
               message="1 validation error detected: Value '0' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value greater than or equal to 1")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 36),
               message="1 validation error detected: Value '36' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value less than or equal to 35")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification={},
               match="pointInTimeRecoverySpecification.pointInTimeRecoveryEnabled' failed to satisfy constraint: Member must not be null")


def test_enable_unavailable_names_why(ddb, table):
    info = expect_error(ddb.update_continuous_backups, "ContinuousBackupsUnavailableException", TableName=table,
                        PointInTimeRecoverySpecification=spec(True, 7))
    assert info.message.startswith("Point-in-time recovery is unavailable on this server: ")
    d = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
    assert d == {"ContinuousBackupsStatus": "ENABLED",
                 "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}


def test_disable_when_off_is_a_no_op(ddb, table):
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(False, 5))
    assert res["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}
