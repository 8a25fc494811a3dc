-- A sale's purchase rules as one JSON object (seckill_engine::Rules), so
-- that a new rule needs no column: the three rules of the first schema
-- move into it. VARCHAR, not TEXT: through sqlx's Any driver a MySQL TEXT
-- column reads as bytes, not a string; so `shards` becomes one too.
ALTER TABLE sales ADD COLUMN rules VARCHAR(2048) CHARACTER SET utf8mb4 NOT NULL DEFAULT '{}';
UPDATE sales SET rules = JSON_OBJECT('per_user_limit', per_user_limit,
    'starts_at_ms', starts_at_ms, 'ends_at_ms', ends_at_ms);
ALTER TABLE sales DROP COLUMN per_user_limit, DROP COLUMN starts_at_ms, DROP COLUMN ends_at_ms,
    MODIFY shards VARCHAR(4200) CHARACTER SET ascii;
