// Package grantscript holds the Lua script that grants one lock key on a
// Redis server, queues a waiter in age order, or wounds a younger holder
// (acquire.lua; its header documents KEYS, ARGV and the reply). The Redis
// backends share it: redislock runs it on its one deployment with a wound
// channel and the next local waiter's ticket, redlock on each of its
// independent servers without either, and counts the votes. observe.lua
// answers observe mode's question (lockmgr.Observer) from the same keys
// plus a hash of the notes of the owners observing the key.
//
// It imports nothing; no lockproxy package but the Redis lock backends
// should import it.
package grantscript

import _ "embed" // for Source

// Source is the text of acquire.lua after FastForm, for redis.NewScript.
var Source = FastForm + acquireSource

//go:embed acquire.lua
var acquireSource string

// FastForm is fast.lua: the Lua function fastToHash, which turns the
// string a fast-path holder set into the lock hash. A script that may meet
// such a holder starts with it (acquire.lua, redislock's release.lua).
//
//go:embed fast.lua
var FastForm string

// ObserveSource is the text of observe.lua, for redis.NewScript.
//
//go:embed observe.lua
var ObserveSource string
