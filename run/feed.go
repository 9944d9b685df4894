package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// Discovery from the session's change feed (docs/operating.md, Discovery;
// the feed itself: docs/wire.md). `ls --runnable` reads the events since
// the section's cursor (section.yaml events.last_processed_at, the
// daemon's), judges only the threads they name and the threads the last
// pass left due, prints, and only then moves the cursor. What it costs
// does not grow with the threads of the session: one request when nothing
// changed.
//
// Never missing a change rests on four rules:
//   - The cursor is only ever a created_at the server stamped; the host's
//     clock never moves it, and it never passes the server's present (the
//     Date of the answer, plus a second), so an event stamped by a clock
//     that jumped ahead cannot hide the ones after it.
//   - created_since is strict, and two events may share an instant, or
//     become visible after a later one (the listing is not a consistent
//     read; feedOverlap bounds how late). So each pass reads again from
//     feedOverlap before the cursor (from the newest event at or before
//     it, events.read_since: created_since is only ever a created_at the
//     server gave), and skips the events it handled already: their keys
//     (created_at, type, alias) are kept in events.seen. Once a read was made (events.read_at, the server's
//     time) feedOverlap after the cursor, everything up to the cursor had
//     settled by then: the next reads start at the cursor itself, so an
//     idle pass reads no event again, however many came in a burst.
//   - The cursor moves after the listing is printed, under section.lock,
//     in one atomic write of section.yaml with the seen keys and the due
//     threads: killed before it, the next pass reads the same events again
//     (a thread listed twice, which its lock makes harmless); after it,
//     nothing is read twice. Two passes at once merge what they wrote
//     (the older cursor, the union of the rest): duplicates, never a miss.
//   - A thread judged runnable (its lock held or not), unreadable, or held
//     until a time (a provider's limit) stays in events.due and is judged
//     again by every pass until it is not: a run that changed nothing
//     (slots taken, BlobHub down) leaves no event, but its thread is not
//     forgotten.
//
// A full listing replaces the feed when there is no cursor yet, when the
// feed cannot answer from the cursor (an error other than an outage, more
// than maxFeedPages pages of changes), and when the last full listing is
// older than discovery.full_listing_every; it reads the head of the feed
// first and takes its newest event as the cursor, so a change made during
// the listing is read by the next pass.

// feedOverlap is how far before the cursor each pass reads again.
const feedOverlap = 10 * time.Second

// maxSeen bounds events.seen; past it the oldest keys are dropped, and
// their events, if read again, are judged twice (harmless).
const maxSeen = 10000

// maxFeedPages bounds the pages one pass reads (the daemon's 20 pages of
// 1000); a longer backlog is a full listing. A var for the tests.
var maxFeedPages = 20

// Test hooks: after the feed is read (before judging), and around the
// write that moves the cursor ("before", "after").
var (
	testHookFeedRead   func()
	testHookFeedCommit func(stage string)
)

// feedRead is what one pass read of the feed.
type feedRead struct {
	fresh     []blobhub.Event // not handled by an earlier pass
	cursor    string          // the cursor after them
	seen      []string
	date      time.Time // the server's clock at the first answer
	readAt    string    // events.read_at after this read
	readSince string    // events.read_since after this read
}

