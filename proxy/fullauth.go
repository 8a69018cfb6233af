package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
)

// caching_sha2_password's full authentication.
//
// A MySQL server answers a caching_sha2_password scramble with "fast auth
// success" when it proves a password the server has cached, and with
// "perform full authentication" otherwise: the client then sends the
// password itself, in clear when the connection is TLS, or encrypted with
// the server's RSA public key (which it may first ask for) when it is not.
// lockproxy knows every user's password, so a correct scramble always
// takes the fast path; a scramble that does not match leads to full
// authentication, as on MySQL, and the password the client then sends
// decides. Unknown users go through the same exchange, so the replies do
// not tell which user names exist.
const (
	sha2RequestPublicKey = 0x02 // client: send me your RSA public key
	sha2PerformFullAuth  = 0x04 // server: send the password itself
	authMoreData         = 0x01 // header of AuthMoreData packets
)

// rsaKeyBits is the size of the key lockproxy makes for full authentication
// (MySQL's auto-generated keys are 2048 bits too).
const rsaKeyBits = 2048

// authKey is the RSA key pair a Server hands to clients for encrypting a
// password on a connection without TLS. It is made on first use and lives
// as long as the process.
type authKey struct {
	once sync.Once
	key  *rsa.PrivateKey
	pem  []byte // the public key, PKIX in PEM, as MySQL sends it
	err  error
}

func (k *authKey) get() (*rsa.PrivateKey, []byte, error) {
	k.once.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, rsaKeyBits)
		if err != nil {
			k.err = fmt.Errorf("proxy: make the RSA key for caching_sha2_password: %w", err)
			return
		}
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			k.err = fmt.Errorf("proxy: encode the RSA public key: %w", err)
			return
		}
		k.key, k.pem = key, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	})
	return k.key, k.pem, k.err
}

// fullAuth runs full authentication after a caching_sha2_password scramble
// that did not match, starting with the packet of sequence seq. It reports
// whether the client proved password (never when known is false) and
// returns the sequence id of the next packet. Errors are I/O failures or a
// key that could not be made; a wrong or malformed answer is not an error.
func (l *login) fullAuth(seq byte, known bool, password string) (bool, byte, error) {
	if _, err := l.cw.writePacket(seq, []byte{authMoreData, sha2PerformFullAuth}); err != nil {
		return false, 0, err
	}
	if err := l.cw.flush(); err != nil {
		return false, 0, err
	}
	seq, p, err := l.cr.readLogical(4096)
	if err != nil {
		return false, 0, err
	}
	seq++
	if l.tls {
		// Over TLS the password comes in clear, NUL-terminated.
		return known && samePassword(bytes.TrimSuffix(p, []byte{0}), password), seq, nil
	}
	key, pub, err := l.srv.authKey.get()
	if err != nil {
		return false, 0, err
	}
	if len(p) == 1 && p[0] == sha2RequestPublicKey {
		if _, err := l.cw.writePacket(seq, append([]byte{authMoreData}, pub...)); err != nil {
			return false, 0, err
		}
		if err := l.cw.flush(); err != nil {
			return false, 0, err
		}
		if seq, p, err = l.cr.readLogical(4096); err != nil {
			return false, 0, err
		}
		seq++
	}
	// Without TLS the password must come encrypted: a client sending it in
	// clear (as some do on a trusted transport) is refused, as by MySQL.
	plain, err := rsa.DecryptOAEP(sha1.New(), nil, key, p, nil)
	if err != nil {
		return false, seq, nil
	}
	for i := range plain {
		plain[i] ^= l.salt[i%len(l.salt)]
	}
	return known && samePassword(bytes.TrimSuffix(plain, []byte{0}), password), seq, nil
}

// samePassword compares in constant time.
func samePassword(got []byte, password string) bool {
	return len(got) == len(password) && subtle.ConstantTimeCompare(got, []byte(password)) == 1
}
