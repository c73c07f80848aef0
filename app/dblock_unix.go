//go:build unix

package app

import (
	"errors"
	"os"
	"syscall"
)

// flock takes f's exclusive lock without waiting; errLocked when another
// open file description holds it.
func flock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
