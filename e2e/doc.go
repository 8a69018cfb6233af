// Package e2e tests lockproxy as users run it: built binaries, several
// instances sharing one Redis, in front of the real MariaDB test bed, driven
// by ordinary clients. It holds tests only; nothing imports it.
package e2e
