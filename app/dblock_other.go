//go:build !unix

package app

import "os"

// flock: no flock(2) here; the file is written, not locked.
func flock(*os.File) error { return nil }
