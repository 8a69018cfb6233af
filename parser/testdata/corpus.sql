// Corpus for the golden test and the fuzz seeds: one case per line, analysed
// under the current database set by the last "@db=" line ("shop" at first).
// Lines starting with // are comments.

// --- keyed writes, the core of lockproxy
UPDATE sku_stock SET stock = 9 WHERE sku_id = 1001
UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1001 AND stock >= 1
UPDATE sku_stock SET stock = stock - ? WHERE sku_id = ?
UPDATE sku_stock SET stock = ? WHERE sku_id = ?
UPDATE sku_stock SET stock = stock + 5, version = version + 1 WHERE sku_id = '1001'
UPDATE sku_stock SET stock = 1 + stock WHERE sku_id = 7
UPDATE sku_stock SET stock = stock * 2 WHERE sku_id = 7
UPDATE sku_stock SET stock = GREATEST(stock - 1, 0) WHERE sku_id = 7
UPDATE sku_stock SET stock = (stock - (1)) WHERE (sku_id = (7))
UPDATE sku_stock SET stock = stock - -1 WHERE sku_id = -5
UPDATE sku_stock SET stock = 0 WHERE sku_id IN (1, 2, 3)
UPDATE sku_stock SET stock = 0 WHERE sku_id = 1 OR sku_id = 2
UPDATE sku_stock SET stock = 0 WHERE sku_id = 1 OR stock < 0
UPDATE sku_stock SET stock = 0 WHERE stock < 0
UPDATE sku_stock SET stock = 0
UPDATE sku_stock SET stock = 0 WHERE sku_id > 5 AND sku_id < 10
UPDATE sku_stock SET stock = 0 WHERE NOT (sku_id = 1)
UPDATE sku_stock SET stock = 0 WHERE sku_id <=> 4
UPDATE sku_stock SET stock = 0 WHERE sku_id = NULL
UPDATE sku_stock SET stock = 0 WHERE 1001 = sku_id
UPDATE sku_stock SET stock = 0 WHERE sku_id = other_col
UPDATE sku_stock SET stock = 0 WHERE sku_id = 1 + 1
UPDATE sku_stock SET stock = 0 WHERE sku_id IN (SELECT sku_id FROM hot_skus)
UPDATE sku_stock SET stock = 0 WHERE sku_id NOT IN (1, 2)
UPDATE sku_stock SET stock = 0 WHERE sku_id IN (1, NOW())
UPDATE sku_stock SET stock = 0 WHERE sku_id = 1 ORDER BY sku_id LIMIT 1
UPDATE LOW_PRIORITY IGNORE sku_stock SET stock = 0 WHERE sku_id = 1
UPDATE shop.sku_stock SET stock = 0 WHERE shop.sku_stock.sku_id = 3
UPDATE other.sku_stock SET stock = 0 WHERE sku_id = 3
UPDATE `sku_stock` SET `stock` = 0 WHERE `sku_stock`.`sku_id` = 3
UPDATE SKU_Stock SET Stock = 0 WHERE SKU_ID = 3
UPDATE sku_stock s SET s.stock = s.stock - 1 WHERE s.sku_id = 3
UPDATE sku_stock s SET s.stock = 1 WHERE sku_stock.sku_id = 3
UPDATE warehouse_stock SET qty = 0 WHERE warehouse_id = 1 AND sku_id = 2
UPDATE warehouse_stock SET qty = 0 WHERE (warehouse_id, sku_id) = (1, 2)
UPDATE warehouse_stock SET qty = 0 WHERE (warehouse_id, sku_id) IN ((1, 2), (1, 3), (2, 2))
UPDATE warehouse_stock SET qty = 0 WHERE (warehouse_id, sku_id) IN ((1, 2), (1, ?))
UPDATE warehouse_stock SET qty = 0 WHERE warehouse_id IN (1, 2) AND sku_id IN (5, 6)
UPDATE warehouse_stock SET qty = 0 WHERE warehouse_id = 1 AND (sku_id = 5 OR sku_id = 6)
UPDATE warehouse_stock SET qty = 0 WHERE (warehouse_id = 1 AND sku_id = 5) OR (warehouse_id = 2 AND sku_id = 6)
UPDATE warehouse_stock SET qty = 0 WHERE warehouse_id = 1 AND sku_id = 5 AND qty > 0 AND note LIKE 'x%'
UPDATE orders o JOIN sku_stock s ON s.sku_id = o.sku_id SET s.stock = s.stock - o.qty WHERE o.id = 77
UPDATE orders o, sku_stock s SET s.stock = 0, o.state = 'done' WHERE o.id = 77 AND s.sku_id = 5
UPDATE orders o INNER JOIN sku_stock s ON s.sku_id = 9 SET o.state = 'x' WHERE o.id = 1
UPDATE orders o LEFT JOIN sku_stock s ON s.sku_id = 9 SET o.state = 'x' WHERE o.id = 1
UPDATE sku_stock SET price = 1.50, name = 'it''s', data = x'0A0B', flags = b'101', f = 1e3, big = 18446744073709551615, neg = -9223372036854775808 WHERE sku_id = 1
UPDATE sku_stock SET name = _utf8mb4'abc' COLLATE utf8mb4_bin WHERE sku_id = _utf8mb4'abc'
UPDATE sku_stock SET name = "double quoted" WHERE code = "A-1"
UPDATE sku_stock SET name = 'a\nb\\c' WHERE code = 0x41
UPDATE sku_stock SET stock = DEFAULT WHERE sku_id = 1
UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND sku_id = 2
WITH hot AS (SELECT sku_id FROM sku_stock WHERE stock < 5) UPDATE sku_stock SET stock = 100 WHERE sku_id IN (SELECT sku_id FROM hot)

