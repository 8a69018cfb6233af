// Package schemaword is the bookkeeping the lock backends share to carry
// the word "the schema changed" between the lockproxy instances that share
// a lock service (lockmgr.SchemaAnnouncer): a versioned record in the
// service (an etcd key, a znode, a row) that an announcement bumps, and a
// Follower that turns the versions a Locker reads into deliveries,
// skipping the Locker's own announcements and never losing another's: a
// change missed while the service was away is seen as a version jump when
// it answers again.
//
// It imports nothing of lockproxy's and must never import another
// lockproxy package.
package schemaword
