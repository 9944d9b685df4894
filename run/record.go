package run

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
)

// record is a thread's local state: thread.yaml and its emission journal
// (docs/state.md), read together, saved in one order (the journal before
// the record that names its emissions) and compacted together, and
// artifacts.yaml, the record of what was published. It is the only writer
// of all three; the activation and its poster change t and j under mu and
// ask the record to save.
type record struct {
	dir   string // the thread's folder in the state tree
	alias string
	log   *slog.Logger

	// mu guards t, j and published: the adapter's reading goroutine emits
	// while the watchdog and the signal handler look on. It also guards the
	// activation's agentTurn.stop, which the same goroutines reach.
	mu    sync.Mutex
	t     *envelope.Thread
	saved []byte // thread.yaml as last read or written, to skip idle writes
	j     *journal
	// published is artifacts.yaml once a run that publishes has read it
	// (publishedArtifacts).
	published map[string]envelope.PublishedArtifact
}

// newRecord is the record of alias in dir, not read yet (load, peek).
func newRecord(dir, alias string, log *slog.Logger) *record {
	return &record{dir: dir, alias: alias, log: log}
}

// load reads thread.yaml and opens the journal for appends, redacting
// secrets from what it journals.
func (rec *record) load(secrets *redact.Secrets) error {
	path := filepath.Join(rec.dir, "thread.yaml")
	t, raw, err := envelope.ReadThread(path)
	if err != nil {
		return exit.Errorf(exit.CodeStateTreeInvalid, "%v", err)
	}
	if t == nil {
		t = &envelope.Thread{Alias: rec.alias}
	} else if t.Alias != rec.alias {
		return exit.Errorf(exit.CodeStateTreeInvalid, "%s records alias %q, not %q (a case-insensitive file system?); refusing to mix two threads", path, t.Alias, rec.alias)
	}
	// What the disk holds, so a save that would write the same bytes is
	// skipped (an idle run writes nothing). The file's own bytes, not t
	// encoded again: a thread.yaml bhw-run wrote is its encoding byte for
	// byte, and one written otherwise (by an older version, by hand) is
	// rewritten once, by the run's first save.
	rec.saved = raw
	if t.EmissionNonce == "" {
		t.EmissionNonce = randomHex(8)
	}
	rec.t = t
	rec.j, err = openJournal(filepath.Join(rec.dir, "emissions.jsonl"), t.EmissionNonce)
	if err != nil {
		return exit.Errorf(exit.CodeStateTreeInvalid, "cannot open the emission journal: %v", err)
	}
	rec.j.secrets = secrets
	rec.restorePrompt()
	return nil
}

// peek is load without a lock or a write: thread.yaml (missing = empty)
// and the journal, read only. A thread.yaml recording another alias is
// judged as no record, as a run would refuse it.
func (rec *record) peek() error {
	t, err := envelope.LoadThread(filepath.Join(rec.dir, "thread.yaml"))
	if err != nil {
		return exit.Errorf(exit.CodeStateTreeInvalid, "%v", err)
	}
	if t == nil || t.Alias != rec.alias {
		t = &envelope.Thread{Alias: rec.alias}
	}
	rec.t = t
	rec.j, err = readJournal(filepath.Join(rec.dir, "emissions.jsonl"), t.EmissionNonce)
	if err != nil {
		return exit.Errorf(exit.CodeStateTreeInvalid, "cannot read the emission journal of %q: %v", rec.alias, err)
	}
	// The journal is not open for writing: a prompt that never reached
	// it is only counted as unfinished work, as a run would journal it.
	rec.restorePrompt()
	return nil
}

// restorePrompt repairs the one gap between thread.yaml and the journal: a
// prompt recorded in thread.yaml whose emission never reached the journal
// (a kill between the two writes) is journaled again from the record.
func (rec *record) restorePrompt() {
	p := rec.t.Prompt
	if p == nil || p.ItemID != "" || p.EmissionID == "" {
		return
	}
	if info, ok := rec.j.posted[p.EmissionID]; ok {
		p.ItemID, p.CreatedAt = info.ItemID, info.CreatedAt
		return
	}
	if _, open := rec.j.byID[p.EmissionID]; open {
		return
	}
	it := promptItem(p)
	it.Meta["emission_id"] = p.EmissionID
	jr := journalRecord{Emission: &emission{ID: p.EmissionID, Target: rec.alias, Item: it}}
	// On ls's read-only journal the write fails and only the in-memory
	// record counts it as unfinished work, as a run would journal it.
	_ = rec.j.write(jr)
	rec.j.apply(mustJSON(jr))
}

