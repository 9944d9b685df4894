package setup

// This file is the one owner of the section's records: identity.yaml (the
// state tree's), section.yaml and not_mine.yaml (the section's folder,
// under section.lock) and the value of the session's worker object on
// BlobHub. Nothing else in bhw-run reads or writes them by hand: run, cli
// and the doctor call the functions here (docs/design.md, Who owns a
// record; checked by TestRecordsHaveOneOwner).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/statefile"
)

// Identity is identity.yaml: who this state tree acts as. The file has
// the shape the blobhub-worker documentation gives it (worker/filesystem,
// worker/cli/login):
//
//	user:
//	  user_id: usr_01J...
//	  name: Your Name
//	  email: you@example.com
//	  recorded_at: 2026-05-27T12:34:56Z
//
// An earlier bhw-run wrote the same four keys flat, at the top level;
// both shapes are read, the documented one is written.
type Identity struct {
	UserID     string `yaml:"user_id"`
	Name       string `yaml:"name"`
	Email      string `yaml:"email"`
	RecordedAt string `yaml:"recorded_at"`

	flat bool // read from the earlier flat shape
}

// identityFile is identity.yaml on disk: the documented user block, and
// the earlier flat keys.
type identityFile struct {
	User     *Identity `yaml:"user,omitempty"`
	Identity `yaml:",inline"`
}

func IdentityPath(stateDir string) string { return filepath.Join(stateDir, "identity.yaml") }

// LoadIdentity reads identity.yaml; nil when missing. A file that names
// no user is an error: it is never replaced by whoever the key is now.
func LoadIdentity(stateDir string) (*Identity, error) {
	path := IdentityPath(stateDir)
	b, err := statefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, exit.Errorf(exit.CodeStateTreeInvalid, "cannot read %s: %v", path, err)
	}
	var f identityFile
	if err := envelope.DecodeYAML(b, &f, false); err != nil {
		return nil, exit.Errorf(exit.CodeStateTreeInvalid, "%s %v; fix it (user: {user_id, name, email, recorded_at})", path, err)
	}
	id := f.Identity
	if u := f.User; u != nil && u.UserID != "" {
		id = *u
		if id.RecordedAt == "" {
			id.RecordedAt = f.RecordedAt // a recorded_at beside the block
		}
	} else {
		id.flat = id.UserID != ""
	}
	if id.UserID == "" {
		return nil, exit.Errorf(exit.CodeStateTreeInvalid,
			"%s records no user_id; fix it (user: {user_id, name, email, recorded_at}), or remove it to record the user the API key belongs to", path)
	}
	return &id, nil
}

// writeIdentity writes identity.yaml in the documented shape.
func writeIdentity(stateDir string, id *Identity) error {
	b, _ := yaml.Marshal(struct {
		User *Identity `yaml:"user"`
	}{id})
	return WriteStateFile(IdentityPath(stateDir), b)
}

// ForgetIdentity removes identity.yaml, so that the next CheckIdentity
// records the user the key belongs to (login --force).
func ForgetIdentity(stateDir string) error {
	if err := os.Remove(IdentityPath(stateDir)); err != nil {
		return StateWriteError(IdentityPath(stateDir), err)
	}
	return nil
}

// CheckIdentity asks BlobHub who the key belongs to and compares it with
// identity.yaml, writing the file when it is missing. Our user id is what
// tells our own items from a person's. A recorded user is never replaced:
// another user is USER_IDENTITY_MISMATCH.
func CheckIdentity(ctx context.Context, c blobhub.Client, stateDir string) (*Identity, error) {
	u, err := c.Me(ctx)
	if err != nil {
		return nil, blobhub.AsExit(err, "users/me")
	}
	rec, err := LoadIdentity(stateDir)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.UserID != u.UserID {
			return nil, exit.Errorf(exit.CodeUserIdentityMismatch,
				"the API key belongs to %s but this state tree (%s) was recorded for %s; use the right profile or another --state-dir",
				u.UserID, stateDir, rec.UserID)
		}
		if rec.flat {
			// The earlier flat file, rewritten in the documented shape.
			if t, err := blobhub.ParseTime(rec.RecordedAt); err == nil {
				rec.RecordedAt = envelope.Stamp(t)
			} else if rec.RecordedAt == "" {
				rec.RecordedAt = now()
			}
			if err := writeIdentity(stateDir, rec); err != nil {
				return nil, err
			}
			rec.flat = false
		}
		return rec, nil
	}
	id := &Identity{UserID: u.UserID, Name: u.Name, Email: u.Email, RecordedAt: now()}
	return id, writeIdentity(stateDir, id)
}

