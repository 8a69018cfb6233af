package proxy

import "go.uber.org/zap"

// processPrivilegeQuery counts the PROCESS privilege among the current
// user's global privileges (ALL PRIVILEGES is listed privilege by
// privilege). GRANTEE is written 'user'@'host', CURRENT_USER() user@host
// (the host never holds an @).
const processPrivilegeQuery = `SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES ` +
	`WHERE PRIVILEGE_TYPE = 'PROCESS' AND GRANTEE = CONCAT('''', ` +
	`LEFT(CURRENT_USER(), LENGTH(CURRENT_USER()) - LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), ` +
	`'''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')`

// hasProcess asks the backend, over the session's connection be, whether
// the session's user has the PROCESS privilege, once per user the
// session is logged in as. When the backend cannot say, the
// answer is no.
func (c *privCache) hasProcess(user string, be *backendConn, log *zap.Logger) bool {
	if c.known && c.user == user {
		return c.process
	}
	v, err := be.queryValue(processPrivilegeQuery)
	if err != nil {
		log.Warn("cannot learn whether the user has the PROCESS privilege; showing other users' statements as shapes", zap.Error(err))
		return false
	}
	c.user, c.known, c.process = user, true, len(v) > 0 && string(v) != "0"
	return c.process
}

// privCache is what the backend said of a user's PROCESS privilege, for
// SHOW LOCKPROXY LOCKS (user: the user it was asked for).
type privCache struct {
	user           string
	known, process bool
}
