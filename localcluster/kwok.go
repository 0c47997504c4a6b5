package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// runKwok mirrors sigs.k8s.io/kwok/cmd/kwok, with one difference: when no
// --config/-c is given, it loads kwok's default node and pod stages (the ones
// kwokctl installs), so that nodes become Ready, pods are Running and Ready and
// Jobs complete without any configuration. Plain kwok would refuse to start with
// "no stages found".
func runKwok(args []string) int {
	if !hasConfigFlag(args) {
		path, err := writeDefaultStages()
		if err != nil {
			fmt.Fprintf(os.Stderr, "kwok: write default stages: %v\n", err)
			return 1
		}
		// kwok reads its configuration once, in config.InitFlags below; the file
		// is removed right after that.
		defer func() { _ = os.Remove(path) }()
		// kwok's config.InitFlags parses os.Args itself.
		os.Args = append(os.Args, "--config="+path)
	}

	// cobra adds pflag.CommandLine to every root command, and in this binary it
	// holds the Kubernetes components' global flags (a non-boolean --version
	// among them, which breaks cobra's own --version). kwok registers nothing
	// there, so it gets a clean one.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	command.SetArgs(os.Args[1:])
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

func hasConfigFlag(args []string) bool {
	for _, a := range args {
		if a == "-c" || a == "--config" || strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-c=") {
			return true
		}
	}
	return false
}

// defaultStages is what kwokctl configures for a new cluster: fast node
// initialisation, heartbeats with leases, and fast pod ready/complete/delete.
func defaultStages() string {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---"))
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

func writeDefaultStages() (string, error) {
	f, err := os.CreateTemp("", "kwok-stages-*.yaml")
	if err != nil {
		return "", fmt.Errorf("create stages file: %w", err)
	}
	if _, err := f.WriteString(defaultStages()); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write stages file %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close stages file %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
