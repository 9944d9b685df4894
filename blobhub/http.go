package blobhub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// The wire (docs/wire.md). Every session command is one POST of a flat
// {"command": …, args…} body to {api_url}/revisions/{revision_id}/data/query
// (reads) or …/data/command (writes); the server refuses a key it does not
// know, so nothing else travels in the body. Every answer is an envelope
// whose "status" is "success", or an error code and message.
const (
	userAgent = "bhw-run"

	maxBody = 256 << 20 // an answer larger than this is refused, not buffered
)

// The commands, by the names errors (and the test hub's request log) give
// them.
const (
	CmdMe        = "users_me" // GET {api_url}/users/me
	CmdDownload  = "download_session_object"
	CmdUpload    = "upload_session_object"
	CmdDelete    = "delete_session_object"
	CmdList      = "list_session_objects"
	CmdPost      = "post_session_thread_item"
	CmdListItems = "list_session_thread_items"
)

// channels: the commands that write go to data/command, the rest to
// data/query.
var writes = map[string]bool{CmdUpload: true, CmdDelete: true, CmdPost: true, CmdUploadFile: true}

type httpClient struct {
	cfg  Config
	base string // api url without a trailing slash
	hc   *http.Client
	log  *slog.Logger

	mu         sync.Mutex
	budgetLeft time.Duration // retry time the client may still spend
}

func newHTTPClient(cfg Config, u *url.URL) *httpClient {
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	if hc.Timeout == 0 {
		// Each attempt, body included, gets its own timeout; the context
		// bounds the whole call.
		hc.Timeout = cfg.Timeout
	}
	return &httpClient{
		cfg:        cfg,
		base:       strings.TrimRight(redactURL(u), "/"),
		hc:         hc,
		log:        cfg.Logger,
		budgetLeft: cfg.RetryBudget,
	}
}

// call is one logical request: the wire body and what came back.
type call struct {
	command, alias string
	method, url    string
	body           []byte
	date           time.Time // the Date header of the answer do returned
	maxValue       int64     // the bound of a download (WithMaxValue), 0 for none
	// data, when set, is sent as the body (application/octet-stream) and
	// body as the X-Request-Body header: a session file's upload.
	data []byte
	// binaryAnswer asks for application/octet-stream: a 2xx answer of
	// that type is the bytes, its envelope in answerHeader.
	binaryAnswer bool
	answerHeader string
	gotBinary    bool
}

func (c *httpClient) sessionCall(cmd, alias string, fields map[string]any) (*call, error) {
	if c.cfg.RevisionID == "" || c.cfg.SessionID == "" {
		return nil, opErr(cmd, alias, errors.New("no revision or session id configured; pass --revision and --session or configure the section"))
	}
	m := map[string]any{"command": cmd, "session_id": c.cfg.SessionID}
	for k, v := range fields {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, opErr(cmd, alias, err)
	}
	channel := "/data/query"
	if writes[cmd] {
		channel = "/data/command"
	}
	return &call{
		command: cmd, alias: alias, method: http.MethodPost,
		url:  c.base + "/revisions/" + url.PathEscape(c.cfg.RevisionID) + channel,
		body: b,
	}, nil
}

// sessionDo sends one session command (sessionCall): the answer, and the
// server's clock when it gave it (its Date header; zero when it said none).
func (c *httpClient) sessionDo(ctx context.Context, cmd, alias string, fields map[string]any) ([]byte, time.Time, error) {
	k, err := c.sessionCall(cmd, alias, fields)
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := c.do(ctx, k)
	return b, k.date, err
}

// header: the key travels in X-API-Key, as the SDK, the CLI and the
// worker send it.
func (c *httpClient) header(h http.Header) {
	h.Set("X-API-Key", c.cfg.APIKey)
	h.Set("User-Agent", userAgent)
	h.Set("Accept", "application/json")
	h.Set("Content-Type", "application/json")
}

// take spends d of the retry budget; false when it does not cover d.
func (c *httpClient) take(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > c.budgetLeft {
		c.budgetLeft = 0
		return false
	}
	c.budgetLeft -= d
	return true
}

