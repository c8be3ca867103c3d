-- 0003_changelog: the per-table change log behind DynamoDB Streams
-- (storage.ChangeLog, docs/adr/0018-change-log.md). A record is inserted
-- by the single writer in the transaction of the item write it describes;
-- seq is assigned by the writer, consecutive per table in commit order
-- (the writer reloads its counters after a rollback, so none is skipped);
-- at is Unix nanoseconds on the writer's clock, non-decreasing in seq.
-- The rowid table appends at the end of its b-tree and keeps a record of
-- a few KiB on its leaf page (a WITHOUT ROWID table would spill records
-- over about 1000 bytes to overflow pages); the index finds a table's
-- records in seq order. changelog_last keeps, per table whose log was
-- trimmed, the highest seq removed, so LogInfo.Last survives trimming
-- everything and no seq is ever reused. DeleteTable removes both.

CREATE TABLE changelog (
    id   INTEGER PRIMARY KEY,
    t    INTEGER NOT NULL,
    seq  INTEGER NOT NULL,
    at   INTEGER NOT NULL,
    data BLOB    NOT NULL
);

CREATE UNIQUE INDEX changelog_by_table ON changelog (t, seq);

CREATE TABLE changelog_last (
    t    INTEGER PRIMARY KEY,
    seq  INTEGER NOT NULL
);
