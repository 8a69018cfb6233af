//go:build !unix

package proxy

// peek cannot look at the socket on this platform; a closed backend is
// found when the session next uses it.
func (b *backendConn) peek() peekState { return peekNothing }
