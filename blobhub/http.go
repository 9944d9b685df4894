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
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// The wire. Every session command is one POST to
// {api_url}/revisions/{revision_id}/data.
const (
	engine    = "workflow_blobhub"
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
}

func (c *httpClient) sessionCall(cmd, alias string, fields map[string]any) (*call, error) {
	if c.cfg.RevisionID == "" || c.cfg.SessionID == "" {
		return nil, opErr(cmd, alias, errors.New("no revision or session id configured; pass --revision and --session or configure the section"))
	}
	m := map[string]any{"engine": engine, "command": cmd, "session_id": c.cfg.SessionID}
	for k, v := range fields {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, opErr(cmd, alias, err)
	}
	return &call{
		command: cmd, alias: alias, method: http.MethodPost,
		url:  c.base + "/revisions/" + url.PathEscape(c.cfg.RevisionID) + "/data",
		body: b,
	}, nil
}

// header: the name of the header the key travels in is a guess (the pages
// read document the key, not how it is sent).
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
		return body, nil
	}
	return nil, opErr(k.command, k.alias, statusError(resp, body))
}

// request is k as a request whose answer, read whole up to maxBody, lands
// in body; a 2xx answer that is not JSON (or is cut) is retried.
func (c *httpClient) request(ctx context.Context, k *call, body *[]byte) (*retryablehttp.Request, error) {
	var rawBody any
	if k.body != nil {
		rawBody = k.body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, k.method, k.url, rawBody)
	if err != nil {
		return nil, err
	}
	c.header(req.Header)
	req.SetResponseHandler(func(resp *http.Response) error {
		defer resp.Body.Close()
		limit := int64(maxBody)
		if k.maxValue > 0 && resp.StatusCode/100 == 2 {
			limit = k.maxValue + answerSlack
		}
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

// parseAPIError accepts {"error":{"code","message"}}, {"code","message"},
// {"error":"code","message"} or any other body (kept, shortened, as the
// message). The documentation names the error codes of the commands
// (invalid_thread_envelope, thread_item_too_large, not_found) but shows no
// error body: every one of these shapes is a guess, the first the one the
// test hub answers.
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

// Me: GET /users/me gives user_id, name and email (worker/cli/login);
// whether they come flat or under "user" is a guess, so both are read.
func (c *httpClient) Me(ctx context.Context) (User, error) {
	b, err := c.do(ctx, &call{command: CmdMe, method: http.MethodGet, url: c.base + "/users/me"})
	if err != nil {
		return User{}, err
	}
	var ans struct {
		User
		Inner *User `json:"user"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return User{}, opErr(CmdMe, "", fmt.Errorf("answer is not a user: %w", err))
	}
	u := ans.User
	if ans.Inner != nil {
		u = *ans.Inner
	}
	if u.UserID == "" {
		return User{}, opErr(CmdMe, "", errors.New("answer carries no user_id"))
	}
	return u, nil
}

// Download: the answer is the documented envelope {revision_id,
// session_id, alias, updated_at, value} (session objects); the same under
// "object" is read too, a guess kept from before the envelope was known.
// That a missing alias is 404 or code not_found is a guess.
func (c *httpClient) Download(ctx context.Context, alias string) (Object, error) {
	k, err := c.sessionCall(CmdDownload, alias, map[string]any{"alias": alias})
	if err != nil {
		return Object{}, err
	}
	k.maxValue = maxValue(ctx)
	b, err := c.do(ctx, k)
	if err != nil {
		return Object{}, err
	}
	var ans struct {
		Object
		Inner *Object `json:"object"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return Object{}, opErr(CmdDownload, alias, fmt.Errorf("answer is not an object: %w", err))
	}
	o := ans.Object
	if ans.Inner != nil && len(o.Value) == 0 {
		o = *ans.Inner
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
	k, err := c.sessionCall(CmdUpload, alias, map[string]any{"alias": alias, "value": value})
	if err != nil {
		return err
	}
	_, err = c.do(ctx, k)
	return err
}

// Delete sends delete_session_object. The documentation names the command
// (delete_session_object(session_id, alias=…)) but shows no request or
// answer; the body is a guess, shaped as every other session command's.
func (c *httpClient) Delete(ctx context.Context, alias string) error {
	k, err := c.sessionCall(CmdDelete, alias, map[string]any{"alias": alias})
	if err != nil {
		return err
	}
	_, err = c.do(ctx, k)
	return err
}

func (c *httpClient) List(ctx context.Context) ([]string, error) {
	k, err := c.sessionCall(CmdList, "", nil)
	if err != nil {
		return nil, err
	}
	b, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	aliases, err := parseAliases(b)
	if err != nil {
		return nil, opErr(CmdList, "", err)
	}
	return aliases, nil
}

// parseAliases accepts {"aliases":[…]}, {"objects":[{"alias":…}]} and a bare
// array of strings or objects. The documentation says the command lists
// the aliases of the session's objects but shows no answer: every shape is
// a guess, {"objects": …} the one the test hub answers.
func parseAliases(b []byte) ([]string, error) {
	var m struct {
		Aliases json.RawMessage `json:"aliases"`
		Objects json.RawMessage `json:"objects"`
	}
	list := json.RawMessage(b)
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		switch {
		case m.Aliases != nil:
			list = m.Aliases
		case m.Objects != nil:
			list = m.Objects
		default:
			return nil, errors.New(`answer has neither "aliases" nor "objects"`)
		}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(list, &raw); err != nil {
		return nil, fmt.Errorf("answer is not a list of aliases: %w", err)
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Alias string `json:"alias"`
		}
		if err := json.Unmarshal(r, &o); err != nil || o.Alias == "" {
			return nil, fmt.Errorf("list entry %s carries no alias", r)
		}
		out = append(out, o.Alias)
	}
	return out, nil
}

// ListItems: the request and the answer {"items": […]} are documented
// (list_session_thread_items; strict created_since and created_before, the
// page size the server's); a bare array is read too, a guess.
func (c *httpClient) ListItems(ctx context.Context, alias string, q ItemQuery) (Page, error) {
	f := map[string]any{"alias": alias, "ascending": q.Ascending} // the API defaults to descending
	if q.CreatedSince != "" {
		f["created_since"] = q.CreatedSince
	}
	if q.CreatedBefore != "" {
		f["created_before"] = q.CreatedBefore
	}
	k, err := c.sessionCall(CmdListItems, alias, f)
	if err != nil {
		return Page{}, err
	}
	b, err := c.do(ctx, k)
	if err != nil {
		return Page{}, err
	}
	var ans struct {
		Items []Item `json:"items"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		err = json.Unmarshal(b, &ans.Items)
	} else {
		err = json.Unmarshal(b, &ans)
	}
	if err != nil {
		return Page{}, opErr(CmdListItems, alias, fmt.Errorf("answer is not a list of items: %w", err))
	}
	if ans.Items == nil {
		ans.Items = []Item{}
	}
	return Page{Items: ans.Items, Date: k.date}, nil
}

// Post sends one item, once. Only a failure known to come before the
// server could act (a refused connection, a cancelled context before
// sending, 429) is ErrUnavailable; anything after the request may have
// arrived — a dropped connection, a timeout, a 5xx, a cut answer — is
// ErrAmbiguous. The answer {"item": {id, created_at, user_id, …}} is
// documented (post_session_thread_item); a bare item is read too, a guess.
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
	it := ans.Item
	if it == nil {
		var bare Item
		if json.Unmarshal(b, &bare) == nil && bare.ID != "" {
			it = &bare
		}
	}
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
