//go:build realcli

package codex

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/codex/codextest"
)

// TestRealImageReachesTheModel: an image attached before a turn is given
// to Codex as a localImage input; Codex reads it from its path and the
// model gets it as an image of the user's message.
func TestRealImageReachesTheModel(t *testing.T) {
	r := newRig(t, codextest.Say("a pixel"))
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	p := r.path("shot.png")
	if err := os.WriteFile(p, png, 0o600); err != nil {
		t.Fatal(err)
	}
	s := r.start(r.launch("autonomous", ""))
	s.AttachImages([]agent.Image{{MediaType: "image/png", Data: png, Path: p}})
	if res := runTurn(t, s, "what is in the picture?", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("result %+v", res)
	}
	reqs := r.model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	body := string(reqs[0].Body)
	if !strings.Contains(body, "input_image") || !strings.Contains(body, base64.StdEncoding.EncodeToString(png)) {
		t.Fatalf("the request lacks the image:\n%.3000s", body)
	}
}
