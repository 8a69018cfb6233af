-- Run by TestMariaDBCLI with: mariadb --batch --skip-column-names --force
-- directly and through lockproxy; the two outputs must be byte-identical.
-- Nothing here may depend on the connection (ids, times, ports).
CREATE TABLE item (
  id INT AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(8) NOT NULL UNIQUE,
  price DECIMAL(10,2),
  born DATETIME(6),
  data BLOB,
  flags BIT(4),
  big BIGINT UNSIGNED
) DEFAULT CHARSET=utf8mb4;
INSERT INTO item (name, price, born, data, flags, big) VALUES
  ('apple', 1.50, '2024-02-29 12:34:56.789012', X'00FF00', b'1010', 18446744073709551615),
  ('pear', NULL, NULL, NULL, NULL, NULL),
  ('😀', 0.01, '1970-01-01 00:00:01', 'tab	and\nnewline', b'0001', 0);
SELECT id, name, price, born, HEX(data), flags + 0, big FROM item ORDER BY id;
SELECT LAST_INSERT_ID(), ROW_COUNT();
UPDATE item SET price = price * 2 WHERE price IS NOT NULL;
SELECT ROW_COUNT(), SUM(price) FROM item;

-- An error in the middle: with --force the script goes on.
INSERT INTO item (name) VALUES ('apple');
SELECT * FROM no_such_table;
SELECT 'still running';

-- Warnings are printed after each statement from here on.
\W
SET SESSION sql_mode = '';
INSERT INTO item (name, price) VALUES ('toolongname', 12345678901.999);
SELECT 1/0;
SET SESSION sql_mode = DEFAULT;
SELECT 1/0;
\w

-- A procedure with several result sets.
DELIMITER //
CREATE PROCEDURE report(IN lim INT)
BEGIN
  SELECT COUNT(*) AS n FROM item;
  SELECT name FROM item ORDER BY id LIMIT lim;
  SELECT 'done' AS status;
END//
DELIMITER ;
CALL report(2);

-- Several statements in one query (the client sends them together).
DELIMITER //
SELECT 'multi-1'; SELECT 'multi-2', 2; UPDATE item SET big = 1 WHERE name = 'pear'; SELECT big FROM item WHERE name = 'pear'//
DELIMITER ;

-- Transactions: rolled back and committed.
START TRANSACTION;
DELETE FROM item;
SELECT COUNT(*), @@in_transaction FROM item;
ROLLBACK;
SELECT COUNT(*), @@in_transaction FROM item;
SET autocommit = 0;
INSERT INTO item (name) VALUES ('fig');
COMMIT;
SET autocommit = 1;
SELECT name FROM item WHERE name = 'fig';

-- Session state and prepared statements on the server.
SET @v = 'user var';
SELECT @v, DATABASE() IS NOT NULL, @@session.autocommit;
PREPARE s FROM 'SELECT name, ? + 1 FROM item WHERE id = ?';
SET @a = 41, @b = 1;
EXECUTE s USING @a, @b;
EXECUTE s USING @a, @a;
DEALLOCATE PREPARE s;
EXECUTE s USING @a, @b;
SELECT 'the end';
