// Command pki writes the certificates and keys of the local test control plane
// into one directory: a cluster CA, the apiserver serving certificate, the
// front-proxy CA and client, client certificates for the admin and the control
// plane components, the node's kubelet serving certificate, and the
// service-account signing key pair.
//
// TLS keys are ECDSA P-256 in PKCS#8 PEM; the service-account key is RSA 2048
// (RS256 tokens, the most widely understood). Existing files are left alone,
// so a rerun only fills in what is missing.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var dir string

func path(name string) string { return filepath.Join(dir, name) }

func exists(name string) bool {
	_, err := os.Stat(path(name))
	return err == nil
}

func write(name string, block *pem.Block, mode os.FileMode) {
	if err := os.WriteFile(path(name), pem.EncodeToMemory(block), mode); err != nil {
		log.Fatal(err)
	}
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func load(base string) keyPair {
	cb, err := os.ReadFile(path(base + ".crt"))
	if err != nil {
		log.Fatal(err)
	}
	kb, err := os.ReadFile(path(base + ".key"))
	if err != nil {
		log.Fatal(err)
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		log.Fatalf("%s: not PEM", base)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		log.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kp.Bytes)
	if err != nil {
		log.Fatal(err)
	}
	return keyPair{cert, key.(crypto.Signer)}
}

func newKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	return k
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		log.Fatal(err)
	}
	return n
}

func skid(pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		log.Fatal(err)
	}
	h := sha1.Sum(der)
	return h[:]
}

// issue signs tmpl for a new key with parent (nil: self-signed) and writes base.crt/base.key.
func issue(base string, tmpl *x509.Certificate, parent *keyPair) keyPair {
	if exists(base+".crt") && exists(base+".key") {
		return load(base)
	}
	key := newKey()
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	}
	tmpl.SubjectKeyId = skid(key.Public())
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		log.Fatalf("%s: %v", base, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		log.Fatal(err)
	}
	write(base+".key", &pem.Block{Type: "PRIVATE KEY", Bytes: kder}, 0o600)
	write(base+".crt", &pem.Block{Type: "CERTIFICATE", Bytes: der}, 0o644)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		log.Fatal(err)
	}
	return keyPair{cert, key}
}

func ca(base, cn string) keyPair {
	return issue(base, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

func client(base, cn string, orgs []string, parent keyPair) {
	issue(base, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: orgs},
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &parent)
}

func main() {
	flag.StringVar(&dir, "dir", "", "output directory (required)")
	serviceIP := flag.String("service-ip", "10.96.0.1", "first IP of the service CIDR (the kubernetes Service)")
	extraSANs := flag.String("extra-sans", "", "comma-separated extra DNS names or IPs for the apiserver certificate")
	nodeName := flag.String("node-name", "skiff-node", "node name for the node client certificate (system:node:<name>)")
	nodeIP := flag.String("node-ip", "10.244.0.1", "node InternalIP, a SAN of the kubelet serving certificate (kubelet.crt)")
	flag.Parse()
	if dir == "" {
		log.Fatal("--dir is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}

	clusterCA := ca("ca", "skiff-test-cluster-ca")

	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if ip := net.ParseIP(*serviceIP); ip != nil {
		ips = append(ips, ip)
	} else {
		log.Fatalf("bad --service-ip %q", *serviceIP)
	}
	for _, s := range strings.Split(*extraSANs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, s)
		}
	}
	issue("apiserver", &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kube-apiserver"},
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              dns,
		IPAddresses:           ips,
	}, &clusterCA)

	client("admin", "kubernetes-admin", []string{"system:masters"}, clusterCA)
	client("controller-manager", "system:kube-controller-manager", nil, clusterCA)
	client("scheduler", "system:kube-scheduler", nil, clusterCA)
	// Not in system:masters: up.sh binds it to system:kubelet-api-admin, which is what the node
	// agent's SubjectAccessReview (nodes/proxy) checks.
	client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil, clusterCA)
	client("node", "system:node:"+*nodeName, []string{"system:nodes"}, clusterCA)

	// The kubelet API's serving certificate (what the apiserver checks with
	// --kubelet-certificate-authority when it dials the node's InternalIP).
	ip := net.ParseIP(*nodeIP)
	if ip == nil {
		log.Fatalf("bad --node-ip %q", *nodeIP)
	}
	issue("kubelet", &x509.Certificate{
		Subject:               pkix.Name{CommonName: "system:node:" + *nodeName, Organization: []string{"system:nodes"}},
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{*nodeName, "localhost"},
		IPAddresses:           []net.IP{ip, net.ParseIP("127.0.0.1")},
	}, &clusterCA)

	frontProxyCA := ca("front-proxy-ca", "skiff-test-front-proxy-ca")
	client("front-proxy-client", "front-proxy-client", nil, frontProxyCA)

	if !exists("sa.key") || !exists("sa.pub") {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			log.Fatal(err)
		}
		pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			log.Fatal(err)
		}
		write("sa.key", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}, 0o600)
		write("sa.pub", &pem.Block{Type: "PUBLIC KEY", Bytes: pub}, 0o644)
	}
	fmt.Printf("pki written to %s\n", dir)
}
