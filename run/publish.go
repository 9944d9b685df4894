package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/outbox"
)

// Publishing in blobhub-worker's form, artifacts {prefix, outbox}: at the
// end of every turn, before its turn_end, every file of the outbox is
// uploaded as a session file at prefix + its path (the alias rules below),
// and the turn posts artifacts_published {aliases, skipped, counts, error}
// with the files as file blocks, ten to an item (part {index, total} when
// there are several). Nothing is diffed: the folder's files are the set,
// and a file published again overwrites its alias in place.
//
// Exactly once (docs/state.md): a publish intent is journaled before the
// first upload; after the last, the items, then turn_end are journaled
// and the intent closed, in one step; then they are posted. A run killed
// before turn_end was journaled finds the intent open and no turn_end
// after it: the turn did not end, so it drops the intent and whatever
// items of it were journaled (none was posted: posting comes after the
// step), and the turn, run again, publishes (an upload is an overwrite of
// the same alias, so doing it twice changes nothing). One killed after
// turn_end was journaled closes the intent and posts the items.

// kindPublish marks a journal emission that is a publish intent, not an
// item.
const kindPublish = "publish"

// Bounds of blobhub-worker's artifacts_published.
const (
	publishReportCap     = 100 // aliases and skipped listed in the item
	publishBlocksPerItem = 10  // file blocks per item
	publishMaxReported   = 256 // bytes of one reported path or error, encoded
	aliasMaxLength       = 256 // BlobHub's longest alias
)

// publishResult is what one publication did.
type publishResult struct {
	aliases []string
	skipped []map[string]string
	files   []agent.FileBlock
	err     string
}

// makeWorkerOutbox makes the outbox of blobhub-worker's form at
// activation, with a .gitignore of "*" in it, so the agent finds it. A
// block that cannot be used, or an outbox that cannot be made, is warned
// (in the log and on the thread); publishing is then off and the thread
// runs, as with blobhub-worker.
func (a *activation) makeWorkerOutbox() {
	art := a.env.Artifacts
	why := art.Unusable
	if why == "" {
		if err := ensureOutbox(a.rec.t.Workspace.Folder(), art.Outbox); err != nil {
			why = "the outbox cannot be used: " + err.Error()
		}
	}
	if why == "" {
		return
	}
	a.log.Warn("artifacts are not published for this thread", "reason", why)
	a.emit(agent.StatusItem("artifacts_invalid", "📎 artifacts are not published: "+abridge(why)+"; fix the thread's artifacts block {prefix, outbox}", nil))
}

