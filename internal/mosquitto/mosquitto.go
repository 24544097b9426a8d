// SPDX-License-Identifier: Apache-2.0

// Package mosquitto runs a real MQTT broker for tests: Debian's
// mosquitto, on a loopback port of its own, with its own configuration,
// no persistence, and a password file when the test gives users.
package mosquitto

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Broker is one mosquitto process for a test, restartable on its port.
type Broker struct {
	t    testing.TB
	dir  string
	conf string
	// Port is the loopback port it listens on.
	Port int
	// CAFile is the PEM certificate of the CA that signed a TLS
	// listener's certificate.
	CAFile string
	tls    bool
	// settings are the configuration but the listener.
	settings string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *bytes.Buffer
}

// Options configure the broker.
type Options struct {
	// Users and their passwords; none lets anyone connect.
	Users map[string]string
	// TLS makes the listener TLS only, with a certificate for 127.0.0.1
	// and localhost signed by a CA made for the test (Broker.CAFile).
	TLS bool
}

// Skip skips the test when mosquitto is not installed.
func Skip(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("mosquitto")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		t.Skip("skipping: no mosquitto (apt-get install mosquitto; .ci/run installs it)")
	}
	return path
}

// Start starts a broker and stops it when the test ends.
func Start(t testing.TB, o Options) *Broker {
	t.Helper()
	Skip(t)
	dir := t.TempDir()
	b := &Broker{t: t, dir: dir, Port: freePort(t), conf: filepath.Join(dir, "mosquitto.conf")}
	conf := "persistence false\nlog_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\nlog_type information\n"
	if o.TLS {
		b.tls = true
		ca, cert, key := writeCertificates(t, dir)
		b.CAFile = ca
		conf += "cafile " + b.CAFile + "\ncertfile " + cert + "\nkeyfile " + key + "\n"
	}
	if os.Geteuid() == 0 {
		conf += "user root\n" // else it drops to user mosquitto, who cannot read the test's files
	}
	if len(o.Users) == 0 {
		conf += "allow_anonymous true\n"
	} else {
		passwd := filepath.Join(dir, "passwd")
		for user, pw := range o.Users {
			args := []string{"-b", passwd, user, pw}
			if _, err := os.Stat(passwd); err != nil {
				args = append([]string{"-c"}, args...)
			}
			if out, err := exec.Command("mosquitto_passwd", args...).CombinedOutput(); err != nil {
				t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
			}
		}
		os.Chmod(passwd, 0o600)
		conf += "allow_anonymous false\npassword_file " + passwd + "\n"
	}
	b.settings = conf
	b.start(true)
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() {
			t.Logf("mosquitto's log:\n%s", b.Log())
		}
	})
	return b
}

// freePort is a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URL is the broker's mqtt:// URL, or mqtts:// with TLS.
func (b *Broker) URL() string {
	if b.tls {
		return "mqtts://127.0.0.1:" + strconv.Itoa(b.Port)
	}
	return "mqtt://127.0.0.1:" + strconv.Itoa(b.Port)
}

// writeCertificates makes a CA and a server certificate it signs for
// 127.0.0.1 and localhost, and writes them and the server's key to dir.
func writeCertificates(t testing.TB, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "macake test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// Start restarts the broker on its port, and returns once it runs.
func (b *Broker) Start() {
	b.t.Helper()
	b.start(false)
}

// start starts mosquitto and waits for its log to say it runs. Another
// test may take the free port first (tests of a package run in
// parallel): a first start then moves to another port.
func (b *Broker) start(first bool) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		conf := fmt.Sprintf("listener %d 127.0.0.1\n%s", b.Port, b.settings)
		if err := os.WriteFile(b.conf, []byte(conf), 0o600); err != nil {
			b.t.Fatal(err)
		}
		b.mu.Lock()
		if b.cmd != nil {
			b.mu.Unlock()
			b.t.Fatal("mosquitto runs already")
		}
		if b.log == nil {
			b.log = &bytes.Buffer{}
		}
		running := strings.Count(b.log.String(), " running")
		cmd := exec.Command(Skip(b.t), "-c", b.conf)
		cmd.Stdout, cmd.Stderr = &lockedWriter{b: b}, &lockedWriter{b: b}
		err := cmd.Start()
		exited := make(chan struct{})
		if err == nil {
			b.cmd, b.exited = cmd, exited
			go func() { cmd.Wait(); close(exited) }()
		}
		b.mu.Unlock()
		if err != nil {
			b.t.Fatalf("starting mosquitto: %v", err)
		}
		if b.waitRunning(running, exited) {
			return
		}
		if !first || attempt >= 3 || !strings.Contains(b.Log(), "Address already in use") {
			b.t.Fatalf("mosquitto exited at start:\n%s", b.Log())
		}
		b.Port = freePort(b.t)
	}
}

// waitRunning waits for the log to say "running" once more than it did,
// and reports whether it did before the process exited.
func (b *Broker) waitRunning(before int, exited chan struct{}) bool {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(b.Log(), " running") <= before {
		select {
		case <-exited:
			b.mu.Lock()
			b.cmd = nil
			b.mu.Unlock()
			return false
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("mosquitto does not run on %s after 10s:\n%s", b.Addr(), b.Log())
		}
	}
	return true
}

// Stop stops the broker (SIGTERM, as a service manager would) and waits
// for it.
func (b *Broker) Stop() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// Log is what the broker logged.
func (b *Broker) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

// Logged reports whether the broker's log holds s.
func (b *Broker) Logged(s string) bool { return strings.Contains(b.Log(), s) }

type lockedWriter struct{ b *Broker }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.b.log.Write(p)
}
