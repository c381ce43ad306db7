// Command coredns is CoreDNS built with only the plugins the test cluster's
// Corefile uses (see ../node/coredns.Corefile), the way CoreDNS documents
// building it with external or fewer plugins: the same server, a smaller build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is CoreDNS's own plugin order (plugin.cfg), cut to the plugins above.
var directives = []string{
	"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop", "forward",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
