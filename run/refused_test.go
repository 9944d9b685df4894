package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// wantExitCode checks a run's exit code and error code.
func wantExitCode(t *testing.T, sum *Summary, want int, code string) {
	t.Helper()
	if sum.ExitCode != want || sum.Error == nil || sum.Error.Code != code {
		t.Fatalf("exit %d error %+v, want exit %d %s", sum.ExitCode, sum.Error, want, code)
	}
}

// TestSessionNotFound: no such thread and the session itself cannot be
// listed → the configuration is wrong, exit 78.
func TestSessionNotFound(t *testing.T) {
	h := newHarness(t, false)
	wantExitCode(t, h.run("a/b"), exit.Config, exit.CodeSessionNotFound)
}

// TestRefused covers the exit-77 refusals: each leaves the thread as it
// was (still pending on the wire, no thread.yaml activation, no item).
func TestRefused(t *testing.T) {
	const alias = "refused/t"
	cases := []struct {
		name  string
		code  string
		setup func(h *harness)
	}{
		{"a key BlobHub refuses", exit.CodeAuthInvalid, func(h *harness) {
			h.runner = func(r *Runner) { r.Client = h.srv.Client("bhk_revoked") }
		}},
		{"a state tree recorded for another user", exit.CodeUserIdentityMismatch, func(h *harness) {
			b, _ := yaml.Marshal(setup.Identity{UserID: "usr_somebody_else", RecordedAt: now()})
			if err := os.WriteFile(setup.IdentityPath(h.state), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a session worked by another user", exit.CodeSessionOwnedByOther, func(h *harness) {
			h.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":"usr_other"}}}}`)
		}},
		{"a worker object that is not a thread", exit.CodeWorkerObjectMalformed, func(h *harness) {
			h.srv.Put("worker", `{"type":"note"}`)
		}},
		// A person who overwrote it with a job envelope used to get "worked
		// by user , not usr_…" on every run.
		{"a job envelope over the worker object", exit.CodeWorkerObjectMalformed, func(h *harness) {
			h.srv.Put("worker", string(envelope.NewThread(h.work, testAgent, "approval", "oops")))
		}},
		{"a worker object whose user_id is empty", exit.CodeWorkerObjectMalformed, func(h *harness) {
			h.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":""}}}}`)
		}},
		{"a worker object whose user_id is a number", exit.CodeWorkerObjectMalformed, func(h *harness) {
			h.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":7}}}}`)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			h.handOff(alias, "approval", "hello")
			tc.setup(h)
			sum := h.run(alias)
			wantExitCode(t, sum, exit.Refused, tc.code)
			if tc.code == exit.CodeWorkerObjectMalformed && (!strings.Contains(sum.Error.Message, "is not a worker object") || !strings.Contains(sum.Error.Message, "delete it")) {
				t.Fatalf("message %q does not say the worker object is not one and how to fix it", sum.Error.Message)
			}
			if strings.Contains(tc.name, "job envelope") && !strings.Contains(sum.Error.Message, "a job thread's envelope") {
				t.Fatalf("message %q does not say what the object holds", sum.Error.Message)
			}
			if got := h.wireState(alias); got != envelope.StatePending {
				t.Fatalf("wire state %q, want pending", got)
			}
			if th := h.thread(alias); th != nil && th.Agent.State != "" {
				t.Fatalf("local state %q after a refusal", th.Agent.State)
			}
			if got := h.items(alias); len(got) != 1 {
				t.Fatalf("items %v, want only the person's", got)
			}
			if tc.code == exit.CodeSessionOwnedByOther || tc.code == exit.CodeWorkerObjectMalformed {
				b, err := os.ReadFile(filepath.Join(h.setup().JobDir, "section.yaml"))
				if err != nil || !strings.Contains(string(b), "status: refused") || !strings.Contains(string(b), tc.code) {
					t.Fatalf("section.yaml does not record the refusal: %v\n%s", err, b)
				}
			}
		})
	}
}

// TestPreflightFails: an approval thread whose adapter's preflight fails
// (the Codex sandbox check, say) fails the checklist with the preflight's
// code and never starts the agent; the preflight gets the launch it checks.
func TestPreflightFails(t *testing.T) {
	h := newHarness(t, false)
	started := false
	var checked agent.Launch
	h.runner = func(r *Runner) {
		for i := range r.Setup.Adapters {
			if ad := &r.Setup.Adapters[i]; ad.Type == testAgent {
				ad.Preflight = func(_ context.Context, l agent.Launch) error {
					checked = l
					return agent.Errorf("SANDBOX_UNAVAILABLE", "the sandbox does not work on this machine (bwrap: no user namespaces)")
				}
			}
		}
		wrapStart(r, testAgent, func(startFunc) startFunc {
			return func(context.Context, agent.Launch) (agent.Session, error) {
				started = true
				return nil, errors.New("must not start")
			}
		})
	}
	const alias = "preflight/t"
	h.handOff(alias, "approval", "run the tests")
	sum := h.run(alias)
	want(t, sum, OutcomeFailed, exit.Failed)
	if sum.Error == nil || sum.Error.Code != "SANDBOX_UNAVAILABLE" || !strings.Contains(sum.Error.Message, "user namespaces") {
		t.Fatalf("error %+v", sum.Error)
	}
	if started {
		t.Fatal("the agent was started")
	}
	if checked.Permissions != setup.PermApproval || !filepath.IsAbs(checked.Executable) || len(checked.Env) == 0 {
		t.Fatalf("preflight launch %+v", checked)
	}
	if got := h.wireState(alias); got != envelope.StateFailed {
		t.Fatalf("wire state %q", got)
	}
}

// TestKeyRefusedWhilePosting: BlobHub answers 401 to the turn's posts (a
// key revoked mid-run). The run ends 77 AUTH_INVALID, not 75, and the
// items stay journaled; the next run with a working key posts each once.
func TestKeyRefusedWhilePosting(t *testing.T) {
	h := newHarness(t, false)
	const alias = "auth/mid-run"
	h.handOff(alias, "approval", "hello")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	// One refusal is enough: the run stops posting after it.
	h.srv.FailNext("post_session_thread_item", 1, 401, "")
	wantExitCode(t, h.run(alias), exit.Refused, exit.CodeAuthInvalid)
	if n := h.journalOpen(alias); n == 0 {
		t.Fatal("no item left journaled")
	}
	sum := h.run(alias)
	if sum.ExitCode != exit.OK {
		t.Fatalf("next run: exit %d %+v", sum.ExitCode, sum.Error)
	}
	h.noneTwice(alias, "worker")
	if got := h.items(alias); !slices.Equal(got, []string{"person", "text", "turn_end"}) {
		t.Fatalf("items %v", got)
	}
}

// TestAPIURLSecretsNotShown: a key smuggled into the API URL never reaches
// an error message.
func TestAPIURLSecretsNotShown(t *testing.T) {
	for _, raw := range []string{"ftp://bhk_secret@host/v1", "https://host/v1?key=bhk_secret", "file://bhk_secret@host/rel"} {
		_, err := setup.Resolve(setup.Options{APIURL: raw, StateDir: t.TempDir(), Home: t.TempDir(), RevisionID: "rev", SessionID: "ses"}, "")
		if err == nil || strings.Contains(err.Error(), "bhk_secret") {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
