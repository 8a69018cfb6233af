// The client-matrix scenario for MariaDB Connector/J, run by
// TestClientMatrix (java single-file source launch) directly against
// MariaDB and through lockproxy; see scenario.py for the conventions.
// With LP_TLS_CA it runs the TLS scenario (useSsl with serverSslCert: the
// certificate's chain and name are verified; Connector/J keeps its TLS
// socket to itself, so the client side's TLS state is not shown).
import java.math.BigDecimal;
import java.sql.*;
import java.util.*;

public class Scenario {
    static String url(String extra) {
        return "jdbc:mariadb://" + System.getenv("LP_HOST") + ":" + System.getenv("LP_PORT") + "/" + System.getenv("LP_DB")
            + "?user=" + System.getenv("LP_USER") + "&password=" + System.getenv("LP_PASSWORD") + extra;
    }

    interface Step { Object run() throws Exception; }

    // connect opens a connection. Connector/J pipelines the queries it
    // runs behind its login and gives their answers 500 ms, however long
    // socketTimeout is, which a starved test machine running every client
    // at once can miss (directly or through lockproxy): a pipelined login
    // that timed out is tried once more, then once without pipelining,
    // which waits as long as socketTimeout says (the test's own timeout
    // ends a server that never answers).
    static Connection connect(String url) throws SQLException {
        String[] tries = {url, url, url + "&usePipelineAuth=false"};
        for (int i = 0; ; i++) {
            try {
                return DriverManager.getConnection(tries[i]);
            } catch (SQLNonTransientConnectionException e) {
                if (i + 1 == tries.length || !timedOut(e)) throw e;
                System.err.println("connect timed out, once more: " + e.getMessage());
            }
        }
    }