// SectionState is section.yaml, in the shape the blobhub-worker
// documentation gives it (worker/session-agent-harness/filesystem): the
// section as configured, the attachment with its error {code, message}
// (both null while attached), and the session-event cursor
// events.last_processed_at, which `ls --runnable` moves as it reads the
// feed (feed.go). attached_at and the cursor are strings, "" when unset
// and never null: blobhub-worker refuses a section.yaml with a null there,
// and its section then never attaches. instance_id is bhw-run's
// own (stable per state tree); keys it does not know are kept.
type SectionState struct {
	Name       string            `yaml:"name"`
	JobType    string            `yaml:"job_type"`
	Session    SessionTuple      `yaml:"session"`
	Attachment SectionAttachment `yaml:"attachment"`
	Events     SectionEvents     `yaml:"events"`
	InstanceID string            `yaml:"instance_id"`
	Extra      map[string]any    `yaml:",inline"`
}

// SectionAttachment is section.yaml's attachment block.
type SectionAttachment struct {
	Status     string               `yaml:"status"` // attached | refused
	AttachedAt string               `yaml:"attached_at"`
	Error      envelope.ErrorRecord `yaml:"error"`
	Extra      map[string]any       `yaml:",inline"`
}

// SectionEvents is section.yaml's events block: the daemon's cursor, and
// beside it what `ls --runnable` needs to follow the feed without missing
// a change (feed.go, docs/operating.md).
type SectionEvents struct {
	LastProcessedAt string `yaml:"last_processed_at"`
	// Seen are the events handled in the overlap before the cursor.
	Seen []string `yaml:"seen,omitempty"`
	// Due are the threads to judge again without a change: alias → "" or
	// the time a hold ends.
	Due map[string]string `yaml:"due,omitempty"`
	// FullListingAt is the server's time of the last full listing.
	FullListingAt string `yaml:"full_listing_at,omitempty"`
	// ReadAt is the server's time of a read that saw everything up to the
	// cursor settle.
	ReadAt string `yaml:"read_at,omitempty"`
	// ReadSince is where the next read starts (its created_since): the
	// newest event's created_at, as the server spelled it, at or before
	// the feedOverlap before the cursor; "start" when the feed holds none
	// (the read starts at the feed's start); "" when not known yet.
	ReadSince string         `yaml:"read_since,omitempty"`
	Extra     map[string]any `yaml:",inline"`
}

// sectionPath is section.yaml in the section's folder.
func sectionPath(jobDir string) string { return filepath.Join(jobDir, "section.yaml") }

// ReadSection reads section.yaml without its lock (it is replaced by a
// rename, never written in place); a missing file is the zero state.
func ReadSection(jobDir string) (SectionState, error) {
	st, _, err := readSection(sectionPath(jobDir))
	return st, err
}

// readSection reads section.yaml at path, and its bytes (nil when missing).
func readSection(path string) (SectionState, []byte, error) {
	var st SectionState
	old, err := statefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil, nil
	}
	if err != nil {
		return st, nil, exit.Errorf(exit.CodeStateTreeInvalid, "cannot read %s: %v", path, err)
	}
	if err := envelope.DecodeYAML(old, &st, false); err != nil {
		return SectionState{}, nil, exit.Errorf(exit.CodeStateTreeInvalid, "%s %v; fix or remove it", path, err)
	}
	return st, old, nil
}