// pass is `ls --runnable` from the feed.
func (ls *lister) pass(ctx context.Context) ([]Listing, error) {
	r := ls.r
	s0, err := loadFeed(r.Setup.JobDir)
	if err != nil {
		return []Listing{}, err
	}
	var read feedRead
	reason := ""
	if s0.LastProcessedAt == "" {
		reason = "there is no cursor yet"
	} else if read, reason, err = ls.readFeed(ctx, s0); err != nil {
		return []Listing{}, err
	} else if reason == "" && ls.fullDue(s0, read.date) {
		reason = fmt.Sprintf("the last full listing is older than discovery.full_listing_every (%v)", r.Setup.Config.Discovery.FullEvery())
	}
	if reason != "" {
		return ls.fullPass(ctx, s0, reason)
	}
	if testHookFeedRead != nil {
		testHookFeedRead()
	}
	cands := map[string]bool{}
	for _, e := range read.fresh {
		if alias := ls.feedAlias(e); alias != "" {
			cands[alias] = true
		}
	}
	now := time.Now() // a hold's end is the host's time, as a run compares it
	for alias, until := range s0.Due {
		if t, err := blobhub.ParseTime(until); until != "" && err == nil && now.Before(t) {
			ls.due[alias] = until // still held: carried, not asked about
			continue
		}
		cands[alias] = true
	}
	ls.events = len(read.fresh)
	out := []Listing{}
	if len(cands) > 0 {
		if ls.id, err = setup.LoadIdentity(r.Setup.StateDir); err != nil {
			return out, err
		}
		ls.cache = setup.LoadNotMine(r.Setup.JobDir)
		// Sorted, so a thread comes before the aliases under its artifacts/.
		for _, alias := range slices.Sorted(maps.Keys(cands)) {
			if err := ls.consider(ctx, alias, &out); err != nil {
				return out, err
			}
		}
	}
	out, err = ls.finish(ctx, out)
	s1 := setup.SectionEvents{LastProcessedAt: read.cursor, Seen: read.seen, Due: ls.due, FullListingAt: s0.FullListingAt, ReadAt: read.readAt, ReadSince: read.readSince}
	return out, ls.commit(ctx, s0, s1, out, err)
}

// readFeed reads the feed from feedOverlap before the cursor. reason says
// why the feed cannot answer (a full listing instead); err is an outage,
// a refused key or a cancelled pass, which end the pass.
func (ls *lister) readFeed(ctx context.Context, s0 setup.SectionEvents) (read feedRead, reason string, err error) {
	cur, err := blobhub.ParseTime(s0.LastProcessedAt)
	if err != nil {
		return read, fmt.Sprintf("the cursor %q is not a time", s0.LastProcessedAt), nil
	}
	since, err := ls.readSince(ctx, s0, cur)
	if err != nil {
		if feedOutage(err) {
			return read, "", blobhub.AsExit(err, blobhub.CmdListEvents)
		}
		return read, fmt.Sprintf("the feed cannot answer before the cursor: %v", err), nil
	}
	q := blobhub.EventQuery{Ascending: true, CreatedSince: since, Limit: blobhub.MaxListLimit}
	if since == feedStart {
		q.CreatedSince = ""
	}
	var all []blobhub.Event
	// Only the pages that hold changes past the cursor count against
	// maxFeedPages: the overlap read again must not use up the budget.
	// Twice the budget bounds the pages read in all.
	counted := 0
	for page := 0; ; page++ {
		if counted > maxFeedPages || page == 2*maxFeedPages {
			return read, fmt.Sprintf("more than %d pages of changes since the cursor", maxFeedPages), nil
		}
		p, err := ls.r.Client.ListEvents(ctx, q)
		if err != nil {
			if feedOutage(err) {
				return read, "", blobhub.AsExit(err, blobhub.CmdListEvents)
			}
			return read, fmt.Sprintf("the feed cannot answer from the cursor: %v", err), nil
		}
		if page == 0 {
			read.date = p.Date
			// The cursor is a created_at the server stamped, so never
			// past its clock: one that is (a server Date that jumped and
			// came back, a hand-edited or shared section.yaml) would read
			// from the future and list nothing until the hourly full
			// listing. Invalid: a full listing resets it. The Date has
			// whole seconds; a stamp within its second is not ahead.
			if !p.Date.IsZero() && cur.After(p.Date.Add(time.Second)) {
				return read, fmt.Sprintf("the cursor %s is ahead of the server's clock (%s)", s0.LastProcessedAt, blobhub.FormatTime(p.Date)), nil
			}
		}
		all = append(all, p.Events...)
		if n := len(p.Events); n > 0 {
			if t, err := blobhub.ParseTime(p.Events[n-1].CreatedAt); err != nil || t.After(cur) {
				counted++
			}
		}
		if p.Cursor == "" {
			break
		}
		if p.Cursor == q.Cursor {
			return read, "the feed answered the page cursor it was sent", nil
		}
		q.Cursor = p.Cursor
	}
	seen := make(map[string]bool, len(s0.Seen))
	for _, k := range s0.Seen {
		seen[k] = true
	}
	for _, e := range all {
		if !seen[eventKey(e)] {
			read.fresh = append(read.fresh, e)
		}
	}
	read.cursor, read.readAt, read.seen = advance(s0.LastProcessedAt, s0.ReadAt, all, read.date)
	read.readSince = sinceFor(read.cursor, read.readAt, since, all)
	return read, "", nil
}

