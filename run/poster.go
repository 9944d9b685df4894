package run

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// poster posts the record's journaled emissions to BlobHub, never blindly
// twice: a post whose outcome is unknown is looked for by its emission_id
// before it is sent again, and a search that cannot tell is an error. It
// confirms what the server holds in the record and owns what posting
// learned this run (BlobHub unreachable, the key refused, the thread gone,
// the aliases to cache as not mine), which the run asks for once at its
// end (err).
type poster struct {
	client blobhub.Client
	alias  string // the job thread
	jobDir string // the section's jobs folder, where not_mine.yaml lives
	logRef string // thread.log as a cut item names it (activation.logRef)
	log    *slog.Logger
	rec    *record
	run    postingRun // what a post means for the rest of the run

	// offline: a post found BlobHub unreachable, or could not tell whether
	// it landed: journal only until the end.
	offline bool
	// authRefused: a post got 401/403; the run ends AUTH_INVALID (77).
	authRefused bool
	// threadGone: a post to the job thread was answered
	// invalid_thread_envelope (the thread was deleted); the run ends
	// THREAD_NOT_FOUND (66) with what it could not post journaled.
	// turnStopped says a running turn was stopped for it.
	threadGone  bool
	turnStopped bool
	// notMine holds aliases for not_mine.yaml, written once at the end
	// (flushNotMine); under notMineMu.
	notMineMu sync.Mutex
	notMine   map[string]string
	// failurePosted names the failures (their code, on the thread and on
	// worker) whose items this run confirmed: a run killed after
	// journaling them fails the thread again on the next run, which then
	// journals them no second time (failureItems). Under rec.mu.
	failurePosted map[string]bool
}

// postingRun is what a post means for the rest of the run: the activation.
type postingRun interface {
	// stateFault stops the run on a state write that failed.
	stateFault(err error)
	// notePosted is told of every emission confirmed, under rec.mu.
	notePosted(e *emission, item blobhub.Item)
	// remakeWorker makes the deleted worker object again, once per run.
	remakeWorker(ctx context.Context) bool
	// stopTurnFor interrupts the running turn, reporting whether one ran.
	stopTurnFor(cause error) bool
	// replayIntent finishes an artifact or publish intent a killed run
	// left open, returning the later emissions it settled.
	replayIntent(ctx context.Context, e *emission, later []*emission) (map[string]bool, error)
}

// post sends one journaled emission, never blindly twice: an ambiguous
// failure is reconciled by listing the thread for its emission_id.
func (p *poster) post(ctx context.Context, e *emission) {
	if e == nil || p.offline {
		return
	}
	// The journal decides: an emission it already holds as posted (or
	// dropped) is never sent again, whoever asks twice (a turn started
	// over after a failed resume acknowledges the same answer again).
	p.rec.mu.Lock()
	settled := p.rec.j.settled(e.ID)
	p.rec.mu.Unlock()
	if settled {
		return
	}
	ctx = context.WithoutCancel(ctx)
	item, err := p.send(ctx, e, newItem(fitItem(e.Item, ItemBudget, p.logRef)))
	if errors.Is(err, blobhub.ErrItemTooLarge) {
		item, err = p.send(ctx, e, newItem(stubItem(e.Item, itemSize(e.Item), p.logRef)))
	}
	var api *blobhub.APIError
	var undecided *exit.Error
	switch {
	case err == nil:
		p.confirmed(e, item)
	case errors.Is(err, blobhub.ErrNoThread) && e.Target == setup.WorkerAlias && p.run.remakeWorker(ctx):
		// The worker object was deleted: made again, the item goes to it.
		p.post(ctx, e)
	case errors.Is(err, blobhub.ErrNoThread):
		// invalid_thread_envelope: the thread is gone, which is no refusal
		// of the item; it waits in the journal with everything after it.
		p.log.Error("the thread is gone from BlobHub (deleted?); items stay journaled", "target", e.Target, "emission_id", e.ID, "error", err)
		p.offline = true
		if e.Target == p.alias {
			p.threadGone = true
			if p.run.stopTurnFor(errThreadGone) {
				p.turnStopped = true
			}
		}
	case errors.As(err, &undecided):
		// The search for an ambiguous post could not tell: posting again
		// might post it twice, so it waits, with everything after it.
		p.log.Warn("items stay journaled for the next run", "emission_id", e.ID, "error", undecided.Message)
		p.offline = true
	case errors.As(err, &api) && !errors.Is(err, blobhub.ErrAuth):
		p.log.Error("BlobHub refused an item for good; dropping it", "emission_id", e.ID, "error", err)
		p.rec.mu.Lock()
		err := p.rec.j.drop(e.ID)
		p.rec.mu.Unlock()
		if err != nil {
			p.run.stateFault(err)
		}
	case errors.Is(err, blobhub.ErrAuth):
		p.log.Error("BlobHub refused the API key while posting; items stay journaled", "emission_id", e.ID)
		p.offline, p.authRefused = true, true
	default:
		p.log.Warn("BlobHub unreachable; items stay journaled for the next run", "emission_id", e.ID, "error", err)
		p.offline = true
	}
}

