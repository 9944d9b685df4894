package envelope

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWithStateKeepsEverythingElse(t *testing.T) {
	raw := []byte(`{"type":"thread","zeta":1.50,"thread":{"attributes":{"name":"x"},"metadata":{"agent":{"type":"codex","custom":{"n":12345678901234567890}},"instance":{"state":"pending","since":"t"},"unknown":[1,2.0,"3"]}}}`)
	out, err := WithState(raw, StateActive)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{`"zeta":1.50`, `"n":12345678901234567890`, `"unknown":[1,2.0,"3"]`, `"since":"t"`, `"custom"`} {
		if !strings.Contains(string(out), keep) {
			t.Errorf("lost %s in %s", keep, out)
		}
	}
	e, err := Parse(out)
	if err != nil || e.State != StateActive || e.Agent.Type != "codex" {
		t.Fatalf("after WithState: %+v %v", e, err)
	}
	// An envelope with no instance gets one.
	out, err = WithState([]byte(`{"type":"thread","thread":{"metadata":{"agent":{"type":"codex"}}}}`), StateFailed)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := Parse(out); e.State != StateFailed {
		t.Fatalf("state %q", e.State)
	}
	if _, err := WithState([]byte(`{"type":"thread","thread":"x"}`), StateActive); err == nil {
		t.Fatal("a thread that is a string must not be rewritten")
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name, raw string
		job       bool
		bad       string
		wantErr   bool
	}{
		{"job with agent", `{"type":"thread","thread":{"metadata":{"agent":{"type":"claude_code"}}}}`, true, "", false},
		{"job with instance only", `{"type":"thread","thread":{"metadata":{"instance":{"state":"pending"}}}}`, true, "", false},
		{"thread without either", `{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":"/x"}}}}`, false, "", false},
		{"not a thread", `{"type":"note","thread":{"metadata":{"agent":{}}}}`, false, "", false},
		{"work folder a number", `{"type":"thread","thread":{"metadata":{"agent":{"type":"codex"},"workspace":{"work_folder":7}}}}`, true, "workspace.work_folder", false},
		{"agent a string", `{"type":"thread","thread":{"metadata":{"agent":"codex"}}}`, true, "agent", false},
		{"permissions a list", `{"type":"thread","thread":{"metadata":{"agent":{"permissions":["x"]}}}}`, true, "agent.permissions", false},
		{"state a number", `{"type":"thread","thread":{"metadata":{"instance":{"state":1}}}}`, true, "instance.state", false},
		{"policy unknown key", `{"type":"thread","thread":{"metadata":{"agent":{},"policy":{"rulez":[]}}}}`, true, "policy", false},
		{"artifacts source a number", `{"type":"thread","thread":{"metadata":{"agent":{},"artifacts":{"source":1}}}}`, true, "artifacts.source", false},
		{"not JSON", `type: thread`, false, "", true},
		{"an array", `[1]`, false, "", true},
		{"null", `null`, false, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(tc.raw))
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.IsJob() != tc.job {
				t.Errorf("IsJob = %v", e.IsJob())
			}
			if tc.bad != "" && e.Bad[tc.bad] == "" {
				t.Errorf("Bad[%s] not set: %v", tc.bad, e.Bad)
			}
			if tc.bad == "" && len(e.Bad) != 0 {
				t.Errorf("a well-formed envelope is marked bad: %v", e.Bad)
			}
		})
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"type":"thread","thread":{"metadata":{"agent":{"type":"claude_code"},"instance":{"state":"pending"}}}}`))
	f.Add([]byte(`{"type":"thread","thread":{"metadata":{"policy":{"default":"ask","rules":[{"effect":"exec"}]}}}}`))
	f.Add([]byte(`{"thread":{"metadata":[]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := Parse(raw)
		if err != nil {
			return
		}
		out, err := WithState(raw, StateActive)
		if err != nil {
			return
		}
		// A rewritten envelope parses and says active, and is still a job
		// when it was one.
		e2, err := Parse(out)
		if err != nil {
			t.Fatalf("WithState produced unparsable %s", out)
		}
		if e2.State != StateActive || (e.IsJob() && !e2.IsJob()) {
			t.Fatalf("WithState: state %q job %v→%v", e2.State, e.IsJob(), e2.IsJob())
		}
	})
}

// TestDeletePath: the key goes, a mapping it leaves empty goes too, every
// other key stays as written, and a path that is not there changes nothing.
func TestDeletePath(t *testing.T) {
	raw := json.RawMessage(`{"type":"thread","thread":{"metadata":{"agent":{"type":"codex","model":"m"},"artifacts":{"source":".bhw/out"},"n":1.50}}}`)
	got, err := DeletePath(raw, []string{"thread", "metadata", "agent", "model"})
	if err != nil || string(got) != `{"thread":{"metadata":{"agent":{"type":"codex"},"artifacts":{"source":".bhw/out"},"n":1.50}},"type":"thread"}` {
		t.Fatalf("delete model: %s %v", got, err)
	}
	got, err = DeletePath(got, []string{"thread", "metadata", "artifacts", "source"})
	if err != nil || string(got) != `{"thread":{"metadata":{"agent":{"type":"codex"},"n":1.50}},"type":"thread"}` {
		t.Fatalf("delete the only key of artifacts: %s %v", got, err)
	}
	same, err := DeletePath(got, []string{"thread", "metadata", "policy"})
	if err != nil || string(same) != string(got) {
		t.Fatalf("a missing path changed %s into %s (%v)", got, same, err)
	}
	same, err = DeletePath(got, []string{"thread", "metadata", "n", "deeper"})
	if err != nil || string(same) != string(got) {
		t.Fatalf("a path through a number changed %s into %s (%v)", got, same, err)
	}
}
