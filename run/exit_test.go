package run

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
)

// codeConstants are the string constants named Code* declared in run's
// non-test files.
func codeConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// TestExitTableCoversEveryCode: every error code run declares is in
// exactly one row of Exits (so exitErr derives its exit), the two adapter
// codes are too, and a code --help names on a row belongs to that row.
func TestExitTableCoversEveryCode(t *testing.T) {
	rows := map[string][]int{}
	for _, c := range Exits {
		for _, code := range c.Codes {
			rows[code] = append(rows[code], c.Exit)
		}
	}
	consts := codeConstants(t)
	if len(consts) < 30 {
		t.Fatalf("found only %d Code constants: the parse is broken", len(consts))
	}
	consts["agent.CodeAgentCrashed"], consts["agent.CodeAgentSpawnFailed"] = agent.CodeAgentCrashed, agent.CodeAgentSpawnFailed
	for name, code := range consts {
		if len(rows[code]) != 1 {
			t.Errorf("%s (%s) is in %d rows of Exits, want 1", name, code, len(rows[code]))
		}
	}
	declared := slices.Collect(maps.Values(consts))
	for code, exits := range rows {
		if !slices.Contains(declared, code) {
			t.Errorf("Exits names %s (exits %v), which no constant declares", code, exits)
		}
	}
	word := regexp.MustCompile(`\b[A-Z][A-Z_]{3,}\b`)
	for _, c := range Exits {
		for _, w := range word.FindAllString(c.Help, -1) {
			if !slices.Contains(c.Codes, w) && !strings.HasPrefix(w, "SIG") {
				t.Errorf("--help's line for %s names %s, which exits %v", c.Label, w, rows[w])
			}
		}
		if ex, ok := exitOf(firstOr(c.Codes, "")); ok && ex != c.Exit {
			t.Errorf("exitErr(%s) exits %d, want %d", c.Codes[0], ex, c.Exit)
		}
	}
	if e := exitErr("NO_SUCH_CODE_ANYWHERE", "x"); e.Exit != ExitFailed || e.Code != CodeInternal {
		t.Errorf("an unknown code gives %+v, want INTERNAL", e)
	}
}

func firstOr(s []string, d string) string {
	if len(s) == 0 {
		return d
	}
	return s[0]
}

// TestExitOfAnyError: one function gives every command its exit: an
// *ExitError keeps its own (wrapped too), any other error is INTERNAL 1,
// and the cause stays reachable.
func TestExitOfAnyError(t *testing.T) {
	cause := os.ErrPermission
	e := exitErr(CodeStateTreeInvalid, "cannot write thread.yaml: %v", cause)
	if e.Exit != ExitConfig || !strings.Contains(e.Error(), "STATE_INVALID") {
		t.Fatalf("%+v", e)
	}
	if got := Exit(e); got != e {
		t.Fatalf("Exit(*ExitError) = %+v", got)
	}
	if got := Exit(&wrapped{e}); got != e {
		t.Fatalf("Exit of a wrapped *ExitError = %+v", got)
	}
	if !errors.Is(e, cause) {
		t.Fatal("the cause is not reachable through Unwrap")
	}
	in := Exit(os.ErrClosed)
	if in.Exit != ExitFailed || in.Code != CodeInternal || !errors.Is(in, os.ErrClosed) {
		t.Fatalf("Exit(plain error) = %+v", in)
	}
	if Exit(nil) != nil {
		t.Fatal("Exit(nil) is not nil")
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestStateInvalidOnSaveIs78: a thread.yaml that can no longer be written
// mid-turn ends the run STATE_INVALID with 78, as when it cannot be read
// (it used to be 75, "try again later", which a retry never mends).
func TestStateInvalidOnSaveIs78(t *testing.T) {
	h := newHarness(t, false)
	const alias = "unwritable/t"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "working"}, {Text: "done"}}}})
	path := filepath.Join(ThreadDir(h.setup().JobDir, alias), "thread.yaml")
	h.tune = func(r *Runner) {
		// Once the turn runs, thread.yaml becomes a folder the atomic write
		// cannot rename over.
		r.Client = &onText{Client: r.Client, do: func() {
			if err := os.Remove(path); err != nil {
				t.Error(err)
			}
			if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
				t.Error(err)
			}
		}}
	}
	sum := h.run(alias)
	wantCode(t, sum, ExitConfig, CodeStateTreeInvalid)
	if !strings.Contains(sum.Error.Message, "thread.yaml") {
		t.Fatalf("message %q", sum.Error.Message)
	}
}

// onText calls do once, right after the first text item is posted.
type onText struct {
	blobhub.Client
	once sync.Once
	do   func()
}

func (c *onText) Post(ctx context.Context, alias string, p blobhub.NewItem) (blobhub.Item, error) {
	it, err := c.Client.Post(ctx, alias, p)
	var m struct {
		Type string `json:"type"`
	}
	if err == nil && json.Unmarshal(p.Metadata, &m) == nil && m.Type == agent.ItemText {
		c.once.Do(c.do)
	}
	return it, err
}

// TestLockFailureIsNotContention: a thread lock that cannot be taken for
// another reason than a holder (here thread.lock is a folder) is
// STATE_INVALID 78, not THREAD_LOCKED 75 "retry later".
func TestLockFailureIsNotContention(t *testing.T) {
	h := newHarness(t, false)
	const alias = "lockdir/t"
	h.handOff(alias, "approval", "start")
	if err := os.MkdirAll(filepath.Join(ThreadDir(h.setup().JobDir, alias), "thread.lock"), 0o700); err != nil {
		t.Fatal(err)
	}
	sum := h.run(alias)
	wantCode(t, sum, ExitConfig, CodeStateTreeInvalid)
	if strings.Contains(sum.Error.Message, "retry later") || !strings.Contains(sum.Error.Message, "cannot lock") {
		t.Fatalf("message %q", sum.Error.Message)
	}
}
