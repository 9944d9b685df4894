package run

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

// otherThreadFolders are the work folders and agent homes the threads of
// the state tree recorded (this thread's too: the caller keeps its own).
// A thread.yaml that cannot be read names nothing.
//
// Decoding every thread.yaml at every confined start cost ~190 µs a
// thread (2.5 s at 10,000 threads, BenchmarkOtherThreadFolders), so what
// each one names is remembered in {state}/cache/thread-folders.json,
// keyed by the file as it is on disk (inode, size, mtime): thread.yaml is
// only ever replaced by a rename, so a changed one is a new inode and is
// decoded again; the others cost a stat. The cache lies in the state tree,
// which no confined agent can read or write. A cache that cannot be read
// or written costs only the decoding.
func otherThreadFolders(stateDir string) []string {
	cachePath := filepath.Join(stateDir, "cache", threadFoldersFile)
	was := map[string]folderStamp{}
	if b, err := statefile.Read(cachePath); err == nil {
		_ = json.Unmarshal(b, &was)
	}
	now := make(map[string]folderStamp, len(was))
	changed := false
	var out []string
	_ = filepath.WalkDir(filepath.Join(stateDir, "jobs"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && (d.Name() == setup.ThreadHomeDir || d.Name() == "logs"):
			return fs.SkipDir // no thread below an agent's home or the logs
		case d.Name() != "thread.yaml" || !d.Type().IsRegular():
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st := stampOf(fi)
		if old, ok := was[p]; ok && old.sameFile(st) {
			st.Folders = old.Folders
		} else {
			changed = true
			if t, err := envelope.LoadThread(p); err == nil && t != nil {
				for _, f := range []string{t.Workspace.Folder(), t.Agent.Resolved.AgentHome} {
					if f != "" {
						st.Folders = append(st.Folders, f)
					}
				}
			}
		}
		now[p] = st
		out = append(out, st.Folders...)
		return nil
	})
	if changed || len(now) != len(was) {
		if b, err := json.Marshal(now); err == nil && os.MkdirAll(filepath.Dir(cachePath), 0o700) == nil {
			_ = statefile.WriteAtomic(cachePath, b, 0o600)
		}
	}
	return out
}

// threadFoldersFile is otherThreadFolders' cache, in the state tree's
// cache folder.
const threadFoldersFile = "thread-folders.json"

// folderStamp is a thread.yaml as it was on disk, and the folders it
// named then.
type folderStamp struct {
	Inode   uint64   `json:"ino"`
	Size    int64    `json:"size"`
	MTimeNs int64    `json:"mtime_ns"`
	Folders []string `json:"folders,omitempty"`
}

func stampOf(fi fs.FileInfo) folderStamp {
	st := folderStamp{Size: fi.Size(), MTimeNs: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.Inode = uint64(sys.Ino)
	}
	return st
}

func (a folderStamp) sameFile(b folderStamp) bool {
	return a.Inode == b.Inode && a.Size == b.Size && a.MTimeNs == b.MTimeNs
}
