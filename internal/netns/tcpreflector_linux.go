// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SlowTCPReflector answers every TCP SYN that arrives on dev for one of
// addrs (IPv4 or IPv6 literals this namespace does not have), to any
// port, with a SYN-ACK from that address and port, sent from user space
// delay after the SYN arrived: a TCP reflector at the end of a path of
// known, fixed delay, for probes timed by a handshake. The kernel's own
// answer (a listener's SYN-ACK, a closed port's RST) would leave at once,
// and without netem nothing could hold it back; so the namespace routes
// addrs into a blackhole, where its kernel neither answers nor reports
// them, and the responder reads the SYNs off dev with a packet socket.
// The client's ACK and RST that follow end in the blackhole too. A SYN
// whose checksum is wrong (say, computed for another source address than
// the one it left with) gets no answer, as from a real host. The
// responder stops at the test's Cleanup.
func (ns *Namespace) SlowTCPReflector(delay time.Duration, dev string, addrs ...string) {
	tb := ns.lab.tb
	tb.Helper()
	// Answers leave from raw sockets bound to the reflector addresses,
	// which are not the namespace's: IP_TRANSPARENT lets them bind there
	// and send from there.
	replies := map[netip.Addr]net.PacketConn{}
	for _, s := range addrs {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			tb.Fatalf("slow TCP reflector in %s: %v", ns.name, err)
		}
		ns.IP("route", "add", "blackhole", netip.PrefixFrom(addr, addr.BitLen()).String())
		network, level, opt := "ip4:tcp", unix.SOL_IP, unix.IP_TRANSPARENT
		if addr.Is6() {
			network, level, opt = "ip6:tcp", unix.SOL_IPV6, unix.IPV6_TRANSPARENT
		}
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, 1) }); err != nil {
				return err
			}
			return serr
		}}
		var pc net.PacketConn
		if err := ns.Do(func() (err error) {
			pc, err = lc.ListenPacket(context.Background(), network, s)
			return err
		}); err != nil {
			tb.Fatalf("slow TCP reflector in %s: the answering socket for %s: %v", ns.name, s, err)
		}
		tb.Cleanup(func() { pc.Close() })
		replies[addr] = pc
	}
	f, err := ns.packetSocket(dev)
	if err != nil {
		tb.Fatalf("slow TCP reflector in %s: %v", ns.name, err)
	}
	tb.Cleanup(func() { f.Close() })
	rc, err := f.SyscallConn()
	if err != nil {
		tb.Fatalf("slow TCP reflector in %s: %v", ns.name, err)
	}
	go func() {
		buf := make([]byte, 1500)
		oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{}))))
		for {
			var n, oobn int
			var from unix.Sockaddr
			var rerr error
			if err := rc.Read(func(fd uintptr) bool {
				n, oobn, _, from, rerr = unix.Recvmsg(int(fd), buf, oob, 0)
				return rerr != unix.EAGAIN
			}); err != nil {
				return // closed at Cleanup
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); rerr != nil || !ok || ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			syn, ok := parseSYN(buf[:n], checksumComplete(oob[:oobn]))
			if !ok {
				continue
			}
			pc := replies[syn.dst.Addr()]
			if pc == nil {
				continue
			}
			out := synACK(syn)
			to := &net.IPAddr{IP: syn.src.Addr().AsSlice()}
			time.AfterFunc(delay, func() { pc.WriteTo(out, to) })
		}
	}()
}

// packetSocket opens a non-blocking packet socket that reads every IP
// packet dev receives, IP header first, with each one's auxiliary data
// (PACKET_AUXDATA, which says whether its checksum is complete). Closing
// the file ends a read in progress.
func (ns *Namespace) packetSocket(dev string) (*os.File, error) {
	var be [2]byte
	binary.BigEndian.PutUint16(be[:], unix.ETH_P_ALL)
	proto := binary.NativeEndian.Uint16(be[:]) // htons
	var f *os.File
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			unix.Close(fd)
			return fmt.Errorf("packet socket: PACKET_AUXDATA: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("packet socket: binding to %s: %w", dev, err)
		}
		f = os.NewFile(uintptr(fd), "packet socket on "+dev)
		return nil
	})
	return f, err
}

// checksumComplete reads a packet's auxiliary data: false when the sender
// left its checksum for the hardware to fill in (a local TCP socket's
// segment, on a veth with checksum offload), which then cannot be checked.
func checksumComplete(oob []byte) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return true
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 4 {
			return binary.NativeEndian.Uint32(m.Data)&unix.TP_STATUS_CSUMNOTREADY == 0
		}
	}
	return true
}

// syn is a received SYN, reduced to what its answer needs.
type syn struct {
	src, dst netip.AddrPort
	seq      uint32
}

// parseSYN reads an IPv4 or IPv6 packet carrying a bare SYN (no ACK, no
// RST); with verify, a wrong TCP checksum makes it no SYN.
func parseSYN(b []byte, verify bool) (syn, bool) {
	if len(b) < 1 {
		return syn{}, false
	}
	var src, dst netip.Addr
	var seg []byte
	switch b[0] >> 4 {
	case 4:
		hl := int(b[0]&0x0f) * 4
		if len(b) < 20 || hl < 20 || b[9] != unix.IPPROTO_TCP {
			return syn{}, false
		}
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total < hl || total > len(b) {
			return syn{}, false
		}
		src, dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		seg = b[hl:total]
	case 6:
		if len(b) < 40 || b[6] != unix.IPPROTO_TCP {
			return syn{}, false
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if 40+plen > len(b) {
			return syn{}, false
		}
		src, dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		seg = b[40 : 40+plen]
	default:
		return syn{}, false
	}
	const fin, synFlag, rst, ack = 0x01, 0x02, 0x04, 0x10
	if len(seg) < 20 || seg[13]&(synFlag|ack|rst|fin) != synFlag {
		return syn{}, false
	}
	if verify && tcpChecksum(src, dst, seg) != 0 {
		return syn{}, false
	}
	return syn{
		src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(seg[0:])),
		dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(seg[2:])),
		seq: binary.BigEndian.Uint32(seg[4:]),
	}, true
}

// synACK is the answer to s: a SYN-ACK from s's destination that
// acknowledges its sequence number, checksum included.
func synACK(s syn) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], s.dst.Port())
	binary.BigEndian.PutUint16(b[2:], s.src.Port())
	binary.BigEndian.PutUint32(b[4:], 0x5eed0000) // our initial sequence number: nothing follows it
	binary.BigEndian.PutUint32(b[8:], s.seq+1)
	b[12] = 5 << 4
	b[13] = 0x12 // SYN, ACK
	binary.BigEndian.PutUint16(b[14:], 65535)
	binary.BigEndian.PutUint16(b[16:], tcpChecksum(s.dst.Addr(), s.src.Addr(), b))
	return b
}

// tcpChecksum is the TCP checksum of seg from src to dst, over RFC 793's
// pseudo-header (RFC 8200's for IPv6, whose words add up the same for a
// segment under 64 KB); over a segment that carries a correct checksum it
// is 0.
func tcpChecksum(src, dst netip.Addr, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for ; len(b) >= 2; b = b[2:] {
			sum += uint32(b[0])<<8 | uint32(b[1])
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	add(src.AsSlice())
	add(dst.AsSlice())
	sum += unix.IPPROTO_TCP + uint32(len(seg))
	add(seg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