// UpdateSection changes section.yaml under section.lock.
func UpdateSection(ctx context.Context, jobDir string, sec Section, fn func(*SectionState)) (*SectionState, error) {
	var out SectionState
	err := lock.WithLock(ctx, filepath.Join(jobDir, "section.lock"), func() error {
		path := sectionPath(jobDir)
		st, old, err := readSection(path)
		if err != nil {
			return err
		}
		st.Name, st.JobType, st.Session = sec.Name, JobType, sec.Session
		if st.InstanceID == "" {
			st.InstanceID = "ins_" + randomHex(8)
		}
		if fn != nil {
			fn(&st)
		}
		b, _ := yaml.Marshal(&st)
		out = st
		if bytes.Equal(b, old) {
			return nil // unchanged: no write, no fsync
		}
		return WriteStateFile(path, b)
	})
	return &out, err
}

// NotMine is not_mine.yaml: aliases known not to be job threads. On disk
// (notMineFile, below) aliases is the list blobhub-worker reads, and why bhw-run
// cached each one is beside it, under reasons.
type NotMine struct {
	Aliases map[string]NotMineEntry
	// Extra keeps keys this version does not know.
	Extra map[string]any
}

// NotMineEntry says why an alias is cached.
type NotMineEntry struct {
	Reason    string `yaml:"reason"`
	UpdatedAt string `yaml:"updated_at"`
}

// ReasonArtifact is the not_mine.yaml reason of an artifact object; such an
// entry stays for good, any other is checked again after a day.
const ReasonArtifact = "artifact"

// notMineRecheck is how long a cached non-job other than an artifact is
// trusted before ls downloads it again.
const notMineRecheck = 24 * time.Hour

// AddNotMine caches an alias that is not a job thread.
func AddNotMine(ctx context.Context, jobDir, alias, reason string) error {
	return AddNotMines(ctx, jobDir, map[string]string{alias: reason})
}

// AddNotMines caches aliases (alias → reason) in one read-modify-write
// under section.lock.
func AddNotMines(ctx context.Context, jobDir string, reasons map[string]string) error {
	if len(reasons) == 0 {
		return nil
	}
	return lock.WithLock(ctx, filepath.Join(jobDir, "section.lock"), func() error {
		path := filepath.Join(jobDir, "not_mine.yaml")
		nm := LoadNotMine(jobDir)
		at := now()
		for alias, reason := range reasons {
			nm.Aliases[alias] = NotMineEntry{Reason: reason, UpdatedAt: at}
		}
		b, _ := yaml.Marshal(&nm)
		return WriteStateFile(path, b)
	})
}

// LoadNotMine reads not_mine.yaml; missing or unreadable is empty (it is
// only a cache).
func LoadNotMine(jobDir string) NotMine {
	var nm NotMine
	if b, err := statefile.Read(filepath.Join(jobDir, "not_mine.yaml")); err == nil {
		_ = yaml.Unmarshal(b, &nm)
	}
	if nm.Aliases == nil {
		nm.Aliases = map[string]NotMineEntry{}
	}
	return nm
}

// cached reports whether the entry still stands at t: an artifact for
// good, anything else for notMineRecheck.
func (e NotMineEntry) Cached(t time.Time) bool {
	if e.Reason == ReasonArtifact {
		return true
	}
	at, err := blobhub.ParseTime(e.UpdatedAt)
	return err == nil && t.Sub(at) < notMineRecheck
}

// notMineFile is not_mine.yaml as it is on disk: aliases, the list
// blobhub-worker's section reads (every alias in it is skipped), and
// reasons, bhw-run's own (why and when it cached each alias, which decides
// when ls looks again), which the worker ignores and drops when it writes
// the file. An alias in the list with no reason (the worker cached it) is
// checked again by ls, as a cache entry past its day is.
type notMineFile struct {
	Aliases []string                `yaml:"aliases"`
	Reasons map[string]NotMineEntry `yaml:"reasons,omitempty"`
	Extra   map[string]any          `yaml:",inline"`
}

