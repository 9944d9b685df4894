package bhtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/blobhub/bhw-run/blobhub"
)

// uploadFile serves upload_session_file as BlobHub does: the file's bytes
// are the body (application/octet-stream), the command and its arguments
// JSON in the X-Request-Body header; a file over blobhub.MaxFileBytes is
// refused (413 file_too_large), and so is a size that is not the body's.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Command     string  `json:"command"`
		SessionID   string  `json:"session_id"`
		Alias       *string `json:"alias"`
		Name        string  `json:"name"`
		ContentType string  `json:"content_type"`
		Size        *int64  `json:"size"`
	}
	dec := json.NewDecoder(strings.NewReader(r.Header.Get("X-Request-Body")))
	dec.DisallowUnknownFields()
	decErr := dec.Decode(&req)
	s.record(req.Command)
	if !s.gate(w, r, req.Command) {
		return
	}
	switch {
	case decErr != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_body", "X-Request-Body is not a command this API takes: "+decErr.Error())
		return
	case req.Command != blobhub.CmdUploadFile:
		writeError(w, http.StatusBadRequest, "unknown_command", fmt.Sprintf("command %q takes no binary body", req.Command))
		return
	case req.SessionID == "" || req.Alias == nil:
		writeError(w, http.StatusBadRequest, "invalid_request_body", "session_id and alias are required")
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, blobhub.MaxFileBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_body", err.Error())
		return
	}
	if req.Size != nil && *req.Size != int64(len(data)) && len(data) <= blobhub.MaxFileBytes {
		writeError(w, http.StatusBadRequest, "invalid_request_body", "size is "+strconv.FormatInt(*req.Size, 10)+", the body holds "+strconv.Itoa(len(data)))
		return
	}
	f, err := s.store.UploadFile(r.Context(), req.SessionID, *req.Alias, data, req.Name, req.ContentType)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	o, _ := s.store.Download(r.Context(), req.SessionID, *req.Alias)
	s.answer(w, r, req.Command, http.StatusOK, map[string]any{"object": map[string]any{
		"revision_id": r.PathValue("revision"), "session_id": req.SessionID, "alias": *req.Alias,
		"updated_at": o.UpdatedAt, "value": map[string]any{"type": "file", "file": f}}})
}

// downloadFile serves download_session_file: the bytes as the body
// (application/octet-stream), the envelope with the file's object in the
// X-Response-Body header; an alias that holds no file answers as a missing
// object does (403).
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request, sessionID, alias string) {
	f, data, err := s.store.DownloadFile(r.Context(), sessionID, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("session file %q does not exist, or is not readable with this key", alias))
		return
	}
	if err != nil {
		writeStoreError(w, err)
		return
	}
	env, _ := json.Marshal(map[string]any{"status": "success", "object": map[string]any{
		"revision_id": r.PathValue("revision"), "session_id": sessionID, "alias": alias,
		"value": map[string]any{"type": "file", "file": f}}})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Response-Body", string(env))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}
