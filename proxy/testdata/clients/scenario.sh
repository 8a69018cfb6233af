#!/usr/bin/env bash
# The client-matrix scenario for the mariadb command-line client, run by
# TestClientMatrix directly against MariaDB and through lockproxy (see
# scenario.py for the conventions: LP_* settings, LP_TLS_CA for the TLS
# scenario, "~" lines that differ by design).
#
# scenario.sql (or scenario_tls.sql) goes to `mariadb --batch --force` on
# stdin, errors interleaved with results. A section of it that differs by
# design opens with SELECT '<label>' AS '~begin' and closes with
# SELECT 1 AS '~end': its lines are printed as "~<label>: <line>".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mariadb="${LP_MARIADB:-mariadb}"
conn=(--no-defaults -h "$LP_HOST" -P "$LP_PORT" -u "$LP_USER" -p"$LP_PASSWORD" --default-character-set=utf8mb4)
sql="$here/scenario.sql"
if [[ -n ${LP_TLS_CA:-} ]]; then
	# --ssl-verify-server-cert checks the certificate's chain against the
	# CA and its name against the host.
	conn+=(--ssl --ssl-ca="$LP_TLS_CA" --ssl-verify-server-cert)
	sql="$here/scenario_tls.sql"
fi

mark() {
	awk '$0 == "~begin" { getline label; m = 1; next }
		$0 == "~end" { getline; m = 0; next }
		{ print (m ? "~" label ": " : "") $0 }'
}

# --unbuffered flushes each result before the next statement's error.
"$mariadb" "${conn[@]}" --batch --force --unbuffered "$LP_DB" <"$sql" 2>&1 | mark

if [[ -n ${LP_TLS_CA:-} ]]; then
	# The client's own view of its link (`status`: "SSL: Cipher in use is
	# ..."): encrypted on both paths; the cipher is each server's choice.
	ssl=$("$mariadb" "${conn[@]}" --batch -e status "$LP_DB" | sed -n 's/^SSL:[[:space:]]*//p')
	echo "tls client: ${ssl%% is *}"
	echo "~tls client cipher: ${ssl##* }"
	other=$("$mariadb" "${conn[@]/--ssl-ca=*/--ssl-ca=$LP_TLS_OTHER_CA}" --batch -e 'SELECT 1' "$LP_DB" 2>&1 || true)
	echo "tls, another CA: ${other%%: *}"
fi