// feedStart is events.read_since when the feed holds no event at or
// before where the next read starts: the read starts at the feed's start.
const feedStart = "start"

// readSince is where a read from the cursor cur starts: a created_at the
// server gave, as it spelled it, never a time computed (blobhub-worker
// sends back only the server's times), or feedStart. It is the newest
// event at or before readFrom: events.read_since when it is one, the
// cursor itself once the read starts there, else the newest such event of
// one page read back from the cursor (created_before it), newest first.
// When that page holds none: feedStart if it holds every event before the
// cursor, else its oldest event, so a burst of more events than a page in
// feedOverlap narrows the overlap read again to the page's.
func (ls *lister) readSince(ctx context.Context, s0 setup.SectionEvents, cur time.Time) (string, error) {
	from := readFrom(cur, s0.ReadAt)
	if t, err := blobhub.ParseTime(s0.ReadSince); s0.ReadSince == feedStart || err == nil && !t.After(from) {
		return s0.ReadSince, nil
	}
	if from.Equal(cur) {
		return s0.LastProcessedAt, nil
	}
	p, err := ls.r.Client.ListEvents(ctx, blobhub.EventQuery{CreatedBefore: s0.LastProcessedAt, Limit: blobhub.MaxListLimit})
	if err != nil {
		return "", err
	}
	for _, e := range p.Events {
		if t, err := blobhub.ParseTime(e.CreatedAt); err == nil && !t.After(from) {
			return e.CreatedAt, nil
		}
	}
	if p.Cursor == "" || len(p.Events) == 0 {
		return feedStart, nil
	}
	return p.Events[len(p.Events)-1].CreatedAt, nil
}

// sinceFor is events.read_since for the next read from cursor (with
// readAt): the newest of events at or before where that read starts, else
// since (the start of the read that read them, earlier still, or
// feedStart), or the cursor once the read starts there. "" when none is
// known.
func sinceFor(cursor, readAt, since string, events []blobhub.Event) string {
	cur, err := blobhub.ParseTime(cursor)
	if err != nil {
		return ""
	}
	from := readFrom(cur, readAt)
	if from.Equal(cur) {
		return cursor
	}
	var best time.Time
	found := false
	for _, e := range events {
		if t, err := blobhub.ParseTime(e.CreatedAt); err == nil && !t.After(from) && (!found || t.After(best)) {
			best, since, found = t, e.CreatedAt, true
		}
	}
	if t, err := blobhub.ParseTime(since); since != feedStart && (err != nil || t.After(from)) {
		return ""
	}
	return since
}

// readFrom is where a read starts (strictly after): feedOverlap before the
// cursor, or later, up to the cursor itself, as far as a read at readAt
// (the server's time) has seen everything settle.
func readFrom(cursor time.Time, readAt string) time.Time {
	from := cursor.Add(-feedOverlap)
	if ra, err := blobhub.ParseTime(readAt); err == nil && ra.Add(-feedOverlap).After(from) {
		from = ra.Add(-feedOverlap)
	}
	if from.After(cursor) {
		return cursor
	}
	return from
}

