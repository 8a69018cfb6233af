// Package proxy is lockproxy's MySQL-protocol front end: it accepts client
// connections, authenticates them against the users of rules.yaml, pins each
// session to a backend connection, and relays every command and its response
// packet by packet, so that results stream through in bounded memory and
// reach the client exactly as the backend sent them.
//
// The session is where lockproxy's decisions are applied to a statement: the
// parser's facts, the rules' decision, lock acquisition and release, routing
// and rewriting all hook into the command loop in session.go.
//
// proxy may import parser, rules, lockmgr and router; nothing of ours imports
// proxy except cmd/lockproxy.
package proxy
