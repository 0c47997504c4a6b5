package hosts

import (
	"fmt"
	"strconv"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

type providerEvent = provider.Event

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func itoa(i int) string { return strconv.Itoa(i) }
