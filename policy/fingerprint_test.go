package policy

import (
	"encoding/json"
	"testing"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" {\n \"a\" : [ 1 , 2.50 , 1e3 ] ,\"z\":{\"y\":null,\"x\":true}}\n", `{"a":[1,2.50,1e3],"z":{"x":true,"y":null}}`},
		{`"<a & b>"`, `"<a & b>"`},
		{`"\u0041\/"`, `"A/"`},
		{`{"é":1,"e":2,"E":3}`, `{"E":3,"e":2,"é":1}`},
		{`-0.0`, `-0.0`},
	}
	for _, c := range cases {
		got, err := Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Canonical([]byte(`{"a":`)); err == nil {
		t.Error("truncated JSON gave no error")
	}
}

func TestFingerprintIDsNeverPartOfIt(t *testing.T) {
	// What an adapter hands over never carries ids: the same call re-issued
	// under a new invocation id has the same fingerprint.
	in := json.RawMessage(`{"file_path":"/abs/x.txt","content":"hi"}`)
	c1 := Call{Tool: "Write", InvocationID: "toolu_1", Input: in, Fingerprint: Fingerprint(map[string]any{"tool": "Write", "input": in})}
	c2 := Call{Tool: "Write", InvocationID: "toolu_2", Input: in, Fingerprint: Fingerprint(map[string]any{"tool": "Write", "input": in})}
	if c1.Fingerprint != c2.Fingerprint {
		t.Error("fingerprint depends on the invocation id")
	}
	g := Gate{Posture: PostureApproval, Grants: []string{c1.Fingerprint}}
	if d := g.Decide(c2); !d.Granted {
		t.Errorf("re-issued call not granted: %+v", d)
	}
}

func TestFingerprintCodex(t *testing.T) {
	type cmd struct {
		Command string `json:"command"`
		Cwd     string `json:"cwd"`
	}
	a := Fingerprint(cmd{"touch x.txt && echo made", "/w"})
	b := Fingerprint(map[string]any{"cwd": "/w", "command": "touch x.txt && echo made"})
	if a != b || a == "" {
		t.Errorf("struct and map differ: %s %s", a, b)
	}
	if a == Fingerprint(cmd{"touch x.txt && echo made", "/other"}) {
		t.Error("cwd not part of it")
	}
	changes := json.RawMessage(`[{"path":"/w/a","kind":{"type":"add"},"diff":"+x"}]`)
	if Fingerprint(changes) != Fingerprint(json.RawMessage("[ {\"diff\":\"+x\", \"kind\":{\"type\":\"add\"}, \"path\":\"/w/a\"} ]")) {
		t.Error("raw changes not canonical")
	}
	if got := Fingerprint(func() {}); got != "" {
		t.Errorf("unencodable value gave %q", got)
	}
}
