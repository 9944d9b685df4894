package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/setup"
)

// kindArtifact marks a journal emission that is an artifact upload intent,
// not an item: reconcile hands it to replayArtifact instead of posting it.
const kindArtifact = "artifact"

// artifactIntent is one upload of an artifact (docs/state.md), in the order: journal the
// intent, upload, record in thread.yaml, add to not_mine.yaml, post
// artifact_published. Its journal emission names the file (work folder,
// source, path), the alias, the sha256 it was meant to carry and the
// emission id its announcement will take, so a replay after a kill can tell
// how far the last run got: the announcement journaled means the upload
// and the record are done; the alias holding these bytes means the upload
// landed; anything else uploads the bytes on disk now.
//
// The scan only hashes the files; each upload reads its file's bytes just
// before sending them, so a run holds one file's bytes at a time. A first
// upload and a replay are one path: the bytes on disk when it reads them
// are published, and a file that changed since the scan (its sha256 no
// longer the intent's) is published as it is now, as after a kill.
type artifactIntent struct {
	e          *emission
	alias      string
	path       string
	sha256     string
	workFolder string
	source     string
	announceID string
	// files are the outbox paths an archive packs (run/outboxbound.go);
	// nil for one file. packed is the archive the scan made, nil after a
	// kill (packed again).
	files  []string
	packed *outbox.Packed
}

// createOutbox creates <work_folder>/<artifacts.source> with a
// self-ignoring .gitignore, only in a folder it created. A
// folder that cannot be created fails the thread.
func (a *activation) createOutbox(ctx context.Context) error {
	if a.env.Artifacts.WorkerForm() {
		a.makeWorkerOutbox()
		return nil
	}
	if a.env.Artifacts == nil || a.env.Artifacts.Source == "" {
		return nil
	}
	created, err := outbox.Create(a.rec.t.Workspace.Folder(), a.env.Artifacts.Source)
	if err != nil {
		return a.fail(ctx, agent.Errorf(exit.CodeArtifactsSourceInvalid, "cannot create the outbox: %v; fix artifacts.source or the work folder, then `bhw-run thread retry`", err))
	}
	if created {
		a.rec.t.Outbox.CreatedByUs = true
		return a.rec.save()
	}
	return nil
}

// scanOutbox lists the outbox's new or changed files after a completed
// turn; every file it will not publish gets an artifact_skipped status
// item. It journals nothing.
func (a *activation) scanOutbox() []outbox.File {
	if a.env.Artifacts == nil || a.env.Artifacts.Source == "" {
		return nil
	}
	a.rec.mu.Lock()
	pub, perr := a.rec.publishedArtifacts()
	published := map[string]string{}
	for p, pa := range pub {
		published[p] = pa.SHA256
	}
	if perr == nil && len(a.rec.t.Artifacts.Published) > 0 {
		// A thread.yaml of an earlier version: its entries move out of it.
		perr = a.rec.writePublished()
	}
	a.rec.mu.Unlock()
	if perr != nil {
		a.skipArtifact("", perr.Error())
		return nil
	}
	files, skips, err := outbox.Scan(a.rec.t.Workspace.Folder(), a.env.Artifacts.Source, a.maxBytes(), published)
	if errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("the outbox is gone; nothing to publish", "source", a.env.Artifacts.Source)
		return nil
	}
	if err != nil {
		a.skipArtifact("", fmt.Sprintf("the outbox was not read: %v", err))
		return nil
	}
	a.skipArtifacts(skips)
	var out []outbox.File
	inbox := inboxInside(a.env.Artifacts.Source, a.inboxRel())
	for _, f := range files {
		if inbox != "" && (inbox == "." || f.Path == inbox || strings.HasPrefix(f.Path, inbox+"/")) {
			continue // a person's files, never published
		}
		if err := setup.ValidateAlias(a.artifactAlias(f.Path)); err != nil {
			a.skipArtifact(f.Path, fmt.Sprintf("its alias is invalid: %v", err))
			continue
		}
		out = append(out, f)
	}
	return out
}

// artifactAlias is <thread alias>/artifacts/<relative path>.
func (a *activation) artifactAlias(rel string) string { return a.alias + "/artifacts/" + rel }

func (a *activation) maxBytes() int64 {
	if n := a.r.Setup.Config.Artifacts.MaxBytes; n > 0 {
		return n
	}
	return 5 << 20
}

// skipArtifact posts the artifact_skipped status item for one file.
func (a *activation) skipArtifact(rel, reason string) {
	a.log.Warn("artifact not published", "path", rel, "reason", reason)
	text := fmt.Sprintf("📎 not published: %s (%s)", rel, reason)
	if rel == "" {
		text = "📎 no artifacts published: " + reason
	}
	a.emit(agent.StatusItem("artifact_skipped", text, map[string]any{"path": rel, "reason": reason}))
}

