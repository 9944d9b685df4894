package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/statefile"
)

// profileName is a name `login` stores a profile under: one folder name
// of the state tree (~/.blobhub-worker/profiles/<name>), blobhub-worker's
// own rule, so a profile either tool writes the other can use.
var profileName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidateProfileName refuses a name blobhub-worker would refuse.
func ValidateProfileName(name string) error {
	if !profileName.MatchString(name) || name == "." || name == ".." {
		return exit.Usagef("%q is not a profile name: use 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// Profile is one entry of the shared credentials file, as `login` writes
// it and `profile ls` shows it.
type Profile struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	RealtimeURL string `json:"realtime_url,omitempty"`
	Default     bool   `json:"default"`
	key         string
}

// Profiles reads the shared credentials file (mode checked, keys redacted
// as Resolve reads it): its profiles by name, and the default's name.
// A missing file has none.
func Profiles(home string, sec *redact.Secrets) ([]Profile, string, error) {
	var c credentialsFile
	if err := readCredentials(CredentialsPath(home), &c, sec); err != nil {
		return nil, "", err
	}
	var out []Profile
	for name, p := range c.Profiles {
		out = append(out, Profile{Name: name, URL: firstOf(p.URL, p.APIURL), Default: name == c.Default, key: firstOf(p.Key, p.APIKey)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, c.Default, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// SaveProfile writes profile name into the shared credentials file in the
// shape blobhub-worker's and the BlobHub CLI's login write (key, url, and
// realtime_url only when given), keeping every other profile and key of
// the file. The first profile of a file becomes its default; a later one
// leaves the default alone. The file is written atomically, mode 0600,
// in a folder made 0700. It returns the file's path.
func SaveProfile(home, name, key, url, realtimeURL string, sec *redact.Secrets) (string, error) {
	path := CredentialsPath(home)
	// The checks of a read first: a file with loose bits or of another
	// kind is refused, not rewritten.
	var known credentialsFile
	if err := readCredentials(path, &known, sec); err != nil {
		return "", err
	}
	doc := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if err := yaml.Unmarshal(b, &doc); err != nil || doc == nil {
			return "", exit.Errorf(exit.CodeInvalidConfig, "%s is not a credentials file (default, profiles); fix or remove it", path)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", exit.Errorf(exit.CodeInvalidConfig, "cannot read %s: %v", path, err)
	}
	profiles, _ := doc["profiles"].(map[string]any)
	if profiles == nil {
		if _, ok := doc["profiles"]; ok && doc["profiles"] != nil {
			return "", exit.Errorf(exit.CodeInvalidConfig, "%s: profiles is not a mapping; fix or remove it", path)
		}
		profiles = map[string]any{}
	}
	hadOthers := len(profiles) > 0
	if _, ok := profiles[name]; ok && len(profiles) == 1 {
		hadOthers = false // the one profile, logged into again
	}
	entry := map[string]any{"key": key, "url": url}
	if realtimeURL != "" {
		entry["realtime_url"] = realtimeURL
	}
	profiles[name] = entry
	doc["profiles"] = profiles
	if !hadOthers || doc["default"] == nil || doc["default"] == "" {
		doc["default"] = name
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("credentials: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", exit.Errorf(exit.CodeInvalidConfig, "cannot create %s: %v", filepath.Dir(path), err)
	}
	if err := statefile.WriteAtomic(path, b, 0o600); err != nil {
		return "", exit.Errorf(exit.CodeInvalidConfig, "cannot write %s: %v; fix the folder's permissions and log in again", path, err)
	}
	return path, nil
}
