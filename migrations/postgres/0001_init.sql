-- 0001_init: catalog of tables, items and secondary index entries.
--
-- Keys are bytea, which PostgreSQL compares bytewise (memcmp, then length):
-- the partition and sort key bytes of attr.KeyBytes, so the order never
-- depends on a collation. Names are text in the "C" collation (byte order
-- of UTF-8), so ListTables is in byte order whatever the database locale.
-- h is storage.KeyHash(pk) (of the index partition key for idx), a uint32
-- stored in a bigint so that its order is the unsigned order; a Scan
-- segment is a range of h. A hash-only table stores the empty bytea as
-- sort key. item is the canonical item (or projection) bytes.

CREATE TABLE tables (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account    TEXT        COLLATE "C" NOT NULL,
    name       TEXT        COLLATE "C" NOT NULL,
    descr      BYTEA       NOT NULL,
    version    BIGINT      NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (account, name)
);

CREATE TABLE items (
    t    BIGINT NOT NULL,
    h    BIGINT NOT NULL CHECK (h >= 0 AND h <= 4294967295),
    pk   BYTEA  NOT NULL,
    sk   BYTEA  NOT NULL,
    item BYTEA  NOT NULL,
    PRIMARY KEY (t, h, pk, sk)
);

CREATE TABLE idx (
    t    BIGINT NOT NULL,
    ix   TEXT   COLLATE "C" NOT NULL,
    h    BIGINT NOT NULL CHECK (h >= 0 AND h <= 4294967295),
    ipk  BYTEA  NOT NULL,
    isk  BYTEA  NOT NULL,
    pk   BYTEA  NOT NULL,
    sk   BYTEA  NOT NULL,
    item BYTEA  NOT NULL,
    PRIMARY KEY (t, ix, h, ipk, isk, pk, sk)
);