// journalIntents journals one upload intent per file, and one for the
// archive of the files beyond artifacts.max_files. The caller holds a.rec.mu
// and journals turn_end in the same step, so the intents and the turn's
// end reach the journal together.
func (a *activation) journalIntents(files []outbox.File, pack *outboxPack) ([]*artifactIntent, error) {
	var out []*artifactIntent
	for i := range files {
		in, err := journalIntent(a.rec.j, a.alias, a.rec.t.Workspace.Folder(), a.env.Artifacts.Source, &files[i])
		if err != nil {
			return out, err
		}
		out = append(out, in)
	}
	if pack != nil {
		in, err := journalPackIntent(a.rec.j, a.alias, a.rec.t.Workspace.Folder(), a.env.Artifacts.Source, pack)
		if err != nil {
			return out, err
		}
		out = append(out, in)
	}
	return out, nil
}

// journalIntent appends the intent to upload f as an artifact of thread,
// reserving the id of its announcement.
func journalIntent(j *journal, thread, workFolder, source string, f *outbox.File) (*artifactIntent, error) {
	in := &artifactIntent{alias: thread + "/artifacts/" + f.Path, path: f.Path, sha256: f.SHA256,
		workFolder: workFolder, source: source, announceID: j.nextID()}
	e, err := j.add(thread, agent.Item{Brief: "artifact upload " + f.Path, Meta: map[string]any{
		"alias": in.alias, "path": in.path, "sha256": in.sha256, "size": f.Size,
		"work_folder": in.workFolder, "source": in.source, "announce_id": in.announceID,
	}}, kindArtifact)
	if err != nil {
		return nil, err
	}
	in.e = e
	return in, nil
}

// intentOf reads an artifact intent back from its journal emission.
func intentOf(e *emission) *artifactIntent {
	s := func(k string) string { v, _ := e.Item.Meta[k].(string); return v }
	in := &artifactIntent{e: e, alias: s("alias"), path: s("path"), sha256: s("sha256"),
		workFolder: s("work_folder"), source: s("source"), announceID: s("announce_id")}
	files, _ := e.Item.Meta["files"].([]any)
	for _, f := range files {
		if p, ok := f.(string); ok {
			in.files = append(in.files, p)
		}
	}
	return in
}

// publishArtifacts uploads and announces the intents of this turn. An
// error means BlobHub could not be reached: the rest stay journaled and the
// next run finishes them.
func (a *activation) publishArtifacts(ctx context.Context, intents []*artifactIntent) error {
	for _, in := range intents {
		if a.poster.offline {
			return nil
		}
		if err := a.publish(ctx, in); err != nil {
			// This and the later intents stay journaled: the next run
			// finishes them (and the run ends 75 meanwhile).
			a.log.Warn("artifact uploads left for the next run", "path", in.path, "error", err)
			return err
		}
	}
	return nil
}

// replayArtifact finishes an intent a killed run left journaled.
func (a *activation) replayArtifact(ctx context.Context, e *emission) error {
	in := intentOf(e)
	a.rec.mu.Lock()
	_, open := a.rec.j.byID[in.announceID]
	_, posted := a.rec.j.posted[in.announceID]
	if open || posted {
		// The announcement is journaled, so the upload and its record are
		// done; reconcile posts the announcement if it is not yet posted.
		err := a.rec.j.confirm(e.ID, "", "")
		a.rec.mu.Unlock()
		return err
	}
	a.rec.mu.Unlock()
	if in.alias == "" || in.path == "" || in.announceID == "" {
		a.log.Error("dropping an unreadable artifact intent", "emission_id", e.ID)
		return a.dropIntent(in)
	}
	return a.publish(ctx, in)
}

