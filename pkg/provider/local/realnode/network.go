package realnode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Network is a cluster's node network: a bridge on the host with a /24 whose
// first address (.1) is the gateway the nodes reach the host at.
type Network struct {
	// ID names everything of the cluster (a few hex digits, see ClusterID).
	ID string `json:"id"`
	// Subnet is the nodes' /24, for example 10.250.3.0/24.
	Subnet string `json:"subnet"`
	// APIServerPort is the API server's port on 127.0.0.1, which the nodes
	// reach at Gateway():GatewayAPIPort.
	APIServerPort int `json:"apiServerPort"`
}

// GatewayAPIPort is the port at which nodes reach the API server on the gateway.
const GatewayAPIPort = 6443

// ClusterID is the short name of the cluster whose state lives in stateDir: the
// first 6 hex digits of the SHA-256 of its absolute path.
func ClusterID(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:3])
}

// Bridge is the bridge's interface name.
func (n Network) Bridge() string { return "kp" + n.ID }

// natChain is the nat table chain that DNATs the gateway's API port to loopback.
func (n Network) natChain() string { return "KP-" + strings.ToUpper(n.ID) }

// Gateway is the host's address on the bridge.
func (n Network) Gateway() net.IP { return n.addr(1) }

// NodeIP is the address of the node with ordinal i (0-based): .2, .3, ...
func (n Network) NodeIP(i int) net.IP { return n.addr(2 + i) }

func (n Network) addr(host int) net.IP {
	_, ipn, err := net.ParseCIDR(n.Subnet)
	if err != nil {
		return nil
	}
	ip := ipn.IP.To4()
	out := net.IPv4(ip[0], ip[1], ip[2], byte(host))
	return out.To4()
}

// ChooseSubnet picks a /24 in 10.250.0.0/16 for the cluster id that overlaps
// no route of the host and none of avoid (CIDRs of the cluster itself: pods,
// services), starting from one derived from the id so that clusters rarely
// collide even before they look.
func ChooseSubnet(ctx context.Context, id string, avoid ...string) (string, error) {
	routes, err := hostRoutes(ctx)
	if err != nil {
		return "", err
	}
	var taken []*net.IPNet
	for _, c := range append(routes, avoid...) {
		if _, ipn, err := net.ParseCIDR(c); err == nil {
			taken = append(taken, ipn)
		}
	}
	start, _ := strconv.ParseUint(id[:2], 16, 8)
	for k := range 256 {
		third := (int(start) + k) % 256
		cand := fmt.Sprintf("10.250.%d.0/24", third)
		_, c, _ := net.ParseCIDR(cand)
		if !overlapsAny(c, taken) {
			return cand, nil
		}
	}
	return "", errors.New("no free /24 in 10.250.0.0/16 for the node network: every one overlaps a route of this machine")
}

func overlapsAny(c *net.IPNet, taken []*net.IPNet) bool {
	for _, t := range taken {
		if t.Contains(c.IP) || c.Contains(t.IP) {
			return true
		}
	}
	return false
}

// hostRoutes lists the destination CIDRs of the host's IPv4 routes (the default
// route left out).
func hostRoutes(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	var cidrs []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "default" || dst == "broadcast" || dst == "local" || dst == "unreachable" {
			if len(f) < 2 || dst == "default" {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		cidrs = append(cidrs, dst)
	}
	return cidrs, nil
}

// EnsureBridge creates the cluster's bridge with the gateway address and the
// nat rule that takes the nodes to the API server, when missing.
func (n Network) EnsureBridge(ctx context.Context) error {
	br := n.Bridge()
	if _, err := net.InterfaceByName(br); err != nil {
		if _, err := run(ctx, "ip", "link", "add", br, "type", "bridge"); err != nil {
			return fmt.Errorf("node network: create bridge %s: %w", br, err)
		}
	}
	if _, err := run(ctx, "ip", "addr", "replace", n.Gateway().String()+"/24", "dev", br); err != nil {
		return fmt.Errorf("node network: address bridge %s: %w", br, err)
	}
	if _, err := run(ctx, "ip", "link", "set", br, "up"); err != nil {
		return fmt.Errorf("node network: bring bridge %s up: %w", br, err)
	}
	// Only this bridge may carry packets addressed to the gateway on to 127.0.0.1.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+br+"/route_localnet", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("node network: route_localnet on %s: %w", br, err)
	}
	chain := n.natChain()
	if _, err := run(ctx, "iptables", "-w", "-t", "nat", "-N", chain); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("node network: nat chain %s: %w", chain, err)
	}
	if _, err := run(ctx, "iptables", "-w", "-t", "nat", "-F", chain); err != nil {
		return fmt.Errorf("node network: flush nat chain %s: %w", chain, err)
	}
	// A cluster whose API server runs on a control-plane machine has none on
	// this host (APIServerPort 0): its nodes reach that machine directly.
	if n.APIServerPort != 0 {
		dnat := []string{"-w", "-t", "nat", "-A", chain, "-d", n.Gateway().String(), "-p", "tcp", "--dport", strconv.Itoa(GatewayAPIPort),
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(n.APIServerPort)}
		if _, err := run(ctx, "iptables", dnat...); err != nil {
			return fmt.Errorf("node network: nat rule for the API server: %w", err)
		}
	}
	jump := []string{"-w", "-t", "nat", "-C", "PREROUTING", "-i", br, "-j", chain}
	if _, err := run(ctx, "iptables", jump...); err != nil {
		jump[3] = "-A"
		if _, err := run(ctx, "iptables", jump...); err != nil {
			return fmt.Errorf("node network: jump to %s: %w", chain, err)
		}
	}
	return nil
}

// Teardown removes the bridge and the nat chain; missing ones are not errors.
func (n Network) Teardown(ctx context.Context) error {
	var errs []error
	br, chain := n.Bridge(), n.natChain()
	for {
		if _, err := run(ctx, "iptables", "-w", "-t", "nat", "-D", "PREROUTING", "-i", br, "-j", chain); err != nil {
			break
		}
	}
	if _, err := run(ctx, "iptables", "-w", "-t", "nat", "-F", chain); err == nil {
		if _, err := run(ctx, "iptables", "-w", "-t", "nat", "-X", chain); err != nil {
			errs = append(errs, fmt.Errorf("remove nat chain %s: %w", chain, err))
		}
	}
	if _, err := net.InterfaceByName(br); err == nil {
		if _, err := run(ctx, "ip", "link", "del", br); err != nil {
			errs = append(errs, fmt.Errorf("remove bridge %s: %w", br, err))
		}
	}
	return errors.Join(errs...)
}

// run runs a command and returns its stdout; the error carries stderr.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return stdout.String(), fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), msg)
	}
	return stdout.String(), nil
}
