package proc

import (
	"sync"
	"time"
)

// Session is what every adapter's agent.Session holds alike, for it to
// embed: the agent's process, and the agent's session id (its resume
// pointer: Claude's session id, Codex's thread id, an ACP session id),
// which the adapter sets as the session opens and run reads from another
// goroutine. It gives the adapter SessionID, Pgid and LastOutput.
type Session struct {
	// Proc is the agent's process, set once by the adapter's Start.
	Proc *Process

	idMu sync.Mutex
	id   string
}

// SessionID is the agent's session id, "" until it is known.
func (s *Session) SessionID() string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return s.id
}

// SetSessionID records the agent's session id.
func (s *Session) SetSessionID(id string) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	s.id = id
}

// Pgid is the agent's process group (its pid: it leads the group).
func (s *Session) Pgid() int { return s.Proc.Pid() }

// LastOutput is when the agent last wrote a line (agent.Session).
func (s *Session) LastOutput() time.Time { return s.Proc.LastLine() }
