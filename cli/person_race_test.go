package cli

import (
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/setup"
)

// TestEditKeepsTheRunsState: a run that writes instance.state after
// `thread edit` read the envelope, before the edit writes it, keeps its
// state: the edit changes its own fields on the state as it is then.
// BlobHub has no conditional write; the edit reads the state again just
// before it writes.
func TestEditKeepsTheRunsState(t *testing.T) {
	srv := bhtest.New(t)
	state, work := t.TempDir(), t.TempDir()
	s, err := setup.Resolve(setup.Options{APIURL: srv.URL(), APIKey: bhtest.PersonKey, StateDir: state, Home: state,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Adapters: adapters}, "")
	if err != nil {
		t.Fatal(err)
	}
	const alias = "race/edit"
	srv.Put(alias, string(envelope.NewThread(work, "claude_code", "approval", alias)))
	var once sync.Once
	srv.RewriteAnswers("download_session_object", func(body []byte) []byte {
		once.Do(func() {
			// The run activates the thread right after the edit read it.
			o, _ := srv.Get(alias)
			nv, err := envelope.WithState(o.Value, envelope.StateActive)
			if err != nil {
				t.Error(err)
			}
			srv.Put(alias, string(nv))
		})
		return body
	})
	model := "opus"
	res, err := threadEdit(t.Context(), s, srv.Client(bhtest.PersonKey), alias, fields{Model: &model}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := srv.Get(alias)
	env, err := envelope.Parse(o.Value)
	if err != nil {
		t.Fatal(err)
	}
	if env.State != envelope.StateActive || env.Agent.Model != "opus" || res.State != envelope.StateActive {
		t.Fatalf("after the edit: state %q model %q (result %+v), want the run's active and the edited model", env.State, env.Agent.Model, res)
	}
}
