package expansion

import (
	"io/fs"
	"slices"

	"github.com/kubeplug/kubeplug/plugins"
)

// builtinPlugins names the built-in plugins: the directories of plugins.FS that
// hold a plugin.yaml.
func builtinPlugins() []string {
	entries, err := fs.ReadDir(plugins.FS, ".")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(plugins.FS, e.Name()+"/plugin.yaml"); err == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}
