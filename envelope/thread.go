package envelope

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/statefile"
)

// Turn states in thread.yaml.
const (
	TurnStateIdle        = "idle"
	TurnStateRunning     = "running"
	TurnStateInterrupted = "interrupted"
)

// Thread is the local thread.yaml (docs/state.md), authoritative for
// recovery. The names the long-running blobhub-worker documents (agent.state, agent.agent_session_id, agent.error,
// workspace.agent_type, items.last_consumed, items.last_posted) are kept.
type Thread struct {
	Alias     string     `yaml:"alias"`
	Session   SessionRef `yaml:"session"`
	Workspace Workspace  `yaml:"workspace"`
	Agent     AgentState `yaml:"agent"`
	Turn      TurnState  `yaml:"turn"`
	// Prompt is the open question of a parked turn. It is written at
	// agent.park, where blobhub-worker keeps its own (park.go); a
	// thread.yaml of an earlier bhw-run kept it here, under prompt, which
	// is still read.
	Prompt        *Prompt        `yaml:"prompt,omitempty"`
	Grants        []string       `yaml:"grants"`
	Items         Cursors        `yaml:"items"`
	EmissionNonce string         `yaml:"emission_nonce"`
	Outbox        OutboxState    `yaml:"outbox"`
	Artifacts     ArtifactsState `yaml:"artifacts"`
	// Ledger is what the agent spent and what holds it back; nil until a
	// turn has run.
	Ledger *Ledger `yaml:"ledger,omitempty"`
	// Extra keeps keys this version does not know, so a newer field survives.
	Extra map[string]any `yaml:",inline"`
}

