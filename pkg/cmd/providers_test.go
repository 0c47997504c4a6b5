package cmd

// The providers are registered where a binary is made (cmd/kubeplug); this
// test binary is one.
import _ "github.com/kubeplug/kubeplug/pkg/provider/all"
