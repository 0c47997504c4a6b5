package yamldoc

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// ParseAll parses a stream of YAML documents separated by '---', such as a file of
// Kubernetes manifests. Empty documents are skipped.
func ParseAll(file string, data []byte) ([]*Doc, diag.List) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*Doc
	var l diag.List
	total := 0
	for {
		var root yaml.Node
		if err := dec.Decode(&root); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, l
			}
			return nil, append(l, syntaxDiag(file, data, err)...)
		}
		n := &root
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			n = n.Content[0]
		}
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			continue
		}
		d := &Doc{File: file, pos: map[string]position{}, nodes: total}
		// An alias bomb or cycle is refused before anything is expanded.
		if !aliasFree(n) && d.bomb(n, &l) {
			return nil, l
		}
		d.document(n, &l)
		total = d.nodes
		if l.HasFatal() {
			return nil, l
		}
		docs = append(docs, d)
	}
}
