-- A sale archived (its Redis keys removed once it ended and every order
-- was settled and persisted) answers from SQL: when, and the units it sold.
ALTER TABLE sales ADD COLUMN archived_ms BIGINT;
ALTER TABLE sales ADD COLUMN archived_sold BIGINT;
