<?php
// The client-matrix scenario for PHP, run by TestClientMatrix directly
// against MariaDB and through lockproxy (see scenario.py for the
// conventions). LP_API: mysqli, pdo (emulated prepares) or pdo-native.
// With LP_TLS_CA it runs the TLS scenario: mysqlnd verifies the server's
// certificate against that CA and its name, but shows nothing of the
// client side's TLS state.
$api = getenv('LP_API');
$host = getenv('LP_HOST'); $port = (int)getenv('LP_PORT'); $user = getenv('LP_USER');
$pass = getenv('LP_PASSWORD'); $db = getenv('LP_DB');
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);

function connect($ca = null) {
    global $api, $host, $port, $user, $pass, $db;
    if ($api === 'mysqli') {
        $c = mysqli_init();
        $flags = 0;
        if ($ca !== null) {
            $c->ssl_set(null, null, $ca, null, null);
            $c->options(MYSQLI_OPT_SSL_VERIFY_SERVER_CERT, true);
            $flags = MYSQLI_CLIENT_SSL;
        }
        $c->real_connect($host, $user, $pass, $db, $port, null, $flags);
        $c->set_charset('utf8mb4');
        return $c;
    }
    $opts = [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => $api === 'pdo',
        PDO::ATTR_STRINGIFY_FETCHES => true,
    ];
    if ($ca !== null) {
        $opts[PDO::MYSQL_ATTR_SSL_CA] = $ca;
        $opts[PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT] = true;
    }
    return new PDO("mysql:host=$host;port=$port;dbname=$db;charset=utf8mb4", $user, $pass, $opts);
}

function code($e) {
    if ($e instanceof PDOException) {
        return $e->errorInfo[1] ?? $e->getCode();
    }
    return $e->getCode();
}

function attempt($label, $fn) {
    try {
        $v = json_encode($fn());
        echo "$label: $v\n";
    } catch (Throwable $e) {
        echo "$label: error ", code($e), "\n";
    }
}

function q($c, $sql) {
    global $api;
    if ($api === 'mysqli') {
        $r = $c->query($sql);
        return $r === true ? $c->affected_rows : $r->fetch_all(MYSQLI_NUM);
    }
    $st = $c->query($sql);
    return $st->columnCount() ? $st->fetchAll(PDO::FETCH_NUM) : $st->rowCount();
}

function p($c, $sql, $args) {
    global $api;
    if ($api === 'mysqli') {
        $st = $c->prepare($sql);
        if ($args) {
            $types = '';
            foreach ($args as $a) {
                $types .= is_int($a) ? 'i' : (is_float($a) ? 'd' : 's');
            }
            $st->bind_param($types, ...$args);
        }
        $st->execute();
        $r = $st->get_result();
        return $r ? $r->fetch_all(MYSQLI_NUM) : $st->affected_rows;
    }
    $st = $c->prepare($sql);
    $st->execute($args);
    return $st->columnCount() ? $st->fetchAll(PDO::FETCH_NUM) : $st->rowCount();
}

if (getenv('LP_TLS_CA')) {
    $c = connect(getenv('LP_TLS_CA'));
    echo "tls connect: ", q($c, "SELECT 1 + 1")[0][0], "\n";
    echo "~tls server: ", q($c, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1], "\n";
    q($c, "CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)");
    q($c, "INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)");
    $api === 'mysqli' ? $c->begin_transaction() : $c->beginTransaction();
    echo "tls for update: ", json_encode(p($c, "SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE", [1])), "\n";
    p($c, "UPDATE sku SET stock = stock - 1 WHERE sku_id = ?", [1]);
    $c->commit();
    echo "tls after commit: ", json_encode(q($c, "SELECT stock FROM sku WHERE sku_id = 1")), "\n";
    $big = p($c, "SELECT REPEAT(?, 1 << 20)", ['é'])[0][0];
    echo "tls long value: ", strlen($big), " bytes, ", json_encode($big === str_repeat('é', 1 << 20)), "\n";
    attempt('tls error', fn() => p($c, "INSERT INTO sku (sku_id, stock) VALUES (?, ?)", [1, 1]));
    attempt('~tls guarded unkeyed write', fn() => q($c, "UPDATE sku SET stock = 0"));
    attempt('~tls show prepared', fn() => count(p($c, "SHOW LOCKPROXY RULES", [])[0]));
    attempt('tls, another CA', fn() => @connect(getenv('LP_TLS_OTHER_CA')) ? 'connected' : 'no');
    exit(0);
}

