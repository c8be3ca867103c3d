-- 0003_changelog: the per-table change log behind DynamoDB Streams
-- (storage.ChangeLog, docs/adr/0018-change-log.md). A record is inserted
-- by the single writer in the transaction of the item write it describes;
-- seq is assigned by the writer, increasing per table in commit order; at
-- is Unix nanoseconds on the writer's clock, non-decreasing in seq.
-- changelog_last keeps, per table whose log was trimmed, the highest seq
-- ever assigned (so LogInfo.Last survives trimming everything and a new
-- record never reuses a trimmed seq). DeleteTable removes both.

CREATE TABLE changelog (
    t    INTEGER NOT NULL,
    seq  INTEGER NOT NULL,
    at   INTEGER NOT NULL,
    data BLOB    NOT NULL,
    PRIMARY KEY (t, seq)
) WITHOUT ROWID;

CREATE TABLE changelog_last (
    t    INTEGER PRIMARY KEY,
    seq  INTEGER NOT NULL
);
