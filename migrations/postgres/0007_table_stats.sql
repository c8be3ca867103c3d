-- 0007_table_stats: table statistics kept with every write
-- (storage.TableCounter).
--
-- idx.sz is an index entry's size as the backend measured it when it
-- wrote the entry (NULL for entries written before this migration: a
-- recount measures them). A write appends its deltas (one item or entry
-- more or less, the difference of the sizes) to table_stats_delta in its
-- own transaction: appends, so concurrent writers of one table never
-- wait for each other on a counter row. A background step folds the
-- deltas into table_stats (one row per table, ix '', and per index); the
-- figures are table_stats plus the deltas not folded yet.
-- table_stats_state.counted is true once the figures are known: a table
-- created from now on starts counted; a table that exists now has no
-- state row and is recounted in the background. bulk counts the bulk
-- loads, which write without counting and unset counted.
ALTER TABLE idx ADD COLUMN sz BIGINT;

CREATE TABLE table_stats (
    t     BIGINT NOT NULL,
    ix    TEXT   COLLATE "C" NOT NULL,
    items BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    PRIMARY KEY (t, ix)
);

CREATE TABLE table_stats_delta (
    id    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    t     BIGINT NOT NULL,
    ix    TEXT   COLLATE "C" NOT NULL,
    items BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
CREATE INDEX table_stats_delta_t ON table_stats_delta (t);

CREATE TABLE table_stats_state (
    t       BIGINT  PRIMARY KEY,
    counted BOOLEAN NOT NULL,
    bulk    BIGINT  NOT NULL DEFAULT 0
);