// backoff is capped exponential, or Retry-After (seconds or a date) when
// the server sends one. A Retry-After longer than the budget ends the call.
func backoff(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if s := resp.Header.Get("Retry-After"); s != "" {
			if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= 0 {
				if n > int64(math.MaxInt64/time.Second) {
					// n seconds overflow a Duration (a negative wait would
					// add to the budget and retry at once): wait forever,
					// which the budget refuses.
					return math.MaxInt64
				}
				return time.Duration(n) * time.Second
			}
			if t, err := http.ParseTime(s); err == nil {
				return max(time.Until(t), 0)
			}
		}
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// errBadBody marks a 2xx answer whose body is truncated or not JSON: on a
// read it is retried like a dropped connection.
var errBadBody = errors.New("answer is truncated or not JSON")

// do runs a read, list or upload with retries (go-retryablehttp): 429, 5xx,
// connection errors and bad bodies are retried with backoff within the
// client's budget, each attempt with its own timeout; a cancelled context
// stops at once. It returns the body of a 2xx answer.
func (c *httpClient) do(ctx context.Context, k *call) ([]byte, error) {
	var body []byte
	req, err := c.request(ctx, k, &body)
	if err != nil {
		return nil, opErr(k.command, k.alias, err)
	}
	resp, err := c.retrying(k).Do(req)
	if resp != nil && resp.Body != nil && body == nil {
		// The handler did not run (a retryable status past the budget).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		body = b
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, opErr(k.command, k.alias, unavailable(ctx.Err()))
		}
		if dns := noSuchHost(err); dns != nil {
			return nil, opErr(k.command, k.alias, &NoSuchHostError{URL: c.base, Err: dns})
		}
		if errors.Is(err, ErrTooLarge) {
			return nil, opErr(k.command, k.alias, err)
		}
		var ue *url.Error
		if errors.As(err, &ue) && !retryableURLError(ue) {
			return nil, opErr(k.command, k.alias, err)
		}
		return nil, opErr(k.command, k.alias, unavailable(err))
	}
	if resp.StatusCode/100 == 2 {
		if k.gotBinary {
			return body, nil
		}
		if k.binaryAnswer {
			return nil, opErr(k.command, k.alias, &APIError{Status: resp.StatusCode, Code: "protocol_mismatch", Message: "expected an application/octet-stream answer"})
		}
		if e := failed(resp.StatusCode, body); e != nil {
			return nil, opErr(k.command, k.alias, e)
		}
		return body, nil
	}
	return nil, opErr(k.command, k.alias, statusError(resp, body))
}

// failed is the error a 2xx answer stands for: the server says a command
// failed with a 200 whose "status" is not "success". nil for success.
func failed(status int, body []byte) *APIError {
	var env struct {
		Status *string `json:"status"`
	}
	if json.Unmarshal(body, &env) != nil || (env.Status != nil && *env.Status == "success") {
		return nil
	}
	e := parseAPIError(status, body)
	if e.Code == "" {
		e.Code = "command_failed"
	}
	return e
}

// request is k as a request whose answer, read whole up to maxBody, lands
// in body; a 2xx answer that is not JSON (or is cut) is retried.
func (c *httpClient) request(ctx context.Context, k *call, body *[]byte) (*retryablehttp.Request, error) {
	var rawBody any
	if k.body != nil {
		rawBody = k.body
	}
	if k.data != nil {
		rawBody = k.data
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, k.method, k.url, rawBody)
	if err != nil {
		return nil, err
	}
	c.header(req.Header)
	if k.data != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("X-Request-Body", string(k.body))
	}
	if k.binaryAnswer {
		req.Header.Set("Accept", "application/octet-stream")
	}
	req.SetResponseHandler(func(resp *http.Response) error {
		defer resp.Body.Close()
		limit := int64(maxBody)
		if k.maxValue > 0 && resp.StatusCode/100 == 2 {
			limit = k.maxValue + answerSlack
		}
		binary := k.binaryAnswer && resp.StatusCode/100 == 2 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/octet-stream")
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return err // a body cut by the connection: retry
		}
		if int64(len(b)) > limit {
			if k.maxValue > 0 {
				return &TooLargeError{Size: max(resp.ContentLength, 0), Max: k.maxValue}
			}
			return fmt.Errorf("answer larger than %d bytes", maxBody)
		}
		*body = b
		k.date, _ = http.ParseTime(resp.Header.Get("Date"))
		if binary {
			k.gotBinary, k.answerHeader = true, resp.Header.Get("X-Response-Body")
			if cl := resp.ContentLength; cl >= 0 && int64(len(b)) != cl {
				return errBadBody // cut short: retry
			}
			return nil
		}
		if resp.StatusCode/100 == 2 && !json.Valid(b) {
			return errBadBody
		}
		return nil
	})
	return req, nil
}

