// Package streaming is the "streaming" benchmark scenario: a 1,000,000-row
// SELECT read to the last row directly and through lockproxy, measuring
// lockproxy's resident memory growth during the query (sampled from /proc
// every 10 ms) and the time each way, with a fast reader and with a
// deliberately slow one that shows back-pressure keeps the proxy's memory
// bounded.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd): it talks to lockproxy over the wire only.
package streaming
