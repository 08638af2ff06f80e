package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (RFC 9106) and stored as PHC strings
// ($argon2id$v=19$m=…,t=…,p=…$salt$key), so the parameters can be raised
// later without invalidating stored hashes. The parameters are OWASP's
// baseline for argon2id: 19 MiB, 2 passes, 1 lane.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// hashSlots bounds how many hashes run at once (each holds argonMemory),
// so a burst of logins cannot exhaust memory.
var hashSlots = make(chan struct{}, 4)

func argonKey(password, salt []byte, t, m uint32, p uint8, n uint32) []byte {
	hashSlots <- struct{}{}
	defer func() { <-hashSlots }()
	return argon2.IDKey(password, salt, t, m, p, n)
}

// hashPassword returns the PHC string of password.
func hashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("reading random salt: %w", err)
	}
	key := argonKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword reports whether password matches the PHC string encoded.
// The keys are compared in constant time. An empty or malformed hash never
// matches, but still costs one hash so that timing does not tell accounts
// without a password from accounts with one.
func checkPassword(encoded, password string) bool {
	salt, key, t, m, p, ok := parsePHC(encoded)
	if !ok {
		salt, key, t, m, p, _ = parsePHC(dummyHash())
		_ = subtle.ConstantTimeCompare(argonKey([]byte(password), salt, t, m, p, uint32(len(key))), key)
		return false
	}
	got := argonKey([]byte(password), salt, t, m, p, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}

func parsePHC(encoded string) (salt, key []byte, t, m uint32, p uint8, ok bool) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return nil, nil, 0, 0, 0, false
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return nil, nil, 0, 0, 0, false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return nil, nil, 0, 0, 0, false
	}
	// Bounds: a corrupted row must not make a login allocate gigabytes.
	if m < 8 || m > 1<<20 || t < 1 || t > 16 || p < 1 || p > 16 {
		return nil, nil, 0, 0, 0, false
	}
	b64 := base64.RawStdEncoding
	var err error
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) < 8 {
		return nil, nil, 0, 0, 0, false
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < 16 || len(key) > 64 {
		return nil, nil, 0, 0, 0, false
	}
	return salt, key, t, m, p, true
}

var (
	dummyOnce sync.Once
	dummy     string
)

// dummyHash is a hash of a random password, verified against when there is
// no account (or no password), so that a sign-in attempt costs the same
// whether the account exists or not.
func dummyHash() string {
	dummyOnce.Do(func() {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		dummy, _ = hashPassword(base64.RawStdEncoding.EncodeToString(b))
	})
	return dummy
}
