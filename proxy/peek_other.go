//go:build !unix

package proxy

// peekReadable cannot look at the socket on this platform; a closed
// backend is found when the session next uses it.
func (b *backendConn) peekReadable() bool { return false }
