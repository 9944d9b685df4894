package acp

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestImagesToAgentsThatTakeThem: images attached before a turn go with
// the prompt as image blocks {mimeType, data} to an agent that advertised
// promptCapabilities.image, once; an agent that did not gets none.
func TestImagesToAgentsThatTakeThem(t *testing.T) {
	img := agent.Image{MediaType: "image/png", Data: []byte("\x89PNG fake")}
	want := "images: image/png " + strconv.Itoa(len(base64.StdEncoding.EncodeToString(img.Data)))
	for _, takes := range []bool{true, false} {
		script := agenttest.Script{Turns: [][]agenttest.Step{{{Text: "first"}}, {{Text: "second"}}}}
		r := startFake(t, "gemini", script, func(l *agent.Launch) {
			if !takes {
				l.Env = append(l.Env, acptest.FakeNoImagesEnv+"=1")
			}
		})
		r.s.AttachImages([]agent.Image{img})
		h := &agenttest.Recorder{}
		runTurn(t, r.s, "look", h)
		runTurn(t, r.s, "again", h)
		got := strings.Join(texts(h), "|")
		if takes && (!strings.Contains(got, want) || strings.Count(got, "images:") != 1) {
			t.Fatalf("an agent that takes images said %q, want %q once", got, want)
		}
		if !takes && strings.Contains(got, "images:") {
			t.Fatalf("an agent that takes no images got some: %q", got)
		}
	}
}
