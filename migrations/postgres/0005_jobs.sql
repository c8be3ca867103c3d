-- 0005_jobs: the job catalog (docs/adr/0048-job-catalog.md): rows of
-- exports, imports and backup-plan runs with their claims, keyed by kind
-- and id. heartbeat is written from the database's clock (now()); payload
-- is owned by the job's kind. Text in the "C" collation: id order is byte
-- order.
CREATE TABLE jobs (
    kind       TEXT        COLLATE "C" NOT NULL,
    id         TEXT        COLLATE "C" NOT NULL,
    account    TEXT        COLLATE "C" NOT NULL,
    status     TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    payload    BYTEA       NOT NULL,
    message    TEXT        NOT NULL DEFAULT '',
    owner      TEXT        NOT NULL,
    generation BIGINT      NOT NULL,
    heartbeat  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX jobs_by_account ON jobs(kind, account, id);
