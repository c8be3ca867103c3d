-- 0004_restore_progress: a restore job records how far its load is durable
-- (docs/adr/0027-restore-progress-after-durable-batches.md): the first
-- `loaded` items of the backup, in its item order, are in the target. A
-- job that takes over, or a restarted server's reconciler, resumes after
-- them instead of loading the backup again from its first item.
ALTER TABLE restores ADD COLUMN loaded BIGINT NOT NULL DEFAULT 0;
