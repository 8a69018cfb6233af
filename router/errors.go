package router

import "errors"

// Reasons a backend is out, wrapped with detail in BackendStatus.LastError
// and in the errors the router logs. Test with errors.Is.
var (
	// ErrNotChecked: no check of the backend has finished yet.
	ErrNotChecked = errors.New("router: not checked yet")
	// ErrNotReplica: SHOW SLAVE STATUS returned no row, so the server
	// replicates from nothing and its data may be arbitrarily old.
	ErrNotReplica = errors.New("router: server is not a replica")
	// ErrReplicationStopped: the IO or SQL replication thread is not running.
	ErrReplicationStopped = errors.New("router: replication is not running")
	// ErrLagUnknown: Seconds_Behind_Master is NULL or unreadable. An unknown
	// lag is never taken for 0.
	ErrLagUnknown = errors.New("router: replication lag unknown")
	// ErrLagging: the replica is further behind than the maximum lag.
	ErrLagging = errors.New("router: replica lag above maximum")
	// ErrMarkedDown: a caller reported the backend broken with MarkDown.
	ErrMarkedDown = errors.New("router: marked down")
	// ErrCheckFailed: connecting or querying for the check failed.
	ErrCheckFailed = errors.New("router: health check failed")
)
