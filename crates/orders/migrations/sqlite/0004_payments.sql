-- The payment side's reference for a paid order (a webhook's or the
-- payments token's `payment_ref`): the first one given stays.
CREATE TABLE IF NOT EXISTS payments (
    order_id TEXT NOT NULL PRIMARY KEY,
    payment_ref TEXT NOT NULL,
    paid_ms BIGINT NOT NULL
);
