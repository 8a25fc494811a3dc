-- A sharded sale's shards, in order (a buyer's home shard is an index into
-- them): what rebuilding it needs besides its shards' orders.
ALTER TABLE sales ADD COLUMN shards TEXT;
