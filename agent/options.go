package agent

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/internal/yamlkeys"
)

// UnknownKeyError is a key under agents.<type> that neither run nor the
// adapter knows. Known lists the adapter's own keys.
type UnknownKeyError struct {
	Key   string
	Known []string
}

func (e *UnknownKeyError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("unknown key %q", e.Key)
	}
	return fmt.Sprintf("unknown key %q; this agent's own keys are %s", e.Key, strings.Join(e.Known, ", "))
}

// DecodeOptions decodes raw, an adapter's own keys under agents.<type>,
// into dst, a pointer to a struct with yaml tags. A key dst has no field
// for is an *UnknownKeyError.
func DecodeOptions(raw map[string]any, dst any) error {
	known := yamlkeys.Of(reflect.TypeOf(dst))
	slices.Sort(known)
	var unknown []string
	for k := range raw {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return &UnknownKeyError{Key: unknown[0], Known: known}
	}
	b, err := yaml.Marshal(raw)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(dst); err != nil && len(raw) > 0 {
		return err
	}
	return nil
}
