package cmd

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// Version is set at link time (-ldflags "-X github.com/kubeplug/kubeplug/pkg/cmd.Version=v0.1.0").
var Version = ""

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
				_, err := fmt.Fprintf(w, "kubeplug %s (%s, %s, %s)\n", v.Version, v.APIVersion, v.GoVersion, v.Platform)
				return err
			})
		},
	}
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
