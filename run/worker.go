package run

import "path/filepath"

// WorkerRunning says whether a blobhub-worker holds the state tree at
// stateDir (its instance.yaml names a live process), as doctor checks it;
// `profile ls` and `whoami` show it.
func WorkerRunning(stateDir string) bool {
	running, _ := workerRunning(filepath.Join(stateDir, "instance.yaml"))
	return running
}
