package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// verifyCosign checks an OCI chart's cosign signatures under its source's
// trust policy (opts.SignatureKeys, opts.SignatureRequired): one signature
// stored as cosign stores it (the tag sha256-HEX.sig of the chart's manifest
// digest, in the chart's repository) must verify with a trusted key over a
// payload naming that very manifest. A chart without one is refused when the
// policy requires it; one whose signatures all fail is always refused. what
// names the chart, its version and source in errors.
func verifyCosign(ctx context.Context, client *oci.Client, what, repository, manifest string, opts HTTPOptions) error {
	if len(opts.SignatureKeys) == 0 {
		return nil
	}
	keys := make([]*sign.PublicKey, 0, len(opts.SignatureKeys))
	for _, k := range opts.SignatureKeys {
		b, err := bounded.ReadFileAs("trusted key", k, bounded.MaxKeySize)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		pk, err := sign.LoadPublicKey(k, b)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		keys = append(keys, pk)
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name + " (" + k.ID + ")"
	}
	tag := repository + ":" + oci.CosignTag(manifest)
	sigs, skipped, err := client.CosignSignatures(ctx, repository, manifest)
	if err != nil {
		return fmt.Errorf("%s: reading its cosign signatures %s: %w", what, tag, err)
	}
	if len(sigs) == 0 {
		if opts.SignatureRequired {
			return fmt.Errorf("%s is not signed: the source requires a cosign signature by %s, and the registry has none (%s)", what, strings.Join(names, ", "), tag)
		}
		return nil
	}
	var errs []error
	for i, s := range sigs {
		_, err := sign.Verify(s.Payload, []byte(s.Signature), keys...)
		if err == nil {
			if err = oci.CheckCosignPayload(s.Payload, manifest); err == nil {
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("signature %d: %w", i+1, err))
	}
	if skipped > 0 {
		errs = append(errs, fmt.Errorf("%d more signatures were not tried (at most %d are)", skipped, oci.MaxCosignSignatures))
	}
	return fmt.Errorf("%s: no cosign signature in %s verifies with a trusted key (%s): refused: %w", what, tag, strings.Join(names, ", "), errors.Join(errs...))
}
