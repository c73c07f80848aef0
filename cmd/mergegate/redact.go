package main

import (
	"net/url"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/mergegate/mergegate/leasedo"
)

// The PostgreSQL connection strings of this run's settings (--db, and
// migrate-store's --to), so that no error printed names their passwords,
// whichever library wrote the error.
var (
	dsnMu sync.Mutex
	dsns  []string
)

// rememberDSN notes value when it is a PostgreSQL connection string.
func rememberDSN(value string) {
	if !leasedo.IsPostgresURL(value) {
		return
	}
	dsn := value
	dsnMu.Lock()
	defer dsnMu.Unlock()
	dsns = append(dsns, dsn)
}

// redactSecrets replaces in msg each remembered connection string by its
// redacted form, then each of their passwords (of 4 bytes or more: a
// shorter one would blot out the message) by xxxxx.
func redactSecrets(msg string) string {
	dsnMu.Lock()
	defer dsnMu.Unlock()
	for _, dsn := range dsns {
		msg = strings.ReplaceAll(msg, dsn, leasedo.RedactDSN(dsn))
		for _, pw := range passwordsOf(dsn) {
			if len(pw) < 4 {
				continue
			}
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// passwordsOf is the password(s) dsn carries (a URL's user password, a
// password= parameter, libpq's key), as pgx reads it and as written.
func passwordsOf(dsn string) []string {
	var out []string
	if cfg, err := pgx.ParseConfig(dsn); err == nil && cfg.Password != "" {
		out = append(out, cfg.Password)
	}
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw)
		}
		if pw := u.Query().Get("password"); pw != "" {
			out = append(out, pw)
		}
	}
	return out
}
