// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Layouts of the macOS kernel structures read by the darwin Reader (xnu
// bsd/net/if_mib.h, if_var.h, if.h; all little-endian on arm64 and amd64,
// if_data64 4-byte aligned under #pragma pack(4)). They are parsed here,
// untagged, so that Linux CI tests them against recorded byte layouts.
const (
	// ifmibdataSize is sizeof(struct ifmibdata): name[16], five u32,
	// filler u32[4], then struct if_data64 (128 bytes) at offset 52.
	ifmibdataSize = 180
	ifmibDataOff  = 52

	// Offsets inside struct if_data64.
	ifdIPackets = 24
	ifdOPackets = 40
	ifdIBytes   = 64
	ifdOBytes   = 72

	// struct if_msghdr2 (RTM_IFINFO2): msglen u16, version u8, type u8,
	// addrs, flags, index u16 at 12, ..., if_data64 at 32; 160 bytes.
	ifMsghdr2Size  = 160
	ifm2IndexOff   = 12
	ifm2DataOff    = 32
	rtmIFINFO2     = 0x12
	afLink         = 18
	sockaddrDLName = 8 // sdl_data, after len, family, index u16, type, nlen, alen, slen
)

// Record is one interface's counters as read from a kernel dump.
type Record struct {
	Name string
	Counters
}

// ParseIfAllData parses the result of the net.link.generic.ifalldata
// sysctl ({CTL_NET, AF_LINK, NETLINK_GENERIC, IFMIB_IFALLDATA, 0,
// IFDATA_GENERAL}): one 180-byte struct ifmibdata per interface. Records
// of detached interfaces are zeroed (empty name) and skipped. The byte
// counters are exact 64-bit values.
func ParseIfAllData(b []byte) ([]Record, error) {
	if len(b)%ifmibdataSize != 0 {
		return nil, fmt.Errorf("ifalldata: %d bytes is not a whole number of %d-byte ifmibdata records (kernel layout changed?)", len(b), ifmibdataSize)
	}
	var out []Record
	for ; len(b) > 0; b = b[ifmibdataSize:] {
		rec := b[:ifmibdataSize]
		name := cString(rec[:16])
		if name == "" {
			continue
		}
		d := rec[ifmibDataOff:]
		out = append(out, Record{Name: name, Counters: Counters{
			RxPackets: binary.LittleEndian.Uint64(d[ifdIPackets:]),
			TxPackets: binary.LittleEndian.Uint64(d[ifdOPackets:]),
			RxBytes:   binary.LittleEndian.Uint64(d[ifdIBytes:]),
			TxBytes:   binary.LittleEndian.Uint64(d[ifdOBytes:]),
		}})
	}
	return out, nil
}

// ParseIfList2 parses a NET_RT_IFLIST2 routing dump: RTM_IFINFO2 messages
// (struct if_msghdr2 followed by the interface's sockaddr_dl, which holds
// its name), interleaved with address messages that are skipped. For a
// program not signed by Apple the kernel rounds the byte counters down to
// 1 KiB and truncates them to 32 bits, so records are marked Rounded; the
// packet counters are exact.
func ParseIfList2(b []byte) ([]Record, error) {
	var out []Record
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("iflist2: %d trailing bytes", len(b))
		}
		msglen := int(binary.LittleEndian.Uint16(b))
		if msglen < 4 || msglen > len(b) {
			return nil, fmt.Errorf("iflist2: message length %d with %d bytes left", msglen, len(b))
		}
		msg := b[:msglen]
		b = b[msglen:]
		if msg[3] != rtmIFINFO2 {
			continue
		}
		if msglen < ifMsghdr2Size+sockaddrDLName {
			return nil, fmt.Errorf("iflist2: RTM_IFINFO2 message of %d bytes, want at least %d", msglen, ifMsghdr2Size+sockaddrDLName)
		}
		sdl := msg[ifMsghdr2Size:]
		if sdl[1] != afLink {
			return nil, fmt.Errorf("iflist2: address after RTM_IFINFO2 has family %d, want AF_LINK", sdl[1])
		}
		nlen := int(sdl[5])
		if sockaddrDLName+nlen > len(sdl) {
			return nil, fmt.Errorf("iflist2: interface name of %d bytes overruns the message", nlen)
		}
		d := msg[ifm2DataOff:]
		out = append(out, Record{Name: string(sdl[sockaddrDLName : sockaddrDLName+nlen]), Counters: Counters{
			Index:     int(binary.LittleEndian.Uint16(msg[ifm2IndexOff:])),
			RxPackets: binary.LittleEndian.Uint64(d[ifdIPackets:]),
			TxPackets: binary.LittleEndian.Uint64(d[ifdOPackets:]),
			RxBytes:   binary.LittleEndian.Uint64(d[ifdIBytes:]),
			TxBytes:   binary.LittleEndian.Uint64(d[ifdOBytes:]),
			Rounded:   true,
		}})
	}
	return out, nil
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// find returns the named record's counters.
func find(recs []Record, name string) (Counters, error) {
	for _, r := range recs {
		if r.Name == name {
			return r.Counters, nil
		}
	}
	return Counters{}, fmt.Errorf("reading counters of %s: %w", name, ErrNoInterface)
}
