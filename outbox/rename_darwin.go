package outbox

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to in one step unless to exists, which
// is EEXIST then: renamex_np with RENAME_EXCL, macOS's counterpart of
// Linux's RENAME_NOREPLACE (ENOTSUP on a file system without it).
func renameNoReplace(from, to string) error {
	return unix.RenamexNp(from, to, unix.RENAME_EXCL)
}