// --- deletes
DELETE FROM sku_stock WHERE sku_id = 1001
DELETE FROM sku_stock WHERE sku_id IN (?, ?, ?)
DELETE FROM sku_stock
DELETE FROM sku_stock WHERE created_at < NOW() - INTERVAL 1 DAY LIMIT 100
DELETE QUICK IGNORE FROM sku_stock WHERE sku_id = 3
DELETE s FROM sku_stock s JOIN orders o ON o.sku_id = s.sku_id WHERE o.id = 5 AND s.sku_id = 3
DELETE s, o FROM sku_stock s, orders o WHERE s.sku_id = 3 AND o.id = 5
DELETE FROM s USING sku_stock AS s WHERE s.sku_id = 3
DELETE FROM shop.sku_stock WHERE sku_stock.sku_id = 8

// --- inserts and replaces
INSERT INTO sku_stock (sku_id, stock) VALUES (1001, 10)
INSERT INTO sku_stock (sku_id, stock) VALUES (1001, 10), (1002, 20), (1003, 30)
INSERT INTO sku_stock (sku_id, stock) VALUES (?, ?), (?, ?)
INSERT INTO sku_stock (sku_id, stock, updated_at) VALUES (1, 2, NOW())
INSERT INTO sku_stock VALUES (1001, 10)
INSERT INTO sku_stock SET sku_id = 5, stock = 1
INSERT sku_stock (sku_id) VALUE (6)
INSERT IGNORE INTO sku_stock (sku_id, stock) VALUES (1, 1)
INSERT INTO sku_stock (sku_id, stock) VALUES (1, 1) ON DUPLICATE KEY UPDATE stock = stock + 1
INSERT INTO sku_stock (sku_id, stock) VALUES (1, 1) ON DUPLICATE KEY UPDATE stock = VALUES(stock), updated_at = NOW()
INSERT INTO sku_stock (sku_id, stock) VALUES (?, ?) ON DUPLICATE KEY UPDATE stock = stock + ?
INSERT INTO sku_stock (sku_id, stock) SELECT sku_id, 0 FROM new_skus WHERE batch = 3
INSERT INTO sku_stock (sku_id, stock) SELECT sku_id, 0 FROM new_skus WHERE batch = 3 FOR UPDATE
INSERT INTO archive.sku_stock SELECT * FROM sku_stock WHERE sku_id = 4
INSERT INTO sku_stock (sku_id, stock) VALUES (DEFAULT, 1)
INSERT INTO `sku_stock` (`sku_id`,`stock`,`created_at`) VALUES (1001,10,'2024-01-01 00:00:00.000')
INSERT INTO orders (user_id, sku_id, qty) VALUES (1, 2, 3); SELECT LAST_INSERT_ID()
REPLACE INTO sku_stock (sku_id, stock) VALUES (1, 2)
REPLACE sku_stock SET sku_id = 1, stock = 2
REPLACE INTO sku_stock (sku_id, stock) SELECT 1, 2
INSERT INTO t1 (a) VALUES (1) ON DUPLICATE KEY UPDATE a = a - ?
INSERT INTO t1 (a, b) VALUES ((1), -2)

