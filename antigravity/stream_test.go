package antigravity

import (
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// decode feeds a case to a decoder as the session does, returning the
// items and the outcome (nil when the stream had no result).
func decode(c streamCase) ([]agent.Item, *agent.TurnResult, *decoder) {
	d := &decoder{}
	var items []agent.Item
	for _, l := range c.lines {
		got, _, err := d.feed([]byte(l))
		if err != nil {
			continue
		}
		items = append(items, got...)
	}
	items = append(items, d.flush()...)
	if d.result == nil {
		return items, nil, d
	}
	r := d.outcome(c.gated, c.hookCalls)
	return items, &r, d
}

func find(t *testing.T, name string) streamCase {
	for _, c := range streamCases() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return streamCase{}
}

func texts(items []agent.Item) []string {
	var out []string
	for _, it := range items {
		if it.Type() == agent.ItemText {
			out = append(out, it.Brief)
		}
	}
	return out
}

// TestDecoderJoinsDeltas: a reply's deltas are one text item, whatever
// byte they were cut at; the conversation id is init's, not the result's.
func TestDecoderJoinsDeltas(t *testing.T) {
	items, res, d := decode(find(t, "a reply in deltas split at odd places"))
	if got := texts(items); len(got) != 1 || got[0] != "Héllo, wörld!\nLABEL: done\n" {
		t.Fatalf("texts %q", got)
	}
	if res.Outcome != agent.TurnCompleted || d.conversationID != "conv-1" {
		t.Fatalf("outcome %+v, conversation %q", res, d.conversationID)
	}
	if res.Usage != (agent.Usage{InputTokens: 200, InputTokensCached: 80, OutputTokens: 30}) {
		t.Fatalf("usage %+v", res.Usage)
	}
}

// TestDecoderTools: ACTIVE is the call, DONE its result, ERROR an error
// result and an error status; text before a call is posted before it.
func TestDecoderTools(t *testing.T) {
	items, res, _ := decode(find(t, "tool calls ACTIVE, DONE, ERROR"))
	var kinds []string
	for _, it := range items {
		kinds = append(kinds, it.Type())
	}
	want := "status text tool_call tool_result tool_call tool_result status tool_call tool_result text"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("items %v, want %s", kinds, want)
	}
	call := items[2].Meta["tool"].(map[string]any)
	if call["name"] != "view_file" || call["invocation_id"] != "2" {
		t.Fatalf("call %v", call)
	}
	if r := items[5].Meta["tool"].(map[string]any); r["is_error"] != true || items[6].Meta["detail"] != "exit status 1" {
		t.Fatalf("error result %v, %v", r, items[6].Meta)
	}
	if r := items[8].Meta["tool"].(map[string]any); r["output"] != "5 bytes written" {
		t.Fatalf("output %v", r["output"])
	}
	d := &decoder{}
	if got, _, _ := d.feed([]byte(toolStep(1, "DONE", "x", nil, map[string]any{"bytes": 5}, ""))); got[0].Meta["tool"].(map[string]any)["output"] != `{"bytes":5}` {
		t.Fatalf("an output that is no string: %v", got[0].Meta)
	}
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("outcome %+v", res)
	}
}

// TestDecoderOutcomes: the status mapping and blobhub-worker's rules.
func TestDecoderOutcomes(t *testing.T) {
	for name, want := range map[string]string{
		"every call denied by the hook":               agent.TurnFailed,
		"some calls denied":                           agent.TurnCompleted,
		"gated, hook never contacted":                 agent.TurnFailed,
		"autonomous, no hook":                         agent.TurnCompleted,
		"denied_actions with no response":             agent.TurnFailed,
		"status ERROR":                                agent.TurnFailed,
		"status CANCELED":                             agent.TurnInterrupted,
		"status INTERRUPTED":                          agent.TurnInterrupted,
		"status INVALID":                              agent.TurnFailed,
		"status WAITING":                              agent.TurnFailed,
		"status RUNNING":                              agent.TurnFailed,
		"status unknown":                              agent.TurnFailed,
		"an unknown event and a step of another type": agent.TurnCompleted,
	} {
		_, res, _ := decode(find(t, name))
		if res == nil || res.Outcome != want {
			t.Errorf("%s: %+v, want %s", name, res, want)
		}
	}
	if _, res, _ := decode(find(t, "gated, hook never contacted")); !strings.HasPrefix(res.ErrorText, NeverContacted+":") {
		t.Errorf("never contacted: %q", res.ErrorText)
	}
	if _, res, _ := decode(find(t, "every call denied by the hook")); !strings.Contains(res.ErrorText, "(2/2)") {
		t.Errorf("every call denied: %q", res.ErrorText)
	}
	if _, res, _ := decode(find(t, "denied_actions with no response")); !strings.HasSuffix(res.ErrorText, "Run make, write") {
		t.Errorf("denied actions: %q", res.ErrorText)
	}
}

// TestDecoderBounds: a reply is kept up to maxReply and says what it
// dropped; a line that is not JSON is an error, an unknown event skipped.
func TestDecoderBounds(t *testing.T) {
	items, _, _ := decode(find(t, "a huge reply"))
	got := texts(items)
	if len(got) != 1 || len(got[0]) > maxReply+100 || !strings.HasSuffix(got[0], "more bytes of this reply were not kept]") ||
		!strings.HasPrefix(got[0], "ééé") {
		t.Fatalf("huge reply kept as %d bytes: %.40q…%.80q", len(got[0]), got[0], got[0][max(0, len(got[0])-80):])
	}
	d := &decoder{}
	if _, _, err := d.feed([]byte("not json")); err == nil {
		t.Fatal("a line that is not JSON decoded")
	}
	if items, known, err := d.feed([]byte(`{"event":"brand_new","brand_new":{}}`)); err != nil || known || len(items) != 0 {
		t.Fatalf("unknown event: %v %v %v", items, known, err)
	}
}

// TestDecoderHugeLineAllocation: a 64 MiB reply line costs the decoder a
// few copies of what it keeps (maxReply), not another 64 MiB.
func TestDecoderHugeLineAllocation(t *testing.T) {
	line := []byte(reply(1, "DONE", strings.Repeat("a", 64<<20)))
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			d := &decoder{}
			_, _, _ = d.feed(line)
			_ = d.flush()
		}
	})
	if per := allocs.AllocedBytesPerOp(); per > 5*maxReply {
		t.Fatalf("decoding a 64 MiB line allocated %d bytes, want at most %d", per, 5*maxReply)
	}
}
