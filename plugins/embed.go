// Package plugins holds kubeplug's built-in plugins, compiled into the binary.
//
// Each directory below this one is a plugin package. The core dogfoods the plugin
// mechanism: the control plane's own defaults are the control-plane plugin here, loaded
// and ordered like any user plugin.
package plugins

import "embed"

// FS holds every built-in plugin package.
//
//go:embed all:*
var FS embed.FS
