// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/shape"
)

// ChooseEndpoint picks the speed-test endpoint, server's (a URL served by
// macake measure --serve) or by default Cloudflare's, and checks that it
// answers before any phase starts. With a server, the server's host joins
// reflectors as a latency target: it is the far end of the path under
// test.
func ChooseEndpoint(ctx context.Context, server string, reflectors []shape.Reflector) (speedtest.Endpoint, []shape.Reflector, error) {
	targets := slices.Clone(reflectors)
	if server == "" {
		ep := speedtest.Cloudflare()
		if err := speedtest.Check(ctx, nil, ep, 5*time.Second); err != nil {
			return ep, nil, fmt.Errorf("the default speed-test endpoint is not reachable (%v). Is this machine offline? To measure against your own server, run `macake measure --serve :8080` on a machine beyond the link and pass --server http://HOST:8080", err)
		}
		return ep, targets, nil
	}
	ep, err := speedtest.ServerEndpoint(server)
	if err != nil {
		return ep, nil, err
	}
	if err := speedtest.Check(ctx, nil, ep, 5*time.Second); err != nil {
		return ep, nil, fmt.Errorf("%v (is `macake measure --serve` running there?)", err)
	}
	u, _ := url.Parse(server)
	if host, err := ResolveHost(ctx, u.Hostname()); err == nil && !slices.Contains(shape.ReflectorAddrs(targets), host) {
		targets = append(targets, shape.ICMPReflector(host))
	}
	return ep, targets, nil
}

// ResolveHost returns one address of host (an IP literal or a name),
// IPv4 preferred: only ICMPv4 has timestamps, which split the delay by
// direction.
func ResolveHost(ctx context.Context, host string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("resolving %s: %v", host, err)
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	return ips[0], nil
}
