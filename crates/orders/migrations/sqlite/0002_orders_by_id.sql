-- Orders kept in one B-tree, by order id. An order id starts with its sale
-- id and generation, so a sale's orders are a range of it and need no
-- index of their own: before this, each insert wrote the table, the
-- primary key's index and (sale_id, order_id); the persister spent most of
-- its time here (see crates/orders/src/store.rs).
CREATE TABLE orders_by_id (
    order_id TEXT NOT NULL PRIMARY KEY,
    sale_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    user_id TEXT NOT NULL,
    quantity BIGINT NOT NULL,
    request_id TEXT,
    state TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
) WITHOUT ROWID;
INSERT INTO orders_by_id SELECT order_id, sale_id, generation, user_id, quantity, request_id,
    state, created_ms, updated_ms FROM orders;
DROP TABLE orders;
ALTER TABLE orders_by_id RENAME TO orders;
