-- 0002_backups: catalog rows of backups with their job claims
-- (docs/backup-design.md section 4). heartbeat is written from the
-- database's clock (now()). Every status write is conditioned on
-- (generation, status). Text in the "C" collation: ARN order is byte order.

CREATE TABLE backups (
    arn        TEXT        COLLATE "C" PRIMARY KEY,
    account    TEXT        COLLATE "C" NOT NULL,
    table_name TEXT        COLLATE "C" NOT NULL,
    table_id   BIGINT      NOT NULL,
    backup_id  TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    type       TEXT        NOT NULL,
    status     TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    size_bytes BIGINT      NOT NULL DEFAULT 0,
    item_count BIGINT      NOT NULL DEFAULT 0,
    table_desc BYTEA       NOT NULL,
    store_id   TEXT        NOT NULL,
    prefix     TEXT        NOT NULL,
    message    TEXT        NOT NULL DEFAULT '',
    owner      TEXT        NOT NULL,
    generation BIGINT      NOT NULL,
    heartbeat  TIMESTAMPTZ NOT NULL
);

CREATE INDEX backups_by_account ON backups(account, arn);
CREATE INDEX backups_by_status ON backups(status);

-- The catalog's identity, named in the store's extenddb-store.json so that
-- a store is never shared by two catalogs (docs/backup-design.md section 2).
CREATE TABLE backup_catalog (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id  TEXT    NOT NULL
);

-- Restore jobs with their claims: a job reloads its target from the start
-- when taken over (items are re-applied idempotently, then counted).
CREATE TABLE restores (
    id         TEXT    PRIMARY KEY,
    account    TEXT    NOT NULL,
    table_name TEXT    NOT NULL,
    table_id   BIGINT  NOT NULL,
    backup_arn TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    message    TEXT    NOT NULL DEFAULT '',
    owner      TEXT    NOT NULL,
    generation BIGINT  NOT NULL,
    heartbeat  TIMESTAMPTZ NOT NULL
);
