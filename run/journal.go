package run

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/blobhub/bhw-run/agent"
)

// journal is emissions.jsonl, the append-only record that makes posting
// exactly-once (docs/state.md): an emission is appended before it is posted and
// a "posted" record follows once the server has it. No fsync per record (a
// kill -9 of bhw-run leaves the page cache intact); Sync at turn end and exit.
type journal struct {
	f       *os.File
	path    string
	nonce   string
	counter int64
	// open holds emissions not yet confirmed, in journal order.
	open []*emission
	byID map[string]*emission
	// posted maps confirmed emission ids to the server's item.
	posted map[string]postedInfo
	// resolutions maps a prompt's item id to the emission id of its
	// pending_prompt_resolved, so a prompt is resolved once (resolution).
	resolutions map[string]string
	// secrets are redacted from every item as it is journaled (write), so
	// what is posted is what the journal holds.
	secrets *Secrets
}

type postedInfo struct{ ItemID, CreatedAt string }

// emission is one item bound for a thread.
type emission struct {
	ID     string     `json:"emission_id"`
	Target string     `json:"target"` // the thread alias, or "worker" for thread_failed
	Item   agent.Item `json:"item"`
	// Kind "artifact" records an artifact upload intent instead of an item.
	Kind string `json:"kind,omitempty"`
	// At is when it was journaled, to bound the search for it on a thread
	// that has no cursor of ours (worker).
	At string `json:"at,omitempty"`
}

type journalRecord struct {
	Emission  *emission `json:"emission,omitempty"`
	Posted    string    `json:"posted,omitempty"`
	Dropped   string    `json:"dropped,omitempty"`
	ItemID    string    `json:"item_id,omitempty"`
	CreatedAt string    `json:"created_at,omitempty"`
}

// openJournal reads the journal at path, collecting unconfirmed emissions and
// the highest counter used with nonce, so an emission id is never reused even
// when thread.yaml lags behind the journal.
func openJournal(path, nonce string) (*journal, error) {
	j, err := readJournal(path, nonce)
	if err != nil {
		return nil, err
	}
	j.f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// readJournal reads the journal without opening it for writing (ls reads
// it under no lock and must not create files); a write to it fails.
func readJournal(path, nonce string) (*journal, error) {
	j := &journal{path: path, nonce: nonce, byID: map[string]*emission{}, posted: map[string]postedInfo{}, resolutions: map[string]string{}}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		r := bufio.NewReader(f)
		for {
			line, rerr := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				j.apply(line)
			}
			if rerr != nil {
				break
			}
		}
		f.Close()
	}
	return j, nil
}

func (j *journal) apply(line []byte) {
	var rec journalRecord
	if json.Unmarshal(line, &rec) != nil {
		// A torn last line from a crash mid-write: the emission it held was
		// never posted (posting follows the append), so dropping it is safe.
		return
	}
	switch {
	case rec.Emission != nil:
		e := rec.Emission
		if n, ok := counterOf(e.ID, j.nonce); ok && n > j.counter {
			j.counter = n
		}
		j.noteResolution(e)
		if _, done := j.posted[e.ID]; done {
			return
		}
		if _, dup := j.byID[e.ID]; !dup {
			j.byID[e.ID] = e
			j.open = append(j.open, e)
		}
	case rec.Posted != "":
		j.posted[rec.Posted] = postedInfo{rec.ItemID, rec.CreatedAt}
		j.close(rec.Posted)
	case rec.Dropped != "":
		j.close(rec.Dropped)
	}
}

func counterOf(id, nonce string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, nonce+":")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

func (j *journal) close(id string) {
	if _, ok := j.byID[id]; !ok {
		return
	}
	delete(j.byID, id)
	for i, e := range j.open {
		if e.ID == id {
			j.open = append(j.open[:i], j.open[i+1:]...)
			break
		}
	}
}

// nextID reserves the next emission id, for a record that must name its
// emission before the emission is journaled (the prompt).
func (j *journal) nextID() string {
	j.counter++
	return fmt.Sprintf("%s:%d", j.nonce, j.counter)
}

// add journals a new emission for target and returns it.
func (j *journal) add(target string, it agent.Item, kind string) (*emission, error) {
	return j.addID(j.nextID(), target, it, kind)
}

// addID journals an emission under a reserved id.
func (j *journal) addID(id, target string, it agent.Item, kind string) (*emission, error) {
	e := &emission{ID: id, Target: target, Item: it, Kind: kind, At: now()}
	if it.Meta != nil {
		it.Meta["emission_id"] = e.ID
	}
	if err := j.write(journalRecord{Emission: e}); err != nil {
		return nil, err
	}
	j.byID[e.ID] = e
	j.open = append(j.open, e)
	j.noteResolution(e)
	return e, nil
}

// noteResolution remembers which prompt a pending_prompt_resolved resolves.
func (j *journal) noteResolution(e *emission) {
	if e.Item.Type() != agent.ItemPendingPromptResolved {
		return
	}
	if id, _ := e.Item.Meta["prompt_item_id"].(string); id != "" {
		j.resolutions[id] = e.ID
	}
}

// resolution journals it, the pending_prompt_resolved of the prompt posted
// as promptItemID, unless the journal already holds one: a run killed after
// journaling it, before thread.yaml dropped the prompt, resolves the prompt
// again. The journaled emission is returned then (nil once it is posted), so
// one prompt never gets two resolutions.
func (j *journal) resolution(target, promptItemID string, it agent.Item) (*emission, error) {
	if id, ok := j.resolutions[promptItemID]; ok && promptItemID != "" {
		return j.byID[id], nil
	}
	return j.add(target, it, "")
}

// confirm records that the server holds the emission.
func (j *journal) confirm(id, itemID, createdAt string) error {
	j.close(id)
	j.posted[id] = postedInfo{itemID, createdAt}
	return j.write(journalRecord{Posted: id, ItemID: itemID, CreatedAt: createdAt})
}

// drop gives up on an emission the server refused for good.
func (j *journal) drop(id string) error {
	j.close(id)
	return j.write(journalRecord{Dropped: id})
}

// pending lists unconfirmed emissions in journal order.
func (j *journal) pending() []*emission { return append([]*emission(nil), j.open...) }

func (j *journal) write(rec journalRecord) error {
	if e := rec.Emission; e != nil && e.Kind != kindArtifact {
		// In place: the caller posts this emission. An artifact intent is
		// bhw-run's own record of a path to upload, never posted.
		e.Item = j.secrets.Item(e.Item)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = j.f.Write(append(b, '\n'))
	if testHookAfterJournal != nil {
		testHookAfterJournal()
	}
	return err
}

// testHookAfterJournal, when set by a test, runs after every journal write
// (an emission appended, confirmed or dropped): the kill -9 tests end the
// process there. Always nil in production.
var testHookAfterJournal func()

func (j *journal) sync() error { return j.f.Sync() }

func (j *journal) closeFile() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	return err
}
