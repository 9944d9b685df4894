package lock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/blobhub/bhw-run/statefile"
)

// Held reports whether another open file holds the lock at path right now:
// it tries the flock without waiting and releases it at once (bhw-run ls
// skips a thread a run is working on). A missing file is not held, and is
// not created: a thread never run has no lock file. The probe holds the
// lock for microseconds and writes no Holder; a run that fails fast on it
// in that instant exits 75 and the next one proceeds.
func Held(path string) (bool, error) {
	// O_RDONLY without O_CREATE: flock(2) needs only an open descriptor.
	fh, err := statefile.Open(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("probe lock %s: %w", path, err)
	}
	f := &lockFile{f: fh, path: path}
	defer f.close() // closing releases the probe's lock
	ok, err := f.tryLock()
	if err != nil {
		return false, fmt.Errorf("probe lock %s: %w", path, err)
	}
	return !ok, nil
}