// --- selects and locking reads
SELECT * FROM sku_stock WHERE sku_id = 1001
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR UPDATE
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR SHARE
SELECT stock FROM sku_stock WHERE sku_id = 1001 LOCK IN SHARE MODE
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR UPDATE NOWAIT
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR UPDATE SKIP LOCKED
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR SHARE SKIP LOCKED
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR SHARE NOWAIT
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR UPDATE WAIT 5
SELECT stock FROM sku_stock WHERE sku_id = 1001 FOR UPDATE OF sku_stock
SELECT * FROM job_queue WHERE state = 'ready' ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED
SELECT * FROM sku_stock WHERE sku_id = ? LIMIT 1 FOR UPDATE
SELECT * FROM sku_stock WHERE sku_id IN (SELECT sku_id FROM cart WHERE user_id = 5 FOR UPDATE)
SELECT * FROM (SELECT * FROM sku_stock WHERE sku_id = 3 FOR UPDATE) AS x
SELECT stock FROM sku_stock WHERE sku_id = 1 UNION SELECT stock FROM sku_stock WHERE sku_id = 2 FOR UPDATE
(SELECT stock FROM sku_stock WHERE sku_id = 1 FOR UPDATE) UNION ALL (SELECT stock FROM archive.sku_stock WHERE sku_id = 1)
(SELECT a FROM t1 LOCK IN SHARE MODE) UNION (SELECT a FROM t2 FOR UPDATE)
SELECT a FROM t1 EXCEPT SELECT a FROM t2
SELECT a FROM t1 INTERSECT SELECT a FROM t2 WHERE id = 3
SELECT * FROM sku_stock s JOIN orders o ON o.sku_id = s.sku_id WHERE s.sku_id = 5 AND o.id = 9 FOR UPDATE
SELECT * FROM sku_stock AS s INNER JOIN orders AS o ON s.sku_id = o.sku_id AND o.id = 9 WHERE s.sku_id IN (5, 6)
SELECT * FROM sku_stock s LEFT JOIN orders o ON o.sku_id = s.sku_id AND o.id = 9 WHERE s.sku_id = 5
SELECT * FROM orders o RIGHT JOIN sku_stock s ON s.sku_id = 5 WHERE o.id = 9
SELECT * FROM sku_stock a JOIN sku_stock b ON b.sku_id = 2 WHERE a.sku_id = 1
SELECT * FROM sku_stock, orders WHERE sku_stock.sku_id = 1 AND orders.id = 2
SELECT * FROM sku_stock NATURAL JOIN orders WHERE id = 2
SELECT * FROM sku_stock JOIN orders USING (sku_id) WHERE sku_id = 2
SELECT * FROM sku_stock s STRAIGHT_JOIN orders o ON o.sku_id = s.sku_id WHERE s.sku_id = 4
SELECT * FROM sku_stock WHERE sku_id = 1 AND EXISTS (SELECT 1 FROM orders o WHERE o.sku_id = sku_stock.sku_id AND o.id = 5)
SELECT (SELECT MAX(id) FROM orders WHERE sku_id = 3), stock FROM sku_stock WHERE sku_id = 3
WITH recent AS (SELECT * FROM orders WHERE id > 100) SELECT * FROM recent JOIN sku_stock ON sku_stock.sku_id = recent.sku_id WHERE sku_stock.sku_id = 1
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 5) SELECT * FROM seq
SELECT * FROM sku_stock WHERE sku_id = 1 AND sku_id = 1
SELECT * FROM sku_stock WHERE sku_id IN (1)
SELECT * FROM sku_stock WHERE (sku_id = 1 OR sku_id = 2) AND (region = 'a' OR region = 'b')
SELECT * FROM sku_stock WHERE sku_id BETWEEN 1 AND 3
SELECT * FROM sku_stock WHERE sku_id IS NULL
SELECT * FROM sku_stock WHERE sku_id = 1 XOR sku_id = 2
SELECT * FROM sku_stock WHERE sku_id = 1 || sku_id = 2
SELECT * FROM sku_stock WHERE sku_id = 1 && stock > 0
SELECT * FROM sku_stock WHERE sku_id = TRUE
SELECT * FROM sku_stock WHERE sku_id = 'abc' COLLATE utf8mb4_bin
SELECT * FROM sku_stock WHERE sku_id = CAST('5' AS UNSIGNED)
SELECT * FROM sku_stock WHERE code = 'A' AND sku_id = 0x10
SELECT * FROM sku_stock WHERE sku_id = 1.0
SELECT * FROM sku_stock WHERE sku_id = +7
SELECT * FROM sku_stock WHERE sku_id = - 7.25
SELECT * FROM sku_stock WHERE sku_id = -18446744073709551615
SELECT 1
SELECT NOW(), @@version
SELECT * FROM DUAL
TABLE sku_stock
VALUES ROW(1, 2), ROW(3, 4)
SELECT COUNT(*) FROM sku_stock GROUP BY region HAVING COUNT(*) > 1 ORDER BY 1 DESC LIMIT 5 OFFSET 10
SELECT * FROM sku_stock WHERE sku_id = ? AND region = ? LIMIT ?, ?
SELECT * FROM sku_stock PARTITION (p0) WHERE sku_id = 1
SELECT * FROM sku_stock USE INDEX (PRIMARY) WHERE sku_id = 1
SELECT * FROM sku_stock FORCE INDEX (idx_region) WHERE region = 'x'
SELECT DISTINCT region FROM sku_stock
SELECT SQL_CALC_FOUND_ROWS * FROM sku_stock LIMIT 10; SELECT FOUND_ROWS()
SELECT ROW_COUNT()
SELECT LAST_INSERT_ID()
SELECT LAST_INSERT_ID(42)
SELECT @@identity, @@session.last_insert_id
SELECT GET_LOCK('job', 10)
SELECT RELEASE_LOCK('job')
SELECT RELEASE_ALL_LOCKS()
SELECT IS_USED_LOCK('job'), IS_FREE_LOCK('job')
DO GET_LOCK('job', 1)
SELECT @n := COUNT(*) FROM sku_stock
SELECT @a, @b
SELECT * FROM sku_stock INTO OUTFILE '/tmp/x.csv'
SELECT * FROM sku_stock WHERE sku_id = 1 AND stock > (SELECT AVG(stock) FROM sku_stock)
SELECT * FROM sku_stock WHERE sku_id = 1 /* lockproxy:primary */
/* lockproxy:primary */ SELECT * FROM sku_stock WHERE sku_id = 1
SELECT '/* lockproxy:primary */' FROM sku_stock
SELECT * FROM sku_stock -- lockproxy:primary
SELECT * FROM sku_stock # LockProxy:Primary
SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM sku_stock WHERE sku_id = 1
SELECT /*+ lockproxy:primary */ 1
SELECT /*! STRAIGHT_JOIN */ * FROM sku_stock WHERE sku_id = 1
/* app=checkout */ SELECT stock FROM sku_stock WHERE sku_id = 1 FOR UPDATE
SELECT * FROM sku_stock WHERE sku_id = 1;
SELECT 1; SELECT 2; SELECT * FROM sku_stock WHERE sku_id = ?
SELECT * FROM sku_stock WHERE sku_id = 1 FOR UPDATE; UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1

