-- 0006_jobs: the job catalog (docs/adr/0048-job-catalog.md): rows of
-- exports, imports and backup-plan runs with their claims, keyed by kind
-- and id. heartbeat and created_at are Unix milliseconds of the
-- database's clock; payload is owned by the job's kind.
CREATE TABLE jobs (
    kind       TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    account    TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    payload    BLOB    NOT NULL,
    message    TEXT    NOT NULL DEFAULT '',
    owner      TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    heartbeat  INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX jobs_by_account ON jobs(kind, account, id);
