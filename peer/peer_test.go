//go:build realcli

// Package peer_test holds the conformance tests against the real peer: the
// BlobHub Python SDK and CLI (and blobhub-worker) from PyPI, installed by
// `make peer` into .tools/peer and named by BHW_PEER_PYTHON. They prove the
// test hub (blobhub/bhtest), and through it the file:// store, answer as the
// real API does (docs/wire.md), so the tests that rely on them test the
// real shape.
package peer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// peerPython is the venv's python: $BHW_PEER_PYTHON, or .tools/peer under
// the module root; a missing one fails the test (these tests are built with
// the realcli tag only, which says the tools are installed).
func peerPython(t *testing.T) string {
	t.Helper()
	return agenttest.PinnedCLI(t, "Python peer", "BHW_PEER_PYTHON", ".tools/peer/bin/python")
}

// runPeer runs a peer program (args[0] a script under testdata, or -m
// module) against srv with the runner's key and a home of its own, so no
// credentials file of the machine is read; it returns its stdout.
func runPeer(t *testing.T, srv *bhtest.Server, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), peerPython(t), args...)
	home := t.TempDir()
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"BLOBHUB_API_URL=" + srv.URL(), "BLOBHUB_API_KEY=" + bhtest.RunnerKey,
		"PEER_ORG_ID=" + bhtest.OrgID, "PEER_BLOB_ID=" + bhtest.BlobID,
		"PEER_REVISION_ID=" + bhtest.RevisionID, "PEER_SESSION=" + bhtest.SessionAlias,
		"PEER_SESSION_ID=" + bhtest.SessionID,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("peer %v: %v\n%s", args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestPeerSDKSession: the SDK, as a client of the test hub, creates a
// thread object, posts an item, pages the items through the cursor,
// downloads, lists and deletes; bhw-run's clients — over HTTP and on the
// file:// store the hub serves — read what the SDK wrote, and the SDK
// reads what bhw-run posted. After the delete, the SDK hears the 403 the
// API answers for a missing object, and bhw-run hears not found.
func TestPeerSDKSession(t *testing.T) {
	srv := bhtest.New(t)
	const alias = "peer/sdk-thread"

	var wrote struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
		SessionID string          `json:"session_id"`
		Value     json.RawMessage `json:"value"`
		Item      blobhub.Item    `json:"item"`
	}
	if err := json.Unmarshal(runPeer(t, srv, filepath.Join("testdata", "sdk_session.py"), "write", alias), &wrote); err != nil {
		t.Fatal(err)
	}
	if wrote.User.ID != bhtest.RunnerUserID || wrote.SessionID != bhtest.SessionID {
		t.Fatalf("the SDK saw user %+v, session %q", wrote.User, wrote.SessionID)
	}
	if wrote.Item.ID == "" || wrote.Item.UserID != bhtest.RunnerUserID || wrote.Item.CreatedAt == "" {
		t.Fatalf("the SDK's post answered %+v", wrote.Item)
	}

	local, err := blobhub.New(blobhub.Config{APIURL: "file://" + srv.Dir(), RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, UserID: bhtest.RunnerUserID})
	if err != nil {
		t.Fatal(err)
	}
	var mine blobhub.Item
	for name, c := range map[string]blobhub.Client{"http": srv.Client(bhtest.RunnerKey), "file": local} {
		o, err := c.Download(t.Context(), alias)
		if err != nil || !jsonEqual(o.Value, wrote.Value) {
			t.Fatalf("%s: bhw-run downloads %s, %v; the SDK uploaded %s", name, o.Value, err, wrote.Value)
		}
		p, err := c.ListItems(t.Context(), alias, blobhub.ItemQuery{Ascending: true})
		if err != nil || len(p.Items) == 0 || p.Items[0].ID != wrote.Item.ID {
			t.Fatalf("%s: bhw-run lists %+v, %v; want the SDK's item first", name, p.Items, err)
		}
	}
	mine, err = srv.Client(bhtest.RunnerKey).Post(t.Context(), alias, blobhub.NewItem{
		Content:  []blobhub.Block{{Type: "text", Text: "posted by bhw-run"}},
		Metadata: json.RawMessage(`{"type":"text","emission_id":"em_peer"}`),
	})
	if err != nil {
		t.Fatal(err)
	}

	var read struct {
		Items       []blobhub.Item  `json:"items"`
		Pages       int             `json:"pages"`
		Object      blobhub.Object  `json:"object"`
		Listed      []string        `json:"listed"`
		AfterDelete json.RawMessage `json:"after_delete"`
	}
	if err := json.Unmarshal(runPeer(t, srv, filepath.Join("testdata", "sdk_session.py"), "read", alias), &read); err != nil {
		t.Fatal(err)
	}
	if len(read.Items) != 2 || read.Items[0].ID != wrote.Item.ID || read.Items[1].ID != mine.ID ||
		!jsonEqual(read.Items[1].Metadata, mine.Metadata) || read.Pages < 2 {
		t.Fatalf("the SDK read %d items in %d pages %+v; want the SDK's then bhw-run's %+v, a page each", len(read.Items), read.Pages, read.Items, mine)
	}
	if read.Object.Alias != alias || !jsonEqual(read.Object.Value, wrote.Value) {
		t.Fatalf("the SDK downloaded %+v", read.Object)
	}
	if len(read.Listed) != 1 || read.Listed[0] != alias {
		t.Fatalf("the SDK listed %q under the prefix", read.Listed)
	}
	if !jsonEqual(read.AfterDelete, []byte(`{"class":"PermissionDenied","status":403,"error":"forbidden"}`)) {
		t.Fatalf("the SDK's download after the delete: %s", read.AfterDelete)
	}
	for name, c := range map[string]blobhub.Client{"http": srv.Client(bhtest.RunnerKey), "file": local} {
		if _, err := c.Download(t.Context(), alias); !errors.Is(err, blobhub.ErrNotFound) {
			t.Errorf("%s: bhw-run's download after the SDK's delete: %v, want not found", name, err)
		}
	}
}

// TestPeerCLIWhoami: the BlobHub CLI reads the identity behind the key
// from the test hub as it reads it from the API: the user's id as id.
func TestPeerCLIWhoami(t *testing.T) {
	srv := bhtest.New(t)
	out := runPeer(t, srv, "-m", "blobhub_cli", "--json", "whoami")
	var who struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal(out, &who); err != nil || who.User.ID != bhtest.RunnerUserID {
		t.Fatalf("blobhub whoami: %s (%v), want the user's id %s", out, err, bhtest.RunnerUserID)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
