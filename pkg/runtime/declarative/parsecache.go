package declarative

import (
	"crypto/sha256"
	"sync"
)

// manifestCache keeps what yamldoc.ParseAll made of rendered manifest files
// that held nothing but Kubernetes objects, by the file's name and rendered
// text: a process that renders the same packages again (the controller's
// resyncs, a re-apply in one process) parses each file once. Parsing YAML is
// most of what rendering a plugin costs.
var manifestCache = &parseCache{max: 4 << 20}

// parseCache is a bounded map of parsed files; it is safe for concurrent use.
// What goes in and what comes out are copies: no caller shares maps with
// another.
type parseCache struct {
	mu    sync.Mutex
	files map[[sha256.Size]byte][]map[string]any
	// size is the text the entries were parsed from; past max, the cache
	// starts again empty.
	size, max int
}

func parseKey(name, text string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// get returns copies of the objects parsed from the file of key.
func (c *parseCache) get(key [sha256.Size]byte) ([]map[string]any, bool) {
	c.mu.Lock()
	objs, ok := c.files[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		out[i] = copyValue(o).(map[string]any)
	}
	return out, true
}

// put keeps copies of the objects parsed from a file of size bytes.
func (c *parseCache) put(key [sha256.Size]byte, size int, objs []map[string]any) {
	if size > c.max {
		return
	}
	kept := make([]map[string]any, len(objs))
	for i, o := range objs {
		kept[i] = copyValue(o).(map[string]any)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil || c.size+size > c.max {
		c.files, c.size = map[[sha256.Size]byte][]map[string]any{}, 0
	}
	if _, ok := c.files[key]; !ok {
		c.files[key] = kept
		c.size += size
	}
}

// copyValue copies a parsed YAML value: maps and lists are new, scalars
// (strings, numbers, booleans) are immutable and shared.
func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}
