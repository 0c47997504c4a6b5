// Command grpccoder is a test plugin served over gRPC: with the kubeconfig its
// request carries, it creates a ConfigMap through the API at deploy and checks
// it at validate, and finds that it may not read Secrets. It speaks HTTP to the
// API server itself (client-go would take the binary past a package's 16 MiB).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/sdk"
)

type coder struct{}

var (
	_ sdk.Deployer  = coder{}
	_ sdk.Validator = coder{}
)

// api is the cluster as the request's kubeconfig names it.
type api struct {
	server, token, ns string
	c                 *http.Client
}

func client(req *sdk.Request) (*api, error) {
	if req.Kubeconfig == "" {
		return nil, fmt.Errorf("no kubeconfig in the %s request", req.Stage)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CA     []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Token string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal([]byte(req.Kubeconfig), &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return nil, fmt.Errorf("kubeconfig: %d clusters and %d users, want one of each", len(kc.Clusters), len(kc.Users))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kc.Clusters[0].Cluster.CA)
	ns, _ := req.Values["namespace"].(string)
	return &api{server: kc.Clusters[0].Cluster.Server, token: kc.Users[0].User.Token, ns: ns,
		c: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}, nil
}

// do sends body (nil for none) to path and returns the status and body.
func (a *api) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, a.server+path, r)
	if err != nil {
		return 0, nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+a.token)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(hr)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func fatal(format string, args ...any) *sdk.Response {
	return &sdk.Response{Diagnostics: diag.List{{Severity: diag.Fatal, Message: fmt.Sprintf(format, args...)}}}
}

func (coder) Deploy(ctx context.Context, req *sdk.Request) (*sdk.Response, error) {
	a, err := client(req)
	if err != nil {
		return fatal("%v", err), nil
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "made-by-grpc"}, "data": map[string]any{"stage": string(req.Stage)}}
	code, b, err := a.do(ctx, http.MethodPost, "/api/v1/namespaces/"+a.ns+"/configmaps", cm)
	if err != nil || code != http.StatusCreated {
		return fatal("create: %d %s %v", code, b, err), nil
	}
	return &sdk.Response{}, nil
}

func (coder) Validate(ctx context.Context, req *sdk.Request) (*sdk.Response, error) {
	a, err := client(req)
	if err != nil {
		return fatal("%v", err), nil
	}
	code, b, err := a.do(ctx, http.MethodGet, "/api/v1/namespaces/"+a.ns+"/configmaps/made-by-grpc", nil)
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &cm) != nil || cm.Data["stage"] != "deploy" {
		return fatal("no ConfigMap from deploy: %d %s %v", code, b, err), nil
	}
	if code, _, err := a.do(ctx, http.MethodGet, "/api/v1/namespaces/"+a.ns+"/secrets", nil); err != nil || code != http.StatusForbidden {
		return fatal("listing Secrets: %d %v, want 403", code, err), nil
	}
	return &sdk.Response{}, nil
}

func main() { sdk.Serve(coder{}) }
