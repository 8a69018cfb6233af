// Package report writes bench/RESULTS.md from every JSON result present,
// so the report always matches the figures committed beside it: the machine
// and versions, each scenario's command, date, targets and its own
// Markdown section and charts, plus a hand-written reading per scenario when
// bench/results/<scenario>.notes.md exists.
//
// It must never import lockproxy's own packages (proxy, rules, lockmgr,
// router, parser, cmd).
package report
