package declarative

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// funcs are the template functions: sprig's, less those that read the host (a
// plugin's output must not depend on where it is rendered), plus toYaml.
var funcs = func() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(f, name)
	}
	f["toYaml"] = func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	}
	// optional returns its argument: a read of another plugin's value it
	// holds may be missing (see strict.go).
	f["optional"] = func(v any) any { return v }
	f["required"] = func(msg string, v any) (any, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	return f
}()

// templateError is a template failure located inside the template's text.
type templateError struct {
	Line, Column int // 1-based, 0 when unknown
	Msg          string
}

func (e *templateError) Error() string { return e.Msg }

// Limits on rendering a plugin's templates. A template is code from the plugin's
// author; these keep `{{ repeat 200000000 "x" }}` or a runaway range from eating
// the host's memory or time.
const (
	// MaxTemplateOutput bounds what one template renders: the per-file limit of a
	// package, since a rendered template becomes one file or one field.
	MaxTemplateOutput = 16 << 20
	// MaxPluginOutput bounds what all of a plugin's templates render in one stage:
	// the size limit of a whole package.
	MaxPluginOutput = 64 << 20
	// MaxTemplateTime bounds rendering one template; real ones take milliseconds.
	MaxTemplateTime = 10 * time.Second
	// MaxPluginTime bounds rendering all of a plugin's templates in one stage, as
	// exec.DefaultTimeout bounds an exec plugin's stage.
	MaxPluginTime = time.Minute
	// maxListLen bounds the lists that until, untilStep and seq make.
	maxListLen = 1 << 20
)

// errStopped is raised inside template functions once rendering must stop.
var errStopped = errors.New("rendering stopped")

// limits is one plugin's rendering budget for a stage, shared by its templates.
// Template functions are wrapped to check it, the output writer counts against
// it, and a template that runs past its time is abandoned.
type limits struct {
	// maxTemplate, maxPlugin, templateTime and pluginTime are the limits above,
	// smaller in tests.
	maxTemplate, maxPlugin   int64
	templateTime, pluginTime time.Duration

	ctx      context.Context
	deadline time.Time // the plugin's
	written  atomic.Int64
	// cur is the running template's state; templates of a plugin run one at a
	// time, from one goroutine.
	cur   atomic.Pointer[run]
	funcs template.FuncMap // wrapped, built at the first template
	// explain, when set, says what a template that failed to execute lacks
	// (a plugin it reads but does not require), to come before the error.
	explain func(text string) string
}

// run is one template's execution.
type run struct {
	written  int64
	deadline time.Time
	stop     atomic.Pointer[string] // why it must stop, once it must
}

func newLimits(ctx context.Context) *limits {
	l := &limits{maxTemplate: MaxTemplateOutput, maxPlugin: MaxPluginOutput, templateTime: MaxTemplateTime, pluginTime: MaxPluginTime, ctx: ctx}
	l.deadline = time.Now().Add(l.pluginTime)
	return l
}

// check panics (text/template turns a function's panic into an execution error)
// when the running template must stop.
func (l *limits) check() {
	r := l.cur.Load()
	if r == nil {
		return
	}
	if why := r.stop.Load(); why != nil {
		panic(fmt.Errorf("%w: %s", errStopped, *why))
	}
	if why := l.expired(r); why != "" {
		r.stop.CompareAndSwap(nil, &why)
		panic(fmt.Errorf("%w: %s", errStopped, why))
	}
}

func (l *limits) expired(r *run) string {
	switch {
	case l.ctx.Err() != nil:
		return context.Cause(l.ctx).Error()
	case time.Now().After(r.deadline) && r.deadline.Equal(l.deadline):
		return "the plugin's templates ran past the " + l.pluginTime.String() + " limit per plugin"
	case time.Now().After(r.deadline):
		return "the template ran past the " + l.templateTime.String() + " limit per template"
	}
	return ""
}

