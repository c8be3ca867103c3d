-- 0008_table_purge: the tables DeleteTable removed whose rows are still
-- being deleted. DeleteTable deletes the catalog row and records the
-- table's id here in one transaction; the purger of any server then
-- deletes the table's items, index entries and change records a bounded
-- batch per statement, and this row once none is left. Ids are never
-- reused (tables.id is an identity) and every read and write checks the
-- catalog, so the rows left meanwhile are unreachable. A purge cut short
-- by a crash goes on at any server's next start or periodic pass.
CREATE TABLE purge (
    t BIGINT PRIMARY KEY
);
