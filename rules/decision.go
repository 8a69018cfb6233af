package rules

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