// retrying is the client that sends k: it retries what the default policy
// retries, each wait (and each failed retry's own time) taken from the
// client's budget, and stops when the budget is spent, not after a count.
func (c *httpClient) retrying(k *call) *retryablehttp.Client {
	var (
		wait     time.Duration
		attempt  int
		retrying bool
		mark     time.Time
	)
	return &retryablehttp.Client{
		HTTPClient: c.hc,
		RetryMax:   1 << 30, // the budget, not a count, ends the retries
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if errors.Is(err, ErrTooLarge) {
				return false, nil // the same answer again would be as large
			}
			if noSuchHost(err) != nil {
				return false, nil // a wrong URL: asking again gets the same answer
			}
			retry, _ := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
			if !retry {
				return false, nil
			}
			if retrying {
				// The failed retry's own time counts against the budget.
				c.take(time.Since(mark))
			}
			wait = backoff(c.cfg.RetryWaitMin, c.cfg.RetryWaitMax, attempt, resp)
			attempt++
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			if !c.take(wait) {
				c.log.Warn("blobhub retry budget spent", "command", k.command, "alias", k.alias, "status", status, "error", errString(err))
				return false, nil
			}
			c.log.Debug("blobhub retry", "command", k.command, "alias", k.alias, "status", status, "error", errString(err), "wait", wait, "attempt", attempt)
			if c.cfg.OnRetry != nil {
				c.cfg.OnRetry(Retry{Command: k.command, Attempt: attempt, Reason: retryReason(resp, err), Wait: wait, Left: c.left()})
			}
			return true, nil
		},
		Backoff: func(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return wait },
		PrepareRetry: func(*http.Request) error {
			retrying, mark = true, time.Now()
			return nil
		},
		// Keep the last answer and error for the mapping in do.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
}

// left is the retry time the client may still spend.
func (c *httpClient) left() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.budgetLeft
}

// retryReason is why a call is retried, in a few words for a person:
// the status, or the innermost cause of a failed connection.
func retryReason(resp *http.Response, err error) string {
	var (
		dns   *net.DNSError
		errno syscall.Errno
		ne    net.Error
	)
	switch {
	case resp != nil:
		return fmt.Sprintf("status %d", resp.StatusCode)
	case errors.As(err, &dns):
		return dns.Err
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case err != nil:
		return err.Error()
	}
	return "unknown"
}

// noSuchHost is the resolver's final "no such name" in err, nil when err
// is not one (a timeout or an unreachable resolver may mend by itself).
func noSuchHost(err error) *net.DNSError {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return dns
	}
	return nil
}

func retryableURLError(ue *url.Error) bool {
	retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), nil, ue)
	return retry
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// statusError maps a non-2xx answer: 429/5xx are transient, the rest is the
// server's word.
func statusError(resp *http.Response, body []byte) error {
	e := parseAPIError(resp.StatusCode, body)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return unavailable(transientAnswer{e})
	}
	return e
}

// parseAPIError reads the failure envelope {"status", "error": code,
// "message"} the API answers (docs/wire.md). Two older shapes the test hub
// once served, {"error": {"code", "message"}} and {"code", "message"}, are
// still read; any other body is kept, shortened, as the message.
func parseAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) == nil {
		str := func(r json.RawMessage) string {
			var s string
			if json.Unmarshal(r, &s) == nil {
				return s
			}
			return ""
		}
		if r, ok := m["error"]; ok {
			var inner map[string]json.RawMessage
			if json.Unmarshal(r, &inner) == nil {
				e.Code, e.Message = str(inner["code"]), str(inner["message"])
			} else {
				e.Code = str(r)
			}
		}
		if e.Code == "" {
			e.Code = str(m["code"])
		}
		if e.Message == "" {
			e.Message = str(m["message"])
		}
		if e.Message == "" {
			e.Message = str(m["detail"])
		}
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e.Message = msg
	return e
}

