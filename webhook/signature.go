package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// SignatureHeader is the header GitHub signs deliveries with (HMAC-SHA256).
const SignatureHeader = "X-Hub-Signature-256"

// signaturePrefix starts every X-Hub-Signature-256 value.
const signaturePrefix = "sha256="

// Signature errors. Every one of them answers 401.
var (
	ErrNoSecrets          = errors.New("webhook: no webhook secret configured")
	ErrMissingSignature   = errors.New("webhook: missing " + SignatureHeader + " header")
	ErrMalformedSignature = errors.New("webhook: " + SignatureHeader + ` is not "sha256=<64 hex digits>"`)
	ErrSignatureMismatch  = errors.New("webhook: signature does not match any configured secret")
)

// Secrets is the set of webhook secrets any one of which verifies a delivery,
// so that a secret can be rotated without losing deliveries. The zero value
// holds no secret and verifies nothing. Its String method never reveals a
// secret.
type Secrets struct {
	keys [][]byte
}

// ParseSecrets reads a comma-separated list of secrets (the value of
// --webhook-secret / GITHUB_WEBHOOK_SECRET). Blanks around each comma are
// trimmed. An empty list, or an empty entry in it ("a,,b", "a,"), is an
// error: a typo must not turn into a secret that matches an empty key.
func ParseSecrets(commaSeparated string) (Secrets, error) {
	if strings.TrimSpace(commaSeparated) == "" {
		return Secrets{}, errors.New("webhook secret: the list is empty; set --webhook-secret or GITHUB_WEBHOOK_SECRET")
	}
	parts := strings.Split(commaSeparated, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return NewSecrets(parts...)
}

// NewSecrets builds a Secrets from secrets taken verbatim (no trimming, no
// splitting). It refuses an empty list and an empty secret.
func NewSecrets(secrets ...string) (Secrets, error) {
	if len(secrets) == 0 {
		return Secrets{}, errors.New("webhook secret: the list is empty")
	}
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		if s == "" {
			return Secrets{}, fmt.Errorf("webhook secret: entry %d of %d is empty (check for a stray comma)", i+1, len(secrets))
		}
		keys = append(keys, []byte(s))
	}
	return Secrets{keys: keys}, nil
}

// Len is the number of configured secrets.
func (s Secrets) Len() int { return len(s.keys) }

// String names how many secrets there are and nothing else.
func (s Secrets) String() string { return fmt.Sprintf("webhook.Secrets(%d, redacted)", len(s.keys)) }

// GoString keeps %#v from printing the secrets.
func (s Secrets) GoString() string { return s.String() }

// Sign returns the X-Hub-Signature-256 value GitHub would send for body
// signed with secret: "sha256=" followed by the lowercase hex HMAC-SHA256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// SignDelivery sets on h what GitHub sends with a delivery: its event and
// id, a JSON content type, and body's signature with secret. It drops the
// legacy SHA-1 signature (X-Hub-Signature), which a recording may carry and
// which would not match the new secret. Offline replay, the load generator
// and the tests send deliveries through it, so that each is made the way
// Handler reads one.
func SignDelivery(h http.Header, secret, event, id string, body []byte) {
	h.Set("Content-Type", "application/json")
	h.Set(EventHeader, event)
	h.Set(DeliveryHeader, id)
	h.Del("X-Hub-Signature")
	h.Set(SignatureHeader, Sign(secret, body))
}

// Verify checks header (the X-Hub-Signature-256 value) against body with
// every secret, comparing in constant time with hmac.Equal. It returns nil
// when one secret matches, else ErrNoSecrets, ErrMissingSignature,
// ErrMalformedSignature or ErrSignatureMismatch.
func Verify(secrets Secrets, body []byte, header string) error {
	if len(secrets.keys) == 0 {
		return ErrNoSecrets
	}
	if header == "" {
		return ErrMissingSignature
	}
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return ErrMalformedSignature
	}
	var got [sha256.Size]byte
	if _, err := hex.Decode(got[:], []byte(hexSig)); err != nil {
		return ErrMalformedSignature
	}
	matched := false
	for _, key := range secrets.keys {
		// Every secret is tried (no early exit) so timing does not tell
		// which secret of the list matched.
		m := hmac.New(sha256.New, key)
		m.Write(body)
		if hmac.Equal(m.Sum(nil), got[:]) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	return nil
}
