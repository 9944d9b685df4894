package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lmittmann/tint"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// Terminal control sequences a hostile item or envelope carries: an OSC 52
// clipboard write, a clear screen, a C1 CSI, a carriage return that
// overwrites the line, DEL, a right-to-left override that shows "txt.exe"
// as "exe.txt" and a left-to-right isolate.
const (
	osc52   = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
	clear   = "\x1b[2J\x1b[H"
	c1CSI   = "\u009b31m"
	bidi    = "\u202etxt.exe\u2066x\u2069"
	hostile = osc52 + "copy" + clear + "wipe" + c1CSI + "red\rover\x7f" + bidi
)

// rawControls reports a control character a terminal would act on: C0 but
// newline and tab, DEL, C1 and the bidirectional embeddings, overrides
// and isolates.
func rawControls(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
	})
}

// TestHumanOutputEscapesControls: what bhw-run prints for a person — thread
// show (items' text, their metadata type, the envelope's state, agent type
// and work folder), ls, the run summary's line and the error line on
// stderr — carries the wire's control characters escaped; --json and
// --print0 stay exact.
func TestHumanOutputEscapesControls(t *testing.T) {
	srv := bhtest.New(t)
	const alias = "projects/p1/hostile"
	srv.Put(alias, `{"type":"thread","thread":{"attributes":{"name":`+jsonString(hostile)+`},"metadata":{`+
		`"workspace":{"work_folder":`+jsonString("/w"+clear)+`},"agent":{"type":`+jsonString("claude"+osc52)+`},`+
		`"instance":{"state":`+jsonString("pending"+clear)+`}}}}`)
	srv.PersonPost(alias, "line one\n\tindented "+hostile)
	srv.PostAs(bhtest.RunnerUserID, bhtest.SessionID, alias, blobhub.NewItem{
		Content:  []blobhub.Block{{Type: "text", Text: "agent says " + osc52}},
		Metadata: json.RawMessage(`{"type":` + jsonString("text"+clear) + `}`)})

	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("BLOBHUB_API_KEY", bhtest.RunnerKey)
	global := []string{"bhw-run", "--api-url", srv.URL(), "--state-dir", filepath.Join(root, "state"),
		"--revision", bhtest.RevisionID, "--session", bhtest.SessionID, "--log-format", "text"}
	bhw := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(append(global, args...), &out, &errOut, "", adapters)
		t.Logf("%q → exit %d\nstdout: %q\nstderr: %q", args, code, out.String(), errOut.String())
		return code, out.String(), errOut.String()
	}

	_, out, _ := bhw("thread", "show", alias)
	for _, want := range []string{`\x1b]52;c;ZWNobyBwd25lZA==\x07copy`, `\x1b[2J\x1b[Hwipe`, `\u009b31mred\x0dover\x7f`,
		"line one\n    \tindented", `[text\x1b[2J\x1b[H]`, `pending\x1b[2J`, `agent claude\x1b]52`, `work folder /w\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("thread show lacks %q", want)
		}
	}
	if rawControls(out) {
		t.Errorf("thread show printed raw control characters: %q", out)
	}

	_, out, _ = bhw("thread", "show", "--json", alias)
	if rawControls(out) {
		t.Errorf("thread show --json printed raw control characters: %q", out)
	}
	var texts []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var it blobhub.Item
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		texts = append(texts, it.Content[0].Text)
	}
	if len(texts) != 2 || !strings.HasSuffix(texts[0], hostile) || texts[1] != "agent says "+osc52 {
		t.Errorf("--json is not exact: %q", texts)
	}

	_, out, _ = bhw("ls")
	if want := alias + "\tpending\\x1b[2J\\x1b[H\n"; out != want {
		t.Errorf("ls printed %q, want %q", out, want)
	}
	_, out, _ = bhw("ls", "--json")
	if !strings.Contains(out, `"state":"pending\u001b[2J\u001b[H"`) {
		t.Errorf("ls --json is not exact: %q", out)
	}

	// The summary line names the alias as given; the error line quotes the
	// wire's state.
	code, out, errOut := bhw("bad" + clear + "alias")
	if code != 64 || rawControls(out) || rawControls(errOut) || !strings.Contains(out, `bad\x1b[2J`) {
		t.Errorf("a bad alias: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = bhw("thread", "retry", alias)
	if code != 64 || rawControls(errOut) || !strings.Contains(errOut, `pending\x1b[2J`) {
		t.Errorf("retry: exit %d, stderr %q", code, errOut)
	}

	// Off a terminal the records are JSON lines, which encoding/json would
	// leave with DEL, C1 and the bidirectional controls raw: the same
	// value with those as \u escapes.
	const other = "projects/p1/hostile-state"
	srv.Put(other, `{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":"/w"},"agent":{"type":"claude_code"},`+
		`"instance":{"state":`+jsonString("pending"+c1CSI+bidi+"\x7f")+`}}}}`)
	code, _, errOut = bhw("--log-format", "json", "thread", "retry", other)
	var rec struct{ Msg string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(errOut)), &rec); err != nil {
		t.Fatalf("retry --log-format json: %v: %q", err, errOut)
	}
	if code != 64 || rawControls(errOut) || !strings.Contains(errOut, `\u009b31m\u202etxt.exe`) ||
		!strings.Contains(rec.Msg, "pending"+c1CSI+bidi+"\x7f") {
		t.Errorf("retry --log-format json: exit %d, stderr %q", code, errOut)
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestTextLogEscapesControls: on a terminal the log records are tint's
// text, which writes the message and, in colour, the escape characters of
// values as they are; the wire text they quote is escaped first.
func TestTextLogEscapesControls(t *testing.T) {
	for _, noColor := range []bool{true, false} {
		var out bytes.Buffer
		log := slog.New(tint.NewTextHandler(&out, &tint.Options{NoColor: noColor, ReplaceAttr: escapeAttr}))
		log.Warn("thread failed: work folder /w"+clear, "error", errors.New("agent.type "+osc52), "alias", "a"+c1CSI)
		s := out.String()
		for _, raw := range []string{osc52, clear, c1CSI} {
			if strings.Contains(s, raw) {
				t.Errorf("no colour %v: the record holds %q raw: %q", noColor, raw, s)
			}
		}
		if !strings.Contains(s, `/w\x1b[2J`) || !strings.Contains(s, `52;c;`) {
			t.Errorf("no colour %v: %q", noColor, s)
		}
	}
}
