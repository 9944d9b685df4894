package run

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

// journal is emissions.jsonl, the record that makes posting exactly-once
// (docs/state.md): an emission is appended before it is posted and a
// "posted" record follows once the server has it. No fsync per record (a
// kill -9 of bhw-run leaves the page cache intact); Sync at turn end and exit.
//
// Appends only, until a run ends with nothing open: compact then replaces
// the file, atomically, by the few records a later reader still needs (the
// highest counter, the open prompt's posted record and its resolution), so
// an idle run and ls read a handful of lines whatever the thread's age.
// Every record kept is one an earlier bhw-run reads the same way.
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
	secrets *redact.Secrets
	// dropped are the emissions given up on (drop), for compact to keep a
	// resolution closed the way it was.
	dropped map[string]bool
	// records counts the file's records, read and appended, and size their
	// bytes; compact rewrites the file only when it holds more than it
	// would keep and has grown to compactAtBytes.
	records int
	size    int64
	// calls are the tool calls journaled since the last turn_end that have
	// no tool_result yet, in journal order: what a turn cut short (a kill,
	// a crash, a signal) left without a result (closeOpenCalls).
	calls []unresultedCall
}

// unresultedCall is a tool_call the journal holds no result for.
type unresultedCall struct{ InvocationID, Name string }

// compactThreshold is how long the journal grows before compaction
// rewrites it. Every rewrite replaces the file (a new inode, a rename, the
// old file freed): on a disk that is one of the dearest steps of a run, so
// it is done once every few turns rather than after each one. What an idle
// run or ls reads of a thread's confirmed records stays under it (a
// fraction of a millisecond to decode), however long the thread has lived.
const compactThreshold = 16 << 10

// compactAtBytes is compactThreshold, a variable for the tests, which
// compact after every run to exercise every compaction step.
var compactAtBytes int64 = compactThreshold

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

// kindCounter marks the emission compact writes to carry the highest
// counter used: it names no item and is closed by a dropped record, so a
// reader (this version or an earlier one) only learns the counter from it.
const kindCounter = "counter"