    static boolean timedOut(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof java.net.SocketTimeoutException) return true;
        }
        return false;
    }

    static void attempt(String label, Step s) {
        try {
            System.out.println(label + ": " + s.run());
        } catch (SQLException e) {
            System.out.println(label + ": error " + e.getErrorCode());
        } catch (Exception e) {
            System.out.println(label + ": error " + e.getClass().getSimpleName());
        }
    }

    static List<List<String>> rows(ResultSet rs) throws SQLException {
        List<List<String>> out = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
            List<String> r = new ArrayList<>();
            for (int i = 1; i <= n; i++) r.add(rs.getString(i));
            out.add(r);
        }
        return out;
    }

    static String tlsURL(String ca) {
        return url("&useServerPrepStmts=true&useSsl=true&serverSslCert=" + ca);
    }

    static void tls() throws Exception {
        Connection c = connect(tlsURL(System.getenv("LP_TLS_CA")));
        Statement st = c.createStatement();
        System.out.println("tls connect: " + rows(st.executeQuery("SELECT 1 + 1")).get(0).get(0));
        System.out.println("~tls server: " + rows(st.executeQuery("SHOW SESSION STATUS LIKE 'Ssl_version'")).get(0).get(1));
        st.execute("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)");
        st.execute("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)");
        c.setAutoCommit(false);
        PreparedStatement fu = c.prepareStatement("SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE");
        fu.setInt(1, 1);
        System.out.println("tls for update: " + rows(fu.executeQuery()));
        st.executeUpdate("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1");
        c.commit();
        c.setAutoCommit(true);
        System.out.println("tls after commit: " + rows(st.executeQuery("SELECT stock FROM sku WHERE sku_id = 1")));
        PreparedStatement big = c.prepareStatement("SELECT REPEAT(?, 1 << 20)");
        big.setString(1, "é");
        String v = rows(big.executeQuery()).get(0).get(0);
        System.out.println("tls long value: " + v.length() + " " + v.equals("é".repeat(1 << 20)));
        attempt("tls error", () -> { PreparedStatement p = c.prepareStatement("INSERT INTO sku (sku_id, stock) VALUES (?, ?)"); p.setInt(1, 1); p.setInt(2, 1); return p.executeUpdate(); });
        attempt("~tls guarded unkeyed write", () -> st.executeUpdate("UPDATE sku SET stock = 0"));
        attempt("~tls show prepared", () -> c.prepareStatement("SHOW LOCKPROXY RULES").executeQuery().getMetaData().getColumnCount());
        attempt("tls, another CA", () -> { DriverManager.getConnection(tlsURL(System.getenv("LP_TLS_OTHER_CA"))).close(); return "connected"; });
        c.close();
    }

    public static void main(String[] args) throws Exception {
        if (System.getenv("LP_TLS_CA") != null) {
            tls();
            return;
        }
        Connection c = connect(url("&useServerPrepStmts=true"));
        Statement st = c.createStatement();
        System.out.println("connect: " + rows(st.executeQuery("SELECT 1 + 1")).get(0).get(0));
        st.execute("CREATE TABLE t (id INT PRIMARY KEY, i BIGINT, f DOUBLE, d DECIMAL(12,3), s VARCHAR(20), "
            + "b VARBINARY(8), dt DATETIME(6), da DATE, n INT NULL, bo BOOLEAN)");
        st.execute("CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)");
        st.execute("INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)");
        System.out.println("text: " + rows(st.executeQuery("SELECT 'é', 1.50, NULL, CAST('2024-02-29 12:34:56.789' AS DATETIME(3))")));
        PreparedStatement ins = c.prepareStatement("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        ins.setInt(1, 1); ins.setLong(2, -4611686018427387904L); ins.setDouble(3, 2.5);
        ins.setBigDecimal(4, new BigDecimal("-12.345")); ins.setString(5, "naïve ' \\ \"");
        ins.setBytes(6, new byte[] {0, (byte) 255, 39});
        ins.setTimestamp(7, Timestamp.valueOf("2024-02-29 01:02:03.456789"));
        ins.setDate(8, java.sql.Date.valueOf("1999-12-31")); ins.setNull(9, Types.INTEGER); ins.setBoolean(10, true);
        ins.executeUpdate();
        PreparedStatement sel = c.prepareStatement("SELECT * FROM t WHERE id = ? AND s = ?");
        sel.setInt(1, 1); sel.setString(2, "naïve ' \\ \"");
        System.out.println("params: " + rows(sel.executeQuery()));
        c.setAutoCommit(false);
        PreparedStatement fu = c.prepareStatement("SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE");
        fu.setInt(1, 1);
        System.out.println("for update: " + rows(fu.executeQuery()));
        st.executeUpdate("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1");
        c.commit();
        System.out.println("after commit: " + rows(st.executeQuery("SELECT stock FROM sku WHERE sku_id = 1")));
        System.out.println("unkeyed read in a transaction: " + rows(st.executeQuery("SELECT sku_id, stock FROM sku ORDER BY sku_id")));
        c.commit();
        c.setAutoCommit(true);
        Statement stream = c.createStatement();
        stream.setFetchSize(1000);
        ResultSet rs = stream.executeQuery("SELECT seq FROM seq_1_to_100000");
        long n = 0, total = 0;
        while (rs.next()) { n++; total += rs.getLong(1); }
        rs.close();
        System.out.println("stream: " + n + " " + total);
        attempt("error", () -> st.execute("SELEC 1"));
        attempt("error", () -> { PreparedStatement p = c.prepareStatement("INSERT INTO sku (sku_id, stock) VALUES (?, ?)"); p.setInt(1, 1); p.setInt(2, 1); return p.executeUpdate(); });
        attempt("error", () -> st.executeQuery("SELECT * FROM no_such_table"));
        attempt("~guarded unkeyed write", () -> st.executeUpdate("UPDATE sku SET stock = 0"));
        attempt("~show text", () -> st.executeQuery("SHOW LOCKPROXY RULES").getMetaData().getColumnCount());
        attempt("~show prepared", () -> c.prepareStatement("SHOW LOCKPROXY RULES").executeQuery().getMetaData().getColumnCount());
        st.execute("SET @v = 7");
        attempt("reset", () -> { c.getClass().getMethod("reset").invoke(c); return rows(st.executeQuery("SELECT @v")); });
        Connection stale = connect(url(""));
        stale.createStatement().execute("SET SESSION wait_timeout = 1");
        Thread.sleep(2500);
        attempt("stale", () -> rows(stale.createStatement().executeQuery("SELECT 1")));
        attempt("stale isValid", () -> connect(url("")).isValid(2));
        Connection k = connect(url(""));
        attempt("kill own id", () -> k.createStatement().execute("KILL CONNECTION_ID()"));
        Thread.sleep(600);
        attempt("after kill", () -> rows(k.createStatement().executeQuery("SELECT 1")));
        c.close();
    }
}
