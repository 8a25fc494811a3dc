-- An order id starts with its sale id and generation, so a sale's orders
-- are a range of the primary key once it compares bytes (collation "C"),
-- and need no index of their own: each insert wrote two indexes before this,
-- the persister's largest cost (see crates/orders/src/store.rs).
ALTER TABLE orders ALTER COLUMN order_id TYPE TEXT COLLATE "C";
DROP INDEX IF EXISTS orders_by_sale;
