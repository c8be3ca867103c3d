-- 0001_init: catalog of tables, items and secondary index entries.
--
-- Keys are BLOBs compared bytewise (memcmp): the partition and sort key
-- bytes of attr.KeyBytes. The CHECK constraints keep a key from ever being
-- stored as TEXT (whose collation could differ). h is storage.KeyHash(pk)
-- (of the index partition key for idx), so a Scan segment is a range of h.
-- A hash-only table stores the empty blob as sort key.

CREATE TABLE tables (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    account    TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    desc       BLOB    NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (account, name)
);

CREATE TABLE items (
    t    INTEGER NOT NULL,
    h    INTEGER NOT NULL,
    pk   BLOB    NOT NULL CHECK (typeof(pk) = 'blob'),
    sk   BLOB    NOT NULL CHECK (typeof(sk) = 'blob'),
    item BLOB    NOT NULL,
    PRIMARY KEY (t, h, pk, sk)
) WITHOUT ROWID;

CREATE TABLE idx (
    t    INTEGER NOT NULL,
    ix   TEXT    NOT NULL,
    h    INTEGER NOT NULL,
    ipk  BLOB    NOT NULL CHECK (typeof(ipk) = 'blob'),
    isk  BLOB    NOT NULL CHECK (typeof(isk) = 'blob'),
    pk   BLOB    NOT NULL CHECK (typeof(pk) = 'blob'),
    sk   BLOB    NOT NULL CHECK (typeof(sk) = 'blob'),
    item BLOB    NOT NULL,
    PRIMARY KEY (t, ix, h, ipk, isk, pk, sk)
) WITHOUT ROWID;
