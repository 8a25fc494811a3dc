-- MySQL 8 / MariaDB 10.11: the schema the other databases reach after
-- their migrations, in one step. Ids keep the id rules (A-Z a-z 0-9 _ -,
-- at most 64 bytes; order ids at most 160), so they are ASCII, compared
-- byte by byte (ascii_bin): a sale's orders are a range of the primary key
-- and need no index of their own, as in the other databases.

-- Sales as created, so a Redis that lost its data can be rebuilt from here.
CREATE TABLE IF NOT EXISTS sales (
    id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    name VARCHAR(256) CHARACTER SET utf8mb4 NOT NULL,
    stock BIGINT NOT NULL,
    per_user_limit BIGINT,
    starts_at_ms BIGINT,
    ends_at_ms BIGINT,
    payment_timeout_secs BIGINT NOT NULL,
    generation BIGINT NOT NULL
) ENGINE = InnoDB;

-- One row per order; the order id is the key, so a redelivered event is a no-op.
CREATE TABLE IF NOT EXISTS orders (
    order_id VARCHAR(160) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    sale_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    generation BIGINT NOT NULL,
    user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    quantity BIGINT NOT NULL,
    request_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin,
    state VARCHAR(16) CHARACTER SET ascii NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
) ENGINE = InnoDB;