// close compacts the journal when it may (compactJournal) and closes it.
func (rec *record) close() {
	if rec.j != nil {
		rec.compactJournal()
		_ = rec.j.closeFile()
	}
}

// compactJournal shrinks the journal at the end of a run that left nothing
// open (journal.compact), so the next runs and ls read a few lines. Only
// when thread.yaml on disk is what this run holds: the records kept are
// chosen by the prompt it names, and a thread.yaml this run failed to write
// may name another one. A failure only leaves the journal long: the next
// run compacts it. A run that ends through wrapUp has compacted already
// (saveAndCompact); this is for the runs that end before it.
func (rec *record) compactJournal() {
	if !rec.shrinks() {
		return // the idle path: nothing appended since the last compaction
	}
	if b, err := yaml.Marshal(rec.t); err != nil || !bytes.Equal(b, rec.saved) {
		return
	}
	rec.compactLocked()
}

// saveAndCompact is the run's last save, and the compaction after it: the
// save has just made thread.yaml on disk what the run holds, so the
// compaction needs no second encoding of it to know.
func (rec *record) saveAndCompact() error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := rec.saveLocked(); err != nil {
		return err
	}
	if rec.shrinks() {
		rec.compactLocked()
	}
	return nil
}

// shrinks reports whether compaction would rewrite an open journal.
func (rec *record) shrinks() bool {
	if rec.j == nil || rec.j.f == nil {
		return false
	}
	emissionID, itemID := rec.promptIDs()
	return rec.j.shrinks(emissionID, itemID)
}

func (rec *record) compactLocked() {
	emissionID, itemID := rec.promptIDs()
	if _, err := rec.j.compact(emissionID, itemID); err != nil {
		rec.log.Warn("could not compact the emission journal; the next run does", "error", err)
	}
}

// promptIDs are the emission and item of the open prompt, if any: the
// records compaction keeps depend on them.
func (rec *record) promptIDs() (emissionID, itemID string) {
	if p := rec.t.Prompt; p != nil {
		return p.EmissionID, p.ItemID
	}
	return "", ""
}

// save writes thread.yaml atomically; the journal is synced first so the
// record never runs ahead of the emissions it names.
func (rec *record) save() error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.saveLocked()
}

func (rec *record) saveLocked() error {
	b, err := yaml.Marshal(rec.t)
	if err != nil {
		return err
	}
	if bytes.Equal(b, rec.saved) {
		return nil
	}
	if err := setup.WriteStateFile(filepath.Join(rec.dir, "thread.yaml"), b); err != nil {
		return err
	}
	rec.saved = b
	return nil
}

// publishedArtifacts is artifacts.yaml (envelope.Published), read once per
// run and only by a run that publishes: the idle path never reads it. The
// entries a thread.yaml of an earlier version holds count too; the first
// write of artifacts.yaml takes them over (written before thread.yaml drops
// them, so no kill loses one). The caller holds rec.mu.
func (rec *record) publishedArtifacts() (map[string]envelope.PublishedArtifact, error) {
	if rec.published != nil {
		return rec.published, nil
	}
	p, err := envelope.LoadPublished(filepath.Join(rec.dir, publishedFile))
	if err != nil {
		return nil, exit.Errorf(exit.CodeStateTreeInvalid, "the published artifacts of %q cannot be read: %v", rec.alias, err)
	}
	for path, pa := range rec.t.Artifacts.Published {
		if _, ok := p.Published[path]; !ok {
			p.Published[path] = pa
		}
	}
	rec.published = p.Published
	return rec.published, nil
}

// recordPublished records one upload in artifacts.yaml, atomically, before
// its announcement is journaled (a replay finds the announcement and knows
// the record is done). The caller holds rec.mu.
func (rec *record) recordPublished(path string, pa envelope.PublishedArtifact) error {
	pub, err := rec.publishedArtifacts()
	if err != nil {
		return err
	}
	pub[path] = pa
	return rec.writePublished()
}

// writePublished writes artifacts.yaml, then drops the entries an earlier
// thread.yaml held, which it now holds too. The caller holds rec.mu.
func (rec *record) writePublished() error {
	b, err := yaml.Marshal(&envelope.Published{Published: rec.published})
	if err != nil {
		return err
	}
	if err := setup.WriteStateFile(filepath.Join(rec.dir, publishedFile), b); err != nil {
		return err
	}
	if len(rec.t.Artifacts.Published) == 0 {
		return nil
	}
	rec.t.Artifacts.Published = nil
	return rec.saveLocked()
}

// publishedFile is artifacts.yaml in the thread's folder.
const publishedFile = "artifacts.yaml"
