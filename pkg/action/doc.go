// Package action holds one object per kubeplug verb, each a struct of documented
// options made with NewX(cfg) and run with Run(ctx, ...). The CLI (and later the
// controller) only binds its inputs to these objects, so a library user gets
// exactly what the command line does. Actions take a loaded cluster spec
// (*config.Cluster, from config.Load or config.Parse, which keeps the file's
// positions for diagnostics); where the spec comes from is the caller's business.
//
// The lifecycle is an explicit pipeline of named steps (pipeline.go), each a
// small function over one run with a documented input and output:
//
//	resolve → initialise → render → provision → connect → deploy → after-deploy → cluster-ready → validate → record
//
// Every call into pkg/deploy the pipeline makes is in deploysteps.go. The verbs
// and what they compose:
//
//	Verb (command)                  Action          Composes
//	plugin list                     List            sources
//	plugin show                     Show            sources, values
//	plugin lint                     Lint            package loading
//	plugin new                      New             (scaffolds a package)
//	plugin package                  Package         (writes a package archive)
//	config validate                 Validate        sources, values
//	plan                            Plan            resolve, initialise
//	plan --kubernetes-version       Plan.Upgrade    resolve, twice
//	render                          Render          resolve, initialise, render, files
//	diff --against                  Diff            Render, then a file diff
//	diff --live                     Drift           resolve, initialise, render, content, server dry run
//	apply                           Apply           resolve, connect, initialise, render, deploy, validate, record;
//	                                                on the file's own cluster, its provider's machine facts first
//	up                              Up              resolve, initialise, render, provision, connect, deploy,
//	                                                after-deploy, cluster-ready, validate, record
//	down                            Down            provider (locate, stop), Uninstall
//	get-kubeconfig                  GetKubeconfig   provider (locate)
//	status                          Status          release records; Drift with a spec
//	uninstall                       Uninstall       release records, reverse dependency order; with the
//	                                                file of a cluster kubeplug brought up, provider,
//	                                                resolve, initialise, render, provision (machines.go)
//	history                         History         release records
//	rollback                        Rollback        release records, deploy; as uninstall, the machines
//	expansion create                ExpansionCreate resolve, initialise, render, image scan, pack
//	expansion lint|inspect|verify   ExpansionLint…  expansion packages
//	expansion push                  ExpansionPush   expansion packages, a registry
//	expansion test                  ExpansionTest   Up with the expansion, Down
//	import kube-aws|kops|kkp|tke|helm Import        importer (internal/importer), Package and catalog index for kkp
//
// Where the cluster is comes from a target: a KubeconfigTarget for the verbs that
// work on a cluster they did not bring up (apply, status, diff --live, uninstall,
// history, rollback), the provider spec.provider names (pkg/provider's registry)
// for up, down and get-kubeconfig. Apply and Up share DeployOptions, which say
// how the plugins' content is deployed.
package action
