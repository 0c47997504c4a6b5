package cmd

import (
	"io"
	"runtime"

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
			v := versionInfo{Version: buildversion.String(), APIVersion: v1alpha1.GroupVersion, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			return o.print(v, func(w io.Writer) error {
				_, err := io.WriteString(w, buildversion.Line(v.APIVersion))
				return err
			})
		},
	}
}
