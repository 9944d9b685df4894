package envelope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestScannedLoadsAsBefore: a thread.yaml written before items.scanned had
// ahead loads as it did and is written back byte for byte (so an idle run
// does not rewrite it) without the new key; one with ahead keeps it.
func TestScannedLoadsAsBefore(t *testing.T) {
	old := `alias: a/b
items:
    last_consumed:
        item_id: ""
        created_at: ""
    last_posted:
        item_id: ""
        created_at: ""
    scanned:
        created_at: "2026-01-01T00:00:00.000000+00:00"
        ids:
            - itm_1
    pending_inbound: []
`
	path := filepath.Join(t.TempDir(), "thread.yaml")
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	th, err := LoadThread(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := th.Items.Scanned
	if sc.CreatedAt != "2026-01-01T00:00:00.000000+00:00" || !slices.Equal(sc.IDs, []string{"itm_1"}) || sc.Ahead != nil {
		t.Fatalf("scanned %+v", sc)
	}
	b, err := yaml.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "ahead") {
		t.Fatalf("an empty ahead is written:\n%s", b)
	}
	var back Thread
	if err := yaml.Unmarshal(b, &back); err != nil || !slices.Equal(back.Items.Scanned.IDs, sc.IDs) {
		t.Fatalf("round trip: %+v, %v", back.Items.Scanned, err)
	}

	th.Items.Scanned.Ahead = []ItemRef{{ItemID: "itm_2099", CreatedAt: "2099-01-01T00:00:00.000000+00:00"}}
	b, _ = yaml.Marshal(th)
	back = Thread{}
	if err := yaml.Unmarshal(b, &back); err != nil || !slices.Equal(back.Items.Scanned.Ahead, th.Items.Scanned.Ahead) {
		t.Fatalf("ahead round trip: %+v, %v\n%s", back.Items.Scanned, err, b)
	}
}
