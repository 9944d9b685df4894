package setup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/exit"
)

// overlappingPrefixes refuses two sections of one session whose prefixes
// share objects: one prefix begins with the other ("" begins every one).
// Both would run every thread in the overlap. Identical prefixes are
// DUPLICATE_SECTION_TARGET, checked before.
func overlappingPrefixes(sections []Section) error {
	for i, a := range sections {
		for _, b := range sections[:i] {
			if a.Session.RevisionID != b.Session.RevisionID || a.Session.SessionID != b.Session.SessionID {
				continue
			}
			pa, pb := a.Prefix(), b.Prefix()
			if pa != pb && (strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)) {
				return exit.Errorf(exit.CodeOverlappingPrefix, "sections %q and %q watch overlapping prefixes %q and %q of session %s: every thread in the overlap would run twice; give them prefixes that do not contain each other", b.Name, a.Name, pb, pa, a.Session.SessionID)
			}
		}
	}
	return nil
}

// The job folder's prefix part, as blobhub-worker names it: a readable
// slug of at most prefixSlugMax characters, then the first prefixHashChars
// hex digits of the prefix's SHA-256, which tells apart two prefixes the
// slug folds together ("a/b/" and "a.b/").
const (
	prefixSlugMax   = 32
	prefixHashChars = 8
)

var notSlug = regexp.MustCompile(`[^A-Za-z0-9]+`)

// prefixComponent is a prefix's part of its section's job folder name; ""
// for a section that watches the whole session.
func prefixComponent(prefix string) string {
	if prefix == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(prefix))
	digest := hex.EncodeToString(sum[:])[:prefixHashChars]
	slug := strings.Trim(notSlug.ReplaceAllString(prefix, "_"), "_")
	if len(slug) > prefixSlugMax {
		slug = slug[:prefixSlugMax]
	}
	slug = strings.Trim(slug, "_")
	if slug == "" {
		return digest
	}
	return slug + "-" + digest
}

// JobID is the name of a section's folder under jobs/, blobhub-worker's:
// {job type}-{session id}, and for a section with a prefix -{slug}-{8 hex
// digits} after it, so sections watching parts of one session keep their
// records apart.
func JobID(sec Section) string {
	base := JobType + "-" + sec.Session.SessionID
	if c := prefixComponent(sec.Prefix()); c != "" {
		return base + "-" + c
	}
	return base
}

// jobDirFor is the folder of sec in the state tree, for a run of alias.
// An earlier bhw-run kept a prefixed section's records in the folder of
// the whole session: a thread it began there, and not yet in the worker's
// folder, is run where it is (docs/state.md says how to move it).
func jobDirFor(stateDir string, sec Section, alias string) string {
	dir := filepath.Join(stateDir, "jobs", JobID(sec))
	if sec.Prefix() == "" || alias == "" {
		return dir
	}
	older := filepath.Join(stateDir, "jobs", JobType+"-"+sec.Session.SessionID)
	if _, err := os.Lstat(ThreadDir(dir, alias)); !errors.Is(err, fs.ErrNotExist) {
		return dir
	}
	if _, err := os.Lstat(filepath.Join(ThreadDir(older, alias), "thread.yaml")); err == nil {
		return older
	}
	return dir
}

// ResolveSession makes the section's session the ids the data commands
// take, as blobhub-worker resolves them at attach: revision_id default
// becomes the blob's default revision, a session alias its session's id
// (blobhub.Resolve); the section's folder is then named by that id.
// cfg is the client's configuration with the section's ids as written.
func (s *Setup) ResolveSession(ctx context.Context, cfg blobhub.Config) error {
	t := s.Section.Session
	rev, ses, err := blobhub.Resolve(ctx, cfg, t.OrgID, t.BlobID)
	switch {
	case errors.Is(err, blobhub.ErrNotFound):
		return exit.Errorf(exit.CodeSessionNotFound, "revision %q and session %q of %s were not found on BlobHub; check the section's org_id, blob_id, revision_id and session_id", t.RevisionID, t.SessionID, s.Where())
	case err != nil:
		return blobhub.AsExit(err, "resolve the session of "+s.Where())
	}
	s.Section.Session.RevisionID = rev
	if ses == t.SessionID && s.JobDir != "" {
		return nil
	}
	if err := ValidateName(ses); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "session id %q (of session %q): %v", ses, t.SessionID, err)
	}
	s.Section.Session.SessionID = ses
	s.JobDir = jobDirFor(s.StateDir, s.Section, s.alias)
	return nil
}
