package policy

import (
	"encoding/json"
	"strings"
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

func TestClaudeFingerprint(t *testing.T) {
	base := ClaudeFingerprint("Bash", json.RawMessage(`{"command":"rm -rf build","description":"clean up"}`))
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("fingerprint %q", base)
	}
	same := []string{
		`{"description":"clean up","command":"rm -rf build"}`,             // key order
		"{\n  \"command\" : \"rm -rf build\",\n  \"description\":\"x\" }", // whitespace, another description
		`{"command":"rm -rf build"}`,                                      // no description
		`{"command":"rm -rf build","description":""}`,
	}
	for _, in := range same {
		if got := ClaudeFingerprint("Bash", json.RawMessage(in)); got != base {
			t.Errorf("%s: fingerprint differs", in)
		}
	}
	differ := map[string]string{
		"another command": `{"command":"rm -rf buildx"}`,
		"a timeout":       `{"command":"rm -rf build","timeout":1000}`,
		"background":      `{"command":"rm -rf build","run_in_background":true}`,
	}
	for name, in := range differ {
		if got := ClaudeFingerprint("Bash", json.RawMessage(in)); got == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	// The tool is part of it, and description is dropped only where it is
	// purely descriptive.
	if ClaudeFingerprint("PowerShell", json.RawMessage(`{"command":"rm -rf build"}`)) == base {
		t.Error("tool name is not part of the fingerprint")
	}
	a := ClaudeFingerprint("Task", json.RawMessage(`{"description":"a","prompt":"p"}`))
	b := ClaudeFingerprint("Task", json.RawMessage(`{"description":"b","prompt":"p"}`))
	if a == b {
		t.Error("Task description dropped")
	}
	// Numbers stay as written.
	if ClaudeFingerprint("Read", json.RawMessage(`{"file_path":"/a","limit":10}`)) == ClaudeFingerprint("Read", json.RawMessage(`{"file_path":"/a","limit":1e1}`)) {
		t.Error("numbers were normalised")
	}
	// Empty and null inputs are one thing; the fingerprint is stable.
	if ClaudeFingerprint("Task", nil) != ClaudeFingerprint("Task", json.RawMessage(`null`)) {
		t.Error("nil and null differ")
	}
	// Two separately built inputs of one call give one fingerprint.
	in1, in2 := json.RawMessage(`{"command":"ls"}`), json.RawMessage(`{ "command" : "ls" }`)
	if ClaudeFingerprint("Bash", in1) != ClaudeFingerprint("Bash", in2) {
		t.Error("unstable")
	}
}

func TestFingerprintIDsNeverPartOfIt(t *testing.T) {
	// What an adapter hands over never carries ids: the same call re-issued
	// under a new invocation id has the same fingerprint.
	in := json.RawMessage(`{"file_path":"/abs/x.txt","content":"hi"}`)
	c1 := Call{Tool: "Write", InvocationID: "toolu_1", Input: in, Fingerprint: ClaudeFingerprint("Write", in)}
	c2 := Call{Tool: "Write", InvocationID: "toolu_2", Input: in, Fingerprint: ClaudeFingerprint("Write", in)}
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
