package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The ingest path reads three fields of a 24 KB payload (action,
// installation.id, repository.full_name) and must reject malformed JSON.
// encoding/json validates and then decodes in two passes with reflection;
// this scanner validates in one pass and keeps only the top-level values
// asked for. The worker decodes the payload in full later, off the
// acknowledgement's path.

var errSyntax = errors.New("invalid JSON")

type scanner struct {
	b []byte
	i int
}

// topLevel validates b as one JSON object (nothing but white space after
// it) and returns the raw values of keys found at its top level, in the
// order of keys (nil where absent; the last one wins on duplicates, as in
// encoding/json).
func topLevel(b []byte, keys ...string) ([][]byte, error) {
	s := scanner{b: b}
	out := make([][]byte, len(keys))
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := s.object(keys, out); err != nil {
		return nil, fmt.Errorf("%w: %v at offset %d", ErrMalformed, err, s.i)
	}
	s.ws()
	if s.i != len(b) {
		return nil, fmt.Errorf("%w: %v: data after the object at offset %d", ErrMalformed, errSyntax, s.i)
	}
	return out, nil
}

// object scans an object at s.i; with keys, it records their raw values.
func (s *scanner) object(keys []string, out [][]byte) error {
	s.i++ // {
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.peek() != '"' {
			return errSyntax
		}
		kStart := s.i
		escaped, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[kStart+1 : s.i-1]
		s.ws()
		if s.peek() != ':' {
			return errSyntax
		}
		s.i++
		s.ws()
		vStart := s.i
		if err := s.value(); err != nil {
			return err
		}
		if keys != nil {
			s.record(key, escaped, s.b[vStart:s.i], keys, out)
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errSyntax
		}
	}
}

func (s *scanner) record(key []byte, escaped bool, val []byte, keys []string, out [][]byte) {
	k := string(key)
	if escaped {
		var u string
		if err := json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &u); err != nil {
			return
		}
		k = u
	}
	for i, want := range keys {
		// encoding/json matches field names without regard to case.
		if k == want || strings.EqualFold(k, want) {
			out[i] = val
		}
	}
}

func (s *scanner) value() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(nil, nil)
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return errSyntax
}

func (s *scanner) array() error {
	s.i++ // [
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// str scans a string at s.i (on its opening quote) and reports whether it
// holds escapes.
func (s *scanner) str() (escaped bool, err error) {
	s.i++ // "
	for s.i < len(s.b) {
		// Skip plain bytes fast.
		j := s.i
		for j < len(s.b) && !stringStop[s.b[j]] {
			j++
		}
		if j == len(s.b) {
			break
		}
		s.i = j
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return escaped, errSyntax
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return escaped, errSyntax
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return escaped, errSyntax
					}
				}
				s.i += 6
			default:
				return escaped, errSyntax
			}
		default: // a control character
			return escaped, errSyntax
		}
	}
	return escaped, errSyntax
}

// stringStop marks the bytes that end a run of plain string content: the
// closing quote, a backslash, and control characters (invalid unescaped).
var stringStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) number() error {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return errSyntax
	}
	if s.peek() == '.' {
		s.i++
		if !isDigit(s.peek()) {
			return errSyntax
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !isDigit(s.peek()) {
			return errSyntax
		}
		s.digits()
	}
	return nil
}

func (s *scanner) digits() {
	for s.i < len(s.b) && isDigit(s.b[s.i]) {
		s.i++
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return errSyntax
	}
	s.i += len(lit)
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// parseEnvelope reads action, tenant and repository of a delivery in one
// validating pass over the payload (the ingest path).
func parseEnvelope(body []byte) (Meta, error) {
	vals, err := topLevel(body, "action", "installation", "repository")
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	if v := vals[0]; v != nil && !isNull(v) {
		if err := json.Unmarshal(v, &m.Action); err != nil {
			return Meta{}, fmt.Errorf("%w: action: %v", ErrMalformed, err)
		}
	}
	if v := vals[1]; v != nil && !isNull(v) {
		if v[0] != '{' {
			return Meta{}, fmt.Errorf("%w: installation is not an object", ErrMalformed)
		}
		inner, err := topLevel(v, "id")
		if err != nil {
			return Meta{}, err
		}
		if id := inner[0]; id != nil && !isNull(id) {
			n, err := strconv.ParseInt(string(id), 10, 64)
			if err != nil {
				return Meta{}, fmt.Errorf("%w: installation.id is not an integer", ErrMalformed)
			}
			if n != 0 {
				m.Tenant = strconv.FormatInt(n, 10)
			}
		}
	}
	if v := vals[2]; v != nil && !isNull(v) {
		if v[0] != '{' {
			return Meta{}, fmt.Errorf("%w: repository is not an object", ErrMalformed)
		}
		inner, err := topLevel(v, "full_name")
		if err != nil {
			return Meta{}, err
		}
		if fn := inner[0]; fn != nil && !isNull(fn) {
			if err := json.Unmarshal(fn, &m.Repo); err != nil {
				return Meta{}, fmt.Errorf("%w: repository.full_name: %v", ErrMalformed, err)
			}
		}
	}
	return m, nil
}

func isNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }
