// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/macake/macake/internal/debounce"
)

// FileSource reads the facts from a JSON file in the Facts shape
// (the MACAKE_LINK_FACTS file), for tests, demos and the emulator:
//
//	{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1",
//	  "gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK","default":true}]}
//
// Unknown keys, duplicate or empty interface names and trailing data are
// errors that name the file. Any name the kernel could have is taken, as
// from detection: only a policy's interface is held to the policy grammar
// (shape.CheckInterfaceName). When no interface says "default", the first
// one that is up and has a gateway is taken as the default.
type FileSource struct {
	Path string
}

// Facts reads and validates the file.
func (f *FileSource) Facts(ctx context.Context) (Facts, error) {
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return Facts{}, fmt.Errorf("%s=%s: %w", EnvFile, f.Path, err)
	}
	facts, err := ParseFacts(b)
	if err != nil {
		return Facts{}, fmt.Errorf("%s=%s: %w", EnvFile, f.Path, err)
	}
	return facts, nil
}

// ParseFacts decodes and validates facts JSON.
func ParseFacts(b []byte) (Facts, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var facts Facts
	if err := dec.Decode(&facts); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(b, se.Offset-1) // Offset is just past the bad byte
			return Facts{}, fmt.Errorf("%d:%d: %v", line, col, err)
		}
		return Facts{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Facts{}, errors.New("unexpected data after the JSON object")
	}
	seen := map[string]bool{}
	haveDefault := false
	for i, ifi := range facts.Interfaces {
		if ifi.Name == "" {
			return Facts{}, fmt.Errorf("interfaces[%d]: name is empty", i)
		}
		if seen[ifi.Name] {
			return Facts{}, fmt.Errorf("interfaces[%d]: interface %q listed twice", i, ifi.Name)
		}
		seen[ifi.Name] = true
		haveDefault = haveDefault || ifi.Default
	}
	if !haveDefault {
		for i, ifi := range facts.Interfaces {
			if ifi.Up && ifi.GatewayIP.IsValid() {
				facts.Interfaces[i].Default = true
				break
			}
		}
	}
	return facts, nil
}

func position(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for _, c := range b[:min(int(off), len(b))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// Changes watches the file's directory (editors and atomic writers replace
// the file by rename, which a watch on the file itself would lose) and
// signals any create, write, rename or removal of the file.
func (f *FileSource) Changes(ctx context.Context) (<-chan struct{}, error) {
	dir, name := filepath.Split(f.Path)
	if dir == "" {
		dir = "."
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", f.Path, err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) == name && ev.Op&^fsnotify.Chmod != 0 {
					debounce.Signal(ch)
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return ch, nil
}
