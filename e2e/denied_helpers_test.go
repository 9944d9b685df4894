package e2e

import (
	"encoding/json"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/policy"
)

// deniedMeta is a policy_denied item's metadata: blobhub-worker's shape
// ({rule: <id>, effect, detail}), bhw-run's origin, index and call beside.
type deniedMeta struct {
	Rule   string `json:"rule"`
	Effect string `json:"effect"`
	Detail string `json:"detail"`
	Origin string `json:"origin"`
	Index  int    `json:"index"`
	Call   struct {
		Effect string        `json:"effect"`
		Target policy.Target `json:"target"`
	} `json:"call"`
}

// oneDenied is the thread's one policy_denied item and its metadata; any
// other number of them fails the test.
func (e *e2eEnv) oneDenied(t *testing.T, alias string) (blobhub.Item, deniedMeta) {
	t.Helper()
	denied := e.itemsOfType(alias, agent.ItemPolicyDenied)
	if len(denied) != 1 {
		t.Fatalf("%d policy_denied items, want 1: %v", len(denied), e.itemTypes(alias))
	}
	var m deniedMeta
	if err := json.Unmarshal(denied[0].Metadata, &m); err != nil {
		t.Fatal(err)
	}
	return denied[0], m
}
