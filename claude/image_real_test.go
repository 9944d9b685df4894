//go:build realcli

package claude_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

// onePixelPNG is a valid 1×1 PNG.
var onePixelPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// TestRealImageReachesTheModel: an image attached before a turn reaches
// the model as an image block of the user's message, its bytes as sent;
// the next turn sends none.
func TestRealImageReachesTheModel(t *testing.T) {
	e := newEnv(t, claudetest.Text("a pixel"), claudetest.Text("ok"))
	l, log := e.launch("approval", newUUID(), false)
	s := start(t, l)
	it, ok := any(s).(agent.ImageTaker)
	if !ok {
		t.Fatal("the Claude session takes no images")
	}
	it.AttachImages([]agent.Image{{MediaType: "image/png", Data: onePixelPNG}})
	if res := turn(t, s, "what is in the picture?", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("turn = %+v\n%s", res, log)
	}
	if res := turn(t, s, "and now?", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("second turn = %+v\n%s", res, log)
	}
	closeSession(t, s)
	reqs := e.model.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	data := base64.StdEncoding.EncodeToString(onePixelPNG)
	if !reqs[0].Contains(`"type":"image"`) || !reqs[0].Contains(data) || !reqs[0].Contains(`"media_type":"image/png"`) {
		t.Fatalf("the first request lacks the image block:\n%.2000s", reqs[0].Body)
	}
	if n := strings.Count(string(reqs[len(reqs)-1].Body), data); n != 1 {
		t.Fatalf("the last request carries the image %d times, want once (in the history)", n)
	}
}