// publish is one upload of an artifact after its intent is journaled. It
// never overwrites an object that is not this thread's artifact, and never
// uploads bytes the alias already holds.
func (a *activation) publish(ctx context.Context, in *artifactIntent) error {
	held, err := a.heldArtifact(ctx, in.alias)
	if err != nil {
		var foreign *foreignObjectError
		if errors.As(err, &foreign) {
			a.skipArtifact(in.path, foreign.Error())
			return a.dropIntent(in)
		}
		return err
	}
	var meta artifactMeta
	var packed []outbox.File
	if held != nil && held.SHA256 == in.sha256 && in.files == nil {
		// The alias holds the intended bytes already: an upload that
		// landed before a kill.
		meta = *held
	} else {
		var f *outbox.File
		var err error
		if in.files != nil {
			// An archive is packed again either way: its record names
			// the files it holds.
			f, packed, err = a.packOf(in)
		} else {
			f, err = outbox.Read(in.workFolder, in.source, in.path, a.maxBytes())
		}
		if err != nil {
			a.skipArtifact(in.path, fmt.Sprintf("it cannot be read any more: %v", err))
			return a.dropIntent(in)
		}
		if f.SHA256 != in.sha256 {
			a.log.Info("an artifact changed since it was scanned; publishing it as it is now", "path", in.path, "sha256", f.SHA256)
		}
		meta = artifactMeta{Name: f.Name(), Path: f.Path, MediaType: f.MediaType, Size: f.Size, SHA256: f.SHA256, Thread: a.alias}
		if held == nil || held.SHA256 != f.SHA256 {
			m := meta
			m.Encoding, m.Data = f.Encoding, f.EncodedData()
			if err := a.r.Client.Upload(ctx, in.alias, m.Value()); err != nil {
				var api *blobhub.APIError
				if errors.As(err, &api) && api.Status < 500 && !errors.Is(err, blobhub.ErrAuth) {
					// Refused for good: dropped, so one file never wedges the thread.
					a.skipArtifact(in.path, fmt.Sprintf("BlobHub refused it: %v", err))
					return a.dropIntent(in)
				}
				return blobhub.AsExit(err, "upload "+in.alias)
			}
		}
	}

	a.rec.mu.Lock()
	if in.files != nil {
		err = a.recordPacked(in.alias, packed)
	} else {
		err = a.rec.recordPublished(in.path, envelope.PublishedArtifact{SHA256: meta.SHA256, Alias: in.alias})
	}
	a.rec.mu.Unlock()
	if err != nil {
		return err
	}
	a.poster.cacheNotMine(in.alias, setup.ReasonArtifact)

	// blobhub-worker's artifacts_published, for one artifact: bhw-run
	// announces each as it lands (skips are status items), with its own
	// artifact block beside (docs/wire.md).
	it := agent.Item{Brief: fmt.Sprintf("📎 %s (%s)", in.path, humanSize(meta.Size)), Meta: map[string]any{
		"type":    agent.ItemArtifactsPublished,
		"aliases": []string{in.alias}, "skipped": []string{},
		"counts":   map[string]any{"published": 1, "skipped": 0},
		"artifact": map[string]any{"name": meta.Name, "alias": in.alias, "sha256": meta.SHA256, "size": meta.Size},
	}}
	if in.files != nil {
		it.Brief = fmt.Sprintf("📎 %s (%s, %d files)", in.path, humanSize(meta.Size), len(packed))
		it.Meta["artifact"].(map[string]any)["files"] = len(packed)
	}
	a.rec.mu.Lock()
	ann, err := a.rec.j.addID(in.announceID, a.alias, it, "")
	if err == nil {
		err = a.rec.j.confirm(in.e.ID, "", "")
	}
	a.rec.mu.Unlock()
	if err != nil {
		return err
	}
	a.logf("artifact %s → %s sha256 %s", in.path, in.alias, meta.SHA256)
	a.poster.post(ctx, ann)
	return nil
}

func (a *activation) dropIntent(in *artifactIntent) error {
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	return a.rec.j.drop(in.e.ID)
}

// artifactMeta is the artifact block of an artifact object's value.
type artifactMeta = envelope.Artifact

// foreignObjectError is an alias that holds something other than this
// thread's artifact.
type foreignObjectError struct{ what string }

func (e *foreignObjectError) Error() string {
	return "its alias already holds " + e.what + "; not overwriting it"
}

// heldArtifact reads what the alias holds: nil when absent, this thread's
// artifact, or a foreignObjectError.
func (a *activation) heldArtifact(ctx context.Context, alias string) (*artifactMeta, error) {
	obj, err := a.r.Client.Download(ctx, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, blobhub.AsExit(err, "download "+alias)
	}
	var v struct {
		Type     string        `json:"type"`
		Artifact *artifactMeta `json:"artifact"`
	}
	switch {
	case json.Unmarshal(obj.Value, &v) != nil:
		return nil, &foreignObjectError{"an object bhw-run cannot read"}
	case v.Type != "artifact" || v.Artifact == nil:
		return nil, &foreignObjectError{fmt.Sprintf("an object of type %q", v.Type)}
	case v.Artifact.Thread != a.alias:
		return nil, &foreignObjectError{fmt.Sprintf("an artifact of thread %q", v.Artifact.Thread)}
	}
	v.Artifact.Data = ""
	return v.Artifact, nil
}

// humanSize is 512 B, 1.2 KB, 3.4 MB.
func humanSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
}
