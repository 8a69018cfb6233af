package rules

import (
	"fmt"
	"time"
)

// LockClass is why a statement would take a rule's row locks; its values are
// the rule.lock names of rules.yaml.
type LockClass string

// Lock classes. ClassNone: the statement takes no row lock.
const (
	ClassNone        LockClass = ""
	ClassWrite       LockClass = LockWrite
	ClassLockingRead LockClass = LockLockingRead
	ClassReadInTxn   LockClass = LockReadInTxn
)

func (c LockClass) rank() int {
	switch c {
	case ClassWrite:
		return 3
	case ClassLockingRead:
		return 2
	case ClassReadInTxn:
		return 1
	}
	return 0
}

// Key is one row lock a statement needs.
type Key struct {
	// Name is the lock name, EncodeKey(schema, table, values): the same
	// for every spelling of the row and for every rule guarding it.
	Name string
	// Rule is the name of the rule that asked for the lock (the first by
	// rules.yaml order when several did).
	Rule string
}

// Unkeyed is a rule that applies to a statement whose row keys cannot be
// derived; the rule's on_unkeyed says whether the statement may run.
type Unkeyed struct {
	Rule   *Rule
	Table  string // schema.table
	Reason string
	// Read: the statement reads the table in a transaction (read_in_txn),
	// so the rule's on_unkeyed_read decides rather than its on_unkeyed.
	Read bool
}

// Rejects reports whether the rule refuses the statement for u.
func (u Unkeyed) Rejects() bool {
	if u.Read {
		return u.Rule.OnUnkeyedRead == OnUnkeyedReject
	}
	return u.Rule.OnUnkeyed == OnUnkeyedReject
}

// setting names the rule setting that decided u.
func (u Unkeyed) setting() string {
	if u.Read {
		return "on_unkeyed_read"
	}
	return "on_unkeyed"
}

// Decision is what the rules say about one statement. The zero Decision
// (no rule matched) takes no lock and forces nothing. A Decision is a value:
// Bind returns a new one; it may be shared once built.
type Decision struct {
	// Rule is the first rule (in rules.yaml order of the tables as the
	// statement names them) that matched; nil when none did.
	Rule *Rule
	// Rules are all the rules that matched, without repeats.
	Rules []*Rule
	// Class is the strongest lock class among the rules that lock for this
	// statement (ClassNone when none does).
	Class LockClass
	// Keys are the row locks to take, sorted by Name and without repeats:
	// take them in this order, all or nothing. Empty until bound when
	// NeedParams.
	Keys []Key
	// Unkeyed lists the rules that should lock but whose keys cannot be
	// derived (with why). Reject is true when one of them says on_unkeyed:
	// reject, or when Hidden is not empty: the statement must not run
	// (error 1105, RejectReason).
	Unkeyed []Unkeyed
	Reject  bool
	// UnkeyedReads lists the rules whose read_in_txn lock a plain SELECT
	// inside a transaction cannot take because its rows cannot be keyed,
	// and whose on_unkeyed_read (allow) lets the read run without them.
	// The read is not a write: it runs unlocked, and the caller counts
	// and audits it. A rule saying on_unkeyed_read: reject is in Unkeyed.
	UnkeyedReads []Unkeyed
	// Hidden lists the writes to guarded tables the statement would make
	// inside stored routines or triggers, which lockproxy cannot lock and
	// the rules do not allow: the statement must not run (Reject is true
	// whatever on_unkeyed says).
	Hidden []Hidden
	// RoutePrimary is true when a matched rule says route: primary.
	RoutePrimary bool
	// Rewrite is the rewrite plan of the rule guarding the table the
	// statement writes (nil when none), and RewriteRule that rule.
	Rewrite     *Rewrite
	RewriteRule *Rule
	// NeedParams is true when keys come from `?` placeholders: call Bind
	// with the execute-time parameters to get Keys.
	NeedParams bool

	pending []pendingTuple
	cs      TextCharsets // the session's, for the pending tuples' text values
	done    []Key        // keys known before binding
	// targets are the rules with a rewrite or a fence column guarding the
	// one table of a SELECT or UPDATE, in rules.yaml order; tkeys the keys
	// derived for them (known so far) and tunk those of them that could
	// not be keyed (see RewriteTarget).
	targets []*Rule
	tkeys   []Key
	tunk    []*Rule
}

// IsUnkeyed reports whether some rule could not derive its keys.
func (d Decision) IsUnkeyed() bool { return len(d.Unkeyed) > 0 }

// UnkeyedReason is the first unkeyed rule's reason ("" when none), preferring
// a rule that rejects.
func (d Decision) UnkeyedReason() string {
	if u := d.firstUnkeyed(); u != nil {
		return u.Reason
	}
	return ""
}

func (d Decision) firstUnkeyed() *Unkeyed {
	for i := range d.Unkeyed {
		if d.Unkeyed[i].Rejects() {
			return &d.Unkeyed[i]
		}
	}
	if len(d.Unkeyed) > 0 {
		return &d.Unkeyed[0]
	}
	return nil
}

// RejectReason says why the statement is rejected, naming the rule and
// the table ("" when the decision does not reject). The proxy answers it
// as its own error, prefixed "lockproxy: ".
func (d Decision) RejectReason() string {
	if d.Reject && len(d.Hidden) > 0 {
		return hiddenMessage(d.Hidden[0])
	}
	u := d.firstUnkeyed()
	if !d.Reject || u == nil {
		return ""
	}
	return fmt.Sprintf("rule %s: cannot derive the row keys of %s (%s); %s: reject",
		u.Rule.Name, u.Table, u.Reason, u.setting())
}

// WaitTimeout is how long to wait for Keys: the smallest effective
// wait_timeout of the rules that asked for them (locks.wait_timeout when
// none did).
func (d Decision) WaitTimeout(l LockConfig) time.Duration {
	var out time.Duration
	for _, r := range d.Rules {
		if !d.locksAny(r) {
			continue
		}
		if w := r.EffectiveWaitTimeout(l); out == 0 || w < out {
			out = w
		}
	}
	if out == 0 {
		out = l.WaitTimeout.D()
	}
	return out
}

func (d Decision) locksAny(r *Rule) bool {
	for _, k := range d.Keys {
		if k.Rule == r.Name {
			return true
		}
	}
	return false
}
