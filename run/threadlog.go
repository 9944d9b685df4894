package run

import (
	"os"
	"path/filepath"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/statefile"
)

// threadLog is the thread's logs/thread.log: the file, the writer that
// redacts secrets from what reaches it, and the agent.Log that writes run's
// and the agent's lines through that writer.
type threadLog struct {
	file *os.File
	w    *redact.Writer // file, secrets redacted
	*agent.Log
}

// openThreadLog opens dir's logs/thread.log for appends, with secrets
// redacted.
func openThreadLog(dir string, secrets *redact.Secrets) (*threadLog, error) {
	f, err := statefile.Open(filepath.Join(dir, "logs", "thread.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, exit.Errorf(exit.CodeStateTreeInvalid, "cannot open thread.log: %v; fix the state tree", err)
	}
	w := secrets.Writer(f)
	return &threadLog{file: f, w: w, Log: agent.NewLog(w)}, nil
}

// close writes what the redacting writer holds and closes the file.
func (l *threadLog) close() {
	_ = l.w.Flush()
	_ = l.file.Close()
}
