-- 0006_backup_expiry: a backup may expire (BackupExpiryDateTime: SYSTEM
-- backups, backups of plans) and may belong to a backup plan. expires_at
-- is Unix milliseconds, 0 for never.
ALTER TABLE backups ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE backups ADD COLUMN plan TEXT NOT NULL DEFAULT '';
