-- 0008_table_stats: table statistics kept with every write
-- (storage.TableCounter). One row per table (ix '') and per secondary
-- index with entries: the number of items or entries and the sum of their
-- sizes, changed by each write's delta in the write's transaction.
-- counted is 1 once the figures are known: a table created from now on
-- starts counted; a table that exists before this migration has no row
-- and is counted once in the background by a recount, which adds what it
-- counted at its snapshot to the deltas committed since. bulk counts the
-- bulk loads, which write without counting and unset counted.
CREATE TABLE table_stats (
    t       INTEGER NOT NULL,
    ix      TEXT    NOT NULL,
    items   INTEGER NOT NULL,
    bytes   INTEGER NOT NULL,
    counted INTEGER NOT NULL DEFAULT 0,
    bulk    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (t, ix)
) WITHOUT ROWID;