// send posts body, the form of e the server is sent; after an ambiguous
// failure it looks for e's emission_id and posts the same body again only
// when the server does not hold it.
func (p *poster) send(ctx context.Context, e *emission, body blobhub.NewItem) (blobhub.Item, error) {
	item, err := p.client.Post(ctx, e.Target, body)
	if !errors.Is(err, blobhub.ErrAmbiguous) {
		return item, err
	}
	p.log.Warn("a post's outcome is unknown; looking for it before posting again", "emission_id", e.ID)
	found, err := p.find(ctx, e)
	switch {
	case err != nil:
		return blobhub.Item{}, err
	case found != nil:
		return *found, nil
	}
	return p.client.Post(ctx, e.Target, body)
}

// confirmed records that the server holds e.
func (p *poster) confirmed(e *emission, item blobhub.Item) {
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	if err := p.rec.j.confirm(e.ID, item.ID, item.CreatedAt); err != nil {
		// The next run finds the item by its emission_id: not posted twice.
		p.run.stateFault(err)
	}
	p.noteFailurePosted(e)
	p.run.notePosted(e, item)
	if e.Target == p.alias {
		p.rec.t.Items.LastPosted = envelope.ItemRef{ItemID: item.ID, CreatedAt: item.CreatedAt}
	}
	if pr := p.rec.t.Prompt; pr != nil && pr.EmissionID == e.ID {
		pr.ItemID, pr.CreatedAt = item.ID, item.CreatedAt
		_ = p.rec.saveLocked()
	}
}

// noteFailurePosted records that a failure's reason (on the job thread)
// or its thread_failed (on worker) is confirmed posted. The caller holds
// p.rec.mu.
func (p *poster) noteFailurePosted(e *emission) {
	key := ""
	switch {
	case e.Target == p.alias && e.Item.Type() == agent.ItemStatus && e.Item.Meta["status"] == "error":
		if code, _ := e.Item.Meta["code"].(string); code != "" {
			key = "reason:" + code
		}
	case e.Target == setup.WorkerAlias && e.Item.Type() == agent.ItemThreadFailed:
		th, _ := e.Item.Meta["thread"].(map[string]any)
		er, _ := th["error"].(map[string]any)
		if code, _ := er["code"].(string); code != "" && th["alias"] == p.alias {
			key = "failed:" + code
		}
	}
	if key == "" {
		return
	}
	if p.failurePosted == nil {
		p.failurePosted = map[string]bool{}
	}
	p.failurePosted[key] = true
}

// find lists the target thread after last_posted and looks for the
// emission's id.
func (p *poster) find(ctx context.Context, e *emission) (*blobhub.Item, error) {
	posted, err := p.since(ctx, e, map[string]bool{e.ID: true})
	if it, ok := posted[e.ID]; ok && err == nil {
		return &it, nil
	}
	return nil, err
}

// postedLimits bounds the search for posted emissions. It keeps only the
// items it is looking for, so it reads much further than a run's tail.
var postedLimits = blobhub.Limits{Items: 100000}

