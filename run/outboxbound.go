package run

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/setup"
)

// The outbox's bounds (docs/state.md, the outbox and artifacts): an agent
// that leaves 20,000 files must not make 20,000 uploads and items.
const (
	// packMaxFiles is the most files the turn's archive holds, so one
	// turn's record of what it published (artifacts.yaml, read by every
	// publishing run) stays small.
	packMaxFiles = 10000
	// maxSkipItems is the most artifact_skipped items a turn posts one by
	// one; one more item counts the rest.
	maxSkipItems = 20
	// packMediaType is the archive's media type.
	packMediaType = "application/gzip"
)

// outboxPack is what a turn publishes of its outbox beyond max_files: one
// archive, named by the id its announcement takes.
type outboxPack struct {
	announceID string
	*outbox.Packed
}

// packName is the archive's path under the thread's artifacts/: named by
// its announcement's emission counter, which no other archive of the
// thread ever takes.
func packName(announceID string) string {
	_, n, _ := strings.Cut(announceID, ":")
	return "more-files-" + n + ".tar.gz"
}

// boundOutbox keeps the first artifacts.max_files files (by path) to
// publish one by one and packs the rest into one archive, itself at most
// artifacts.max_bytes; what does not fit waits for the next completed turn
// (it is not recorded as published, so that turn's scan finds it again).
// A status item says so on the thread.
func (a *activation) boundOutbox(files []outbox.File) ([]outbox.File, *outboxPack) {
	limit := a.r.Setup.Config.Artifacts.MaxFiles
	if limit <= 0 {
		limit = setup.DefaultMaxFiles
	}
	if len(files) <= limit {
		return files, nil
	}
	rest := make([]string, 0, len(files)-limit)
	for _, f := range files[limit:] {
		rest = append(rest, f.Path)
	}
	packed, err := outbox.Pack(a.rec.t.Workspace.Folder(), a.env.Artifacts.Source, rest, a.maxBytes(), packMaxFiles)
	if err != nil {
		a.log.Warn("the outbox's extra files were not packed", "error", err)
		packed = &outbox.Packed{}
	}
	var p *outboxPack
	name := ""
	if len(packed.Files) > 0 {
		a.rec.mu.Lock()
		p = &outboxPack{announceID: a.rec.j.nextID(), Packed: packed}
		a.rec.mu.Unlock()
		name = packName(p.announceID)
	}
	left := len(rest) - len(packed.Files)
	text := fmt.Sprintf("📎 the outbox has %d new or changed files, more than artifacts.max_files (%d): the first %d by path are published one by one", len(files), limit, limit)
	if name != "" {
		text += fmt.Sprintf("; %d more in one archive, %s", len(packed.Files), name)
	}
	if left > 0 {
		text += fmt.Sprintf("; %d wait for the next completed turn (the archive is at most artifacts.max_bytes, %d files)", left, packMaxFiles)
	}
	a.emit(agent.StatusItem("artifacts_bounded", text, map[string]any{
		"files": len(files), "max_files": limit, "published": limit, "packed": len(packed.Files), "archive": name, "left": left,
	}))
	return files[:limit], p
}

// skipArtifacts posts the artifact_skipped items of a scan: one per file
// up to maxSkipItems, then one that counts the rest by reason.
func (a *activation) skipArtifacts(skips []outbox.Skip) {
	for i, s := range skips {
		if i == maxSkipItems {
			a.skipMany(skips[i:])
			return
		}
		a.skipArtifact(s.Path, s.Reason)
	}
}

// skipMany is the one artifact_skipped item for skips.
func (a *activation) skipMany(skips []outbox.Skip) {
	reasons := map[string]int{}
	for _, s := range skips {
		reasons[s.Reason]++
	}
	var parts []string
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	why := strings.Join(parts, ", ")
	a.log.Warn("artifacts not published", "files", len(skips), "reasons", why)
	a.emit(agent.StatusItem("artifact_skipped", fmt.Sprintf("📎 %d more files not published (%s)", len(skips), why),
		map[string]any{"files": len(skips), "reasons": reasons}))
}

// journalPackIntent appends the intent to upload the turn's archive: the
// paths it packs, in order, so a run that replays it after a kill packs
// the same files again.
func journalPackIntent(j *journal, thread, workFolder, source string, p *outboxPack) (*artifactIntent, error) {
	name := packName(p.announceID)
	paths := make([]string, len(p.Files))
	for i, f := range p.Files {
		paths[i] = f.Path
	}
	in := &artifactIntent{alias: thread + "/artifacts/" + name, path: name, sha256: p.SHA256,
		workFolder: workFolder, source: source, announceID: p.announceID, files: paths, packed: p.Packed}
	e, err := j.add(thread, agent.Item{Brief: "artifact upload " + name, Meta: map[string]any{
		"alias": in.alias, "path": in.path, "sha256": in.sha256, "size": len(p.Data),
		"work_folder": in.workFolder, "source": in.source, "announce_id": in.announceID, "files": paths,
	}}, kindArtifact)
	if err != nil {
		return nil, err
	}
	in.e = e
	return in, nil
}

// packOf is the archive of an intent: the one the scan packed, or, after
// a kill, its paths packed again from the outbox as it is now. nil when
// none of them can be packed any more.
func (a *activation) packOf(in *artifactIntent) (*outbox.File, []outbox.File, error) {
	p := in.packed
	if p == nil {
		var err error
		if p, err = outbox.Pack(in.workFolder, in.source, in.files, a.maxBytes(), packMaxFiles); err != nil {
			return nil, nil, err
		}
	}
	if len(p.Files) == 0 {
		return nil, nil, fmt.Errorf("none of its %d files can be read any more", len(in.files))
	}
	return &outbox.File{Path: in.path, Size: int64(len(p.Data)), SHA256: p.SHA256, Data: p.Data,
		MediaType: packMediaType, Encoding: "base64"}, p.Files, nil
}

// recordPacked records every file of a published archive in artifacts.yaml,
// in one write, as published under the archive's alias. The caller holds
// a.rec.mu.
func (a *activation) recordPacked(alias string, files []outbox.File) error {
	pub, err := a.rec.publishedArtifacts()
	if err != nil {
		return err
	}
	for _, f := range files {
		pub[f.Path] = envelope.PublishedArtifact{SHA256: f.SHA256, Alias: alias}
	}
	return a.rec.writePublished()
}