// advance is the cursor after events, from cursor: the newest created_at
// that is not past the server's present (date, plus a second for the
// header's whole seconds; no bound without a date); the read_at to keep
// (date, unless the one kept already starts the next read at the cursor:
// no write for nothing); and the keys of the events the next read reads
// again.
func advance(cursor, readAt string, events []blobhub.Event, date time.Time) (string, string, []string) {
	cur, _ := blobhub.ParseTime(cursor)
	for _, e := range events {
		t, err := blobhub.ParseTime(e.CreatedAt)
		if err == nil && t.After(cur) && (date.IsZero() || !t.After(date.Add(time.Second))) {
			cur, cursor = t, e.CreatedAt
		}
	}
	if !date.IsZero() && readFrom(cur, readAt).Before(readFrom(cur, blobhub.FormatTime(date))) {
		readAt = blobhub.FormatTime(date)
	}
	from := readFrom(cur, readAt)
	var seen []string
	have := map[string]bool{}
	for _, e := range events {
		t, err := blobhub.ParseTime(e.CreatedAt)
		if k := eventKey(e); err == nil && t.After(from) && !have[k] {
			have[k] = true
			seen = append(seen, k)
		}
	}
	if len(seen) > maxSeen {
		slices.SortFunc(seen, func(a, b string) int { return keyTime(a).Compare(keyTime(b)) })
		seen = seen[len(seen)-maxSeen:]
	}
	return cursor, readAt, seen
}

