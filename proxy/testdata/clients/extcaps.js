// MariaDB's extended capabilities seen by node clients, run by
// TestMariaDBExtendedCapabilities directly against MariaDB and through
// lockproxy: the transcripts must match. mysql2 and MariaDB Connector/Node
// read a JSON column (an object when the server says it is JSON), the types
// of UUID and INET6 columns and a geometry's subtype (extended metadata),
// and Connector/Node's batch() inserts and updates rows with
// COM_STMT_BULK_EXECUTE. LP_HOST, LP_PORT, LP_USER, LP_PASSWORD, LP_DB
// name the server; the table bulk_t exists and is empty.
'use strict';
const mysql = require('mysql2/promise');
const mariadb = require('mariadb');

const cfg = () => ({
  host: process.env.LP_HOST, port: Number(process.env.LP_PORT), user: process.env.LP_USER,
  password: process.env.LP_PASSWORD, database: process.env.LP_DB,
});
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x.toString() + 'n' : x));

async function attempt(label, fn) {
  try {
    console.log(`${label}: ${show(await fn())}`);
  } catch (e) {
    console.log(`${label}: error ${e.errno || e.code || e.message}`);
  }
}

const typesQuery = "SELECT j, u, i, g, p FROM ext_t ORDER BY id";

async function viaMysql2() {
  const c = await mysql.createConnection(cfg());
  for (const [label, run] of [['text', (q) => c.query(q)], ['prepared', (q) => c.execute(q)]]) {
    await attempt(`mysql2 ${label} rows`, async () => {
      const [rows] = await run(typesQuery);
      return rows.map((r) => ({ j: r.j, jtype: typeof r.j, u: r.u, i: r.i }));
    });
    await attempt(`mysql2 ${label} fields`, async () => {
      const [, fields] = await run(typesQuery);
      return fields.map((f) => [f.name, f.type, f.extendedTypeName || null, f.extendedFormat || null]);
    });
  }
  await c.end();
}

async function viaConnector() {
  const c = await mariadb.createConnection({ ...cfg(), metaAsArray: false });
  console.log('connector bulk negotiated:', (c.info.clientCapabilities & (1n << 34n)) > 0n);
  console.log('connector extended metadata negotiated:', (c.info.clientCapabilities & (1n << 35n)) > 0n);
  for (const [label, run] of [['text', (q) => c.query(q)], ['prepared', (q) => c.execute(q)]]) {
    await attempt(`connector ${label} rows`, async () => {
      const rows = await run(typesQuery);
      return rows.map((r) => ({ j: r.j, jtype: typeof r.j, u: r.u, i: r.i }));
    });
    await attempt(`connector ${label} meta`, async () => {
      const rows = await run(typesQuery);
      return rows.meta.map((m) => [m.name(), m.type, m.dataTypeName || null, m.dataTypeFormat || null]);
    });
  }
  // An execute whose parameters come without their types (named
  // placeholders given an array): MariaDB answers 1835, a malformed packet.
  const named = await mariadb.createConnection({ ...cfg(), namedPlaceholders: true });
  await attempt('connector execute without types', async () => {
    try {
      return await named.execute('SELECT ? AS a, ? AS b', ['1', '2']);
    } catch (e) {
      return `error ${e.errno} ${e.sqlState} fatal=${e.fatal} malformed=${e.message.includes('Malformed communication packet\nsql:')}`;
    }
  });
  await named.end();
  const n = 300;
  const rows = Array.from({ length: n }, (_, k) => [k + 1, `name-${k + 1}`, k % 7]);
  await attempt('batch insert', async () => {
    const r = await c.batch('INSERT INTO bulk_t (id, name, qty) VALUES (?, ?, ?)', rows);
    return { affectedRows: r.affectedRows, warningStatus: r.warningStatus };
  });
  await attempt('batch update', async () => {
    const r = await c.batch('UPDATE bulk_t SET qty = qty + ? WHERE id = ?', rows.map((x) => [1, x[0]]));
    return { affectedRows: r.affectedRows };
  });
  await attempt('batch duplicate', async () => {
    await c.batch('INSERT INTO bulk_t (id, name, qty) VALUES (?, ?, ?)', [[n + 1, 'new', 0], [1, 'dup', 0]]);
    return 'no error';
  });
  await attempt('after batches', async () => {
    const [r] = await c.query('SELECT COUNT(*) AS n, SUM(qty) AS s, MAX(name) AS m FROM bulk_t');
    return r;
  });
  await c.end();
}

async function main() {
  await viaMysql2();
  await viaConnector();
}

main().catch((e) => {
  console.log('fatal:', e.message);
  process.exit(1);
});
