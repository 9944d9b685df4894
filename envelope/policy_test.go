package envelope

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWithStateRewritesOlderPolicy: the runner's next write of a thread
// whose policy is in bhw-run's older spelling puts it in blobhub-worker's
// shape (the worker reads the older write rule as allow-every-write); a
// policy in the worker's shape, and one that does not read, stay as written.
func TestWithStateRewritesOlderPolicy(t *testing.T) {
	older := `{"thread":{"metadata":{"instance":{"state":"pending"},"policy":{"rules":[{"effect":"write","path":"/etc/**","decision":"deny"}]},"x":1}}}`
	out, err := WithState(json.RawMessage(older), StateActive)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`"state":"active"`, `"action":"deny"`, `"outside":"work_folder"`, `"default":"ask"`, `"id":"rule-1"`, `"x":1`} {
		if !strings.Contains(s, want) {
			t.Errorf("%s lacks %s", s, want)
		}
	}
	for _, gone := range []string{`"decision"`, `"path"`} {
		if strings.Contains(s, gone) {
			t.Errorf("%s still holds %s", s, gone)
		}
	}
	for _, keep := range []string{
		`{"thread":{"metadata":{"instance":{"state":"pending"},"policy":{"rules":[{"id":"a","effect":"exec","action":"deny","command":["rm *"]}]}}}}`,
		`{"thread":{"metadata":{"instance":{"state":"pending"},"policy":{"rules":[{"effect":"fly","decision":"deny"}]}}}}`,
	} {
		out, err := WithState(json.RawMessage(keep), StateActive)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Replace(keep, "pending", "active", 1); string(out) != want {
			t.Errorf("%s became %s, want only the state changed", keep, out)
		}
	}
}
