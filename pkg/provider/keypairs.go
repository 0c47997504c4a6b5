package provider

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// KeyPairFile is one file of a plugin's key pair on a machine.
type KeyPairFile struct {
	Path, Mode string
	Content    []byte
}

// KeyPairsDir is where a provider keeps the plugins' key pairs in its state
// directory, one directory per plugin, beside the cluster's PKI.
func KeyPairsDir(stateDir string) string { return filepath.Join(stateDir, "pki", "plugins") }

// IssueKeyPairs issues, or keeps while they are still what is declared and
// far from expiry (serving.KeyPairStore), the key pairs plugins declare (a
// model's KeyPairs):
// those of CA "cluster" signed by clusterCA, those of CA "plugin" by a CA of
// the plugin's own kept beside them. It returns, by pool, the files the
// pool's machines get: NAME.crt, NAME.key (0600) and NAME-ca.crt under
// model.KeyPairDir. A provider delivers them as it delivers the cluster's PKI,
// never in user data.
func IssueKeyPairs(stateDir string, clusterCA serving.KeyPairCA, kps []model.KeyPair, policy serving.Policy) (map[string][]KeyPairFile, error) {
	out := map[string][]KeyPairFile{}
	for _, kp := range kps {
		store := &serving.KeyPairStore{Dir: filepath.Join(KeyPairsDir(stateDir), kp.By), Policy: policy}
		ca := clusterCA
		if kp.CA == "plugin" {
			var err error
			if ca, err = store.OwnCA(kp.By); err != nil {
				return nil, fmt.Errorf("plugin %s: %w", kp.By, err)
			}
		}
		req, err := keyPairRequest(kp)
		if err != nil {
			return nil, err
		}
		issued, err := store.Ensure(req, ca)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", kp.By, err)
		}
		for _, pool := range kp.Pools {
			out[pool] = append(out[pool],
				KeyPairFile{Path: kp.CertFile(), Mode: "0644", Content: issued.CertPEM},
				KeyPairFile{Path: kp.KeyFile(), Mode: "0600", Content: issued.KeyPEM},
				KeyPairFile{Path: kp.CAFile(), Mode: "0644", Content: issued.CABundlePEM})
		}
	}
	return out, nil
}

func keyPairRequest(kp model.KeyPair) (serving.KeyPairRequest, error) {
	req := serving.KeyPairRequest{Name: kp.Name, CommonName: kp.CommonName, Organizations: kp.Organizations,
		DNSNames: kp.DNSNames, IPAddresses: kp.IPAddresses}
	for _, u := range kp.Usages {
		switch u {
		case "server":
			req.Server = true
		case "client":
			req.Client = true
		}
	}
	if kp.Validity != "" {
		v, err := time.ParseDuration(kp.Validity)
		if err != nil {
			return req, fmt.Errorf("plugin %s: key pair %s: validity %q: %w", kp.By, kp.Name, kp.Validity, err)
		}
		req.Validity = v
	}
	return req, nil
}

// KeyPairPools returns the pools of m that get a key pair, each with the
// first plugin and pair that reach it: for a provider to refuse the pools it
// cannot deliver them to.
func KeyPairPools(m *model.Model) map[string]string {
	out := map[string]string{}
	for _, kp := range m.KeyPairs {
		for _, p := range kp.Pools {
			if _, ok := out[p]; !ok {
				out[p] = "key pair " + kp.Name + " of plugin " + kp.By
			}
		}
	}
	return out
}
