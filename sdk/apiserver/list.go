package apiserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// listQuery is a list or watch request, parsed and checked: what goes to the
// storage (its Secrets) and what the server still filters itself.
//
// Label selectors go to the storage whole: an object's labels are copied onto
// its Secret, so the API server selects, pages and watches by them.
// metadata.namespace and metadata.name become the Secret's namespace label
// and name where they can; every field selector is also checked here against
// the objects the storage returns, which is what makes declared fields
// (Resource.SelectableFields) selectable.
type listQuery struct {
	opts metainternalversion.ListOptions
	// storage is the list or watch sent for the Secrets.
	storage metav1.ListOptions
	// listKey names the list a continue token belongs to.
	listKey string
	// filtered: the field selector needs the server's own check.
	filtered bool
	res      Resource
	fields   map[string][]string // selectable field -> path in the object
}

// parseList reads a list or watch request's query as the API server does
// (the same parameter codec and validation), refusing with 400 a selector that
// does not parse or names a field the resource does not offer.
func (s *Server) parseList(query url.Values, res Resource, ns string, watch bool) (*listQuery, error) {
	q := &listQuery{res: res, fields: selectableFields(res)}
	if err := q.decode(query, watch); err != nil {
		return nil, err
	}
	sel, err := s.labelSelector(res, ns, q.opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	q.storage = metav1.ListOptions{
		ResourceVersion:      q.opts.ResourceVersion,
		ResourceVersionMatch: q.opts.ResourceVersionMatch,
		TimeoutSeconds:       q.opts.TimeoutSeconds,
		Limit:                q.opts.Limit,
		AllowWatchBookmarks:  q.opts.AllowWatchBookmarks,
		SendInitialEvents:    q.opts.SendInitialEvents,
		Watch:                q.opts.Watch,
	}
	sel, ns, name, err := q.fieldSelector(sel, ns)
	if err != nil {
		return nil, err
	}
	if name != "" && (ns != "" || !res.Namespaced) {
		q.storage.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.store.cmName(res, ns, name)).String()
	}
	q.storage.LabelSelector = sel.String()
	sum := sha256.Sum256([]byte(s.opts.Group + "\x00" + res.Plural + "\x00" + ns + "\x00" + q.opts.LabelSelector.String() + "\x00" + q.opts.FieldSelector.String()))
	q.listKey = hex.EncodeToString(sum[:8])
	if q.opts.Continue != "" {
		inner, err := q.decodeContinue(q.opts.Continue)
		if err != nil {
			return nil, err
		}
		q.storage.Continue = inner
	}
	return q, nil
}

// decode reads the query into q.opts with the API server's parameter codec
// and validation; no selector means every object.
func (q *listQuery) decode(query url.Values, watch bool) error {
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, &q.opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	q.opts.Watch = q.opts.Watch || watch
	if errs := metainternalversionvalidation.ValidateListOptions(&q.opts, true); len(errs) > 0 {
		return apierrors.NewBadRequest(errs.ToAggregate().Error())
	}
	if q.opts.LabelSelector == nil {
		q.opts.LabelSelector = labels.Everything()
	}
	if q.opts.FieldSelector == nil {
		q.opts.FieldSelector = fields.Everything()
	}
	return nil
}

// labelSelector is the storage's selector of res's objects in ns with the
// user's requirements added; a requirement on the server's own labels
// (sdkPrefix) is refused.
func (s *Server) labelSelector(res Resource, ns string, userSel labels.Selector) (labels.Selector, error) {
	sel, err := labels.Parse(s.store.selector(res, ns))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	user, _ := userSel.Requirements()
	for _, r := range user {
		if strings.HasPrefix(r.Key(), sdkPrefix) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: label %q: the prefix %s is the server's own", r.Key(), sdkPrefix))
		}
	}
	return sel.Add(user...), nil
}

