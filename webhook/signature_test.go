package webhook

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// GitHub's documented test vector (docs.github.com, validating deliveries).
const (
	vectorSecret = "It's a Secret to Everybody"
	vectorBody   = "Hello, World!"
	vectorSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestDocumentedVector(t *testing.T) {
	if got := Sign(vectorSecret, []byte(vectorBody)); got != vectorSig {
		t.Fatalf("Sign = %s, want %s", got, vectorSig)
	}
	s, err := NewSecrets(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(s, []byte(vectorBody), vectorSig); err != nil {
		t.Fatalf("Verify(documented vector) = %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	s, _ := NewSecrets(vectorSecret)
	body := []byte(vectorBody)
	flipped := []byte(vectorBody)
	flipped[5] ^= 1
	flippedSig := []byte(vectorSig)
	flippedSig[len(flippedSig)-1] = '6'
	cases := []struct {
		name   string
		body   []byte
		header string
		want   error
	}{
		{"flipped body byte", flipped, vectorSig, ErrSignatureMismatch},
		{"flipped signature digit", body, string(flippedSig), ErrSignatureMismatch},
		{"wrong secret", body, Sign("another secret", body), ErrSignatureMismatch},
		{"empty secret's signature", body, Sign("", body), ErrSignatureMismatch},
		{"missing", body, "", ErrMissingSignature},
		{"sha1 form", body, "sha1=" + strings.Repeat("ab", 20), ErrMalformedSignature},
		{"no prefix", body, strings.TrimPrefix(vectorSig, "sha256="), ErrMalformedSignature},
		{"not hex", body, "sha256=" + strings.Repeat("zz", 32), ErrMalformedSignature},
		{"short", body, vectorSig[:len(vectorSig)-2], ErrMalformedSignature},
		{"long", body, vectorSig + "00", ErrMalformedSignature},
		{"prefix only", body, "sha256=", ErrMalformedSignature},
	}
	for _, c := range cases {
		if err := Verify(s, c.body, c.header); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	if err := Verify(Secrets{}, body, vectorSig); !errors.Is(err, ErrNoSecrets) {
		t.Errorf("zero Secrets: Verify = %v, want ErrNoSecrets", err)
	}
}

func TestRotation(t *testing.T) {
	s, err := ParseSecrets("old-secret, " + vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	for _, secret := range []string{"old-secret", vectorSecret} {
		if err := Verify(s, []byte(vectorBody), Sign(secret, []byte(vectorBody))); err != nil {
			t.Errorf("signed with %q: %v", secret, err)
		}
	}
	if err := Verify(s, []byte(vectorBody), Sign("retired", []byte(vectorBody))); !errors.Is(err, ErrSignatureMismatch) {
		t.Errorf("retired secret: %v", err)
	}
}

func TestParseSecretsRefusesEmpty(t *testing.T) {
	for _, in := range []string{"", "   ", ",", "a,,b", "a,", ",a", "a, ,b"} {
		if s, err := ParseSecrets(in); err == nil {
			t.Errorf("ParseSecrets(%q) = %v, want an error", in, s)
		}
	}
	if _, err := NewSecrets(); err == nil {
		t.Error("NewSecrets() accepted an empty list")
	}
	if _, err := NewSecrets("a", ""); err == nil {
		t.Error(`NewSecrets("a", "") accepted an empty secret`)
	}
	_, err := ParseSecrets("a,,b")
	if !strings.Contains(err.Error(), "empty") {
		t.Errorf("message %q does not say what is wrong", err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	s, _ := ParseSecrets("hunter2,swordfish")
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, s)
		if strings.Contains(out, "hunter2") || strings.Contains(out, "swordfish") {
			t.Errorf("%s printed a secret: %s", format, out)
		}
	}
}
