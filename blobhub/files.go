package blobhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/blobhub/bhw-run/statefile"
)

// Session files: bytes stored at an alias (upload_session_file), read back
// whole (download_session_file). A file's object value is {type: file,
// file: {name, content_type, size}}.
const (
	CmdUploadFile   = "upload_session_file"
	CmdDownloadFile = "download_session_file"
	// MaxFileBytes is the most a session file may hold.
	MaxFileBytes = 4 << 20
	// CodeFileTooLarge is the code of a file over MaxFileBytes.
	CodeFileTooLarge = "file_too_large"
)

// FileInfo is what a session file's object says of it.
type FileInfo struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
}

// fileValue is a session file's object value.
func fileValue(f FileInfo) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "file", "file": f})
	return b
}

// fileOf reads a session file's object value; ok is false when the value
// is not a file's.
func fileOf(value json.RawMessage) (FileInfo, bool) {
	var v struct {
		Type string    `json:"type"`
		File *FileInfo `json:"file"`
	}
	if json.Unmarshal(value, &v) != nil || v.File == nil {
		return FileInfo{}, false
	}
	return *v.File, true
}

// UploadFile stores data as the session file alias, replacing what the
// alias held, and writes its object; over MaxFileBytes it is refused
// (413, file_too_large).
func (s *LocalStore) UploadFile(ctx context.Context, sessionID, alias string, data []byte, name, contentType string) (FileInfo, error) {
	if err := checkAlias(alias); err != nil {
		return FileInfo{}, err
	}
	if len(data) > MaxFileBytes {
		return FileInfo{}, &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeFileTooLarge,
			Message: fmt.Sprintf("the file is %d bytes, the limit is %d", len(data), MaxFileBytes)}
	}
	if name == "" || contentType == "" {
		return FileInfo{}, &APIError{Status: http.StatusBadRequest, Code: "invalid_request", Message: "name and content_type are required"}
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return FileInfo{}, err
	}
	dir := filepath.Join(sd, "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return FileInfo{}, err
	}
	// The bytes first, then the object that names them: a reader that
	// finds the object finds its bytes.
	if err := statefile.WriteAtomic(filepath.Join(dir, aliasFileName(alias)+".bin"), data, 0o600); err != nil {
		return FileInfo{}, err
	}
	f := FileInfo{Name: name, ContentType: contentType, Size: int64(len(data))}
	return f, s.Upload(ctx, sessionID, alias, fileValue(f))
}

// DownloadFile reads the session file alias: ErrNotFound when the alias
// holds nothing or no file.
func (s *LocalStore) DownloadFile(ctx context.Context, sessionID, alias string) (FileInfo, []byte, error) {
	o, err := s.Download(ctx, sessionID, alias)
	if err != nil {
		return FileInfo{}, nil, err
	}
	f, ok := fileOf(o.Value)
	if !ok {
		return FileInfo{}, nil, notFound("file")
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return FileInfo{}, nil, err
	}
	b, err := os.ReadFile(filepath.Join(sd, "files", aliasFileName(alias)+".bin"))
	if errors.Is(err, fs.ErrNotExist) {
		return FileInfo{}, nil, notFound("file")
	}
	return f, b, err
}

func (c *localClient) UploadFile(ctx context.Context, alias string, data []byte, name, contentType string) (FileInfo, error) {
	if err := c.done(ctx, CmdUploadFile, alias); err != nil {
		return FileInfo{}, err
	}
	f, err := c.store.UploadFile(ctx, c.cfg.SessionID, alias, data, name, contentType)
	return f, opErr(CmdUploadFile, alias, err)
}

func (c *localClient) DownloadFile(ctx context.Context, alias string) (FileInfo, []byte, error) {
	if err := c.done(ctx, CmdDownloadFile, alias); err != nil {
		return FileInfo{}, nil, err
	}
	f, b, err := c.store.DownloadFile(ctx, c.cfg.SessionID, alias)
	return f, b, opErr(CmdDownloadFile, alias, err)
}

// UploadFile sends upload_session_file as the SDK does: the bytes as the
// body (application/octet-stream), the command and its arguments (alias,
// name, content_type, size) as JSON in the X-Request-Body header. The
// answer is the usual envelope with the file's object.
func (c *httpClient) UploadFile(ctx context.Context, alias string, data []byte, name, contentType string) (FileInfo, error) {
	k, err := c.sessionCall(CmdUploadFile, alias, map[string]any{"alias": alias, "name": name, "content_type": contentType, "size": len(data)})
	if err != nil {
		return FileInfo{}, err
	}
	k.data = data
	b, err := c.do(ctx, k)
	if err != nil {
		return FileInfo{}, err
	}
	var ans struct {
		Object struct {
			Value json.RawMessage `json:"value"`
		} `json:"object"`
	}
	_ = json.Unmarshal(b, &ans)
	if f, ok := fileOf(ans.Object.Value); ok {
		return f, nil
	}
	return FileInfo{Name: name, ContentType: contentType, Size: int64(len(data))}, nil
}

// DownloadFile sends download_session_file on data/query asking for
// application/octet-stream: the answer's body is the file's bytes, its
// envelope (with the object) in the X-Response-Body header; an error
// answers JSON as any command does. A file over MaxFileBytes is refused
// unread.
func (c *httpClient) DownloadFile(ctx context.Context, alias string) (FileInfo, []byte, error) {
	k, err := c.sessionCall(CmdDownloadFile, alias, map[string]any{"alias": alias})
	if err != nil {
		return FileInfo{}, nil, err
	}
	k.binaryAnswer, k.maxValue = true, MaxFileBytes
	b, err := c.do(ctx, k)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		ae.Absent = true
	}
	if err != nil {
		return FileInfo{}, nil, err
	}
	var env struct {
		Object struct {
			Value json.RawMessage `json:"value"`
		} `json:"object"`
	}
	if json.Unmarshal([]byte(k.answerHeader), &env) != nil {
		return FileInfo{}, nil, opErr(CmdDownloadFile, alias, errors.New("the answer's X-Response-Body is not JSON"))
	}
	f, _ := fileOf(env.Object.Value)
	return f, b, nil
}
