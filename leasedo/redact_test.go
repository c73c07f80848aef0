package leasedo

import (
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@db:5432/mg?sslmode=require": "postgres://u:xxxxx@db:5432/mg?sslmode=require",
		"postgresql://u@db/mg?password=s3cret":           "postgresql://u@db/mg?password=xxxxx",
		"host=db user=u password=s3cret dbname=mg":       "host=db user=u password=xxxxx dbname=mg",
		"host=db password='s3cret \\' x' dbname=mg":      "host=db password=xxxxx dbname=mg",
		"postgres://u:s3cret@db:bad-port/mg":             "(PostgreSQL connection string)",
		"/var/lib/mergegate/mergegate.db":                "/var/lib/mergegate/mergegate.db",
	} {
		got := RedactDSN(in)
		if strings.Contains(got, "s3cret") {
			t.Errorf("RedactDSN(%q) = %q: the password shows", in, got)
		}
		if got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
