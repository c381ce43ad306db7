// Command etcd runs a single-member embedded etcd (go.etcd.io/etcd/server/v3/embed,
// the version k8s.io/kubernetes pins) for the local test control plane.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		log.Fatalf("bad url %q: %v", s, err)
	}
	return *u
}

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL (listen and advertise)")
	peer := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL (listen and advertise)")
	noFsync := flag.Bool("unsafe-no-fsync", true, "skip fsync (test cluster: speed over durability)")
	quota := flag.Int64("quota-backend-bytes", 2<<30, "backend quota")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("--data-dir is required")
	}

	cfg := embed.NewConfig()
	cfg.Name = "skiff-etcd"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{mustURL(*client)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mustURL(*peer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	// embed.NewConfig leaves these at 0 (etcd's own flags default them), which makes etcd
	// log every request as an "expensive request" warning.
	cfg.WarningApplyDuration = embed.DefaultWarningApplyDuration
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}
	// Keep the history small: the apiserver compacts every 5 minutes as well.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "5m"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd ready, serving clients on %s", *client)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd took more than 60s to become ready")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("got %v, stopping etcd", s)
		e.Close()
	case err := <-e.Err():
		log.Fatalf("etcd failed: %v", err)
	}
}
