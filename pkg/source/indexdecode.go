package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Bounds of a catalog index beyond its size ([MaxIndexSize]).
const (
	// MaxIndexEntries bounds the versions an index lists, all plugins together:
	// an index is decoded one entry at a time and refused past it, so a small
	// document of a million tiny entries cannot exhaust memory.
	MaxIndexEntries = 200_000
	// MaxIndexErrors bounds the broken entries reported one by one; the rest
	// are counted in one last diagnostic ("and N more").
	MaxIndexErrors = 20
	// MaxYAMLIndexSize bounds an index in YAML, which is decoded whole into a
	// tree about 80 times its size (4 MiB, some 18,000 versions, takes about
	// 350 MB); larger catalogs publish index.json, which is streamed.
	MaxYAMLIndexSize = 4 << 20
)

// ErrIndexTooLarge is wrapped by DecodeIndex for an index past MaxIndexEntries.
var ErrIndexTooLarge = errors.New("catalog index too large")

// DecodeIndex decodes a catalog index, in YAML or in JSON. JSON (data whose first
// non-blank byte is '{') is streamed, about eight times faster than YAML and in
// bounded memory: a 10,000 × 10 index takes about 0.2 s as JSON. YAML is decoded
// whole, so it is refused past [MaxYAMLIndexSize]: large catalogs publish
// index.json (`kubeplug catalog index -o index.json`). Either way the entries
// are counted as they are decoded: an index of more than [MaxIndexEntries]
// versions, or YAML past its size, wraps [ErrIndexTooLarge].
func DecodeIndex(data []byte) (*CatalogIndex, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if len(data) > MaxYAMLIndexSize {
			return nil, fmt.Errorf("%w: a YAML index is limited to %d MiB (this one is %.1f MiB); publish index.json (kubeplug catalog index -o index.json), which is read in bounded memory", ErrIndexTooLarge, MaxYAMLIndexSize>>20, float64(len(data))/(1<<20))
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, err
		}
		data = js
	}
	return decodeJSONIndex(data)
}

// decodeJSONIndex decodes as json.Unmarshal would (keys matched without regard
// to case, unknown keys ignored, a later duplicate winning), streaming the
// entries.
func decodeJSONIndex(data []byte) (*CatalogIndex, error) {
	x := &CatalogIndex{}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil { // null
		return x, trailing(dec)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object, found %v", tok)
	}
	n := 0
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.EqualFold(key, "apiVersion"):
			err = dec.Decode(&x.APIVersion)
		case strings.EqualFold(key, "kind"):
			err = dec.Decode(&x.Kind)
		case strings.EqualFold(key, "entries"):
			x.Entries, err = decodeEntries(dec, x.Entries, &n)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return x, trailing(dec)
}

// decodeEntries decodes the entries object into out (a later "entries" key adds
// to an earlier one's map, as json.Unmarshal does), counting versions in n.
//
// Branches: a streaming JSON decoder: each token is checked where it is read, so
// that an index past the limits is refused before it is held.
func decodeEntries(dec *json.Decoder, out map[string][]CatalogEntry, n *int) (map[string][]CatalogEntry, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected an object of plugins, found %v", tok)
	}
	if out == nil {
		out = map[string][]CatalogEntry{}
	}
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return nil, err
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if tok == nil {
			out[name] = nil
			continue
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return nil, fmt.Errorf("%s: expected a list of versions, found %v", name, tok)
		}
		es := []CatalogEntry{} // [] is an empty list, as json.Unmarshal makes it
		for dec.More() {
			if *n++; *n > MaxIndexEntries {
				return nil, fmt.Errorf("%w: more than %d versions (plugins together)", ErrIndexTooLarge, MaxIndexEntries)
			}
			var e CatalogEntry
			if err := dec.Decode(&e); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", name, len(es), err)
			}
			es = append(es, e)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, err
		}
		out[name] = es
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return out, nil
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("expected an object key, found %v", tok)
	}
	return key, nil
}

// trailing refuses data after the document, as json.Unmarshal does.
func trailing(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid data after the index document")
	}
	return nil
}