// SessionRef names the session the thread lives in: the section's session
// as blobhub-worker records it (org, blob, revision, session and the
// section's prefix).
type SessionRef struct {
	OrgID         string `yaml:"org_id,omitempty"`
	BlobID        string `yaml:"blob_id,omitempty"`
	RevisionID    string `yaml:"revision_id"`
	SessionID     string `yaml:"session_id"`
	SessionPrefix string `yaml:"session_prefix,omitempty"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// Workspace is fixed at activation.
type Workspace struct {
	AgentType  string `yaml:"agent_type"`
	WorkFolder string `yaml:"work_folder"` // as the envelope names it
	// ResolvedFolder is WorkFolder with its links resolved, as the
	// checklist approved it at activation: the agent always runs there,
	// whatever a link on the way leads to later. A thread.yaml written
	// before it existed gets it on its next turn.
	ResolvedFolder string `yaml:"resolved_work_folder,omitempty"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// Folder is where the agent runs: ResolvedFolder, or WorkFolder in a
// thread.yaml that predates it.
func (w Workspace) Folder() string {
	if w.ResolvedFolder != "" {
		return w.ResolvedFolder
	}
	return w.WorkFolder
}

// AgentState is the agent block of thread.yaml.
type AgentState struct {
	State          string       `yaml:"state"`
	AgentSessionID string       `yaml:"agent_session_id"`
	Error          ErrorRecord  `yaml:"error"`
	FailedOnWire   bool         `yaml:"failed_on_wire"`
	Resolved       Resolved     `yaml:"resolved"`
	Process        *ProcessInfo `yaml:"process,omitempty"`
	// Park is the open question of a parked turn as it is on disk; in
	// memory it is Thread.Prompt (park.go moves it on read and write).
	Park *Prompt `yaml:"park,omitempty"`
	// Grant is blobhub-worker's one-shot grant: a person approved the call
	// it names, and its next attempt runs without asking (park.go).
	Grant *Grant `yaml:"grant,omitempty"`
	// UsageTotal is the agent's cumulative usage counters where the last
	// turn in agent_session_id ended (the daemon's or bhw-run's); the
	// daemon measures its next turn's usage from it.
	UsageTotal map[string]int `yaml:"usage_total,omitempty"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// ErrorRecord is a thread-level error; both fields are null when clear.
type ErrorRecord struct {
	Code    *string `yaml:"code"`
	Message *string `yaml:"message"`
}

// Set records a thread error.
func (r *ErrorRecord) Set(code, message string) { r.Code, r.Message = &code, &message }

// Clear empties the record.
func (r *ErrorRecord) Clear() { r.Code, r.Message = nil, nil }

// Get returns the recorded error; ok is false when there is none.
func (r ErrorRecord) Get() (code, message string, ok bool) {
	if r.Code == nil {
		return "", "", false
	}
	if r.Message != nil {
		message = *r.Message
	}
	return *r.Code, message, true
}

// Resolved is the agent's resolved launch, reused on resume.
type Resolved struct {
	Executable  string `yaml:"executable,omitempty"`
	Model       string `yaml:"model,omitempty"`
	Effort      string `yaml:"effort,omitempty"`
	Permissions string `yaml:"permissions,omitempty"`
	// Home is the user's home, the agent's HOME.
	Home string `yaml:"home,omitempty"`
	// AgentHome is the agent's own isolated home (what goes in
	// CLAUDE_CONFIG_DIR, CODEX_HOME, …), whatever the agent.
	AgentHome string `yaml:"agent_home,omitempty"`
	// Extra keeps the keys this version does not know. A thread.yaml
	// written before agent_home existed recorded the agent's home under the
	// agent's own key (config_dir for Claude Code, codex_home for Codex):
	// LegacyHome reads it from here.
	Extra map[string]any `yaml:",inline"`
}

// LegacyHome is the agent home an older thread.yaml recorded under key.
func (r Resolved) LegacyHome(key string) string {
	s, _ := r.Extra[key].(string)
	return s
}

// ProcessInfo names a live agent's process group.
type ProcessInfo struct {
	Pgid      int    `yaml:"pgid"`
	StartedAt string `yaml:"started_at"`
}

// TurnState is the turn block of thread.yaml.
type TurnState struct {
	State      string   `yaml:"state"`
	StartedAt  string   `yaml:"started_at,omitempty"`
	InboundIDs []string `yaml:"inbound_ids"`
	// Inbound keeps the delivered items themselves, so an interrupted turn's
	// messages can be delivered again without another read.
	Inbound []InboundItem `yaml:"inbound,omitempty"`
}

// Prompt is present only while parked on a person (docs/gate.md).
type Prompt struct {
	Kind string `yaml:"kind"`
	// PromptID is the prompt's prompt_id on the wire ("prm_<ULID>", as
	// blobhub-worker names its prompts); empty in a prompt recorded by an
	// earlier version, whose items have none.
	PromptID   string      `yaml:"prompt_id,omitempty"`
	ItemID     string      `yaml:"item_id"`
	EmissionID string      `yaml:"emission_id"`
	CreatedAt  string      `yaml:"created_at"`
	Call       policy.Call `yaml:"call"`
	InputJSON  string      `yaml:"input_json,omitempty"`
	// Subject is what blobhub-worker names an approval by: the tool (or
	// the request method); empty for a question.
	Subject string `yaml:"subject,omitempty"`
	// GrantKey is the grant key the prompt's item showed, kept for a park
	// the daemon left (bhw-run's own prompts derive it from Call).
	GrantKey string `yaml:"grant_key,omitempty"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// Cursors are the four item cursors: the last person item delivered, the
// last own item confirmed posted, how far the thread was read, and the
// person items read but not yet delivered.
type Cursors struct {
	LastConsumed   ItemRef       `yaml:"last_consumed"`
	LastPosted     ItemRef       `yaml:"last_posted"`
	Scanned        Scanned       `yaml:"scanned"`
	PendingInbound []InboundItem `yaml:"pending_inbound"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// ItemRef points at one item.
type ItemRef struct {
	ItemID    string `yaml:"item_id"`
	CreatedAt string `yaml:"created_at"`
}

// Scanned is how far the thread has been read: the newest created_at not
// ahead of the server's clock, every id seen at exactly that instant, and
// the items read while they were stamped ahead of the server's clock (a
// clock that jumped), which must not be read twice. Since is the
// created_at read before that instant, where the next read starts (the
// server's own string: it is sent back as created_since).
type Scanned struct {
	CreatedAt string    `yaml:"created_at"`
	IDs       []string  `yaml:"ids"`
	Since     string    `yaml:"since,omitempty"`
	Ahead     []ItemRef `yaml:"ahead,omitempty"`
}

// InboundItem is a person's item read but not yet delivered.
type InboundItem struct {
	ID        string         `yaml:"id"`
	CreatedAt string         `yaml:"created_at"`
	UserID    string         `yaml:"user_id"`
	Content   []ContentBlock `yaml:"content"`
	// Picked is the item's metadata.answers (answers picked where the
	// prompt was shown), used before its text to answer a prompt.
	Picked []policy.PickedAnswer `yaml:"answers,omitempty"`
}

// ContentBlock is one content block of an item; JSON blocks are kept as text.
type ContentBlock struct {
	Type string `yaml:"type"`
	Text string `yaml:"text,omitempty"`
	JSON string `yaml:"json,omitempty"`
	// File is a file block's attachment.
	File *Attachment `yaml:"file,omitempty"`
}

// Attachment is a file a person attached: the session file (alias, and
// the name, content type and size the block gave), then where the run
// put it in the inbox (Path), or why it could not (Unavailable).
type Attachment struct {
	Alias       string `yaml:"alias"`
	Name        string `yaml:"name,omitempty"`
	ContentType string `yaml:"content_type,omitempty"`
	Size        int64  `yaml:"size,omitempty"`
	Path        string `yaml:"path,omitempty"`
	Unavailable string `yaml:"unavailable,omitempty"`
}

// OutboxState records whether bhw-run created the outbox folder.
type OutboxState struct {
	CreatedByUs bool `yaml:"created_by_us"`
}

// ArtifactsState is where a thread.yaml of an earlier version recorded the
// artifacts it published. They are kept in artifacts.yaml now (Published),
// which only a completed turn reads; run moves these entries there the
// first time it records an artifact.
type ArtifactsState struct {
	Published map[string]PublishedArtifact `yaml:"published,omitempty"`
}

// Published is artifacts.yaml, next to thread.yaml: every artifact the
// thread has published, by its path in the outbox, to tell a new or changed
// file from one already published. It grows with every file a thread ever
// publishes, so it is not in thread.yaml, which every run reads.
type Published struct {
	Published map[string]PublishedArtifact `yaml:"published"`
}

// LoadPublished reads artifacts.yaml; a missing file is an empty record.
func LoadPublished(path string) (*Published, error) {
	p := &Published{}
	b, err := statefile.Read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := DecodeYAML(b, p, false); err != nil {
			return nil, fmt.Errorf("%s %w; fix it or move it aside (its files are then published again)", path, err)
		}
	}
	if p.Published == nil {
		p.Published = map[string]PublishedArtifact{}
	}
	return p, nil
}

// PublishedArtifact is one published file.
type PublishedArtifact struct {
	SHA256 string `yaml:"sha256"`
	Alias  string `yaml:"alias"`
}

// LoadThread reads thread.yaml; a missing file is an empty record (nil, nil).
func LoadThread(path string) (*Thread, error) {
	t, _, err := ReadThread(path)
	return t, err
}

// ReadThread is LoadThread that also returns the bytes it decoded.
func ReadThread(path string) (*Thread, []byte, error) {
	b, err := statefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var t Thread
	if err := DecodeYAML(b, &t, false); err != nil {
		return nil, nil, fmt.Errorf("%s %w; fix or move it aside", path, err)
	}
	return &t, b, nil
}
