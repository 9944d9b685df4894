// Package blobhub is bhw-run's only door to where threads live: the
// BlobHub REST client and the local file:// store behind one interface.
//
// It is a room of its own because every wire detail of the BlobHub API —
// endpoint, command names, field names, error shapes, retry rules — must sit
// in one place so that a correction is one edit. Callers see only
// Client, the sentinels and Tail.
package blobhub

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultRetryBudget  = 2 * time.Minute
	DefaultRetryWaitMin = 500 * time.Millisecond
	DefaultRetryWaitMax = 30 * time.Second
	DefaultPageSize     = 100 // list-items page: the local store's, the limit the HTTP client asks for
	DefaultLocalUserID  = "usr_local"
)

// Config binds a client to one session.
type Config struct {
	APIURL     string // https://…/v1, http:// for loopback hosts, or file:///abs/dir
	APIKey     string // never logged, never in an error
	RevisionID string
	SessionID  string
	// UserID is the user_id the local store stamps on posted items
	// ("usr_local" by default, "usr_person" for the person's side).
	UserID string
	// Timeout bounds each HTTP attempt (default 30s).
	Timeout time.Duration
	// RetryBudget is the total time the client may spend retrying, across
	// all its calls (default 2m).
	RetryBudget time.Duration
	// RetryWaitMin and RetryWaitMax bound the exponential backoff
	// (defaults 500ms and 30s; tests shrink them).
	RetryWaitMin, RetryWaitMax time.Duration
	// PageSize is the list-items page: the local store answers at most
	// this many, the HTTP client asks for this many (default 100).
	PageSize   int
	HTTPClient *http.Client // optional (tests)
	Logger     *slog.Logger // optional
	// OnRetry, when set, hears of every retry before its wait (a run's
	// status line at a terminal says what it waits for). It is called on
	// the calling goroutine and must not block.
	OnRetry func(Retry)
}

// Retry is one retry the HTTP client is about to make.
type Retry struct {
	Command string        // the command retried (CmdDownload, …)
	Attempt int           // 1 for the first retry
	Reason  string        // why: "connection refused", "status 503", …
	Wait    time.Duration // the wait before it
	Left    time.Duration // the retry time left after the wait
}

// Client is one session of BlobHub or of the local store.
type Client interface {
	// Me is the identity behind the key (GET {api_url}/users/me).
	Me(ctx context.Context) (User, error)
	// Download reads a session object; ErrNotFound when absent.
	Download(ctx context.Context, alias string) (Object, error)
	// Upload replaces a session object's whole value, which must carry "type".
	Upload(ctx context.Context, alias string, value json.RawMessage) error
	// Delete removes a session object (a thread's items with it).
	Delete(ctx context.Context, alias string) error
	// List returns the aliases of the session's objects.
	List(ctx context.Context) ([]string, error)
	// Post adds an item to a thread. It is never retried: a failure after
	// the request may have reached the server is ErrAmbiguous. A thread
	// that does not exist is ErrNoThread.
	Post(ctx context.Context, alias string, p NewItem) (Item, error)
	// ListItems reads one server-sized page of a thread's items;
	// ErrNoThread when there is no such thread.
	ListItems(ctx context.Context, alias string, q ItemQuery) (Page, error)
	// ListEvents reads one page of the session's change feed
	// (list_session_events, docs/wire.md).
	ListEvents(ctx context.Context, q EventQuery) (EventPage, error)
	// UploadFile stores data as a session file at alias
	// (upload_session_file), replacing what it held; a retry sends the
	// same bytes again, which is harmless.
	UploadFile(ctx context.Context, alias string, data []byte, name, contentType string) (FileInfo, error)
	// DownloadFile reads a session file whole (download_session_file).
	DownloadFile(ctx context.Context, alias string) (FileInfo, []byte, error)
}

// User is the identity behind an API key.
type User struct {
	UserID string `json:"user_id"`
	Name   string `json:"name"`
	Email  string `json:"email"`
}

