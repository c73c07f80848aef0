//go:build !linux

package leasedo

import (
	"syscall"
	"time"
)

// setUserTimeout: TCP_USER_TIMEOUT is Linux's; elsewhere the keep-alives
// alone notice a silent server.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
