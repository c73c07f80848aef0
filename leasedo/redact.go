package leasedo

import (
	"net/url"
	"regexp"
)

// RedactDSN returns dsn fit for a message or a log line: a PostgreSQL
// connection string without its password (a URL's user password and a
// password= parameter, a libpq key=value string's password), anything else
// (a SQLite path) as it is.
func RedactDSN(dsn string) string {
	if !IsPostgresURL(dsn) {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	if libpqKeyValue.MatchString(dsn) {
		return libpqPassword.ReplaceAllString(dsn, "${1}xxxxx")
	}
	// A URL that does not parse: nothing of it is shown.
	return "(PostgreSQL connection string)"
}

// libpqPassword is a key=value string's password, quoted ('...', with \'
// escapes) or not.
var libpqPassword = regexp.MustCompile(`(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