// MarshalYAML writes the worker's list, sorted, and the reasons beside it.
func (nm NotMine) MarshalYAML() (any, error) {
	f := notMineFile{Aliases: make([]string, 0, len(nm.Aliases)), Reasons: nm.Aliases, Extra: nm.Extra}
	for alias := range nm.Aliases {
		f.Aliases = append(f.Aliases, alias)
	}
	slices.Sort(f.Aliases)
	return f, nil
}

// UnmarshalYAML reads the worker's list with bhw-run's reasons, or the
// mapping alias → reason an earlier bhw-run wrote under aliases.
func (nm *NotMine) UnmarshalYAML(n *yaml.Node) error {
	var f struct {
		Aliases yaml.Node               `yaml:"aliases"`
		Reasons map[string]NotMineEntry `yaml:"reasons"`
		Extra   map[string]any          `yaml:",inline"`
	}
	if err := n.Decode(&f); err != nil {
		return err
	}
	nm.Aliases, nm.Extra = map[string]NotMineEntry{}, f.Extra
	switch f.Aliases.Kind {
	case 0: // no aliases key
	case yaml.SequenceNode:
		var list []string
		if err := f.Aliases.Decode(&list); err != nil {
			return err
		}
		for _, alias := range list {
			nm.Aliases[alias] = f.Reasons[alias]
		}
	case yaml.MappingNode:
		if err := f.Aliases.Decode(&nm.Aliases); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: aliases is neither a list nor a mapping", f.Aliases.Line)
	}
	return nil
}

// WorkerAlias is the session's worker object: the affinity lock and the
// activity thread thread_failed items go to.
const WorkerAlias = "worker"

// EnsureWorker makes sure the section's worker object is ours (one user
// works a session; thread_failed items go to it):
// absent → upload it, then read it back (two first runs may race).
func (s *Setup) EnsureWorker(ctx context.Context, c blobhub.Client, userID string) (*SectionState, error) {
	jobDir, sec := s.JobDir, s.Section
	st, err := UpdateSection(ctx, jobDir, sec, nil)
	if err != nil {
		return nil, err
	}
	refuse := func(code, format string, args ...any) error {
		e := exit.Errorf(code, format, args...)
		_, _ = UpdateSection(ctx, jobDir, sec, func(s *SectionState) {
			s.Attachment.Status = "refused"
			s.Attachment.Error.Set(e.Code, e.Message)
		})
		return e
	}
	for attempt := 0; attempt < 2; attempt++ {
		obj, err := c.Download(ctx, WorkerAlias)
		if errors.Is(err, blobhub.ErrNotFound) {
			if err := c.Upload(ctx, WorkerAlias, workerValue(userID, st.InstanceID, s.Version)); err != nil {
				return nil, blobhub.AsExit(err, "worker")
			}
			continue
		}
		if err != nil {
			return nil, blobhub.AsExit(err, "worker")
		}
		owner, ok := workerUserID(obj.Value)
		if !ok {
			return nil, refuse(exit.CodeWorkerObjectMalformed, "the object \"worker\" of session %s is not a worker object (a thread whose metadata.user.user_id names the user who works the session; it holds %s); delete it, and the next run makes it again, or restore it", sec.Session.SessionID, workerShape(obj.Value))
		}
		if owner != userID {
			return nil, refuse(exit.CodeSessionOwnedByOther, "session %s is worked by user %s, not %s; use that user's key or another session", sec.Session.SessionID, owner, userID)
		}
		if attempt == 0 && !seenLately(obj.Value) {
			// Refresh last_seen_at at most once per run, and only when it
			// is older than workerSeenEvery: a run a minute would otherwise
			// upload the worker object every minute.
			if nv, err := setJSON(obj.Value, []string{"thread", "metadata", "instance", "last_seen_at"}, now()); err == nil {
				_ = c.Upload(ctx, WorkerAlias, nv)
			}
		}
		if _, _, failed := st.Attachment.Error.Get(); st.Attachment.Status == "attached" && st.Attachment.AttachedAt != "" && !failed {
			return st, nil // section.yaml says so already: no second read-modify-write
		}
		return UpdateSection(ctx, jobDir, sec, func(s *SectionState) {
			if s.Attachment.Status != "attached" || s.Attachment.AttachedAt == "" {
				s.Attachment.AttachedAt = now()
			}
			s.Attachment.Status = "attached"
			s.Attachment.Error.Clear()
		})
	}
	return nil, refuse(exit.CodeWorkerObjectMalformed, "the session's worker object could not be created; check the session")
}

