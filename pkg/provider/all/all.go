// Package all registers every provider kubeplug has. A binary imports it (or
// the providers it wants, one by one) at its edge: the CLI's main does, so
// that pkg/action and the libraries below it link no provider — no AWS SDK,
// no local control-plane runner — unless their user registers one.
package all

import (
	_ "github.com/kubeplug/kubeplug/pkg/provider/aws"   // spec.provider.aws
	_ "github.com/kubeplug/kubeplug/pkg/provider/hosts" // spec.provider.hosts
	_ "github.com/kubeplug/kubeplug/pkg/provider/local" // spec.provider.local, the default
)
