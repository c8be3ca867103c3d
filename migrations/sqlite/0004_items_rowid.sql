-- 0004_items_rowid: items and idx become rowid tables with a UNIQUE index
-- on their keys (docs/adr/0022-sqlite-rowid-items.md).
--
-- As WITHOUT ROWID tables, their rows were the keys of their B-trees: a
-- 1 KiB item made every cell overflow a 4 KiB page (at most ~1000 bytes of
-- a cell stay on an index page), interior pages held three or four
-- dividers, and every comparison of a search read the cell's overflow page
-- with a system call. Now the keys live in a small index (t, h, pk, sk /
-- t, ix, h, ipk, isk, pk, sk) whose entries stay on their page, and the
-- item in the table's B-tree under an integer rowid, where a new row is
-- appended at the end. Same columns, same key order, same CHECKs: every
-- statement reads as before.

CREATE TABLE items_r (
    t    INTEGER NOT NULL,
    h    INTEGER NOT NULL,
    pk   BLOB    NOT NULL CHECK (typeof(pk) = 'blob'),
    sk   BLOB    NOT NULL CHECK (typeof(sk) = 'blob'),
    item BLOB    NOT NULL
);
INSERT INTO items_r(t, h, pk, sk, item) SELECT t, h, pk, sk, item FROM items ORDER BY t, h, pk, sk;
DROP TABLE items;
ALTER TABLE items_r RENAME TO items;
CREATE UNIQUE INDEX items_key ON items(t, h, pk, sk);

CREATE TABLE idx_r (
    t    INTEGER NOT NULL,
    ix   TEXT    NOT NULL,
    h    INTEGER NOT NULL,
    ipk  BLOB    NOT NULL CHECK (typeof(ipk) = 'blob'),
    isk  BLOB    NOT NULL CHECK (typeof(isk) = 'blob'),
    pk   BLOB    NOT NULL CHECK (typeof(pk) = 'blob'),
    sk   BLOB    NOT NULL CHECK (typeof(sk) = 'blob'),
    item BLOB    NOT NULL
);
INSERT INTO idx_r(t, ix, h, ipk, isk, pk, sk, item) SELECT t, ix, h, ipk, isk, pk, sk, item FROM idx ORDER BY t, ix, h, ipk, isk, pk, sk;
DROP TABLE idx;
ALTER TABLE idx_r RENAME TO idx;
CREATE UNIQUE INDEX idx_key ON idx(t, ix, h, ipk, isk, pk, sk);
