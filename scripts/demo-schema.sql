-- The demo shop behind rules.yaml: `make run` loads it into the test bed's
-- primary (the replica gets it by replication). Safe to load again: existing
-- tables and rows are kept.
CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
USE shop;

-- One row per SKU; rule sku-stock locks by sku_id and guards stock >= 0.
CREATE TABLE IF NOT EXISTS sku_stock (
  sku_id BIGINT PRIMARY KEY,
  stock  INT NOT NULL,
  fence  BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- One row per purchase, so oversold stock shows as more orders than stock.
CREATE TABLE IF NOT EXISTS orders (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  sku_id     BIGINT,
  buyer      VARCHAR(64),
  created_at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6),
  KEY (sku_id)
) ENGINE=InnoDB;

INSERT IGNORE INTO sku_stock (sku_id, stock) VALUES
  (1001, 1),      -- "one left": the classic oversell
  (1002, 10),
  (1003, 100),
  (1004, 1000),
  (1005, 0);      -- sold out