// openJournalFile is the one way the journal file is opened: read-only to
// read it, or to append (created when missing); never through a link, and
// only as a regular file (statefile.Open).
func openJournalFile(path string, appendTo bool) (*os.File, error) {
	if !appendTo {
		return statefile.Open(path, os.O_RDONLY, 0)
	}
	return statefile.Open(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// openJournal reads the journal at path, collecting unconfirmed emissions and
// the highest counter used with nonce, so an emission id is never reused even
// when thread.yaml lags behind the journal.
func openJournal(path, nonce string) (*journal, error) {
	j, err := readJournal(path, nonce)
	if err != nil {
		return nil, err
	}
	j.f, err = openJournalFile(path, true)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// readJournal reads the journal without opening it for writing (ls reads
// it under no lock and must not create files); a write to it fails.
func readJournal(path, nonce string) (*journal, error) {
	j := &journal{path: path, nonce: nonce, byID: map[string]*emission{}, posted: map[string]postedInfo{},
		resolutions: map[string]string{}, dropped: map[string]bool{}}
	f, err := openJournalFile(path, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		r := bufio.NewReader(f)
		for {
			line, rerr := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				j.records++
				j.size += int64(len(line))
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
		j.noteCall(e)
		if _, done := j.posted[e.ID]; done {
			return
		}
		if _, dup := j.byID[e.ID]; !dup {
			j.byID[e.ID] = e
			j.open = append(j.open, e)
		}
	case rec.Posted != "":
		j.posted[rec.Posted] = postedInfo{rec.ItemID, rec.CreatedAt}
		delete(j.dropped, rec.Posted)
		j.close(rec.Posted)
	case rec.Dropped != "":
		j.dropped[rec.Dropped] = true
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
		// emission_id is what a run looks a lost post up by; post_id is
		// blobhub-worker's key for the same, stamped so the thread's items
		// carry it whoever posted them (docs/wire.md).
		it.Meta["emission_id"] = e.ID
		if _, ok := it.Meta["post_id"]; !ok {
			it.Meta["post_id"] = agent.NewPostID()
		}
	}
	if err := j.write(journalRecord{Emission: e}); err != nil {
		return nil, err
	}
	j.byID[e.ID] = e
	j.open = append(j.open, e)
	j.noteResolution(e)
	j.noteCall(e)
	return e, nil
}

// noteCall follows which tool calls still wait for their result: a
// tool_call opens one, its tool_result closes it, and a turn_end closes
// whatever its turn left (that turn is over; it never gets another).
func (j *journal) noteCall(e *emission) {
	switch e.Item.Type() {
	case agent.ItemTurnEnd:
		j.calls = nil
	case agent.ItemToolCall, agent.ItemToolResult:
		tool, _ := e.Item.Meta["tool"].(map[string]any)
		id, _ := tool["invocation_id"].(string)
		j.calls = slices.DeleteFunc(j.calls, func(c unresultedCall) bool { return c.InvocationID == id })
		if e.Item.Type() == agent.ItemToolCall {
			name, _ := tool["name"].(string)
			j.calls = append(j.calls, unresultedCall{InvocationID: id, Name: name})
		}
	}
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

// settled reports whether the emission is posted or dropped: nothing is
// left to send of it.
func (j *journal) settled(id string) bool {
	_, posted := j.posted[id]
	return posted || j.dropped[id]
}

// drop gives up on an emission the server refused for good.
func (j *journal) drop(id string) error {
	j.close(id)
	j.dropped[id] = true
	return j.write(journalRecord{Dropped: id})
}

// pending lists unconfirmed emissions in journal order.
func (j *journal) pending() []*emission { return append([]*emission(nil), j.open...) }

func (j *journal) write(rec journalRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if e := rec.Emission; e != nil && e.Kind != kindArtifact && j.secrets.In(b) {
		// Redacted in place: the caller posts this emission. The record's
		// encoding holds the item's text and metadata as redactItem
		// encodes them, so an item with no secret in it is encoded once.
		// An artifact intent is bhw-run's own record of a path to upload,
		// never posted.
		e.Item = redactItem(j.secrets, e.Item)
		if b, err = json.Marshal(rec); err != nil {
			return err
		}
	}
	if setup.TestHookStateWrite != nil {
		err = setup.TestHookStateWrite(j.path)
	}
	if err == nil {
		_, err = j.f.Write(append(b, '\n'))
	}
	if err == nil {
		j.records++
		j.size += int64(len(b)) + 1
	}
	if testHookAfterJournal != nil {
		testHookAfterJournal()
	}
	if err != nil {
		return setup.StateWriteError(j.path, err)
	}
	return nil
}

// testHookAfterJournal, when set by a test, runs after every journal write
// (an emission appended, confirmed or dropped) and on both sides of a
// compaction's rewrite: the kill -9 tests end the process there. Always nil
// in production.
var testHookAfterJournal func()

// compact replaces the journal, once nothing in it is open, by the records
// a later run still needs, so what a run reads stays a few lines however
// long the thread has lived. promptEmission and promptItem name the prompt
// thread.yaml records (empty without one); the caller has saved thread.yaml
// first, so the prompt is the one on disk. Kept, in this order:
//
//   - the highest counter used with the nonce, as a closed emission of kind
//     counter (unless a kept emission carries it), so no id is reused;
//   - the prompt's posted record, from which a run whose thread.yaml lacks
//     the prompt's item id takes it (restorePrompt);
//   - the prompt's resolution, if one is journaled, and how it was closed,
//     so the prompt is never resolved twice (resolution).
//
// Nothing else can matter: every other emission is confirmed or dropped,
// and an artifact intent is open until its announcement is journaled. The
// file is replaced by statefile.WriteAtomic (temp file, fsync, rename,
// fsync of the folder): a kill before the rename leaves the old journal,
// and a temp file the next compaction removes; after it, the new one. It
// reports whether it rewrote the file; the journal stays open for appends
// (on the new file) either way.
func (j *journal) compact(promptEmission, promptItem string) (bool, error) {
	if !j.shrinks(promptEmission, promptItem) {
		return false, nil
	}
	keep := j.kept(promptEmission, promptItem)
	var buf bytes.Buffer
	for _, rec := range keep {
		b, err := json.Marshal(rec)
		if err != nil {
			return false, err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	removeJournalTemps(j.path)
	// A kill here finds thread.yaml saved and the journal whole, as every
	// run before compaction left them.
	if testHookAfterJournal != nil {
		testHookAfterJournal()
	}
	if err := statefile.WriteAtomic(j.path, buf.Bytes(), 0o600); err != nil {
		return false, err
	}
	j.records, j.size = len(keep), int64(buf.Len())
	if testHookAfterJournal != nil {
		testHookAfterJournal()
	}
	if j.f == nil {
		return true, nil
	}
	// The open descriptor still points at the file the rename replaced:
	// an append there would be lost.
	_ = j.f.Close()
	f, err := openJournalFile(j.path, true)
	j.f = f
	return true, err
}

// shrinks reports whether compact would rewrite the journal: nothing is
// open (no emission unconfirmed, no tool call without its result), the
// file has grown to compactAtBytes, and it holds more records than compact
// keeps.
func (j *journal) shrinks(promptEmission, promptItem string) bool {
	return len(j.open) == 0 && len(j.calls) == 0 && j.size >= compactAtBytes && j.records > len(j.kept(promptEmission, promptItem))
}

// kept is what compact keeps (see there).
func (j *journal) kept(promptEmission, promptItem string) []journalRecord {
	var out []journalRecord
	top := ""
	if j.counter > 0 {
		top = fmt.Sprintf("%s:%d", j.nonce, j.counter)
	}
	resID := ""
	if promptItem != "" {
		resID = j.resolutions[promptItem]
	}
	// At is when compact kept the record: every emission record has one.
	at := now()
	if top != "" && top != resID {
		out = append(out, journalRecord{Emission: &emission{ID: top, Kind: kindCounter, At: at}}, journalRecord{Dropped: top})
	}
	if info, ok := j.posted[promptEmission]; ok && promptEmission != "" {
		out = append(out, journalRecord{Posted: promptEmission, ItemID: info.ItemID, CreatedAt: info.CreatedAt})
	}
	if resID != "" {
		// The resolution's item is never posted again: its type and prompt
		// are all a reader needs.
		res := &emission{ID: resID, At: at, Item: agent.Item{Meta: map[string]any{
			"type": agent.ItemPendingPromptResolved, "prompt_item_id": promptItem}}}
		out = append(out, journalRecord{Emission: res})
		if info, ok := j.posted[resID]; ok {
			out = append(out, journalRecord{Posted: resID, ItemID: info.ItemID, CreatedAt: info.CreatedAt})
		} else {
			out = append(out, journalRecord{Dropped: resID})
		}
	}
	return out
}

// removeJournalTemps removes the temp files of compactions a kill
// interrupted (statefile.WriteAtomic names them .<name>.tmp-*). Only the lock
// holder compacts, so none of them is being written.
func removeJournalTemps(path string) {
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	for _, t := range temps {
		_ = os.Remove(t)
	}
}

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

// redactItem is it with every secret replaced in its text and in every
// string (and key) of its metadata; metadata without secrets is kept as it
// is.
func redactItem(s *redact.Secrets, it agent.Item) agent.Item {
	it.Brief = s.String(it.Brief)
	it.Meta = s.Meta(it.Meta)
	return it
}