// ensureOutbox makes workFolder/rel (a strict subfolder, not under .git,
// reached through no link out of the work folder) and writes a .gitignore
// of "*" in it when it has none; it never replaces a file.
func ensureOutbox(workFolder, rel string) error {
	if _, err := outbox.Create(workFolder, rel); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(workFolder, rel, outbox.GitIgnore), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("*\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// publishing reports whether this turn publishes in blobhub-worker's form.
func (a *activation) publishing() bool {
	art := a.env.Artifacts
	return art.WorkerForm() && art.Unusable == "" && outbox.ValidateSource(art.Outbox) == nil
}

// journalPublish journals the turn's publish intent. The caller holds a.rec.mu.
func (a *activation) journalPublish() (*emission, error) {
	art := a.env.Artifacts
	return a.rec.j.add(a.alias, agent.Item{Brief: "publish the outbox", Meta: map[string]any{
		"prefix": art.Prefix, "outbox": art.Outbox, "work_folder": a.rec.t.Workspace.Folder(),
	}}, kindPublish)
}

// publishOutbox uploads the outbox of intent and returns the items that
// report it; nothing is journaled.
func (a *activation) publishOutbox(ctx context.Context, intent *emission) []agent.Item {
	s := func(k string) string { v, _ := intent.Item.Meta[k].(string); return v }
	res := a.uploadOutbox(ctx, s("work_folder"), s("outbox"), s("prefix"))
	return publishedItems(res)
}

// uploadOutbox uploads every file of workFolder/rel at prefix + its path,
// one file's bytes in memory at a time. It never fails: what cannot be
// published is a skip, a bad outbox the result's error.
func (a *activation) uploadOutbox(ctx context.Context, workFolder, rel, prefix string) publishResult {
	var res publishResult
	files, skips, err := outbox.Scan(workFolder, rel, blobhub.MaxFileBytes, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return res // nothing was written
	}
	if err != nil {
		res.err = abridge(err.Error())
		return res
	}
	for _, sk := range skips {
		switch sk.Reason {
		case outbox.ReasonTooLarge:
			res.skipped = append(res.skipped, map[string]string{"path": abridge(sk.Path), "reason": "too_large"})
		case outbox.ReasonUnreadable:
			res.skipped = append(res.skipped, map[string]string{"path": abridge(sk.Path), "reason": "unreadable"})
		case outbox.ReasonHardlink:
			// bhw-run's own: another name of the bytes may lie outside.
			res.skipped = append(res.skipped, map[string]string{"path": abridge(sk.Path), "reason": "hardlink"})
		}
		// Links, folders too deep and what is not a regular file are
		// not the agent's output: passed over, as blobhub-worker does.
	}
	// The inbox, when it lies in the outbox, holds a person's files: never
	// published.
	if in := inboxInside(rel, a.inboxRel()); in != "" {
		kept := files[:0]
		for _, f := range files {
			if in != "." && f.Path != in && !strings.HasPrefix(f.Path, in+"/") {
				kept = append(kept, f)
			}
		}
		files = kept
	}
	rels := make([]string, len(files))
	for i, f := range files {
		rels[i] = f.Path
	}
	aliasOf := workerAliases(prefix, rels)
	for _, f := range files {
		alias := aliasOf[f.Path]
		if alias == "" {
			res.skipped = append(res.skipped, map[string]string{"path": abridge(f.Path), "reason": "invalid_alias"})
			continue
		}
		rf, err := outbox.Read(workFolder, rel, f.Path, blobhub.MaxFileBytes)
		if err != nil {
			reason := "unreadable"
			if strings.Contains(err.Error(), outbox.ReasonTooLarge) {
				reason = "too_large"
			}
			res.skipped = append(res.skipped, map[string]string{"path": abridge(f.Path), "reason": reason})
			continue
		}
		ct := rf.MediaType
		if ct == "application/octet-stream" && utf8.Valid(rf.Data) {
			ct = "text/plain"
		}
		name := rf.Name()
		info, err := a.r.Client.UploadFile(ctx, alias, rf.Data, name, ct)
		if err != nil {
			reason := "upload_failed"
			var api *blobhub.APIError
			if errors.As(err, &api) && api.Code == "unsupported_file_type" {
				reason = "unsupported_type"
			}
			a.log.Warn("artifact not uploaded", "alias", alias, "error", err)
			res.skipped = append(res.skipped, map[string]string{"path": abridge(f.Path), "reason": reason})
			continue
		}
		if info.Name == "" {
			info = blobhub.FileInfo{Name: name, ContentType: ct, Size: int64(len(rf.Data))}
		}
		res.files = append(res.files, agent.FileBlock{Alias: alias, Name: info.Name, ContentType: info.ContentType, Size: info.Size})
		res.aliases = append(res.aliases, alias)
		a.logf("artifact %s → %s (%d bytes)", f.Path, alias, len(rf.Data))
		a.poster.cacheNotMine(alias, "artifact")
	}
	return res
}

// publishedItems is the result as blobhub-worker reports it: the first
// item says how many were published and skipped, lists the aliases and the
// skips (up to publishReportCap each) and the error; the file blocks go
// ten to an item; with several items each carries part {index, total}. When
// the first item with its first ten blocks would be over the budget, it
// goes without blocks and every block follows in the later items.
func publishedItems(res publishResult) []agent.Item {
	aliases := capList(res.aliases, publishReportCap)
	skipped := capList(res.skipped, publishReportCap)
	counts := map[string]any{"published": len(res.aliases), "skipped": len(res.skipped)}
	summary := fmt.Sprintf("Published %d artifact(s), skipped %d", len(res.aliases), len(res.skipped))
	if res.err != "" {
		summary += " (" + res.err + ")"
	}
	first := map[string]any{"type": agent.ItemArtifactsPublished, "aliases": aliases, "skipped": skipped, "counts": counts}
	if res.err != "" {
		first["error"] = res.err
	}
	var chunks [][]agent.FileBlock
	for i := 0; i < len(res.files); i += publishBlocksPerItem {
		chunks = append(chunks, res.files[i:min(i+publishBlocksPerItem, len(res.files))])
	}
	spill := len(chunks) > 0 && itemSize(agent.Item{Brief: summary, Meta: first, Files: chunks[0]}) > ItemBudget
	var items []agent.Item
	if spill || len(chunks) == 0 {
		items = append(items, agent.Item{Brief: summary, Meta: first})
	} else {
		items = append(items, agent.Item{Brief: summary, Meta: first, Files: chunks[0]})
		chunks = chunks[1:]
	}
	for _, c := range chunks {
		items = append(items, agent.Item{Meta: map[string]any{"type": agent.ItemArtifactsPublished, "counts": counts}, Files: c})
	}
	if len(items) > 1 {
		for i := range items {
			items[i].Meta["part"] = map[string]any{"index": i + 1, "total": len(items)}
			if i > 0 {
				items[i].Brief = fmt.Sprintf("Published artifacts (part %d/%d)", i+1, len(items))
			}
		}
	}
	return items
}

func capList[T any](s []T, n int) []T {
	if s == nil {
		return []T{}
	}
	return s[:min(len(s), n)]
}

// abridge bounds a path or an error reported in an item to
// publishMaxReported bytes as encoded, keeping both ends around
// "…[abridged from N chars]…" (a path's end names the file).
func abridge(s string) string {
	if blobhub.EncodedSize(s) <= publishMaxReported {
		return s
	}
	r := []rune(s)
	for kept := min(len(r), publishMaxReported); kept > 0; kept-- {
		head, tail := kept/2, kept-kept/2
		c := string(r[:head]) + fmt.Sprintf("…[abridged from %d chars]…", len(r)) + string(r[len(r)-tail:])
		if blobhub.EncodedSize(c) <= publishMaxReported {
			return c
		}
	}
	return fmt.Sprintf("…[abridged from %d chars]…", len(r))
}

// The alias grammar of BlobHub: segments of [A-Za-z0-9._@-], none "." or
// "..", at most aliasMaxLength characters in all.
var (
	safeAlias       = regexp.MustCompile(`^[A-Za-z0-9._@-]+(/[A-Za-z0-9._@-]+)*$`)
	unsafeAliasChar = regexp.MustCompile(`[^A-Za-z0-9._@-]`)
)

func isSafeAlias(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > aliasMaxLength || !safeAlias.MatchString(s) {
		return false
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// workerAliases maps each outbox path to its alias as blobhub-worker does
// ("" when none fits): prefix + path when that is a valid alias (these
// claim first); otherwise each character outside the grammar becomes _,
// and a tag of the path's own sha256 goes before the extension (so a
// path's alias does not depend on the other files), shortened to fit, with
// -N after the tag in the rare case the alias is taken.
func workerAliases(prefix string, rels []string) map[string]string {
	out := map[string]string{}
	claimed := map[string]bool{}
	var rest []string
	for _, rel := range rels {
		if lit := prefix + rel; isSafeAlias(lit) {
			out[rel], claimed[lit] = lit, true
		} else {
			rest = append(rest, rel)
		}
	}
	sort.Strings(rest)
	for _, rel := range rest {
		segs := strings.Split(rel, "/")
		for i, s := range segs {
			segs[i] = unsafeAliasChar.ReplaceAllString(s, "_")
		}
		mapped := strings.Join(segs, "/")
		dirs, base := "", mapped
		if i := strings.LastIndex(mapped, "/"); i >= 0 {
			dirs, base = mapped[:i+1], mapped[i+1:]
		}
		stem, ext := splitStemExt(base)
		sum := sha256.Sum256([]byte(rel))
		tag := "-" + hex.EncodeToString(sum[:])[:6]
		for n := 1; ; n++ {
			suffix := tag
			if n > 1 {
				suffix = fmt.Sprintf("%s-%d", tag, n)
			}
			room := aliasMaxLength - runeLen(prefix) - runeLen(dirs) - runeLen(suffix) - runeLen(ext)
			if room < 1 {
				out[rel] = ""
				break
			}
			st := []rune(stem)
			cand := prefix + dirs + string(st[:min(len(st), room)]) + suffix + ext
			if !isSafeAlias(cand) {
				out[rel] = ""
				break
			}
			if !claimed[cand] {
				out[rel], claimed[cand] = cand, true
				break
			}
		}
	}
	return out
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// splitStemExt splits base at its last dot when the dot is not its first
// character and 1 to 16 characters follow it; otherwise all is the stem.
func splitStemExt(base string) (stem, ext string) {
	r := []rune(base)
	dot := -1
	for i := len(r) - 1; i >= 0; i-- {
		if r[i] == '.' {
			dot = i
			break
		}
	}
	if dot > 0 && len(r)-dot-1 >= 1 && len(r)-dot-1 <= 16 {
		return string(r[:dot]), string(r[dot:])
	}
	return base, ""
}

// kindPublished marks the journaled artifacts_published items of a publish
// intent: posted as any item, and dropped by a replay of an intent left
// open (a kill between their appends), which publishes again.
const kindPublished = "published"

// journalPublished journals the items of intent, in one step with the
// turn's end, which closePublish ends. The caller holds a.rec.mu.
func (a *activation) journalPublished(items []agent.Item) ([]*emission, error) {
	var out []*emission
	for _, it := range items {
		e, err := a.rec.j.add(a.alias, it, kindPublished)
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// closePublish closes the intent once its items and the turn's end are
// journaled. The caller holds a.rec.mu.
func (a *activation) closePublish(intent *emission) error {
	return a.rec.j.confirm(intent.ID, "", "")
}

// replayPublish settles a publish intent a killed run left open; later
// are the emissions journaled after it, still pending. When its turn's
// turn_end is among them, the step that journals the items and the
// turn's end was done but for closing the intent: it is closed, and the
// items are posted as any. Otherwise the turn ended before that step: the
// items journaled for it are dropped (none was posted) with the intent,
// and the turn, which is run again, publishes. It returns the ids
// dropped.
func (a *activation) replayPublish(intent *emission, later []*emission) (map[string]bool, error) {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	for _, e := range later {
		if e.Item.Type() == agent.ItemTurnEnd {
			return nil, a.rec.j.confirm(intent.ID, "", "")
		}
	}
	dropped := map[string]bool{}
	for _, e := range later {
		if e.Kind == kindPublished {
			if err := a.rec.j.drop(e.ID); err != nil {
				return dropped, err
			}
			dropped[e.ID] = true
		}
	}
	return dropped, a.rec.j.drop(intent.ID)
}