// grow reserves n bytes of output, or says which limit they would break.
func (l *limits) grow(r *run, n int64) string {
	if r.written+n > l.maxTemplate {
		return "the output exceeds the " + bounded.Size(l.maxTemplate) + " limit per template"
	}
	if l.written.Load()+n > l.maxPlugin {
		return "the plugin's templates' output exceeds the " + bounded.Size(l.maxPlugin) + " limit per plugin"
	}
	r.written += n
	l.written.Add(n)
	return ""
}

// want panics when a function is about to make a string of n bytes that the
// output budget cannot hold: the allocation itself is the attack.
func (l *limits) want(n int64) {
	r := l.cur.Load()
	if r == nil {
		return
	}
	why := ""
	switch {
	case n > l.maxTemplate-r.written:
		why = "a function would make " + bounded.Size(n) + ", more than the output limit of " + bounded.Size(l.maxTemplate) + " per template"
	case n > l.maxPlugin-l.written.Load():
		why = "a function would make " + bounded.Size(n) + ", more than is left of the output limit of " + bounded.Size(l.maxPlugin) + " per plugin"
	default:
		return
	}
	r.stop.CompareAndSwap(nil, &why)
	panic(fmt.Errorf("%w: %s", errStopped, why))
}

// writer counts a template's output against the budget.
type writer struct {
	l   *limits
	r   *run
	buf bytes.Buffer
}

func (w *writer) Write(p []byte) (int, error) {
	if why := w.r.stop.Load(); why != nil {
		return 0, fmt.Errorf("%w: %s", errStopped, *why)
	}
	if why := w.l.grow(w.r, int64(len(p))); why != "" {
		w.r.stop.CompareAndSwap(nil, &why)
		return 0, fmt.Errorf("%w: %s", errStopped, why)
	}
	return w.buf.Write(p)
}

// wrap returns fm with every function checking the budget before it runs, and
// the functions that make output from a count bounded by it.
func (l *limits) wrap(fm template.FuncMap) template.FuncMap {
	out := make(template.FuncMap, len(fm)+4)
	for name, f := range fm {
		fv := reflect.ValueOf(f)
		variadic := fv.Type().IsVariadic()
		out[name] = reflect.MakeFunc(fv.Type(), func(args []reflect.Value) []reflect.Value {
			l.check()
			if variadic {
				return fv.CallSlice(args)
			}
			return fv.Call(args)
		}).Interface()
	}
	repeat := fm["repeat"].(func(int, string) string)
	out["repeat"] = func(n int, s string) string {
		l.check()
		if n > 0 {
			l.want(int64(n) * int64(len(s)))
		}
		return repeat(n, s)
	}
	for _, name := range []string{"indent", "nindent"} {
		f := fm[name].(func(int, string) string)
		out[name] = func(n int, s string) string {
			l.check()
			if n > 0 {
				l.want(int64(n) * int64(strings.Count(s, "\n")+2))
			}
			return f(n, s)
		}
	}
	until := fm["until"].(func(int) []int)
	out["until"] = func(n int) []int {
		l.check()
		listLen(n)
		return until(n)
	}
	untilStep := fm["untilStep"].(func(int, int, int) []int)
	out["untilStep"] = func(start, stop, step int) []int {
		l.check()
		if step != 0 {
			listLen((stop - start) / step)
		}
		return untilStep(start, stop, step)
	}
	seq := fm["seq"].(func(...int) string)
	out["seq"] = func(p ...int) string {
		l.check()
		switch len(p) {
		case 1:
			listLen(p[0])
		case 2:
			listLen(p[1] - p[0])
		case 3:
			if p[1] != 0 {
				listLen((p[2] - p[0]) / p[1])
			}
		}
		return seq(p...)
	}
	for _, name := range []string{"printf", "sprintf"} {
		out[name] = func(format string, args ...any) string {
			l.check()
			l.want(int64(len(format)) + maxWidth(format, args))
			return fmt.Sprintf(format, args...)
		}
	}
	return out
}

// listLen panics when a list of n elements is longer than maxListLen.
func listLen(n int) {
	if n > maxListLen || n < -maxListLen {
		panic(fmt.Errorf("%w: a list of %d elements is longer than the %d element limit", errStopped, n, maxListLen))
	}
}

