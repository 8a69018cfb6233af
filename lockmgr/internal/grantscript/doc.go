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

// Source is the text of acquire.lua, for redis.NewScript.
//
//go:embed acquire.lua
var Source string

// ObserveSource is the text of observe.lua, for redis.NewScript.
//
//go:embed observe.lua
var ObserveSource string
