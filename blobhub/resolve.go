package blobhub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// RevisionDefault is the revision ref that follows the blob's default
// revision; the data commands refuse it, so it is resolved first.
const RevisionDefault = "default"

// The commands of the resolution, by the names errors give them.
const (
	CmdRevision   = "resolve_revision" // GET {api_url}/blobs/{org}/{blob}/revisions/{ref}
	CmdGetSession = "get_session"
)

// IsSessionID reports whether s is a session's id rather than its alias:
// ids begin with ses_.
func IsSessionID(s string) bool { return strings.HasPrefix(s, "ses_") }

// Resolve turns what a section names into the ids every data command
// takes, as blobhub-worker does before its first one: revision_id default
// into the blob's default revision (ErrNotFound when the blob has none),
// and a session alias into its session's id (get_session, the one command
// that takes an alias; ErrNotFound when no session has it). Ids pass
// unchanged, with no request; a local store (file://) has nothing to
// resolve.
func Resolve(ctx context.Context, cfg Config, orgID, blobID string) (revisionID, sessionID string, err error) {
	revisionID, sessionID = cfg.RevisionID, cfg.SessionID
	if revisionID != RevisionDefault && (sessionID == "" || IsSessionID(sessionID)) {
		return revisionID, sessionID, nil
	}
	c, err := New(cfg)
	if err != nil {
		return "", "", err
	}
	h, ok := c.(*httpClient)
	if !ok {
		return revisionID, sessionID, nil
	}
	if revisionID == RevisionDefault {
		b, err := h.do(ctx, &call{command: CmdRevision, method: http.MethodGet,
			url: h.base + "/blobs/" + url.PathEscape(orgID) + "/" + url.PathEscape(blobID) + "/revisions/" + RevisionDefault})
		if err != nil {
			return "", "", err
		}
		var ans struct {
			Revision struct {
				ID string `json:"id"`
			} `json:"revision"`
		}
		if json.Unmarshal(b, &ans) != nil || ans.Revision.ID == "" {
			return "", "", opErr(CmdRevision, "", errors.New("answer carries no revision id"))
		}
		revisionID = ans.Revision.ID
		h.cfg.RevisionID = revisionID
	}
	if sessionID != "" && !IsSessionID(sessionID) {
		b, _, err := h.sessionDo(ctx, CmdGetSession, "", nil)
		if err != nil {
			return "", "", err
		}
		var ans struct {
			Session struct {
				ID string `json:"id"`
			} `json:"session"`
		}
		if json.Unmarshal(b, &ans) != nil || ans.Session.ID == "" {
			return "", "", opErr(CmdGetSession, "", errors.New("answer carries no session id"))
		}
		sessionID = ans.Session.ID
	}
	return revisionID, sessionID, nil
}