// fieldSelector checks the field selector: every field must be one the
// resource offers. The equalities on metadata.namespace and metadata.name
// also narrow what the storage returns: it returns sel narrowed to the
// namespace, ns (the selector's namespace when ns was empty) and the name
// asked for.
func (q *listQuery) fieldSelector(sel labels.Selector, ns string) (labels.Selector, string, string, error) {
	name := ""
	for _, r := range q.opts.FieldSelector.Requirements() {
		if _, ok := q.fields[r.Field]; !ok {
			return nil, "", "", apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s (%s offer %s)", r.Field, q.res.Plural, strings.Join(fieldNames(q.fields), ", ")))
		}
		eq := r.Operator == selection.Equals || r.Operator == selection.DoubleEquals
		switch {
		case r.Field == "metadata.namespace" && eq && q.res.Namespaced:
			req, err := labels.NewRequirement(labelNamespace, selection.Equals, []string{r.Value})
			if err != nil {
				// Not a namespace name: nothing matches.
				req, _ = labels.NewRequirement(labelNamespace, selection.DoesNotExist, nil)
			}
			sel = sel.Add(*req)
			if ns == "" {
				ns = r.Value
			}
		case r.Field == "metadata.name" && eq:
			name = r.Value
		}
		q.filtered = true
	}
	return sel, ns, name, nil
}

// matches reports whether an object the storage returned passes the field
// selector.
func (q *listQuery) matches(u *unstructured.Unstructured) bool {
	if !q.filtered {
		return true
	}
	set := fields.Set{}
	for f, path := range q.fields {
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		if found && v != nil {
			set[f] = fmt.Sprint(v)
		}
	}
	return q.opts.FieldSelector.Matches(set)
}

// continueToken wraps the storage's own token with the list it belongs to, so
// a token is refused on another list (its resource, namespace or selectors)
// instead of silently paging through it.
type continueToken struct {
	List    string `json:"l"`
	Storage string `json:"c"`
}

func (q *listQuery) encodeContinue(storage string) string {
	if storage == "" {
		return ""
	}
	raw, _ := json.Marshal(continueToken{List: q.listKey, Storage: storage})
	return base64.RawURLEncoding.EncodeToString(raw)
}

func (q *listQuery) decodeContinue(token string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	var t continueToken
	if err == nil {
		err = json.Unmarshal(raw, &t)
	}
	if err != nil || t.Storage == "" {
		return "", apierrors.NewBadRequest("invalid continue token: not one this server issued")
	}
	if t.List != q.listKey {
		return "", apierrors.NewResourceExpired("the continue token belongs to another list (resource, namespace or selectors differ): start the list again without it")
	}
	return t.Storage, nil
}

// selectableFields are the field selectors a resource offers: metadata.name,
// metadata.namespace and its declared fields.
func selectableFields(res Resource) map[string][]string {
	out := map[string][]string{
		"metadata.name":      {"metadata", "name"},
		"metadata.namespace": {"metadata", "namespace"},
	}
	for _, f := range res.SelectableFields {
		key := strings.TrimPrefix(f, ".")
		out[key] = strings.Split(key, ".")
	}
	return out
}

func fieldNames(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }

// checkSelectableFields checks a resource's declared fields once, at New.
func checkSelectableFields(res Resource) error {
	seen := map[string]bool{}
	for i, f := range res.SelectableFields {
		key := strings.TrimPrefix(f, ".")
		p := field.NewPath("Resources").Key(res.Plural).Child("SelectableFields").Index(i)
		switch {
		case !strings.HasPrefix(f, ".") || key == "" || strings.Contains(key, "..") || strings.ContainsAny(key, "[]*"):
			return fmt.Errorf("apiserver: %s: %q is not a simple JSON path such as .spec.color", p, f)
		case strings.HasPrefix(key, "metadata."):
			return fmt.Errorf("apiserver: %s: %q: metadata.name and metadata.namespace are always selectable, other metadata is not", p, f)
		case seen[key]:
			return fmt.Errorf("apiserver: %s: %q is declared twice", p, f)
		}
		seen[key] = true
	}
	return nil
}
