package e2e

import (
	"errors"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/setup"
)

const configExample = "contrib/config.example.yaml"

// TestConfigExample keeps contrib/config.example.yaml true: bhw-run's own
// loader accepts it, it holds every key the Config struct knows — for each
// agent type main lists (but those not supported yet), the keys every
// agent has, its home key and its own options — and no other, and every
// key has a comment.
func TestConfigExample(t *testing.T) {
	dir := t.TempDir()
	if _, err := setup.Resolve(setup.Options{ConfigPath: configExample, APIURL: "file://" + dir, StateDir: dir, Home: dir, Adapters: adapters, Section: "backend"}, ""); err != nil {
		t.Fatalf("the loader refuses %s: %v", configExample, err)
	}

	b, err := os.ReadFile(configExample)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	var uncommented []string
	walkKeys(doc.Content[0], "", have, &uncommented)

	want := map[string]bool{}
	structKeys(reflect.TypeFor[setup.Config](), "", want)
	for _, ad := range adapters {
		if ad.Unsupported != "" {
			continue // a block for a type not supported yet is refused
		}
		want["agents."+ad.Type] = true
		for _, k := range agentKeys(t, ad) {
			want["agents."+ad.Type+"."+k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !have[k] {
			t.Errorf("%s lacks the key %s", configExample, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if !want[k] {
			t.Errorf("%s has the key %s, which the code does not know", configExample, k)
		}
	}
	for _, k := range uncommented {
		t.Errorf("%s: the key %s has no comment", configExample, k)
	}
}

// walkKeys records the dotted path of every mapping key under n ("[]" for
// a list item) and the keys that have no comment above or beside them.
func walkKeys(n *yaml.Node, prefix string, have map[string]bool, uncommented *[]string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := k.Value
			if prefix != "" {
				path = prefix + "." + k.Value
			}
			have[path] = true
			if k.HeadComment == "" && k.LineComment == "" && v.LineComment == "" && (i > 0 || n.HeadComment == "") {
				*uncommented = append(*uncommented, path)
			}
			walkKeys(v, path, have, uncommented)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			walkKeys(item, prefix+"[]", have, uncommented)
		}
	}
}

// structKeys records the yaml paths of t's fields; agents.<type> is left
// to agentKeys (its keys depend on the adapter).
func structKeys(t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		structKeys(t.Elem(), prefix+"[]", out)
		return
	case reflect.Struct:
	default:
		return
	}
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() || strings.Contains(opts, "inline") {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out[path] = true
		if path == "agents" {
			continue
		}
		structKeys(f.Type, path, out)
	}
}

// agentKeys are the keys of agents.<type> for ad: the fields of
// setup.AgentConfig, its home key, and the adapter's own options, which its
// Options names when handed a key it does not know.
func agentKeys(t *testing.T, ad agent.Adapter) []string {
	keys := map[string]bool{}
	structKeys(reflect.TypeFor[setup.AgentConfig](), "", keys)
	home := ad.HomeKey
	if home == "" {
		home = "home"
	}
	keys[home] = true
	if ad.Options != nil {
		_, err := ad.Options(map[string]any{"no such key": true})
		var uk *agent.UnknownKeyError
		if !errors.As(err, &uk) {
			t.Fatalf("%s's Options does not name its keys for an unknown one: %v", ad.Type, err)
		}
		for _, k := range uk.Known {
			keys[k] = true
		}
	}
	return slices.Sorted(maps.Keys(keys))
}
