-- SQLite work for the preload tests (run as: sqlite3 -batch -bail < this file, in an empty
-- working directory). Tables filled by recursive CTEs, indexes, joins, aggregates, window
-- functions, ORDER BY, updates, deletes, big strings and blobs, an attached on-disk database
-- and VACUUM. Every value is computed, nothing random, so the output is deterministic.
.bail on
.headers on
.mode list
PRAGMA cache_size = -65536;
PRAGMA temp_store = MEMORY;

CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, since INTEGER);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, note TEXT);
CREATE TABLE items (order_id INTEGER, sku TEXT, qty INTEGER, price REAL);

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
INSERT INTO customers SELECT i, printf('customer-%05d', i), 'city-' || (i * 37 % 61),
                             2000 + i % 24 FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO orders SELECT i, 1 + (i * 7919) % 3000, (i * 104729) % 100000,
                          printf('note %d %.*c', i, i % 200, 'n')
                   FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO items SELECT 1 + i % 20000, 'sku-' || (i * 31 % 997), 1 + i % 9,
                         ((i * 2654435761) % 100000) / 100.0 FROM n;

CREATE INDEX orders_customer ON orders(customer, amount);
CREATE INDEX items_order ON items(order_id);
CREATE UNIQUE INDEX customers_name ON customers(name);
CREATE INDEX items_sku ON items(sku, price);

SELECT count(*) AS customers FROM customers;
SELECT count(*) AS orders, sum(amount) AS total, min(amount), max(amount) FROM orders;
SELECT count(*) AS items, sum(qty), printf('%.2f', sum(qty * price)) AS value FROM items;

-- Top customers by spend (join + group + order).
SELECT c.name, c.city, count(o.id) AS n, sum(o.amount) AS spent
FROM customers c JOIN orders o ON o.customer = c.id
GROUP BY c.id ORDER BY spent DESC, c.id LIMIT 15;

-- Per city, three-way join with aggregates.
SELECT c.city, count(DISTINCT c.id) AS customers, count(DISTINCT o.id) AS orders,
       sum(i.qty) AS qty, printf('%.2f', sum(i.qty * i.price)) AS value
FROM customers c JOIN orders o ON o.customer = c.id JOIN items i ON i.order_id = o.id
GROUP BY c.city ORDER BY value DESC, c.city LIMIT 20;

-- Window functions over a sorted set.
SELECT id, customer, amount, rank, running FROM (
  SELECT id, customer, amount,
         rank() OVER (PARTITION BY customer ORDER BY amount DESC, id) AS rank,
         sum(amount) OVER (PARTITION BY customer ORDER BY id ROWS UNBOUNDED PRECEDING) AS running
  FROM orders)
WHERE customer IN (1, 2, 1500, 2999) AND rank <= 3 ORDER BY customer, rank;

-- Distribution of skus (GROUP BY over an index), HAVING, ORDER BY an aggregate.
SELECT sku, count(*) AS n, printf('%.2f', avg(price)) AS avg_price FROM items
GROUP BY sku HAVING n > 60 ORDER BY n DESC, sku LIMIT 10;

-- Big strings: group_concat of every name (tens of kilobytes), long replaces, a 5 MB blob.
SELECT length(group_concat(name, ',')) AS names_len FROM customers;
SELECT length(replace(group_concat(note, ''), 'n', 'nnn')) AS notes_len FROM orders;
SELECT length(zeroblob(5000000)) AS blob_len, hex(substr(zeroblob(5000000), 4999990)) AS tail;
CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
INSERT INTO blobs SELECT i, CAST(printf('%.*c%d', i * 997, 'b', i) AS BLOB) FROM n;
SELECT count(*), sum(length(b)), hex(substr(b, -3)) FROM blobs WHERE id > 195 GROUP BY id;

-- Updates and deletes through the indexes, then the same queries again.
UPDATE orders SET amount = amount / 2 WHERE customer % 5 = 0;
DELETE FROM items WHERE qty = 1 AND order_id % 3 = 0;
DELETE FROM orders WHERE id % 11 = 0;
SELECT count(*) AS orders, sum(amount) AS total FROM orders;
SELECT count(*) AS items FROM items;
SELECT c.name, sum(o.amount) AS spent FROM customers c JOIN orders o ON o.customer = c.id
GROUP BY c.id ORDER BY spent DESC, c.id LIMIT 5;

-- Subqueries, EXISTS, correlated aggregates.
SELECT count(*) AS without_orders FROM customers c
WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer = c.id);
SELECT id, name FROM customers
WHERE since = 2010 AND id IN (SELECT customer FROM orders WHERE amount > 99000)
ORDER BY id LIMIT 10;

-- A temp table sorted without an index (sorter), and a CTE with string building.
CREATE TEMP TABLE sorted AS SELECT sku || '/' || order_id AS k, qty FROM items;
SELECT k, qty FROM sorted ORDER BY k DESC LIMIT 5;
WITH RECURSIVE s(i, str) AS (SELECT 0, '' UNION ALL
                             SELECT i + 1, str || printf('%d;', i * i) FROM s WHERE i < 3000)
SELECT length(str), substr(str, -20) FROM s WHERE i = 3000;

-- An on-disk database in the working directory: copy, index, query, vacuum.
ATTACH 'disk.db' AS disk;
CREATE TABLE disk.orders AS SELECT * FROM main.orders;
CREATE INDEX disk.orders_amount ON orders(amount);
SELECT count(*), sum(amount) FROM disk.orders WHERE amount BETWEEN 10000 AND 20000;
DELETE FROM disk.orders WHERE id % 2 = 0;
VACUUM disk;
SELECT count(*) FROM disk.orders;
PRAGMA disk.integrity_check;
DETACH disk;
VACUUM;
PRAGMA integrity_check;