// since lists e's target thread from where e may have landed and maps
// the emission_ids of want found there to their items: after last_posted on
// the job thread; on worker, which has no cursor of ours, from an hour
// before e was journaled (clocks may differ). It stops once every id of
// want is found. A search that ends at postedLimits first cannot tell
// whether the rest was posted: that is an error, so nothing is posted
// again blindly; the emissions stay journaled for the next run.
func (p *poster) since(ctx context.Context, e *emission, want map[string]bool) (map[string]blobhub.Item, error) {
	from := blobhub.Cursor{}
	if e.Target == p.alias {
		from.CreatedAt = p.rec.t.Items.LastPosted.CreatedAt
	} else if t, err := blobhub.ParseTime(e.At); err == nil {
		from.CreatedAt = blobhub.FormatTime(t.Add(-time.Hour))
	}
	found := map[string]blobhub.Item{}
	_, more, err := blobhub.TailEach(ctx, p.client, e.Target, from, postedLimits, func(it blobhub.Item) bool {
		var m struct {
			EmissionID string `json:"emission_id"`
		}
		if json.Unmarshal(it.Metadata, &m) == nil && want[m.EmissionID] {
			found[m.EmissionID] = it
		}
		return len(found) < len(want)
	})
	if errors.Is(err, blobhub.ErrNoThread) && e.Target == setup.WorkerAlias {
		// No worker thread (deleted): it holds none of them; posting one
		// makes it again.
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	if more && len(found) < len(want) {
		return found, exit.Errorf(exit.CodeUnposted, "could not tell whether BlobHub holds %d journaled item(s) of %q: the thread has more than %d items after where they would be; they stay journaled and the next run looks again", len(want)-len(found), e.Target, postedLimits.Items)
	}
	return found, nil
}

// reconcile posts every unconfirmed emission, after looking for those the
// server already holds, and finishes journaled artifact uploads in journal
// order (docs/state.md).
func (p *poster) reconcile(ctx context.Context) error {
	pending := p.rec.j.pending()
	if len(pending) == 0 {
		return nil
	}
	// Per target, in journal order: its first emission (the earliest
	// place to look from) and every emission id to look for.
	var firsts []*emission
	want := map[string]map[string]bool{}
	for _, e := range pending {
		if e.Kind == kindArtifact || e.Kind == kindPublish {
			continue
		}
		if want[e.Target] == nil {
			want[e.Target] = map[string]bool{}
			firsts = append(firsts, e)
		}
		want[e.Target][e.ID] = true
	}
	seen := map[string]map[string]blobhub.Item{}
	for _, e := range firsts {
		found, err := p.since(ctx, e, want[e.Target])
		if err != nil {
			return blobhub.AsExit(err, "reconcile "+e.Target)
		}
		seen[e.Target] = found
	}
	dropped := map[string]bool{}
	for i, e := range pending {
		if dropped[e.ID] {
			continue
		}
		if e.Kind == kindArtifact || e.Kind == kindPublish {
			// An upload intent or a publication, not an item.
			d, err := p.run.replayIntent(ctx, e, pending[i+1:])
			if err != nil {
				return err
			}
			for id := range d {
				dropped[id] = true
			}
			continue
		}
		if it, ok := seen[e.Target][e.ID]; ok {
			p.confirmed(e, it)
			continue
		}
		p.post(ctx, e)
		if p.offline {
			return exit.Errorf(exit.CodeUnavailable, "BlobHub is unreachable while posting journaled items; the next run retries")
		}
	}
	return nil
}

// unposted counts emissions still not confirmed.
func (p *poster) unposted() int {
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	return len(p.rec.j.pending())
}

// err is what posting leaves the run's exit to say, nil when everything
// journaled is posted: the thread deleted (66), the key refused (77), or
// items left for the next run (75).
func (p *poster) err() error {
	switch {
	case p.threadGone:
		stopped := ""
		if p.turnStopped {
			stopped = "; its agent was stopped mid-turn"
		}
		return exit.Errorf(exit.CodeNoThread, "thread %q was deleted from BlobHub while this run posted to it%s; %d item(s) it could not post stay journaled, and a run posts them if the thread is made again", p.alias, stopped, p.unposted())
	case p.authRefused:
		return exit.Errorf(exit.CodeAuthInvalid, "BlobHub refused the API key while posting; %d item(s) stay journaled for the next run with a valid key", p.unposted())
	case p.unposted() > 0:
		return exit.Errorf(exit.CodeUnposted, "%d item(s) could not be posted to BlobHub; they are journaled and the next run posts them", p.unposted())
	}
	return nil
}

// cacheNotMine notes an alias for not_mine.yaml; flushNotMine writes the
// run's notes at its end, in one write. The file is only a cache: a run
// killed before writing it leaves ls to download those aliases once more.
// Writing it once per artifact rewrote and fsynced the whole cache every
// time (100 files against 5,000 cached aliases took 17 s).
func (p *poster) cacheNotMine(alias, reason string) {
	p.notMineMu.Lock()
	defer p.notMineMu.Unlock()
	if p.notMine == nil {
		p.notMine = map[string]string{}
	}
	p.notMine[alias] = reason
}

// flushNotMine writes the aliases noted by cacheNotMine, once.
func (p *poster) flushNotMine(ctx context.Context) {
	p.notMineMu.Lock()
	notes := p.notMine
	p.notMine = nil
	p.notMineMu.Unlock()
	if len(notes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := setup.AddNotMines(ctx, p.jobDir, notes); err != nil {
		p.log.Warn("cannot cache the artifact aliases in not_mine.yaml; ls downloads them once more", "aliases", len(notes), "error", err)
	}
}
