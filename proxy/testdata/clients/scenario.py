"""The client-matrix scenario for Python DB-API drivers, run by
TestClientMatrix directly against MariaDB and through lockproxy.

LP_DRIVER picks the driver: pymysql, mysqldb (mysqlclient) or sqlalchemy
(over mysqlclient, with pool_pre_ping). Connection settings come from
LP_HOST, LP_PORT, LP_USER, LP_PASSWORD, LP_DB. With LP_TLS_CA set it runs
the TLS scenario instead: every connection uses TLS and verifies the
server's certificate against that CA (and its name, where the driver
can), and one made with LP_TLS_OTHER_CA, a CA that signed nothing, must
fail. Lines starting with "~" may differ by design between the two paths
(lockproxy's own rules and statements, the TLS links lockproxy makes);
every other line must be the same.
"""
import datetime
import decimal
import os
import time

DRIVER = os.environ["LP_DRIVER"]
if DRIVER == "pymysql":
    import pymysql as db
else:
    import MySQLdb as db
    import MySQLdb.cursors


def connect(**kw):
    args = dict(host=os.environ["LP_HOST"], port=int(os.environ["LP_PORT"]),
                user=os.environ["LP_USER"], password=os.environ["LP_PASSWORD"],
                database=os.environ["LP_DB"], charset="utf8mb4")
    if DRIVER != "pymysql":
        args["db"] = args.pop("database")
        args["passwd"] = args.pop("password")
    args.update(kw)
    return db.connect(**args)


def code(e):
    return e.args[0] if e.args else type(e).__name__


def attempt(label, fn):
    try:
        print(f"{label}: {fn()}")
    except db.MySQLError as e:
        print(f"{label}: error {code(e)}")


def fetch(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchall()


def main():
    conn = connect()
    cur = conn.cursor()
    print("connect:", fetch(cur, "SELECT 1 + 1")[0][0], "autocommit", conn.get_autocommit())
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, i BIGINT, f DOUBLE, d DECIMAL(12,3), s VARCHAR(20), "
                "b VARBINARY(8), dt DATETIME(6), da DATE, n INT NULL, bo BOOLEAN)")
    cur.execute("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)")
    cur.execute("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)")
    conn.commit()
    print("text:", fetch(cur, "SELECT 'é', 1.50, NULL, CAST('2024-02-29 12:34:56.789' AS DATETIME(3))"))
    row = (1, -(2**62), 2.5, decimal.Decimal("-12.345"), "naïve ' \\ \"", b"\x00\xff'",
           datetime.datetime(2024, 2, 29, 1, 2, 3, 456789), datetime.date(1999, 12, 31), None, True)
    cur.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
    print("params:", fetch(cur, "SELECT * FROM t WHERE id = %s AND s = %s", (1, row[4])))
    conn.commit()
    cur.execute("BEGIN")
    print("for update:", fetch(cur, "SELECT stock FROM sku WHERE sku_id = %s FOR UPDATE", (1,)))
    cur.execute("UPDATE sku SET stock = stock - 1 WHERE sku_id = %s", (1,))
    conn.commit()
    print("after commit:", fetch(cur, "SELECT stock FROM sku WHERE sku_id = 1"))
    print("unkeyed read in a transaction:", fetch(cur, "SELECT sku_id, stock FROM sku ORDER BY sku_id"))
    conn.commit()
    scur = conn.cursor(db.cursors.SSCursor)
    scur.execute("SELECT seq FROM seq_1_to_100000")
    n = total = 0
    for (v,) in scur:
        n, total = n + 1, total + v
    scur.close()
    print("stream:", n, total)
    for sql in ("SELEC 1", "INSERT INTO sku (sku_id, stock) VALUES (1, 1)", "SELECT * FROM no_such_table"):
        attempt("error", lambda: cur.execute(sql))
        conn.rollback()
    attempt("~guarded unkeyed write", lambda: cur.execute("UPDATE sku SET stock = 0"))
    conn.rollback()
    attempt("~show text", lambda: [d[0] for d in (cur.execute("SHOW LOCKPROXY RULES"), cur.description)[1]])
    cur.execute("SET @v = 7")
    print("connection id:", fetch(cur, "SELECT CONNECTION_ID()")[0][0] == conn.thread_id())
    if DRIVER == "pymysql":
        conn.ping(reconnect=False)
        print("ping: ok")
    stale = connect()
    scur = stale.cursor()
    scur.execute("SET SESSION wait_timeout = 1")
    time.sleep(2.5)
    attempt("stale", lambda: fetch(scur, "SELECT 1"))
    kill = connect()
    kcur = kill.cursor()
    attempt("kill own id", lambda: kcur.execute("KILL CONNECTION_ID()"))
    time.sleep(0.6)
    attempt("after kill", lambda: fetch(kcur, "SELECT 1"))
    conn.close()


