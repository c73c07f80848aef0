//go:build linux || darwin || freebsd

package app

import "syscall"

// freeBytes is the space an unprivileged process may still use on the
// filesystem holding dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// writable reports a file that cannot be written (a read-only filesystem,
// or permissions), without writing to it.
func writable(path string) error {
	return syscall.Access(path, 2) // W_OK
}
