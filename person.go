package main

// The person's side of a thread (`bhw-run thread …`): these commands write
// what a person would — a new envelope, instance.state completed or
// pending — and post items as the person, never as the runner.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
)

// CheckPoster refuses a person post on BlobHub made with the runner's own
// identity, which the runner would filter out as its own item.
func checkPoster(ctx context.Context, s *run.Setup, c blobhub.Client, log func(string)) error {
	if strings.HasPrefix(s.APIURL, "file://") {
		return nil
	}
	me, err := c.Me(ctx)
	if err != nil {
		return run.APIError(err, "users/me")
	}
	runner := ""
	if obj, err := c.Download(ctx, "worker"); err == nil {
		runner, _ = run.WorkerUserID(obj.Value)
	}
	if runner == "" {
		if id, _ := run.LoadIdentity(s.StateDir); id != nil {
			runner = id.UserID
		}
	}
	if runner == "" {
		log("cannot tell the runner's user; posting anyway (if it is the same user, the runner will ignore this item)")
		return nil
	}
	if runner == me.UserID {
		return run.Errorf(run.CodePosterIsRunner, "you would post as %s, the runner's own user, and the runner ignores its own items; post with another profile: --as PROFILE", me.UserID)
	}
	return nil
}

// newOptions are `thread new`'s flags.
type newOptions struct {
	WorkFolder  string // the checkout the agent works in
	Agent       string // agent.type
	Permissions string // "" for the machine's default
	Message     string // the first message, "" for none
}

// threadNew hands off a new thread: the envelope with state pending, and an
// optional first message.
func threadNew(ctx context.Context, c blobhub.Client, alias string, o newOptions) error {
	if _, err := c.Download(ctx, alias); err == nil {
		return run.Errorf(run.CodeThreadExists, "thread %q already exists; post to it with `bhw-run thread post`, or pick another alias", alias)
	} else if !errors.Is(err, blobhub.ErrNotFound) {
		return run.APIError(err, "download "+alias)
	}
	if err := c.Upload(ctx, alias, envelope.NewThread(o.WorkFolder, o.Agent, o.Permissions, alias)); err != nil {
		return run.APIError(err, "upload "+alias)
	}
	if o.Message != "" {
		if _, err := threadPost(ctx, c, alias, o.Message); err != nil {
			return err
		}
	}
	return nil
}

// threadPost posts a person's item (which also answers a waiting question).
func threadPost(ctx context.Context, c blobhub.Client, alias, text string) (blobhub.Item, error) {
	if _, err := c.Download(ctx, alias); errors.Is(err, blobhub.ErrNotFound) {
		return blobhub.Item{}, run.Errorf(run.CodeNoThread, "there is no thread %q; create it with `bhw-run thread new`", alias)
	}
	it, err := c.Post(ctx, alias, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: text}}, Metadata: json.RawMessage("{}")})
	if err != nil {
		return it, run.APIError(err, "post to "+alias)
	}
	return it, nil
}

// threadSetState is the person's write of instance.state (stop: completed;
// retry: failed → pending, or active with no local record → pending).
func threadSetState(ctx context.Context, s *run.Setup, c blobhub.Client, alias, to string) (string, error) {
	obj, env, err := run.DownloadJob(ctx, c, alias)
	if err != nil {
		return "", err
	}
	if to == envelope.StatePending {
		switch env.State {
		case envelope.StateFailed:
		case envelope.StateActive:
			t, _ := envelope.LoadThread(filepath.Join(run.ThreadDir(s.JobDir, alias), "thread.yaml"))
			if t != nil && t.Agent.State == envelope.StateActive {
				return "", run.Errorf(run.CodeThreadActive, "thread %q is active and this state tree runs it; nothing to retry", alias)
			}
		default:
			return "", run.Errorf(run.CodeNotRetryable, "thread %q is %s; only a failed thread (or an active one with no local state) can be retried", alias, orNone(env.State))
		}
	}
	nv, err := envelope.WithState(obj.Value, to)
	if err != nil {
		return "", err
	}
	if err := c.Upload(ctx, alias, nv); err != nil {
		return "", run.APIError(err, "upload "+alias)
	}
	return env.State, nil
}

func orNone(s string) string {
	if s == "" {
		return "without a state"
	}
	return s
}

// defaultShowPoll is how often `thread show --follow` asks for new items.
const defaultShowPoll = 2 * time.Second

// showOptions are `thread show`'s flags.
type showOptions struct {
	JSON   bool          // one item a line, as JSON
	Follow bool          // keep printing new items until ctx ends
	Poll   time.Duration // how often --follow asks (0: defaultShowPoll)
}

// threadShow prints the thread's state and items; with Follow it keeps
// printing new items until ctx ends (main cancels it on SIGINT/SIGTERM),
// and then returns nil.
func threadShow(ctx context.Context, c blobhub.Client, alias string, o showOptions, w io.Writer) error {
	poll, jsonOut, follow := o.Poll, o.JSON, o.Follow
	if poll <= 0 {
		poll = defaultShowPoll
	}
	obj, err := c.Download(ctx, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return run.Errorf(run.CodeNoThread, "there is no thread %q", alias)
	}
	if err != nil {
		return run.APIError(err, "download "+alias)
	}
	env, _ := envelope.Parse(obj.Value)
	if !jsonOut && env != nil {
		fmt.Fprintf(w, "thread %s: %s (agent %s, work folder %s)\n", shown(alias), shown(orNone(env.State)), shown(env.Agent.Type), shown(env.WorkFolder))
	}
	show := func(it blobhub.Item) bool {
		if jsonOut {
			b, _ := json.Marshal(it)
			fmt.Fprintln(w, string(jsonShown(b)))
		} else {
			fmt.Fprintln(w, renderItem(it))
		}
		return true
	}
	if !follow {
		// Items are printed as read, never held; the bound stops a server
		// that keeps answering new items.
		_, more, err := blobhub.TailEach(ctx, c, alias, blobhub.Cursor{}, showLimits, show)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			return run.APIError(err, "read items of "+alias)
		case more:
			return run.Errorf(run.CodeUnavailable, "stopped after %d items of %q without reaching the end (a server that keeps answering new items?); pass --follow to read on", showLimits.Items, alias)
		}
		return nil
	}
	cur := blobhub.Cursor{}
	for {
		shown := 0
		next, more, err := blobhub.TailEach(ctx, c, alias, cur, blobhub.TailLimits, func(it blobhub.Item) bool {
			shown++
			return show(it)
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return run.APIError(err, "read items of "+alias)
		}
		cur = next
		if more && shown > 0 {
			continue // a long thread: read on at once
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// showLimits bounds `thread show` without --follow.
var showLimits = blobhub.Limits{Items: 100000}

// renderItem is one item for a person at a terminal, its wire text
// escaped (shown, shownText).
func renderItem(it blobhub.Item) string {
	var meta struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(it.Metadata, &meta)
	var text []string
	for _, b := range it.Content {
		if b.Text != "" {
			text = append(text, b.Text)
		} else if len(b.JSON) > 0 {
			text = append(text, string(b.JSON))
		}
	}
	who := "person"
	if meta.Type != "" {
		who = meta.Type
	}
	ts := it.CreatedAt
	if t, err := blobhub.ParseTime(it.CreatedAt); err == nil {
		ts = t.Local().Format("15:04:05")
	}
	body := shownText(strings.Join(text, "\n"))
	body = strings.ReplaceAll(body, "\n", "\n    ")
	return fmt.Sprintf("%s [%s] %s", shown(ts), shown(who), body)
}