// --- ORM shapes
SELECT * FROM `users` WHERE `users`.`id` = ? ORDER BY `users`.`id` LIMIT 1
SELECT * FROM `users` WHERE `users`.`id` = 10 AND `users`.`deleted_at` IS NULL ORDER BY `users`.`id` LIMIT 1
SELECT * FROM `users` WHERE `users`.`id` IN (1,2,3) AND `users`.`deleted_at` IS NULL
UPDATE `users` SET `name`=?,`updated_at`=? WHERE `users`.`deleted_at` IS NULL AND `id` = ?
INSERT INTO `users` (`name`,`email`,`created_at`,`updated_at`) VALUES (?,?,?,?) RETURNING `id`
INSERT INTO `users` (`name`,`email`,`created_at`,`updated_at`) VALUES (?,?,?,?)
DELETE FROM `users` WHERE `users`.`id` = ?
SELECT * FROM `users` WHERE id = 5 FOR UPDATE
select u1_0.id,u1_0.name from users u1_0 where u1_0.id=? for update
select u1_0.id,u1_0.name from users u1_0 where u1_0.id=?
select s1_0.sku_id,s1_0.stock,s1_0.version from sku_stock s1_0 where s1_0.sku_id=?
update sku_stock set stock=?,version=? where sku_id=? and version=?
insert into sku_stock (stock,version,sku_id) values (?,?,?)
select o1_0.id,s1_0.sku_id from orders o1_0 join sku_stock s1_0 on s1_0.sku_id=o1_0.sku_id where o1_0.id=? for update of s1_0
SELECT `app_sku`.`id`, `app_sku`.`stock` FROM `app_sku` WHERE `app_sku`.`id` = 12 LIMIT 21
SELECT `app_sku`.`id`, `app_sku`.`stock` FROM `app_sku` WHERE `app_sku`.`id` = 12 LIMIT 21 FOR UPDATE
UPDATE `app_sku` SET `stock` = (`app_sku`.`stock` - 1) WHERE `app_sku`.`id` = 12
UPDATE `app_sku` SET `stock` = 9 WHERE `app_sku`.`id` = 12
SELECT `skus`.* FROM `skus` WHERE `skus`.`id` = 1 LIMIT 1
SELECT `skus`.* FROM `skus` WHERE `skus`.`id` = 1 LIMIT 1 FOR UPDATE
UPDATE `skus` SET `skus`.`stock` = 3, `skus`.`updated_at` = '2024-05-01 10:00:00' WHERE `skus`.`id` = 1
UPDATE `skus` SET `stock` = COALESCE(`stock`, 0) - 1 WHERE `skus`.`id` = 1
SELECT t0.ID, t0.NAME FROM SKU t0 WHERE (t0.ID = ?)
SELECT this_.id as id1_0_0_ FROM sku this_ WHERE this_.id in (?, ?, ?)