// Me: GET /users/me answers the user under "user": its id (the user_id
// items are stamped with), name and email (docs/wire.md).
func (c *httpClient) Me(ctx context.Context) (User, error) {
	b, err := c.do(ctx, &call{command: CmdMe, method: http.MethodGet, url: c.base + "/users/me"})
	if err != nil {
		return User{}, err
	}
	var ans struct {
		User *struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			Email string `json:"email"`
		} `json:"user"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return User{}, opErr(CmdMe, "", fmt.Errorf("answer is not a user: %w", err))
	}
	if ans.User == nil || ans.User.ID == "" {
		return User{}, opErr(CmdMe, "", errors.New("answer carries no user id"))
	}
	return User{UserID: ans.User.ID, Name: ans.User.Name, Email: ans.User.Email}, nil
}

// Download: the answer holds the object {…, alias, updated_at, value}
// under "object". The API answers 403 for an alias that does not exist (the
// same status as for one the key may not read): that answer is ErrNotFound
// here, and ErrAuth too, so a caller that asks for either hears it.
func (c *httpClient) Download(ctx context.Context, alias string) (Object, error) {
	k, err := c.sessionCall(CmdDownload, alias, map[string]any{"alias": alias})
	if err != nil {
		return Object{}, err
	}
	k.maxValue = maxValue(ctx)
	b, err := c.do(ctx, k)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		ae.Absent = true
	}
	if err != nil {
		return Object{}, err
	}
	var ans struct {
		Object *Object `json:"object"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Object{}, opErr(CmdDownload, alias, fmt.Errorf("answer is not an object: %w", err))
	}
	var o Object
	if ans.Object != nil {
		o = *ans.Object
	}
	if len(o.Value) == 0 || string(o.Value) == "null" {
		return Object{}, opErr(CmdDownload, alias, &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "answer carries no value"})
	}
	if k.maxValue > 0 && int64(len(o.Value)) > k.maxValue {
		return Object{}, opErr(CmdDownload, alias, &TooLargeError{Size: int64(len(o.Value)), Max: k.maxValue})
	}
	return o, nil
}

func (c *httpClient) Upload(ctx context.Context, alias string, value json.RawMessage) error {
	if !json.Valid(value) {
		return opErr(CmdUpload, alias, errors.New("value is not JSON"))
	}
	_, _, err := c.sessionDo(ctx, CmdUpload, alias, map[string]any{"alias": alias, "value": value})
	return err
}

// Delete sends delete_session_object {session_id, alias} on data/command.
func (c *httpClient) Delete(ctx context.Context, alias string) error {
	_, _, err := c.sessionDo(ctx, CmdDelete, alias, map[string]any{"alias": alias})
	return err
}

// maxListPages bounds List: a server that keeps answering a cursor is cut
// off after this many pages (a million aliases at the largest page).
const maxListPages = 1000