// workerValue is the worker object in its documented shape
// (worker/session-agent-harness/worker-object): a thread whose
// metadata.user.user_id is the affinity lock, and an informational
// instance block.
func workerValue(userID, instanceID, version string) json.RawMessage {
	at := now()
	b, _ := json.Marshal(map[string]any{"type": "thread", "thread": map[string]any{
		"attributes": map[string]any{"name": "worker", "description": "BlobHub worker activity log"},
		"metadata": map[string]any{
			"user": map[string]any{"user_id": userID},
			"instance": map[string]any{"instance_id": instanceID, "version": version,
				"started_at": at, "last_seen_at": at, "status": "attached"},
		}}})
	return b
}

func setJSON(raw json.RawMessage, path []string, v any) (json.RawMessage, error) {
	b, _ := json.Marshal(v)
	return envelope.SetPath(raw, path, b)
}

// now stamps a local file (and the worker object, whose documented
// shape uses the same form): see envelope.StampLayout.
func now() string { return envelope.Stamp(time.Now()) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// workerSeenEvery is how stale the worker object's last_seen_at may get
// before a run that acts refreshes it (one upload).
const workerSeenEvery = 5 * time.Minute

// seenLately reports whether the worker object's last_seen_at is less than
// workerSeenEvery old (and not ahead of this clock by more than that).
func seenLately(value json.RawMessage) bool {
	at, err := time.Parse(time.RFC3339Nano, lastSeenAt(value))
	if err != nil {
		return false
	}
	age := time.Since(at)
	return age < workerSeenEvery && age > -workerSeenEvery
}

// lastSeenAt is the worker object's thread.metadata.instance.last_seen_at
// ("" when it has none).
func lastSeenAt(value json.RawMessage) string {
	var w struct {
		Thread struct {
			Metadata struct {
				Instance struct {
					LastSeenAt string `json:"last_seen_at"`
				} `json:"instance"`
			} `json:"metadata"`
		} `json:"thread"`
	}
	_ = json.Unmarshal(value, &w)
	return w.Thread.Metadata.Instance.LastSeenAt
}

// WorkerOwner is the user the session's worker object names as the one
// that works the session; "" when it cannot be read or is not a worker
// object.
func WorkerOwner(ctx context.Context, c blobhub.Client) string {
	obj, err := c.Download(ctx, WorkerAlias)
	if err != nil {
		return ""
	}
	owner, _ := workerUserID(obj.Value)
	return owner
}

// workerUserID is the user a session's worker object names as the one that
// works the session; ok is false when the object is not a worker object: a
// thread whose metadata.user.user_id is a non-empty string (a job envelope
// written over it has none).
func workerUserID(value json.RawMessage) (userID string, ok bool) {
	var w struct {
		Type   string `json:"type"`
		Thread *struct {
			Metadata struct {
				User *struct {
					UserID *string `json:"user_id"`
				} `json:"user"`
			} `json:"metadata"`
		} `json:"thread"`
	}
	if json.Unmarshal(value, &w) != nil || w.Type != "thread" || w.Thread == nil ||
		w.Thread.Metadata.User == nil || w.Thread.Metadata.User.UserID == nil || *w.Thread.Metadata.User.UserID == "" {
		return "", false
	}
	return *w.Thread.Metadata.User.UserID, true
}

// workerShape says, for a message, what a malformed worker object holds
// instead of a worker's user.
func workerShape(value json.RawMessage) string {
	env, err := envelope.Parse(value)
	switch {
	case err != nil:
		return "no JSON object"
	case env.IsJob():
		return "a job thread's envelope"
	case env.Type != "thread":
		return fmt.Sprintf("an object of type %q", env.Type)
	}
	return "a thread without a user"
}