var widthRE = regexp.MustCompile(`%[-+# 0]*(\*|\d*)(?:\.(\*|\d*))?`)

// maxWidth returns the largest width or precision a format asks for, counting
// `*` as the argument's value where it is an int.
func maxWidth(format string, args []any) int64 {
	var most int64
	for _, m := range widthRE.FindAllStringSubmatch(format, -1) {
		for _, w := range m[1:] {
			var n int64
			if w == "*" {
				for _, a := range args {
					if i, ok := a.(int); ok && int64(i) > n {
						n = int64(i)
					}
				}
			} else if w != "" {
				n, _ = strconv.ParseInt(w, 10, 64)
				if n == 0 && len(w) > 18 {
					n = math.MaxInt64 / 2
				}
			}
			most = max(most, n)
		}
	}
	return most
}

// execute renders text as a template, the way Helm does: a missing value is nil (so
// `{{ .Values.x | default "y" }}` works) and renders as nothing; `required` makes a
// value mandatory. Rendering is bounded by l (newLimits when nil).
func execute(text string, data any) (string, error) {
	return newLimits(context.Background()).execute(text, data)
}

func (l *limits) execute(text string, data any) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	if l.funcs == nil {
		// Built at the first template: most plugins have none to render.
		l.funcs = l.wrap(funcs)
	}
	t, err := template.New("t").Funcs(l.funcs).Option("missingkey=zero").Parse(text)
	if err != nil {
		return "", locate(err)
	}
	strictReads(t, text, data)
	r := &run{deadline: time.Now().Add(l.templateTime)}
	if l.deadline.Before(r.deadline) {
		r.deadline = l.deadline
	}
	if why := l.expired(r); why != "" {
		return "", &templateError{Msg: errStopped.Error() + ": " + why}
	}
	l.cur.Store(r)
	defer l.cur.Store(nil)
	w := &writer{l: l, r: r}
	done := make(chan error, 1)
	go func() { done <- t.Execute(w, data) }()
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	select {
	case err = <-done:
	case <-l.ctx.Done():
		why := context.Cause(l.ctx).Error()
		r.stop.CompareAndSwap(nil, &why)
		// The template stops at its next function call or write; a loop that
		// makes neither is abandoned.
		return "", &templateError{Msg: errStopped.Error() + ": " + why}
	case <-timer.C:
		why := l.expired(r)
		r.stop.CompareAndSwap(nil, &why)
		return "", &templateError{Msg: errStopped.Error() + ": " + why}
	}
	if err != nil {
		return "", l.failure(err, r, text)
	}
	return strings.ReplaceAll(w.buf.String(), "<no value>", ""), nil
}

// failure is what a template that failed to execute reports: why it was
// stopped, or what it read that is missing, or text/template's error with
// what the plugin lacks (explain) before it.
func (l *limits) failure(err error, r *run, text string) *templateError {
	te := locateTE(err)
	if mv, ok := errors.AsType[*missingValueError](err); ok {
		te.Msg = mv.msg
		if mv.noPlugin && l.explain != nil {
			if why := l.explain(text); why != "" {
				te.Msg = why + " (reading " + mv.read + ")"
			}
		}
		return te
	}
	if why := r.stop.Load(); why != nil && !strings.Contains(te.Msg, errStopped.Error()) {
		te.Msg = errStopped.Error() + ": " + *why
	} else if l.explain != nil {
		if why := l.explain(text); why != "" {
			te.Msg = why + " (" + te.Msg + ")"
		}
	}
	return te
}

var templateErrRE = regexp.MustCompile(`^template: t:(\d+)(?::(\d+))?: (?:executing "t" )?(.*)$`)

// locate turns text/template's "template: t:3:7: executing "t" at <.x>: ..." into a
// position and the part of the message a user needs.
func locate(err error) error { return locateTE(err) }

func locateTE(err error) *templateError {
	m := templateErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &templateError{Msg: strings.TrimPrefix(err.Error(), "template: ")}
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	return &templateError{Line: line, Column: col, Msg: m[3]}
}
