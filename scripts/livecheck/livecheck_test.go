package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestLiveCheckTestHub runs the live check against the test hub, with
// small pages and items sharing instants: it must find every answer
// as bhw-run expects, and leave nothing behind. This keeps the script
// from rotting between checks against a real BlobHub.
func TestLiveCheckTestHub(t *testing.T) {
	srv := bhtest.New(t)
	srv.PageSize(3)
	// Pairs of items share an instant, some across a page boundary. (More
	// items at one instant than a page holds is a known limit of reading
	// by created_since; BlobHub stamps microseconds.)
	posts := 0
	srv.RewriteAnswers(blobhub.CmdPost, func(b []byte) []byte {
		posts++
		srv.EqualTimestamps(posts%3 == 1)
		return b
	})
	rep, err := Check(t.Context(), srv.Config(bhtest.RunnerKey), Options{Items: 8})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Write(&out)
	t.Log(out.String())
	if len(rep.Diffs) != 0 || len(rep.Guesses) != 0 {
		t.Fatalf("the test hub differs from what bhw-run expects:\n%s", out.String())
	}
	for _, a := range []string{rep.Alias, rep.Alias + "/artifacts/live-check.txt"} {
		if _, ok := srv.Get(a); ok {
			t.Errorf("%s left behind", a)
		}
	}
	if !strings.Contains(out.String(), "3 of 8 items shared") {
		t.Errorf("equal timestamps not noted:\n%s", out.String())
	}
}

// mangle rewrites a JSON answer through fn.
func mangle(fn func(m map[string]any)) func([]byte) []byte {
	return func(b []byte) []byte {
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return b
		}
		fn(m)
		out, _ := json.Marshal(m)
		return out
	}
}

func items(m map[string]any) []map[string]any {
	var out []map[string]any
	l, _ := m["items"].([]any)
	for _, x := range l {
		if it, ok := x.(map[string]any); ok {
			out = append(out, it)
		}
	}
	return out
}

// TestLiveCheckReportsWrongShapes: a hub answering in another shape than
// bhw-run expects is reported, naming the command.
func TestLiveCheckReportsWrongShapes(t *testing.T) {
	cases := []struct {
		name, command string
		rewrite       func([]byte) []byte
		want          string
	}{
		{"users/me without id", bhtest.CmdMe, mangle(func(m map[string]any) {
			m["user"] = map[string]any{"user_id": bhtest.RunnerUserID}
		}), "users/me"},
		{"an item stamped with another user", blobhub.CmdPost, mangle(func(m map[string]any) {
			m["item"].(map[string]any)["user_id"] = "usr_someone"
		}), "runs would read their own items as a person's"},
		{"metadata without the emission_id", blobhub.CmdPost, mangle(func(m map[string]any) {
			delete(m["item"].(map[string]any)["metadata"].(map[string]any), "emission_id")
		}), "emission_id must survive"},
		{"a page under another key", blobhub.CmdListItems, mangle(func(m map[string]any) {
			m["results"] = m["items"]
			delete(m, "items")
		}), `has no "items"`},
		{"created_at not a timestamp", blobhub.CmdListItems, mangle(func(m map[string]any) {
			for _, it := range items(m) {
				it["created_at"] = "yesterday"
			}
		}), "is not a timestamp bhw-run reads"},
		{"a value that does not round-trip", blobhub.CmdDownload, mangle(func(m map[string]any) {
			if o, ok := m["object"].(map[string]any); ok {
				if v, ok := o["value"].(map[string]any); ok {
					v["type"] = "note"
				}
			}
		}), "came back as"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := bhtest.New(t)
			srv.RewriteAnswers(tc.command, tc.rewrite)
			rep, err := Check(t.Context(), srv.Config(bhtest.RunnerKey), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.Write(&out)
			found := false
			for _, d := range rep.Diffs {
				found = found || strings.Contains(d.Step+" "+d.Text, tc.want)
			}
			if !found {
				t.Fatalf("no difference reporting %q:\n%s", tc.want, out.String())
			}
			if !strings.Contains(out.String(), "answer(s) differ") {
				t.Fatalf("the summary line does not say so:\n%s", out.String())
			}
		})
	}
}
