// Every way MariaDB Connector/Node sends a write, each made while another
// session holds the row's lock, run by TestConnectorNodeWritesWait through
// lockproxy with a rule on acct(id): text query() (with parameters the
// connector inlines), execute() (prepared, first and cached), prepare(),
// batch() (COM_STMT_BULK_EXECUTE, and one execute per row), pipelined
// commands (the connector's default: several sent before the first
// answer, a new execute() then sent as MariaDB's direct execute),
// queryStream(), a transaction, a multi-statement text. For each the
// script waits until SHOW LOCKPROXY LOCKS lists the write waiting for row
// 1's lock, checks it has not completed, then releases the lock and
// prints "<path>: waited" (or what went wrong). LP_HOST, LP_PORT, LP_USER,
// LP_PASSWORD, LP_DB name lockproxy; the table acct (id INT PRIMARY KEY,
// bal INT) holds rows 1 to 3.
'use strict';
const mariadb = require('mariadb');

const cfg = (extra) => ({
  host: process.env.LP_HOST, port: Number(process.env.LP_PORT), user: process.env.LP_USER,
  password: process.env.LP_PASSWORD, database: process.env.LP_DB, ...extra,
});

async function main() {
  const holder = await mariadb.createConnection(cfg());
  const watcher = await mariadb.createConnection(cfg());
  const c = await mariadb.createConnection(cfg({ pipelining: true }));
  const multi = await mariadb.createConnection(cfg({ multipleStatements: true }));
  const upd = 'UPDATE acct SET bal = bal + 1 WHERE id = ?';

  async function check(name, write) {
    await holder.query('BEGIN');
    await holder.query('SELECT bal FROM acct WHERE id = 1 FOR UPDATE');
    let done = false, failed = null;
    const w = write().then(() => { done = true; }, (e) => { done = true; failed = e; });
    let seen = false;
    for (const deadline = Date.now() + 20000; !seen && !done && Date.now() < deadline;) {
      const rows = await watcher.query('SHOW LOCKPROXY LOCKS');
      seen = rows.some((r) => r.state === 'waiting' && r.key.endsWith('.acct/1'));
      if (!seen) await new Promise((r) => setTimeout(r, 20));
    }
    const doneWhileHeld = done;
    await holder.query('COMMIT');
    await w;
    if (failed) console.log(`${name}: error ${failed.errno || failed.code} ${failed.sqlMessage || failed.message}`);
    else if (doneWhileHeld) console.log(`${name}: ran while another session held the row's lock`);
    else if (!seen) console.log(`${name}: never seen waiting`);
    else console.log(`${name}: waited`);
  }

  await check('query()', () => c.query('UPDATE acct SET bal = bal + 1 WHERE id = 1'));
  await check('query() with parameters', () => c.query(upd, [1]));
  await check('execute()', () => c.execute(upd, [1]));
  await check('execute() again', () => c.execute(upd, [1]));
  await check('prepare() and execute', async () => {
    const st = await c.prepare(upd);
    try { await st.execute([1]); } finally { st.close(); }
  });
  await check('batch()', () => c.batch(upd, [[2], [1]]));
  await check('batch() without bulk', () => c.batch({ sql: upd, bulk: false }, [[2], [1]]));
  await check('pipelined query()', () => Promise.all([c.query('SELECT 1'),
    c.query('UPDATE acct SET bal = bal + 1 WHERE id = 2'), c.query('UPDATE acct SET bal = bal + 1 WHERE id = 1')]));
  await check('pipelined execute()', () => Promise.all([c.execute('SELECT ?', [1]), c.execute(upd, [2]), c.execute(upd, [1])]));
  await check('pipelined first execute()', () => Promise.all([
    c.execute('UPDATE acct SET bal = bal + 2 WHERE id = ?', [1]), c.query('SELECT 2')]));
  await check('queryStream()', () => new Promise((resolve, reject) => {
    const s = c.queryStream('UPDATE acct SET bal = bal + 3 WHERE id = 1');
    s.on('error', reject).on('data', () => {}).on('end', resolve);
  }));
  await check('transaction', async () => {
    await c.beginTransaction();
    await c.query(upd, [1]);
    await c.commit();
  });
  await check('multi-statement text', () => multi.query('SELECT 1; UPDATE acct SET bal = bal + 1 WHERE id = 1'));
  for (const x of [holder, watcher, c, multi]) await x.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
