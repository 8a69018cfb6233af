"""A PyMySQL workload run by TestPyMySQL, directly and through lockproxy.

Connection settings come from the environment (LP_HOST, LP_PORT, LP_USER,
LP_PASSWORD, LP_DB). Everything printed must be the same on both paths, so
nothing connection-specific (thread id, port, timings) is printed.
"""
import datetime
import decimal
import os
import sys

import pymysql


def connect(**kw):
    args = dict(host=os.environ["LP_HOST"], port=int(os.environ["LP_PORT"]),
                user=os.environ["LP_USER"], password=os.environ["LP_PASSWORD"],
                database=os.environ["LP_DB"], charset="utf8mb4")
    args.update(kw)
    return pymysql.connect(**args)


def show(label, value):
    print(f"{label}: {value!r}")


def run(cur, sql, args=None):
    """Executes sql and prints what the client sees, errors included."""
    try:
        n = cur.execute(sql, args)
    except pymysql.MySQLError as e:
        print(f"{sql} -> {type(e).__name__} {e.args!r}")
        return
    warnings = cur._result.warning_count if cur._result else None
    print(f"{sql} -> rowcount={n} lastrowid={cur.lastrowid} warnings={warnings}")
    if cur.description:
        print("  columns:", [(d[0], d[1], d[3], d[4], d[5], d[6]) for d in cur.description])
        for row in cur.fetchall():
            print("  row:", row)


def main():
    conn = connect()
    # PyMySQL takes autocommit from the handshake's status flags.
    show("autocommit", conn.get_autocommit())
    show("server_version", conn.get_server_info())
    show("server_status_in_trans", bool(conn.server_status & 1))
    cur = conn.cursor()
    run(cur, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10) UNIQUE, "
             "amount DECIMAL(12,3), at DATETIME(6), raw VARBINARY(16), note TEXT)")
    run(cur, "INSERT INTO t (name, amount, at, raw, note) VALUES (%s, %s, %s, %s, %s)",
        ("alpha", decimal.Decimal("12.345"), datetime.datetime(2024, 2, 29, 1, 2, 3, 456789),
         b"\x00\x01\xff", None))
    n = cur.executemany("INSERT INTO t (name, amount) VALUES (%s, %s)",
                        [("beta", 1), ("gamma", decimal.Decimal("-0.5")), ("delta", None)])
    show("executemany rowcount", n)
    show("executemany lastrowid", cur.lastrowid)
    run(cur, "SELECT * FROM t WHERE name IN %s ORDER BY id", (("alpha", "gamma"),))
    run(cur, "SELECT COUNT(*) FROM t")
    # Not committed yet: autocommit is off, another connection sees nothing.
    other = connect(autocommit=True)
    ocur = other.cursor()
    run(ocur, "SELECT COUNT(*) FROM t")
    conn.commit()
    run(ocur, "SELECT COUNT(*) FROM t")
    run(cur, "DELETE FROM t WHERE name = %s", ("beta",))
    conn.rollback()
    run(ocur, "SELECT name FROM t ORDER BY id")
    # Errors.
    run(cur, "INSERT INTO t (name) VALUES (%s)", ("alpha",))
    run(cur, "SELECT nope FROM t")
    run(cur, "SELEC 1")
    conn.rollback()
    # Warnings.
    run(cur, "SET SESSION sql_mode = ''")
    run(cur, "INSERT INTO t (name, amount) VALUES (%s, %s)", ("waytoolongname", "1e20"))
    run(cur, "SHOW WARNINGS")
    run(cur, "SET SESSION sql_mode = DEFAULT")
    run(cur, "SELECT 1/0")
    conn.rollback()
    # A procedure with several result sets.
    run(cur, "CREATE PROCEDURE sets(IN k INT) BEGIN SELECT k; SELECT name FROM t ORDER BY id LIMIT k; END")
    cur.callproc("sets", (2,))
    i = 0
    while True:
        print(f"  callproc set {i}:", cur.fetchall())
        i += 1
        if not cur.nextset():
            break
    # Autocommit switched on, database switched, ping.
    conn.autocommit(True)
    show("autocommit after set", conn.get_autocommit())
    run(cur, "SELECT @@autocommit, @@in_transaction")
    conn.ping(reconnect=False)
    try:
        conn.select_db("lockproxy_no_such_db")
    except pymysql.MySQLError as e:
        print("select_db missing ->", type(e).__name__, e.args)
    conn.select_db(os.environ["LP_DB"])
    run(cur, "SELECT name FROM t WHERE id = %s", (1,))
    # A dict cursor and an unbuffered (streaming) cursor.
    with conn.cursor(pymysql.cursors.DictCursor) as dc:
        dc.execute("SELECT id, name FROM t ORDER BY id LIMIT 2")
        print("  dict rows:", dc.fetchall())
    with conn.cursor(pymysql.cursors.SSCursor) as sc:
        sc.execute("SELECT seq FROM seq_1_to_5000")
        total = sum(r[0] for r in sc)
        print("  streamed sum:", total)
    other.close()
    conn.close()
    # A wrong password is refused with 1045.
    try:
        connect(password="wrong-password")
    except pymysql.MySQLError as e:
        print("bad password ->", type(e).__name__, e.args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
