-- 0003_changelog: the per-table change log behind DynamoDB Streams
-- (storage.ChangeLog, docs/adr/0018-change-log.md).
--
-- Concurrent write transactions commit out of the order in which they
-- could number their records, so a write inserts its record into
-- changelog_pending (in the item's transaction; id is taken while the
-- item's advisory lock is held, so two writes of one item have ids in
-- commit order; the identity sequence has CACHE 1, so ids of different
-- sessions are in nextval order). A publish step, serialized per table by
-- a transaction-scoped advisory lock, moves the committed pending rows to
-- changelog in id order and numbers them from changelog_last.seq, the
-- highest seq ever assigned (kept through trimming). at is the database
-- clock at publication, never before the previous publication's.

CREATE TABLE changelog_pending (
    id   BIGINT GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    t    BIGINT NOT NULL,
    data BYTEA  NOT NULL
);

CREATE INDEX changelog_pending_by_table ON changelog_pending (t, id);

CREATE TABLE changelog (
    t    BIGINT      NOT NULL,
    seq  BIGINT      NOT NULL,
    at   TIMESTAMPTZ NOT NULL,
    data BYTEA       NOT NULL,
    PRIMARY KEY (t, seq)
);

CREATE TABLE changelog_last (
    t   BIGINT      PRIMARY KEY,
    seq BIGINT      NOT NULL,
    at  TIMESTAMPTZ NOT NULL
);
