package yamlkeys

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

type Spend struct {
	Cost  int `yaml:"cost"`
	Turns int
}

type record struct {
	Name    string `yaml:"name,omitempty"`
	Skipped string `yaml:"-"`
	hidden  string `yaml:"hidden"`
	Spend   `yaml:",inline"`
	Extra   map[string]any `yaml:",inline"`
	Model   string
}

// TestOf: the keys are the ones yaml.v3 decodes into the struct (an inline
// struct's in its place, an inline map's none of its own), in field order,
// through a pointer too; anything but a struct has none.
func TestOf(t *testing.T) {
	want := []string{"name", "cost", "turns", "model"}
	for _, typ := range []reflect.Type{reflect.TypeOf(record{}), reflect.TypeOf(&record{})} {
		if got := Of(typ); !slices.Equal(got, want) {
			t.Errorf("Of(%v) = %q, want %q", typ, got, want)
		}
	}
	var r record
	doc := "name: n\nskipped: s\nhidden: h\ncost: 1\nturns: 2\nmodel: m\n"
	if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "n" || r.Cost != 1 || r.Turns != 2 || r.Model != "m" || r.Skipped != "" || r.hidden != "" {
		t.Errorf("yaml.v3 decoded %+v: Of's rules no longer match it", r)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(r.Extra)), []string{"hidden", "skipped"}) {
		t.Errorf("yaml.v3 left %v to the inline map, want hidden and skipped (the keys Of does not list)", r.Extra)
	}
	for _, v := range []any{0, "", map[string]any{}, []string{}, (*int)(nil)} {
		if got := Of(reflect.TypeOf(v)); got != nil {
			t.Errorf("Of(%T) = %q, want nil", v, got)
		}
	}
	if got := Of(nil); got != nil {
		t.Errorf("Of(nil) = %q, want nil", got)
	}
}
