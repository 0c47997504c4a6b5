package cmd

import (
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/buildversion"
)

type versionInfo struct {
	Version    string `json:"version"`
	APIVersion string `json:"apiVersion"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

func newVersionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kubeplug's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionInfo{Version: version(), APIVersion: v1alpha1.GroupVersion, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			return o.print(v, func(w io.Writer) error {
				_, err := io.WriteString(w, buildversion.Line(v.Version, v.APIVersion))
				return err
			})
		},
	}
}

// version is kubeplug's version: the one stamped at link time, else the module
// version of a `go install`, else "dev".
func version() string {
	if buildversion.Version != "" {
		return buildversion.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