def tls_main():
    """The TLS scenario. PyMySQL checks the certificate's chain and name
    (ssl.create_default_context); mysqlclient (MariaDB Connector/C) its
    chain. Only PyMySQL shows the client side's TLS state."""
    conn = connect(ssl={"ca": os.environ["LP_TLS_CA"]})
    cur = conn.cursor()
    print("tls connect:", fetch(cur, "SELECT 1 + 1")[0][0])
    if DRIVER == "pymysql":
        print("tls client:", conn._sock.version())
        print("~tls client cipher:", conn._sock.cipher()[0])
    print("~tls server:", fetch(cur, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1])
    cur.execute("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)")
    cur.execute("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)")
    conn.commit()
    cur.execute("BEGIN")
    print("tls for update:", fetch(cur, "SELECT stock FROM sku WHERE sku_id = %s FOR UPDATE", (1,)))
    cur.execute("UPDATE sku SET stock = stock - 1 WHERE sku_id = %s", (1,))
    conn.commit()
    print("tls after commit:", fetch(cur, "SELECT stock FROM sku WHERE sku_id = 1"))
    big = fetch(cur, "SELECT REPEAT(%s, 1 << 20)", ("é",))[0][0]
    print("tls long value:", len(big), set(big))
    attempt("tls error", lambda: cur.execute("INSERT INTO sku (sku_id, stock) VALUES (1, 1)"))
    conn.rollback()
    attempt("~tls guarded unkeyed write", lambda: cur.execute("UPDATE sku SET stock = 0"))
    conn.rollback()
    attempt("tls, another CA", lambda: connect(ssl={"ca": os.environ["LP_TLS_OTHER_CA"]}) and "connected")
    conn.close()


def sqlalchemy_engine(**connect_args):
    import sqlalchemy as sa
    url = "mysql+mysqldb://%s:%s@%s:%s/%s?charset=utf8mb4" % (
        os.environ["LP_USER"], os.environ["LP_PASSWORD"], os.environ["LP_HOST"], os.environ["LP_PORT"],
        os.environ["LP_DB"])
    return sa.create_engine(url, pool_pre_ping=True, pool_size=1, max_overflow=0, connect_args=connect_args)


def sqlalchemy_tls_main():
    import sqlalchemy as sa
    eng = sqlalchemy_engine(ssl={"ca": os.environ["LP_TLS_CA"]})
    with eng.begin() as c:
        print("tls connect:", c.execute(sa.text("SELECT 1 + 1")).scalar())
        print("~tls server:", c.execute(sa.text("SHOW SESSION STATUS LIKE 'Ssl_version'")).one()[1])
        c.execute(sa.text("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)"))
        c.execute(sa.text("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)"))
    with eng.begin() as c:
        print("tls for update:", c.execute(sa.text("SELECT stock FROM sku WHERE sku_id = :id FOR UPDATE"), {"id": 1}).all())
        c.execute(sa.text("UPDATE sku SET stock = stock - 1 WHERE sku_id = :id"), {"id": 1})
    with eng.connect() as c:
        print("tls after commit:", c.execute(sa.text("SELECT stock FROM sku WHERE sku_id = 1")).all())
    try:
        sqlalchemy_engine(ssl={"ca": os.environ["LP_TLS_OTHER_CA"]}).connect()
        print("tls, another CA: connected")
    except sa.exc.DBAPIError as e:
        print("tls, another CA: error", e.orig.args[0])


def sqlalchemy_main():
    import sqlalchemy as sa
    eng = sqlalchemy_engine()
    with eng.begin() as c:
        print("connect:", c.execute(sa.text("SELECT 1 + 1")).scalar())
        c.execute(sa.text("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)"))
        c.execute(sa.text("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)"))
    with eng.connect() as c:
        print("orm-style read:", c.execute(sa.text("SELECT sku_id, stock FROM sku ORDER BY sku_id")).all())
        print("params:", c.execute(sa.text("SELECT stock FROM sku WHERE sku_id = :id"), {"id": 2}).all())
        c.execute(sa.text("SET SESSION wait_timeout = 1"))
    time.sleep(2.5)
    with eng.connect() as c:  # pool_pre_ping finds the connection closed and opens another
        print("stale, pre-ping:", c.execute(sa.text("SELECT COUNT(*) FROM sku")).scalar())
    try:
        with eng.begin() as c:
            n = c.execute(sa.text("UPDATE sku SET stock = 0")).rowcount
            print("~guarded unkeyed write:", n)
            raise KeyboardInterrupt  # roll back
    except sa.exc.DBAPIError as e:
        print("~guarded unkeyed write: error", e.orig.args[0])
    except KeyboardInterrupt:
        pass


if os.environ.get("LP_TLS_CA"):
    sqlalchemy_tls_main() if DRIVER == "sqlalchemy" else tls_main()
elif DRIVER == "sqlalchemy":
    sqlalchemy_main()
else:
    main()
