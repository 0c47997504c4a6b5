package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/internal/redact"
)

// waitDelay is how long an exec check's output may stay open after it exited (a
// child it left behind holds it) before its process group is killed.
const waitDelay = time.Second

// exec prepares an exec check: it reads the executable from the package once
// (checking its digest when plugin.yaml pins it), writes that copy and a
// kubeconfig for the cluster into a private directory, and returns an attempt that
// runs the copy in its own process group, killed when the attempt's context ends.
// cleanup removes the directory.
func (r *Runner) exec(p Plugin, c *v1alpha1.ExecCheck) (try attempt, cleanup func(), err error) {
	if len(c.Command) == 0 {
		return nil, nil, errors.New("the exec check has no command")
	}
	name := path.Clean(c.Command[0])
	if !fs.ValidPath(name) || p.FS == nil {
		return nil, nil, fmt.Errorf("exec %s: expected a path inside the plugin package", c.Command[0])
	}
	var bin []byte
	if pin := p.Pins[name]; pin != "" {
		bin, err = proc.Verified(p.FS, name, pin)
	} else {
		bin, err = proc.Read(p.FS, name)
	}
	if err != nil {
		return nil, nil, err
	}
	dir, file, err := proc.Private(bin, name)
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(kubeconfigFor(r.cfg), kubeconfig); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("write a kubeconfig: %w", err)
	}
	// The values beside the kubeconfig, readable by this user only: they may
	// hold sensitive ones, as the plugin's own code gets them.
	values := filepath.Join(dir, "values.json")
	vals := p.Values
	if vals == nil {
		vals = map[string]any{}
	}
	b, err := json.Marshal(vals)
	if err == nil {
		err = os.WriteFile(values, b, 0o600)
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("write the plugin's values: %w", err)
	}
	wd := p.Dir
	if wd == "" {
		wd = dir
	}
	env := proc.Env("KUBECONFIG="+kubeconfig, "KUBEPLUG_VALUES="+values, "KUBEPLUG_PLUGIN="+p.Name, "KUBEPLUG_CLUSTER="+r.opts.Cluster)
	try = func(ctx context.Context) (string, error) {
		// A check's output may echo a secret; it is masked before it is logged or kept.
		secrets := redact.FromContext(ctx)
		stdout := proc.NewStderr(r.log, p.Name, "check", name, "stream", "stdout").Scrub(secrets)
		stderr := proc.NewStderr(r.log, p.Name, "check", name, "stream", "stderr").Scrub(secrets)
		contained := proc.NewContainment()
		defer contained.Sweep()
		cmd, err := proc.Start(ctx, func() *exec.Cmd {
			cmd := exec.CommandContext(ctx, file, c.Command[1:]...)
			cmd.Args[0] = c.Command[0]
			cmd.Dir, cmd.Env = wd, append(slices.Clip(env), contained.Env())
			cmd.Stdout, cmd.Stderr = stdout, stderr
			proc.Isolate(cmd)
			cmd.Cancel = func() error { return proc.KillGroup(cmd.Process.Pid) }
			cmd.WaitDelay = waitDelay
			return cmd
		})
		if err != nil {
			if ctx.Err() != nil {
				return "", &failing{state: "did not start", detail: err.Error()}
			}
			return "", terminal{err}
		}
		err = cmd.Wait()
		// Children it left behind must not outlive the attempt.
		_ = proc.KillGroup(cmd.Process.Pid)
		out := outputTail(stdout.Tail(), stderr.Tail())
		var exit *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return "", &failing{state: "did not finish and was killed", detail: out}
		case err == nil, errors.Is(err, exec.ErrWaitDelay):
			// ErrWaitDelay: it exited 0, but a child held its output open.
			return "exited with status 0", nil
		case errors.As(err, &exit):
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return "", &failing{state: "was killed by signal " + ws.Signal().String(), detail: out}
			}
			return "", &failing{state: fmt.Sprintf("exited with status %d", exit.ExitCode()), detail: out}
		}
		return "", &failing{state: "failed", detail: strings.TrimPrefix(err.Error()+"; "+out, "; ")}
	}
	return try, cleanup, nil
}

// outputTail joins the tails of an exec check's stdout and stderr for a message.
func outputTail(stdout, stderr string) string {
	var parts []string
	for _, s := range []struct{ name, tail string }{{"stdout", stdout}, {"stderr", stderr}} {
		if s.tail != "" {
			parts = append(parts, s.name+":\n    "+strings.ReplaceAll(s.tail, "\n", "\n    "))
		}
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, "\n")
}

// kubeconfigFor returns a kubeconfig with one context for cfg's cluster and
// credentials, for exec checks (which run kubectl or client-go programs).
func kubeconfigFor(cfg *rest.Config) clientcmdapi.Config {
	cluster := clientcmdapi.NewCluster()
	cluster.Server = cfg.Host
	cluster.CertificateAuthority = cfg.CAFile
	cluster.CertificateAuthorityData = cfg.CAData
	cluster.InsecureSkipTLSVerify = cfg.Insecure
	cluster.TLSServerName = cfg.ServerName
	user := clientcmdapi.NewAuthInfo()
	user.ClientCertificate, user.ClientCertificateData = cfg.CertFile, cfg.CertData
	user.ClientKey, user.ClientKeyData = cfg.KeyFile, cfg.KeyData
	user.Token, user.TokenFile = cfg.BearerToken, cfg.BearerTokenFile
	user.Username, user.Password = cfg.Username, cfg.Password
	user.Impersonate, user.ImpersonateGroups = cfg.Impersonate.UserName, cfg.Impersonate.Groups
	if cfg.ExecProvider != nil {
		user.Exec = cfg.ExecProvider.DeepCopy()
		user.Exec.Config = nil // runtime only, never serialised
	}
	if cfg.AuthProvider != nil {
		user.AuthProvider = cfg.AuthProvider.DeepCopy()
	}
	c := clientcmdapi.NewConfig()
	c.Clusters["cluster"] = cluster
	c.AuthInfos["user"] = user
	c.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	c.CurrentContext = "cluster"
	return *c
}
