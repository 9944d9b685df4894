package outbox

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to in one step unless to exists, which
// is EEXIST then: renameat2 with RENAME_NOREPLACE.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
