package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// The runners below mirror the upstream main functions in k8s.io/kubernetes/cmd so
// the components behave exactly like the release binaries (flags, logging, exit
// codes).

func runAPIServer(args []string) int {
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runControllerManager(args []string) int {
	cmd := controllermanager.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runScheduler(args []string) int {
	cmd := scheduler.NewSchedulerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runKubelet(args []string) int {
	cmd := kubelet.NewKubeletCommand(context.Background())
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runProxy(args []string) int {
	cmd := proxy.NewProxyCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runKubectl(args []string) int {
	// As upstream: set verbosity before the command is built, so that plugin
	// lookup and .kuberc parsing already log at the requested level.
	_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args))
	cmd := kubectlcmd.NewDefaultKubectlCommand()
	cmd.SetArgs(args)
	if err := cli.RunNoErrOutput(cmd); err != nil {
		// CheckErr prints the error the way kubectl users expect and exits.
		kubectlutil.CheckErr(err)
	}
	return 0
}