// --- transactions and session
BEGIN
BEGIN WORK
START TRANSACTION
START TRANSACTION READ ONLY
START TRANSACTION READ WRITE
START TRANSACTION WITH CONSISTENT SNAPSHOT
COMMIT
COMMIT WORK
ROLLBACK
ROLLBACK WORK
ROLLBACK TO SAVEPOINT sp1
ROLLBACK TO sp1
ROLLBACK WORK TO SAVEPOINT sp1
SAVEPOINT sp1
RELEASE SAVEPOINT sp1
SET autocommit = 0
SET autocommit = 1
SET autocommit = ON
SET autocommit = off
SET @@autocommit = 0
SET SESSION autocommit = 1
SET autocommit = @x
SET autocommit = DEFAULT
SET @a = 1, @b := 'x'
SET @@session.sql_mode = 'STRICT_TRANS_TABLES', time_zone = '+00:00'
SET NAMES utf8mb4
SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci
SET CHARACTER SET utf8mb4
SET GLOBAL max_connections = 100
SET TRANSACTION ISOLATION LEVEL READ COMMITTED
SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ
SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE
SET SESSION TRANSACTION READ ONLY
SET TRANSACTION READ WRITE
SET @last = LAST_INSERT_ID()
SET PASSWORD = 'secret'
USE shop
USE `Other_DB`
BEGIN; UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1; COMMIT
SET autocommit=0; SELECT stock FROM sku_stock WHERE sku_id = 1

