// The client-matrix scenario for node mysql2, run by TestClientMatrix
// directly against MariaDB and through lockproxy (see scenario.py for the
// conventions: LP_* settings, LP_TLS_CA for the TLS scenario, "~" lines
// that differ by design).
'use strict';
const fs = require('fs');
const mysql = require('mysql2/promise');

const cfg = () => ({
  host: process.env.LP_HOST, port: Number(process.env.LP_PORT), user: process.env.LP_USER,
  password: process.env.LP_PASSWORD, database: process.env.LP_DB, charset: 'UTF8MB4_GENERAL_CI',
  dateStrings: true, supportBigNumbers: true, bigNumberStrings: true,
});
// tlsCfg verifies the server's certificate against ca, and its name.
const tlsCfg = (ca) => ({ ...cfg(), ssl: { ca: fs.readFileSync(ca), rejectUnauthorized: true, verifyIdentity: true } });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const show = (v) => JSON.stringify(v, (k, x) => (Buffer.isBuffer(x) ? 'hex:' + x.toString('hex') : x));

async function attempt(label, fn) {
  try {
    console.log(`${label}: ${show(await fn())}`);
  } catch (e) {
    console.log(`${label}: error ${e.errno || e.code || e.message}`);
  }
}

async function main() {
  const c = await mysql.createConnection(cfg());
  const [[one]] = await c.query('SELECT 1 + 1 AS v');
  console.log('connect:', one.v);
  await c.query('CREATE TABLE t (id INT PRIMARY KEY, i BIGINT, f DOUBLE, d DECIMAL(12,3), s VARCHAR(20), ' +
    'b VARBINARY(8), dt DATETIME(6), da DATE, n INT NULL, bo BOOLEAN)');
  await c.query('CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)');
  await c.query('INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)');
  const [text] = await c.query("SELECT 'é' AS a, 1.50 AS b, NULL AS c, CAST('2024-02-29 12:34:56.789' AS DATETIME(3)) AS d");
  console.log('text:', show(text));
  const row = [1, '-4611686018427387904', 2.5, '-12.345', 'naïve \' \\ "', Buffer.from([0, 255, 39]),
    '2024-02-29 01:02:03.456789', '1999-12-31', null, true];
  await c.execute('INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', row);
  const [params] = await c.execute('SELECT * FROM t WHERE id = ? AND s = ?', [1, row[4]]);
  console.log('params:', show(params));
  await c.beginTransaction();
  const [fu] = await c.execute('SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE', [1]);
  console.log('for update:', show(fu));
  await c.execute('UPDATE sku SET stock = stock - 1 WHERE sku_id = ?', [1]);
  await c.commit();
  console.log('after commit:', show((await c.query('SELECT stock FROM sku WHERE sku_id = 1'))[0]));
  await c.beginTransaction();
  console.log('unkeyed read in a transaction:', show((await c.query('SELECT sku_id, stock FROM sku ORDER BY sku_id'))[0]));
  await c.commit();
  let n = 0; let total = 0;
  await new Promise((resolve, reject) => {
    c.connection.query('SELECT seq FROM seq_1_to_100000').stream()
      .on('data', (r) => { n += 1; total += Number(r.seq); }).on('end', resolve).on('error', reject);
  });
  console.log('stream:', n, total);
  await attempt('error', () => c.query('SELEC 1'));
  await attempt('error', () => c.execute('INSERT INTO sku (sku_id, stock) VALUES (?, ?)', [1, 1]));
  await attempt('error', () => c.execute('SELECT * FROM no_such_table'));
  await attempt('~guarded unkeyed write', async () => (await c.query('UPDATE sku SET stock = 0'))[0].affectedRows);
  await attempt('~show text', async () => (await c.query('SHOW LOCKPROXY RULES'))[1].map((f) => f.name).slice(0, 3));
  await attempt('~show prepared', async () => (await c.execute('SHOW LOCKPROXY RULES'))[1].map((f) => f.name).slice(0, 3));
  const [[id]] = await c.query('SELECT CONNECTION_ID() AS id');
  console.log('connection id:', Number(id.id) === c.connection.threadId);
  await c.query('SET @v = 7');
  await c.reset();
  console.log('reset:', show((await c.query('SELECT @v AS v'))[0]));
  await c.changeUser({ user: process.env.LP_USER, password: process.env.LP_PASSWORD, database: process.env.LP_DB });
  console.log('change user:', show((await c.query('SELECT DATABASE() = ? AS same', [process.env.LP_DB]))[0]));
  await attempt('change user, bad password', () => c.changeUser({ user: process.env.LP_USER, password: 'wrong' }));
  await attempt('after a failed change user', async () => (await c.query('SELECT 1 AS one'))[0]);
  const stale = await mysql.createConnection(cfg());
  stale.on('error', () => {});
  await stale.query('SET SESSION wait_timeout = 1');
  await sleep(2500);
  await attempt('stale', () => stale.query('SELECT 1'));
  const k = await mysql.createConnection(cfg());
  k.on('error', () => {});
  await attempt('kill own id', () => k.query('KILL CONNECTION_ID()'));
  await sleep(600);
  await attempt('after kill', () => k.query('SELECT 1'));
  await c.end();
}

// tls is the TLS scenario; the client side's TLS state is the socket's.
async function tls() {
  const c = await mysql.createConnection(tlsCfg(process.env.LP_TLS_CA));
  const [[one]] = await c.query('SELECT 1 + 1 AS v');
  console.log('tls connect:', one.v);
  const sock = c.connection.stream;
  console.log('tls client:', sock.encrypted === true && sock.authorized === true, sock.getProtocol());
  console.log('~tls client cipher:', sock.getCipher().standardName);
  console.log('~tls server:', (await c.query("SHOW SESSION STATUS LIKE 'Ssl_version'"))[0][0].Value);
  await c.query('CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)');
  await c.query('INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)');
  await c.beginTransaction();
  console.log('tls for update:', show((await c.execute('SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE', [1]))[0]));
  await c.execute('UPDATE sku SET stock = stock - 1 WHERE sku_id = ?', [1]);
  await c.commit();
  console.log('tls after commit:', show((await c.query('SELECT stock FROM sku WHERE sku_id = 1'))[0]));
  const [[big]] = await c.execute('SELECT REPEAT(?, 1 << 20) AS v', ['é']);
  console.log('tls long value:', big.v.length, [...new Set(big.v)].join(''));
  await attempt('tls error', () => c.execute('INSERT INTO sku (sku_id, stock) VALUES (?, ?)', [1, 1]));
  await attempt('~tls guarded unkeyed write', async () => (await c.query('UPDATE sku SET stock = 0'))[0].affectedRows);
  await attempt('~tls show prepared', async () => (await c.execute('SHOW LOCKPROXY RULES'))[1].map((f) => f.name).slice(0, 3));
  await attempt('tls, another CA', async () => {
    const o = await mysql.createConnection(tlsCfg(process.env.LP_TLS_OTHER_CA));
    await o.end();
    return 'connected';
  });
  await c.end();
}

(process.env.LP_TLS_CA ? tls() : main()).catch((e) => { console.error(e); process.exit(1); });
