package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestUnionSortsByKeyOncePerRef: Union and SortRefs order by Key exactly (the
// order records are stored and compared in), one entry per Key, a's first.
func TestUnionSortsByKeyOncePerRef(t *testing.T) {
	var a, b []ObjRef
	for i := range 300 {
		// Groups that prefix one another and names with "/" in the key's
		// separators' place: field by field would order them otherwise.
		r := ObjRef{Group: []string{"", "a", "a.b", "a-b"}[i%4], Version: "v1", Kind: "K", Namespace: fmt.Sprint("ns", i%7), Name: fmt.Sprint("n", (i*37)%101)}
		if i%2 == 0 {
			a = append(a, r)
		} else {
			b = append(b, r)
		}
	}
	dup := a[3]
	dup.Version = "v2"
	b = append(b, dup)
	got := Union(a, b)
	if !slices.IsSortedFunc(got, func(x, y ObjRef) int { return strings.Compare(x.Key(), y.Key()) }) {
		t.Error("Union is not sorted by Key")
	}
	seen := map[string]ObjRef{}
	for _, r := range got {
		if _, ok := seen[r.Key()]; ok {
			t.Fatalf("%s twice", r.Key())
		}
		seen[r.Key()] = r
	}
	if seen[dup.Key()].Version != "v1" {
		t.Error("Union kept b's entry of a Key a has")
	}
	if Union(nil, nil) != nil {
		t.Error("Union(nil, nil) is not nil")
	}
}
