// Package declarative is the runtime of a plugin's data: the contributes block of
// its plugin.yaml and the manifests it names, rendered as Go templates at the
// initialise stage. Every plugin has one, pure-data plugins nothing else; a
// plugin's code (exec, grpc or in-process Go) runs after it at every stage.
//
// Templates see .Cluster, .Values (the plugin's own, per node pool in node
// contributions), .Plugins (every plugin's values, others' sensitive ones
// redacted) and .NodePool. They behave like Helm's: a missing value renders as
// nothing, `required` makes one mandatory — except another plugin's: a read of
// .Plugins that finds nothing fails unless the template marks it optional
// (strict.go), and the functions that would read the
// host (env, expandenv, getHostByName) are absent, so that what a plugin renders
// depends only on its inputs. A failure is a fatal diagnostic at the field of
// plugin.yaml, or the line of the manifest, it came from.
//
// Templates run through one function, execute (template.go): the place to bound
// what a template may cost.
package declarative
