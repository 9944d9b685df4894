// Package yamlkeys lists the keys a YAML mapping decoded into a Go struct
// may hold, so a reader that meets another key can name it and the keys it
// knows: the envelope's "did you mean" and an adapter's own keys under
// agents.<type>.
package yamlkeys

import (
	"reflect"
	"strings"
)

// Of is the keys a mapping decoded into t (a struct, or a pointer to one)
// may hold, in field order, as gopkg.in/yaml.v3 reads them: a field by its
// yaml name, else its name in lower case; an inline struct's keys in its
// place; no field tagged "-" and no unexported one. Nil for any other type.
func Of(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			keys = append(keys, Of(f.Type)...)
		case !f.IsExported():
		case name != "":
			keys = append(keys, name)
		default:
			keys = append(keys, strings.ToLower(f.Name))
		}
	}
	return keys
}