// --- other statements
SHOW TABLES
SHOW CREATE TABLE sku_stock
SHOW VARIABLES LIKE 'autocommit'
SHOW COLUMNS FROM sku_stock
SHOW WARNINGS
EXPLAIN SELECT * FROM sku_stock WHERE sku_id = 1
EXPLAIN UPDATE sku_stock SET stock = 0 WHERE sku_id = 1
DESCRIBE sku_stock
CALL restock(1001, 5)
LOAD DATA INFILE '/tmp/x.csv' INTO TABLE sku_stock
LOAD DATA LOCAL INFILE 'x.csv' REPLACE INTO TABLE sku_stock FIELDS TERMINATED BY ','
LOCK TABLES sku_stock WRITE, orders READ
LOCK TABLES sku_stock AS s READ
UNLOCK TABLES
PREPARE stmt1 FROM 'SELECT * FROM sku_stock WHERE sku_id = ?'
PREPARE stmt1 FROM @sql
EXECUTE stmt1 USING @id
EXECUTE stmt1
DEALLOCATE PREPARE stmt1
DROP PREPARE stmt1
CREATE TABLE t2 (id INT PRIMARY KEY, v VARCHAR(10))
CREATE TEMPORARY TABLE tmp1 (id INT)
DROP TEMPORARY TABLE tmp1
DROP TABLE IF EXISTS t2
ALTER TABLE sku_stock ADD COLUMN note TEXT
TRUNCATE TABLE sku_stock
TRUNCATE sku_stock
RENAME TABLE a TO b, c TO d
CREATE INDEX idx_region ON sku_stock (region)
CREATE DATABASE IF NOT EXISTS shop2
CREATE TABLE t3 AS SELECT * FROM sku_stock WHERE sku_id = 1
CREATE VIEW v1 AS SELECT * FROM sku_stock
CREATE USER 'bob'@'%' IDENTIFIED BY 'pw'
GRANT SELECT ON shop.* TO 'bob'@'%'
FLUSH PRIVILEGES
ANALYZE TABLE sku_stock
KILL 42
DO 1
HELP 'select'

// --- current database
@db=
SELECT * FROM sku_stock WHERE sku_id = 1
UPDATE shop.sku_stock SET stock = 1 WHERE sku_id = 1
@db=Shop
SELECT * FROM sku_stock WHERE sku_id = 1
@db=shop

// --- MariaDB-specific and unparseable
DELETE FROM sku_stock WHERE sku_id = 1 RETURNING stock
INSERT INTO sku_stock (sku_id, stock) VALUES (1, 1) RETURNING sku_id
SELECT a INTO @x FROM sku_stock WHERE sku_id = 1
SELECT stock FROM sku_stock WHERE sku_id = 1 INTO @s
SET STATEMENT max_statement_time = 1 FOR SELECT * FROM sku_stock
SELECT * FROM sku_stock FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01' WHERE sku_id = 1
UPDATE `sku stock` SET x = 1 WHERE ??? garbage
SELECT * FROM sku_stock s, `other db`.`orders` o WHERE garbage (((
BEGIN NOT ATOMIC SELECT 1; END
SELECT NEXT VALUE FOR seq1
CREATE OR REPLACE TABLE t4 (id INT)
this is not sql
INSERT INTO db1.t1 (a) VALUES (1) RETURNING a
