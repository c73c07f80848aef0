package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Payloads are read with a one-pass validating scanner instead of
// encoding/json: a 24 KB payload holds a few dozen fields mergegate reads
// and kilobytes it does not (pull_request.head.repo, base.repo, ...).
// encoding/json validates the whole input, then decodes it with
// reflection; the scanner validates as it goes, decodes the fields asked
// for straight into their Go values and only skips the rest.
//
// It accepts and decodes exactly what json.Unmarshal would into the same
// structs (translate_ref_test.go keeps that implementation; the tests and
// FuzzTranslateMatchesReference compare the two):
//   - the input is one JSON object, white space around it, nested no
//     deeper than encoding/json's 10000 levels;
//   - keys match field names exactly or else case-insensitively
//     (bytes.EqualFold, escapes decoded first); other keys are skipped;
//   - a value of the wrong type for a field is an error; null leaves a
//     string, number, bool or struct field as it was and clears a pointer
//     or a slice;
//   - a repeated key decodes again into the same field: a later scalar
//     replaces an earlier one, a later object is merged into the struct
//     the first one filled, a later array is decoded element by element
//     over the earlier one's (reusing its backing array as reflect does).

var (
	errSyntax = errors.New("invalid JSON")
	errDepth  = errors.New("JSON nested too deeply")
)

// maxDepth is encoding/json's limit on nested objects and arrays.
const maxDepth = 10000

type scanner struct {
	b     []byte
	i     int
	depth int // objects and arrays open at s.i
}

// fieldDecoder is a struct a JSON object decodes into.
type fieldDecoder interface {
	// decodeField decodes the value at s.i, whose key matched field
	// number i of the names its object was scanned with, and scans past it.
	decodeField(s *scanner, i int) error
}

// decode validates body as one JSON object (white space around it)
// and decodes the members whose keys match names into v, as
// encoding/json.Unmarshal would. Its errors wrap ErrMalformed.
func decode(body []byte, names []string, v fieldDecoder) error {
	s := scanner{b: body}
	s.ws()
	if s.peek() != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := s.object(names, v); err != nil {
		return fmt.Errorf("%w: %v at offset %d", ErrMalformed, err, s.i)
	}
	s.ws()
	if s.i != len(body) {
		return fmt.Errorf("%w: %v: data after the object at offset %d", ErrMalformed, errSyntax, s.i)
	}
	return nil
}

// enter opens an object or array at s.i.
func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return errDepth
	}
	s.i++
	s.ws()
	return nil
}

// object scans an object at s.i. The value of each member whose key
// matches one of names is decoded by v; the others are skipped.
func (s *scanner) object(names []string, v fieldDecoder) error {
	if err := s.enter(); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		s.depth--
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
		if f := fieldIndex(key, escaped, names); f >= 0 {
			err = v.decodeField(s, f)
		} else {
			err = s.value()
		}
		if err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return errSyntax
		}
	}
}

// fieldIndex is the index of the name key (raw, between its quotes)
// matches as encoding/json matches a struct field: exactly, or else
// case-insensitively; -1 when none does.
func fieldIndex(key []byte, escaped bool, names []string) int {
	if len(names) == 0 {
		return -1
	}
	if escaped {
		var u string
		if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &u) != nil {
			return -1 // not reached: the scanner validated the key
		}
		key = []byte(u)
	}
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	ascii := true
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for i, name := range names {
		if ascii {
			if len(key) == len(name) && asciiEqualFold(key, name) {
				return i
			}
		} else if bytes.EqualFold(key, []byte(name)) {
			return i
		}
	}
	return -1
}

// asciiEqualFold compares ASCII b and s, of the same length, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	for i := range len(b) {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
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
	if err := s.enter(); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		s.depth--
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
			s.depth--
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
	var e envelope
	if err := decode(body, envelopeFields, &e); err != nil {
		return Meta{}, err
	}
	return e.meta(), nil
}

// The field decoders below decode the value at s.i into a Go value as
// encoding/json would, and scan past it. field names the field in errors.

// stringField decodes a string; null leaves *dst as it is. With a nil dst
// the value is only checked.
func (s *scanner) stringField(dst *string, field string) error {
	switch s.peek() {
	case '"':
		start := s.i
		escaped, err := s.str()
		if err != nil || dst == nil {
			return err
		}
		if raw := s.b[start+1 : s.i-1]; !escaped && utf8.Valid(raw) {
			*dst = string(raw)
			return nil
		}
		// Escapes, or bytes that are not UTF-8 (each becomes U+FFFD):
		// encoding/json's own unquoting.
		return json.Unmarshal(s.b[start:s.i], dst)
	case 'n':
		return s.literal("null")
	}
	return s.wrongType(field, "a string")
}