// feedOutage: an error that a full listing would meet as well (BlobHub
// unreachable, the key refused, the pass cancelled).
func feedOutage(err error) bool {
	return errors.Is(err, blobhub.ErrUnavailable) || errors.Is(err, blobhub.ErrAuth) && !errors.Is(err, blobhub.ErrNotFound) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// feedAlias is the thread an event asks ls to judge; "" for none: the
// session's lifecycle, a deletion (nothing to run), an object that is not a
// thread (its type is carried), the worker object, an alias outside the
// section's prefix.
func (ls *lister) feedAlias(e blobhub.Event) string {
	o := e.Object
	switch {
	case o == nil || o.Alias == "" || e.Type == blobhub.EventObjectDeleted:
		return ""
	case o.Type != "" && o.Type != "thread":
		return ""
	case o.Alias == setup.WorkerAlias || !strings.HasPrefix(o.Alias, ls.r.Setup.Section.Prefix()):
		return ""
	}
	return o.Alias
}

// fullDue reports whether the safety net's full listing is due, on the
// server's clock (date; the host's without one). A last listing stamped
// in the future by more than the interval is due as well.
func (ls *lister) fullDue(s0 setup.SectionEvents, date time.Time) bool {
	if date.IsZero() {
		date = time.Now()
	}
	at, err := blobhub.ParseTime(s0.FullListingAt)
	every := ls.r.Setup.Config.Discovery.FullEvery()
	return err != nil || date.Sub(at) >= every || at.Sub(date) > every
}

// fullPass lists every object, with the head of the feed read first: its
// newest event becomes the cursor.
func (ls *lister) fullPass(ctx context.Context, s0 setup.SectionEvents, reason string) ([]Listing, error) {
	r := ls.r
	ls.info("ls: listing every object of the session: "+reason, "section", r.Setup.Section.Name)
	ls.full = true
	head, err := ls.head(ctx)
	switch {
	case err != nil && feedOutage(err):
		return []Listing{}, blobhub.AsExit(err, blobhub.CmdListEvents)
	case err != nil:
		// The listing answers for itself (a session not found, say); the
		// next pass lists everything again.
		ls.info("ls: the session's feed cannot be read; the next pass lists every object again", "error", err.Error())
		head = blobhub.EventPage{}
	}
	out, err := ls.all(ctx)
	if err != nil && !errors.Is(err, ErrThreadsUnreadable) {
		return out, err
	}
	s1 := setup.SectionEvents{LastProcessedAt: s0.LastProcessedAt, Due: ls.due}
	if len(head.Events) > 0 {
		cursor, readAt, seen := advance("", "", head.Events, head.Date)
		if cursor != "" {
			s1.LastProcessedAt, s1.Seen, s1.ReadAt = cursor, seen, readAt
			since := ""
			if head.Cursor == "" {
				since = feedStart // the head holds every event
			}
			s1.ReadSince = sinceFor(cursor, readAt, since, head.Events)
		}
	}
	if s1.LastProcessedAt != "" {
		// Without a cursor (a session without events) the next pass lists
		// everything again, safety net or not.
		date := head.Date
		if date.IsZero() {
			date = time.Now()
		}
		s1.FullListingAt = blobhub.FormatTime(date)
	}
	return out, ls.commit(ctx, s0, s1, out, err)
}

// head reads the newest events, newest first, back to feedOverlap before
// the newest (at most maxFeedPages pages), so the next pass, which reads
// that overlap again, knows them.
func (ls *lister) head(ctx context.Context) (blobhub.EventPage, error) {
	q := blobhub.EventQuery{Limit: blobhub.MaxListLimit}
	var out blobhub.EventPage
	for range maxFeedPages {
		p, err := ls.r.Client.ListEvents(ctx, q)
		if err != nil {
			return out, err
		}
		if out.Date.IsZero() {
			out.Date = p.Date
		}
		out.Events = append(out.Events, p.Events...)
		out.Cursor = p.Cursor // "": the head holds every event
		if p.Cursor == "" || p.Cursor == q.Cursor || len(p.Events) == 0 {
			break
		}
		newest, _ := blobhub.ParseTime(out.Events[0].CreatedAt)
		if t, err := blobhub.ParseTime(p.Events[len(p.Events)-1].CreatedAt); err == nil && !t.After(newest.Add(-feedOverlap)) {
			break
		}
		q.Cursor = p.Cursor
	}
	return out, nil
}

// commit prints the listing (Emit), then moves the cursor: nothing is
// written when the pass failed, the listing could not be printed, or
// nothing changed.
func (ls *lister) commit(ctx context.Context, s0, s1 setup.SectionEvents, out []Listing, perr error) error {
	if err := ls.emit(out, perr); err != nil && !errors.Is(err, ErrThreadsUnreadable) {
		return err
	}
	if len(s1.Due) == 0 {
		s1.Due = nil
	}
	if feedEqual(s0, s1) {
		return perr
	}
	if testHookFeedCommit != nil {
		testHookFeedCommit("before")
	}
	_, err := setup.UpdateSection(ctx, ls.r.Setup.JobDir, ls.r.Setup.Section, func(st *setup.SectionState) {
		extra := st.Events.Extra
		if feedEqual(st.Events, s0) {
			st.Events = s1
		} else {
			// Another pass moved the cursor since this one read it.
			st.Events = mergeFeed(st.Events, s1)
		}
		st.Events.Extra = extra
	})
	if testHookFeedCommit != nil {
		testHookFeedCommit("after")
	}
	if err != nil {
		// The listing is printed; the next pass reads the same events
		// again, which lists some threads twice, and misses nothing.
		ls.r.Logger.Warn("ls: could not move the section's cursor; the next pass reads the same changes again", "error", err)
	}
	return perr
}

// info logs at info, or at debug in the passes of --wait, which repeat
// every poll interval.
func (ls *lister) info(msg string, args ...any) {
	if ls.o.quiet {
		ls.r.Logger.Debug(msg, args...)
		return
	}
	ls.r.Logger.Info(msg, args...)
}

// loadFeed reads section.yaml's events block.
func loadFeed(jobDir string) (setup.SectionEvents, error) {
	st, err := setup.ReadSection(jobDir)
	return st.Events, err
}

func feedEqual(a, b setup.SectionEvents) bool {
	return a.LastProcessedAt == b.LastProcessedAt && slices.Equal(a.Seen, b.Seen) &&
		maps.Equal(a.Due, b.Due) && a.FullListingAt == b.FullListingAt && a.ReadAt == b.ReadAt && a.ReadSince == b.ReadSince
}

// mergeFeed joins what two passes wrote: the older cursor and read_at,
// the seen keys of both that the next read reads again, the due threads of
// both (the sooner time of one thread), the later full listing. It can
// only make a later pass read or judge again.
func mergeFeed(a, b setup.SectionEvents) setup.SectionEvents {
	m := setup.SectionEvents{LastProcessedAt: a.LastProcessedAt, Due: map[string]string{}, FullListingAt: a.FullListingAt, ReadAt: a.ReadAt}
	ta, errA := blobhub.ParseTime(a.LastProcessedAt)
	tb, errB := blobhub.ParseTime(b.LastProcessedAt)
	if errA != nil || errB == nil && tb.Before(ta) {
		m.LastProcessedAt, ta = b.LastProcessedAt, tb
	}
	if ra, err := blobhub.ParseTime(a.ReadAt); err != nil || keyTime(b.ReadAt+"|").Before(ra) {
		m.ReadAt = b.ReadAt
	}
	from := readFrom(ta, m.ReadAt)
	// The earlier start, if it is not past the merged one (else the next
	// read looks it up).
	m.ReadSince = a.ReadSince
	if sa, err := blobhub.ParseTime(a.ReadSince); a.ReadSince != feedStart && (err != nil || b.ReadSince == feedStart || keyTime(b.ReadSince+"|").Before(sa)) {
		m.ReadSince = b.ReadSince
	}
	if s, err := blobhub.ParseTime(m.ReadSince); m.ReadSince != feedStart && (err != nil || s.After(from)) {
		m.ReadSince = ""
	}
	have := map[string]bool{}
	for _, k := range append(slices.Clone(a.Seen), b.Seen...) {
		if !have[k] && keyTime(k).After(from) {
			have[k] = true
			m.Seen = append(m.Seen, k)
		}
	}
	for _, due := range []map[string]string{a.Due, b.Due} {
		for alias, until := range due {
			old, ok := m.Due[alias]
			if !ok || until == "" || old != "" && keyTime(until+"|").Before(keyTime(old+"|")) {
				m.Due[alias] = until
			}
		}
	}
	if len(m.Due) == 0 {
		m.Due = nil
	}
	fa, _ := blobhub.ParseTime(a.FullListingAt)
	if fb, err := blobhub.ParseTime(b.FullListingAt); err == nil && fb.After(fa) {
		m.FullListingAt = b.FullListingAt
	}
	return m
}

// eventKey names an event among those of its instant: created_at, type,
// alias. Two posts to one thread in one instant share a key, and are one
// reason to judge it.
func eventKey(e blobhub.Event) string {
	alias := ""
	if e.Object != nil {
		alias = e.Object.Alias
	}
	return e.CreatedAt + "|" + e.Type + "|" + alias
}

// keyTime is the created_at a key starts with; zero when unreadable.
func keyTime(k string) time.Time {
	ts, _, _ := strings.Cut(k, "|")
	t, _ := blobhub.ParseTime(ts)
	return t
}

// WaitRunnable is `ls --runnable --wait`: a pass every
// discovery.poll_interval until one lists a runnable thread (which Emit
// prints, as --runnable does), max has passed (0: no bound; nothing is
// printed), or ctx ends. An outage (75) is waited out, the interval
// doubling up to 30s; any other failure ends the wait, as it ends ls.
func (r *Runner) WaitRunnable(ctx context.Context, o ListOptions, max time.Duration) ([]Listing, error) {
	o.Runnable, o.quiet = true, true
	emit := o.Emit
	o.Emit = func(out []Listing) error {
		if len(out) == 0 || emit == nil {
			return nil
		}
		return emit(out)
	}
	var deadline time.Time
	if max > 0 {
		deadline = time.Now().Add(max)
	}
	poll := r.Setup.Config.Discovery.Poll()
	wait := poll
	for {
		out, err := r.List(ctx, o)
		var ee *exit.Error
		switch {
		case err == nil && len(out) > 0:
			return out, nil
		case err == nil:
			wait = poll
		case ctx.Err() != nil:
			return out, ctx.Err()
		case errors.As(err, &ee) && ee.Code == exit.CodeUnavailable && !errors.Is(err, ErrThreadsUnreadable):
			wait = min(2*wait, 30*time.Second)
			r.Logger.Warn("ls --wait: BlobHub is unreachable; looking again later", "in", wait.String(), "error", err.Error())
		default:
			return out, err
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return []Listing{}, nil
			}
			wait = min(wait, left)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return []Listing{}, ctx.Err()
		case <-t.C:
		}
	}
}
