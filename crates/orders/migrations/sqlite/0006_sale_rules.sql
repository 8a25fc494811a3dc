-- A sale's purchase rules as one JSON object (seckill_engine::Rules), so
-- that a new rule needs no column: the three rules of the first schema
-- move into it.
ALTER TABLE sales ADD COLUMN rules TEXT NOT NULL DEFAULT '{}';
UPDATE sales SET rules = json_object('per_user_limit', per_user_limit,
    'starts_at_ms', starts_at_ms, 'ends_at_ms', ends_at_ms);
ALTER TABLE sales DROP COLUMN per_user_limit;
ALTER TABLE sales DROP COLUMN starts_at_ms;
ALTER TABLE sales DROP COLUMN ends_at_ms;