// Object is a session object as served.
type Object struct {
	RevisionID string `json:"revision_id"`
	SessionID  string `json:"session_id"`
	Alias      string `json:"alias"`
	UpdatedAt  string `json:"updated_at"`
	// Value holds the raw bytes as served, so callers keep unknown keys and
	// numbers as written.
	Value json.RawMessage `json:"value"`
}

// Block is one content block of an item: {type:text,text} or {type:json,json}.
type Block struct {
	Type string          `json:"type"`
	Text string          `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
	// File is a file block's session file.
	File *FileRef `json:"file,omitempty"`
}

// FileRef is what a file block says of its session file.
type FileRef struct {
	Alias       string `json:"alias"`
	Name        string `json:"name,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// NewItem is what a caller posts; the server stamps id, created_at, user_id.
type NewItem struct {
	Content  []Block
	Metadata json.RawMessage
	ParentID string
}

// Item is a stored thread item.
type Item struct {
	ID        string          `json:"id"`
	CreatedAt string          `json:"created_at"`
	UserID    string          `json:"user_id"`
	Content   []Block         `json:"content"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	ParentID  string          `json:"parent_id,omitempty"`
}

// ItemQuery selects a page of items. Bounds are strict; empty is unbounded.
type ItemQuery struct {
	Ascending     bool
	CreatedSince  string
	CreatedBefore string
}

// Page is one answer of ListItems.
type Page struct {
	Items []Item
	// Date is the server's clock when it answered: the HTTP Date header,
	// the local store's clock; zero when the answer did not say.
	Date time.Time
}

// positiveOr is v, or d where v is zero or negative: a Config field left
// unset takes its default.
func positiveOr[T ~int | ~int64](v, d T) T { return cmp.Or(max(v, 0), d) }

// New picks the HTTP client or the local store by the URL's scheme.
// http:// is accepted only for loopback hosts, so a key never crosses a
// network in clear text.
func New(cfg Config) (Client, error) {
	cfg.Timeout = positiveOr(cfg.Timeout, DefaultTimeout)
	cfg.RetryBudget = positiveOr(cfg.RetryBudget, DefaultRetryBudget)
	cfg.RetryWaitMin = positiveOr(cfg.RetryWaitMin, DefaultRetryWaitMin)
	cfg.RetryWaitMax = positiveOr(cfg.RetryWaitMax, DefaultRetryWaitMax)
	cfg.PageSize = positiveOr(cfg.PageSize, DefaultPageSize)
	if cfg.RetryWaitMax < cfg.RetryWaitMin {
		cfg.RetryWaitMax = cfg.RetryWaitMin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || cfg.APIURL == "" {
		// The text is not echoed: it may hold a key.
		return nil, fmt.Errorf("blobhub: the api url is not a URL; pass https://…/v1 or file:///abs/dir")
	}
	if u.User != nil {
		return nil, fmt.Errorf("blobhub: api url must not carry credentials; pass the key with --api-key or BLOBHUB_API_KEY")
	}
	// Messages show the URL without its query, which may hold a key too.
	shown := redactURL(u)
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return nil, fmt.Errorf("blobhub: api url %q has no host; pass https://host/v1", shown)
		}
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("blobhub: api url %q uses http:// for a host that is not loopback; use https:// (http:// is only for 127.0.0.1, ::1 or localhost)", shown)
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("blobhub: api url %q names a host; a local store is file:///abs/dir", shown)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("blobhub: api url %q has extra parts; a local store is file:///abs/dir", shown)
		}
		if !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("blobhub: api url %q is not an absolute path; a local store is file:///abs/dir", shown)
		}
		return newLocalClient(cfg, filepath.Clean(u.Path)), nil
	default:
		return nil, fmt.Errorf("blobhub: api url %q has scheme %q; pass https://…/v1 or file:///abs/dir", shown, u.Scheme)
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("blobhub: no API key for %s; set BLOBHUB_API_KEY or a credentials profile", shown)
	}
	return newHTTPClient(cfg, u), nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	return c.String()
}
