// Package rules is lockproxy's rules.yaml: loading it (with ${VAR}
// expansion, defaults and validation that reports every problem at once with
// file, line and key path), describing the guarded tables' key columns as
// the primary defines them (LoadSchema), normalising key values the way
// MySQL compares them, encoding row keys as unambiguous lock names
// (EncodeKey), and matching statement facts against the rules (Compile,
// RuleSet.Match) to decide which row locks a statement takes, whether it
// must go to the primary and which rewrite applies (docs/configuration.md
// describes every key).
//
// A *Config, a Schema and a *RuleSet are immutable once built and safe for
// concurrent use; a reload builds new ones and swaps them in.
//
// This package may import lockproxy's parser package and nothing else of
// lockproxy's own (never proxy, lockmgr, router or cmd).
package rules