// intField decodes an integer that fits in bits; a fraction or an exponent
// (5.0, 1e2) is an error, as in encoding/json. null leaves *dst as it is.
func (s *scanner) intField(dst *int64, bits int, field string) error {
	switch c := s.peek(); {
	case c == '-' || isDigit(c):
		start := s.i
		if err := s.number(); err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, bits)
		if err != nil {
			return fmt.Errorf("%s: %s is not an integer of %d bits", field, s.b[start:s.i], bits)
		}
		*dst = n
		return nil
	case c == 'n':
		return s.literal("null")
	}
	return s.wrongType(field, "a number")
}

// goIntField is intField for an int.
func (s *scanner) goIntField(dst *int, field string) error {
	n := int64(*dst)
	if err := s.intField(&n, strconv.IntSize, field); err != nil {
		return err
	}
	*dst = int(n)
	return nil
}

// boolField decodes true or false; null leaves *dst as it is.
func (s *scanner) boolField(dst *bool, field string) error {
	switch s.peek() {
	case 't':
		*dst = true
		return s.literal("true")
	case 'f':
		*dst = false
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.wrongType(field, "a boolean")
}

// presentField scans any value and sets *dst to whether it is not null:
// a *json.RawMessage field's being non-nil.
func (s *scanner) presentField(dst *bool) error {
	notNull := s.peek() != 'n'
	if err := s.value(); err != nil {
		return err
	}
	*dst = notNull
	return nil
}

// structField decodes an object into a struct (merged into what v already
// holds); null leaves it as it is.
func (s *scanner) structField(names []string, v fieldDecoder, field string) error {
	switch s.peek() {
	case '{':
		return s.object(names, v)
	case 'n':
		return s.literal("null")
	}
	return s.wrongType(field, "an object")
}

// pointerField decodes an object into a pointer to a struct: into *p
// when it is already set (merged, as encoding/json does with a repeated
// key), else into a new one. null sets *p to nil.
func pointerField[T any, P interface {
	*T
	fieldDecoder
}](s *scanner, p **T, names []string, field string) error {
	switch s.peek() {
	case '{':
		if *p == nil {
			*p = new(T)
		}
		return s.object(names, P(*p))
	case 'n':
		*p = nil
		return s.literal("null")
	}
	return s.wrongType(field, "an object")
}

// sliceField decodes an array of objects into a slice of structs as
// encoding/json does: element n is decoded into (merged with) the slice's
// element n when there is one (a repeated key), the slice is truncated to
// the array's length, and it grows one element at a time, so that it
// reuses its backing array exactly as reflect.Value.Grow does. A null
// element leaves its element as it is; a null array sets *sl to nil.
func sliceField[T any, P interface {
	*T
	fieldDecoder
}](s *scanner, sl *[]T, names []string, field string) error {
	switch s.peek() {
	case '[':
	case 'n':
		*sl = nil
		return s.literal("null")
	default:
		return s.wrongType(field, "an array")
	}
	if err := s.enter(); err != nil {
		return err
	}
	v, n := *sl, 0
	for s.peek() != ']' {
		s.ws()
		switch {
		case n < len(v):
		case n < cap(v):
			v = v[:n+1]
		default:
			var zero T
			v = append(v, zero)
		}
		if err := s.structField(names, P(&v[n]), field); err != nil {
			return err
		}
		n++
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
			if s.peek() == ']' {
				return errSyntax
			}
		case ']':
		default:
			return errSyntax
		}
	}
	s.i++
	s.depth--
	if n == 0 {
		v = v[:0:0]
	}
	*sl = v[:n]
	return nil
}

// wrongType is the error for a value that cannot decode into field.
func (s *scanner) wrongType(field, want string) error {
	var got string
	switch c := s.peek(); {
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case c == '"':
		got = "a string"
	case c == 't' || c == 'f':
		got = "a boolean"
	case c == '-' || isDigit(c):
		got = "a number"
	default:
		return errSyntax
	}
	return fmt.Errorf("%s is %s, not %s", field, got, want)
}
