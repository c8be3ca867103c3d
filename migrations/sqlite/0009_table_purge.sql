-- 0009_table_purge: the tables DeleteTable removed whose rows are still
-- being deleted. DeleteTable deletes the catalog row and records the
-- table's id here in one transaction; the backend's purger then deletes
-- the table's items, index entries and change records a bounded batch
-- per write transaction, and this row with the last batch. Ids are never
-- reused (tables.id is AUTOINCREMENT) and every read checks the catalog,
-- so the rows left meanwhile are unreachable. A purge cut short by a
-- crash goes on when the database is opened again.
CREATE TABLE purge (
    t INTEGER PRIMARY KEY
);
