// Package dashboard serves kubeplug's web dashboard: server-rendered pages of
// the cluster a kubeconfig points at — its plugins (version, phase, readiness,
// drift, last apply) and nodes, one plugin's revisions, objects and values,
// the plan's graph, the catalogs' plugins, and the fleet of a management
// cluster (the controller's TargetClusters, PluginInstallations and
// PluginRollouts) — with a rollback, and suspend, resume and retry on the
// fleet, behind a confirmation.
//
// The pages are Go html/template, made live by htmx (vendored from npm into
// static/, embedded with the templates: no CDN, nothing fetched at run time).
// Every figure comes from the same actions the CLI runs (pkg/action: Status,
// History, Validate, Plan, List, Rollback), so the dashboard and
// `kubeplug status` cannot disagree. Live updates come from the API server's
// watch of the release records, pushed to the page as server-sent events;
// nothing polls.
//
// The one idea a reader needs: the dashboard has no power of its own. Every
// request to the API server is made with the credentials the Server was given
// (the user's kubeconfig), so an action the user may not take is refused by
// the API server and the page says so. Values are shown as the CLI shows
// them, sensitive ones masked (pkg/values.Redact); release records keep no
// values, and no page reads an object's content.
package dashboard
