package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// typeRE is the form of a resource type: AWS::Service::Resource, or Custom::Name.
var typeRE = regexp.MustCompile(`^(([A-Za-z0-9]+::){2}[A-Za-z0-9]+(::MODULE)?|Custom::[A-Za-z0-9_@-]+)$`)

// logicalIDRE is what CloudFormation accepts as a logical ID.
var logicalIDRE = regexp.MustCompile(`^[A-Za-z0-9]+$`)

// subRE finds the ${Name} and ${Name.Attribute} variables of an Fn::Sub string;
// ${!Literal} is not one.
var subRE = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

// checkTemplate checks what CloudFormation would reject only after it started
// (or rejects without naming the resource): every resource is an object with a
// type of the form AWS::Service::Resource, and every Ref, Fn::GetAtt, Fn::Sub
// variable and DependsOn names a resource, a parameter or a pseudo parameter of
// the template. Each problem names its path in the template, such as
// Resources.Queue.Properties.QueueName. It returns the template's parameter names.
func checkTemplate(stack string, body []byte) ([]string, error) {
	var t struct {
		Parameters map[string]json.RawMessage `json:"Parameters"`
		Resources  map[string]any             `json:"Resources"`
		Outputs    map[string]any             `json:"Outputs"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("%w: %s: expected a JSON template: %w", ErrTemplate, stack, err)
	}
	if len(t.Resources) == 0 {
		return nil, fmt.Errorf("%w: %s: Resources: expected at least one resource, found none", ErrTemplate, stack)
	}
	var errs []string
	isParam := func(n string) bool { _, ok := t.Parameters[n]; return ok }
	isResource := func(n string) bool { _, ok := t.Resources[n]; return ok }
	refOK := func(n string) bool { return isParam(n) || isResource(n) || strings.HasPrefix(n, "AWS::") }
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case map[string]any:
			if len(v) == 1 {
				for k, arg := range v {
					switch k {
					case "Ref":
						if n, ok := arg.(string); !ok || !refOK(n) {
							errs = append(errs, fmt.Sprintf("%s: Ref to %v, which is neither a resource nor a parameter of the template", path, arg))
						}
					case "Fn::GetAtt":
						n := ""
						switch a := arg.(type) {
						case string:
							n, _, _ = strings.Cut(a, ".")
						case []any:
							if len(a) == 2 {
								n, _ = a[0].(string)
							}
						}
						if !isResource(n) {
							errs = append(errs, fmt.Sprintf("%s: Fn::GetAtt of %v, which is not a resource of the template", path, arg))
						}
					case "Fn::Sub":
						s, vars := "", map[string]any{}
						switch a := arg.(type) {
						case string:
							s = a
						case []any:
							if len(a) == 2 {
								s, _ = a[0].(string)
								vars, _ = a[1].(map[string]any)
							}
						}
						for _, m := range subRE.FindAllStringSubmatch(s, -1) {
							n, attr, hasAttr := strings.Cut(m[1], ".")
							if _, ok := vars[m[1]]; ok {
								continue
							}
							if (hasAttr && !isResource(n) && attr != "") || (!hasAttr && !refOK(n)) {
								errs = append(errs, fmt.Sprintf("%s: Fn::Sub variable ${%s} names no resource or parameter of the template", path, m[1]))
							}
						}
					}
				}
			}
			for _, k := range sortedKeys(v) {
				walk(path+"."+k, v[k])
			}
		}
	}
	for _, id := range sortedKeys(t.Resources) {
		path := "Resources." + id
		if !logicalIDRE.MatchString(id) {
			errs = append(errs, fmt.Sprintf("%s: expected a logical ID of letters and digits", path))
		}
		r, ok := t.Resources[id].(map[string]any)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: expected an object with Type and Properties, found %T", path, t.Resources[id]))
			continue
		}
		if typ, _ := r["Type"].(string); !typeRE.MatchString(typ) {
			errs = append(errs, fmt.Sprintf("%s.Type: expected a type such as AWS::S3::Bucket, found %v", path, r["Type"]))
		}
		var deps []any
		switch d := r["DependsOn"].(type) {
		case string:
			deps = []any{d}
		case []any:
			deps = d
		}
		for _, d := range deps {
			if n, _ := d.(string); !isResource(n) {
				errs = append(errs, fmt.Sprintf("%s.DependsOn: %v is not a resource of the template", path, d))
			}
		}
		for _, k := range []string{"Properties", "Condition", "Metadata"} {
			if p, ok := r[k]; ok {
				walk(path+"."+k, p)
			}
		}
	}
	for _, id := range sortedKeys(t.Outputs) {
		walk("Outputs."+id, t.Outputs[id])
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", ErrTemplate, stack, strings.Join(errs, "; "))
	}
	return sortedKeys(t.Parameters), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// order returns the stacks in dependency order (a stack after every stack it
// depends on or takes an output of; ties by the given order). A cycle is an error
// printing its chain, a -> b -> a; an unknown dependency names the stack.
func order(stacks []Stack) ([]Stack, error) {
	index := map[string]int{}
	for i, s := range stacks {
		if _, dup := index[s.Name]; dup {
			return nil, fmt.Errorf("stack %s is defined twice", s.Name)
		}
		index[s.Name] = i
	}
	deps := make([][]string, len(stacks))
	for i, s := range stacks {
		ds := slices.Clone(s.DependsOn)
		for _, p := range sortedKeys(s.Inputs) {
			ds = append(ds, s.Inputs[p].Stack)
		}
		for _, d := range ds {
			if _, ok := index[d]; !ok {
				return nil, fmt.Errorf("stack %s depends on stack %s, which no plugin defines", s.Name, d)
			}
		}
		slices.Sort(ds)
		deps[i] = slices.Compact(ds)
	}
	const (
		unvisited = iota
		visiting
		done
	)
	mark := make([]int, len(stacks))
	var out []Stack
	var path []string
	var visit func(i int) error
	visit = func(i int) error {
		switch mark[i] {
		case done:
			return nil
		case visiting:
			start := slices.Index(path, stacks[i].Name)
			return fmt.Errorf("stacks depend on each other: %s", strings.Join(append(slices.Clone(path[start:]), stacks[i].Name), " -> "))
		}
		mark[i] = visiting
		path = append(path, stacks[i].Name)
		for _, d := range deps[i] {
			if err := visit(index[d]); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		out = append(out, stacks[i])
		return nil
	}
	for i := range stacks {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var errNoStacks = errors.New("nothing to deploy: no stack")