// List pages list_session_objects at its largest page, following the
// answer's opaque cursor until it is null or absent.
func (c *httpClient) List(ctx context.Context) ([]string, error) {
	var out []string
	cursor := ""
	for range maxListPages {
		f := map[string]any{"limit": MaxListLimit}
		if cursor != "" {
			f["cursor"] = cursor // never null: the server refuses one
		}
		b, _, err := c.sessionDo(ctx, CmdList, "", f)
		if err != nil {
			return nil, err
		}
		var page struct {
			Objects []struct {
				Alias string `json:"alias"`
			} `json:"objects"`
			Cursor *string `json:"cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil || page.Objects == nil {
			return nil, opErr(CmdList, "", errors.New(`answer carries no "objects" list`))
		}
		for _, o := range page.Objects {
			if o.Alias == "" {
				return nil, opErr(CmdList, "", errors.New("a listed object carries no alias"))
			}
			out = append(out, o.Alias)
		}
		if page.Cursor == nil || *page.Cursor == "" {
			return out, nil
		}
		if *page.Cursor == cursor {
			return nil, opErr(CmdList, "", errors.New("the server answered the cursor it was sent; the listing would not end"))
		}
		cursor = *page.Cursor
	}
	return nil, opErr(CmdList, "", fmt.Errorf("the listing did not end after %d pages", maxListPages))
}

// ListItems: list_session_thread_items {alias, ascending, created_since,
// created_before, limit} answers {"items": […], "cursor"}; the bounds are
// strict. The caller pages by created_at (Tail), so the cursor is not
// followed; the limit is sent because without one the server answers ten.
func (c *httpClient) ListItems(ctx context.Context, alias string, q ItemQuery) (Page, error) {
	f := map[string]any{"alias": alias, "ascending": q.Ascending, "limit": c.cfg.PageSize} // the API defaults to descending
	if q.CreatedSince != "" {
		f["created_since"] = q.CreatedSince
	}
	if q.CreatedBefore != "" {
		f["created_before"] = q.CreatedBefore
	}
	b, date, err := c.sessionDo(ctx, CmdListItems, alias, f)
	if err != nil {
		return Page{}, err
	}
	var ans struct {
		Items []Item `json:"items"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Page{}, opErr(CmdListItems, alias, fmt.Errorf("answer is not a list of items: %w", err))
	}
	if ans.Items == nil {
		ans.Items = []Item{}
	}
	return Page{Items: ans.Items, Date: date}, nil
}

// Post sends one item, once. Only a failure known to come before the
// server could act (a refused connection, a cancelled context before
// sending, 429) is ErrUnavailable; anything after the request may have
// arrived — a dropped connection, a timeout, a 5xx, a cut answer — is
// ErrAmbiguous. A 200 whose envelope says the command failed is the
// server's word (the item was not stored). The answer is {"item": {id,
// created_at, user_id, …}}.
func (c *httpClient) Post(ctx context.Context, alias string, p NewItem) (Item, error) {
	f := map[string]any{"alias": alias, "content": p.Content}
	if len(p.Metadata) > 0 {
		f["metadata"] = p.Metadata
	} else {
		f["metadata"] = map[string]any{}
	}
	if p.ParentID != "" {
		f["parent_id"] = p.ParentID
	}
	k, err := c.sessionCall(CmdPost, alias, f)
	if err != nil {
		return Item{}, err
	}
	if err := ctx.Err(); err != nil {
		return Item{}, opErr(CmdPost, alias, unavailable(err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.url, bytes.NewReader(k.body))
	if err != nil {
		return Item{}, opErr(CmdPost, alias, err)
	}
	c.header(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		if dns := noSuchHost(err); dns != nil {
			return Item{}, opErr(CmdPost, alias, &NoSuchHostError{URL: c.base, Err: dns})
		}
		if notSent(err) {
			return Item{}, opErr(CmdPost, alias, unavailable(err))
		}
		return Item{}, opErr(CmdPost, alias, ambiguous(err))
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return Item{}, opErr(CmdPost, alias, unavailable(transientAnswer{parseAPIError(resp.StatusCode, b)}))
	case resp.StatusCode >= 500:
		return Item{}, opErr(CmdPost, alias, ambiguous(transientAnswer{parseAPIError(resp.StatusCode, b)}))
	case resp.StatusCode/100 != 2:
		return Item{}, opErr(CmdPost, alias, parseAPIError(resp.StatusCode, b))
	case rerr != nil:
		return Item{}, opErr(CmdPost, alias, ambiguous(rerr))
	}
	var ans struct {
		Item *Item `json:"item"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Item{}, opErr(CmdPost, alias, ambiguous(errBadBody))
	}
	if e := failed(resp.StatusCode, b); e != nil {
		return Item{}, opErr(CmdPost, alias, e)
	}
	it := ans.Item
	if it == nil || it.ID == "" {
		return Item{}, opErr(CmdPost, alias, ambiguous(errors.New("answer carries no item id")))
	}
	return *it, nil
}

// notSent reports a failure to connect at all: dial errors (refused,
// unreachable, DNS) mean the server never saw the request.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
