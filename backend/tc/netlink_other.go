// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package tc

import (
	"context"
	"errors"
)

// NetlinkAvailable is true where the kernel can be written over netlink.
const NetlinkAvailable = false

// Netlink is Linux's rtnetlink writer; elsewhere it cannot be opened.
type Netlink struct{}

// errNoNetlink is what a write says off Linux.
var errNoNetlink = errors.New("netlink: only on Linux")

// NewNetlink returns a writer whose every write fails: rtnetlink is
// Linux's.
func NewNetlink(netns string) *Netlink { return &Netlink{} }

// Close does nothing.
func (n *Netlink) Close() error { return nil }

func (n *Netlink) setRate(ctx context.Context, s shaperSpec) error { return errNoNetlink }

// Observe cannot read off Linux.
func (n *Netlink) Observe(ctx context.Context, t Tools) (Live, error) {
	return n.observe(ctx, t, false)
}

func (n *Netlink) observe(context.Context, Tools, bool) (Live, error) { return Live{}, errNoNetlink }
