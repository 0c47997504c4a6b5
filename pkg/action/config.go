package action

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/serving"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Config is what every action shares.
type Config struct {
	// Logger receives progress and debugging; a discarding logger when nil.
	Logger *slog.Logger
	// ContribDir is the contrib plugin directory; none when empty.
	ContribDir string
	// PluginDirs are user plugin directories or package archives (.tgz files written
	// by [Package]), searched after the built-in and contrib ones (and before the
	// cluster file's own sources).
	PluginDirs []string
	// Catalogs are the URLs of HTTP catalogs' index.yaml files (see
	// [source.HTTPCatalog]), at [source.OriginCatalog]; downloads are cached under the
	// user's cache directory.
	Catalogs []string
	// NoBuiltin leaves the built-in plugins out (for tests and for tools that bring
	// their own core).
	NoBuiltin bool
	// Env looks up environment variables for valuesFrom; os.LookupEnv when nil.
	Env config.Env
	// AllowValuesOutside lets valuesFrom read files outside the cluster file's
	// directory (--allow-values-outside).
	AllowValuesOutside bool
	// Locked refuses a plan that would change the cluster file's kubeplug.lock (or
	// that has none): plan, render, apply and up with --locked.
	Locked bool
	// Update names the plugins whose versions a run may move past those the
	// cluster file's kubeplug.lock pins, to the newest the file allows (the
	// others keep theirs); UpdateAll moves every plugin. A successful apply or
	// up then writes the new versions to the lock. Without either, every run
	// prefers the locked versions.
	Update    []string
	UpdateAll bool
	// InProcess are in-process Go plugins, by plugin name (runtime.Options.InProcess).
	InProcess map[string]stage.Runtime
	// PluginTimeout, when positive, overrides every plugin's spec.runtime.timeout
	// (how long one stage call of its executable may take; default 1m).
	PluginTimeout time.Duration
	// Progress, when set, is told when each wave of each stage starts.
	Progress func(engine.StageEvent)
	// Expansions are the expansion packages every run merges; none when zero.
	Expansions ExpansionUse
	// ServingCerts says how long the serving CAs and certificates issued for
	// plugins' APIs and webhooks live (deploy.Options.ServingCerts); zero
	// fields take its defaults. Tests shorten them to see renewals.
	ServingCerts serving.Policy
}

func (c *Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Logger
}

func (c *Config) env() config.Env {
	if c.Env == nil {
		return os.LookupEnv
	}
	return c.Env
}

// Sources returns the configured sources in precedence order, lowest first, followed
// by extra (a cluster file's sources).
func (c *Config) Sources(extra ...source.Source) []source.Source {
	var out []source.Source
	if !c.NoBuiltin {
		out = append(out, source.Builtin())
	}
	if c.ContribDir != "" {
		out = append(out, source.Dir(plugin.OriginContrib, c.ContribDir))
	}
	for _, d := range c.PluginDirs {
		out = append(out, source.Path(plugin.OriginUser, d))
	}
	for _, u := range c.Catalogs {
		out = append(out, source.OpenCatalog(source.OriginCatalog, u, source.HTTPOptions{Cache: source.DefaultCache()}))
	}
	return append(out, extra...)
}

// loadFor indexes the configured sources plus the optional cluster spec's own,
// and returns the spec again for the caller's convenience.
func (c *Config) loadFor(ctx context.Context, cl *config.Cluster) (*config.Cluster, *source.Index, diag.List) {
	if cl == nil {
		idx, l := c.LoadIndex(ctx)
		return nil, idx, l
	}
	idx, l := c.LoadIndex(ctx, cl.Sources()...)
	return cl, idx, l
}

// LoadIndex lists every configured source plus extra. Packages are fetched from the
// index when used.
func (c *Config) LoadIndex(ctx context.Context, extra ...source.Source) (*source.Index, diag.List) {
	srcs := c.Sources(extra...)
	for _, s := range srcs {
		c.logger().Debug("listing plugin source", "source", s)
	}
	return source.List(ctx, srcs...)
}

// fetchParallelism bounds how many packages an action fetches at once when it loads
// every package of its sources (plugin list).
const fetchParallelism = 8