$c = connect();
echo "connect: ", q($c, "SELECT 1 + 1")[0][0], "\n";
q($c, "CREATE TABLE t (id INT PRIMARY KEY, i BIGINT, f DOUBLE, d DECIMAL(12,3), s VARCHAR(20), b VARBINARY(8), dt DATETIME(6), da DATE, n INT NULL, bo BOOLEAN)");
q($c, "CREATE TABLE sku (sku_id INT PRIMARY KEY, stock INT NOT NULL)");
q($c, "INSERT INTO sku (sku_id, stock) VALUES (1, 10), (2, 20), (3, 30)");
echo "text: ", json_encode(q($c, "SELECT 'é', 1.50, NULL, CAST('2024-02-29 12:34:56.789' AS DATETIME(3))")), "\n";
$row = [1, -4611686018427387904, 2.5, '-12.345', "naïve ' \\ \"", "\x00\xff'", '2024-02-29 01:02:03.456789', '1999-12-31', null, 1];
p($c, "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", $row);
echo "params: ", json_encode(array_map(fn($r) => array_map(fn($v) => is_string($v) ? bin2hex($v) : $v, $r),
    p($c, "SELECT * FROM t WHERE id = ? AND s = ?", [1, $row[4]]))), "\n";
$api === 'mysqli' ? $c->begin_transaction() : $c->beginTransaction();
echo "for update: ", json_encode(p($c, "SELECT stock FROM sku WHERE sku_id = ? FOR UPDATE", [1])), "\n";
p($c, "UPDATE sku SET stock = stock - 1 WHERE sku_id = ?", [1]);
$c->commit();
echo "after commit: ", json_encode(q($c, "SELECT stock FROM sku WHERE sku_id = 1")), "\n";
$api === 'mysqli' ? $c->begin_transaction() : $c->beginTransaction();
echo "unkeyed read in a transaction: ", json_encode(q($c, "SELECT sku_id, stock FROM sku ORDER BY sku_id")), "\n";
$c->commit();
$n = 0; $total = 0;
if ($api === 'mysqli') {
    $r = $c->query("SELECT seq FROM seq_1_to_100000", MYSQLI_USE_RESULT);
    while ($x = $r->fetch_row()) { $n++; $total += $x[0]; }
    $r->free();
} else {
    $c->setAttribute(PDO::MYSQL_ATTR_USE_BUFFERED_QUERY, false);
    $st = $c->query("SELECT seq FROM seq_1_to_100000");
    while ($x = $st->fetch(PDO::FETCH_NUM)) { $n++; $total += $x[0]; }
    $st->closeCursor();
    $c->setAttribute(PDO::MYSQL_ATTR_USE_BUFFERED_QUERY, true);
}
echo "stream: $n $total\n";
attempt('error', fn() => q($c, "SELEC 1"));
attempt('error', fn() => p($c, "INSERT INTO sku (sku_id, stock) VALUES (?, ?)", [1, 1]));
attempt('error', fn() => q($c, "SELECT * FROM no_such_table"));
attempt('~guarded unkeyed write', fn() => q($c, "UPDATE sku SET stock = 0"));
attempt('~show text', fn() => count(q($c, "SHOW LOCKPROXY RULES")[0]));
attempt('~show prepared', fn() => count(p($c, "SHOW LOCKPROXY RULES", [])[0]));
$tid = $api === 'mysqli' ? $c->thread_id : null;
echo "connection id: ", $api === 'mysqli' ? json_encode((int)q($c, "SELECT CONNECTION_ID()")[0][0] === $tid) : 'true', "\n";
if ($api === 'mysqli') {
    q($c, "SET @v = 7");
    $c->change_user($user, $pass, $db);
    echo "change user: ", json_encode(q($c, "SELECT @v, DATABASE() = '$db'")), "\n";
    attempt('change user, bad password', fn() => $c->change_user($user, 'wrong', $db));
    attempt('after a failed change user', fn() => q($c, "SELECT 1"));
}
$s = connect();
q($s, "SET SESSION wait_timeout = 1");
sleep(2); usleep(500000);
attempt('stale', fn() => @q($s, "SELECT 1"));
$k = connect();
attempt('kill own id', fn() => q($k, "KILL CONNECTION_ID()"));
usleep(600000);
attempt('after kill', fn() => @q($k, "SELECT 1"));
