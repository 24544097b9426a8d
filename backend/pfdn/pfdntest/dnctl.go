// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"net/netip"
	"strings"
)

// dnctl emulates /usr/sbin/dnctl (network_cmds dnctl.c, reference §1 and
// §8). Parsing follows the C code's order, so errors appear in the same
// order and with the same exit codes as on a Mac.
type dnctl struct {
	*process
	quiet, testOnly, verbose bool
	doPipe                   int // 0 none, 1 pipe, 2 queue
}

const dnctlUsage = "usage: dnctl [options]\ndo \"dnctl -h\" or see dnctl manpage for details\n"

const dnctlHelp = "dnclt [-acdeftTnNpqS] <command> where <command> is one of:\n{pipe|queue} N config PIPE-BODY\n[pipe|queue] {zero|delete|show} [N{,N}]\n"

const whitespace = " \t\f\v\n\r"

func runDnctl(p *process) int {
	d := &dnctl{process: p}
	p.progname = "dnctl"
	return p.run(func() int {
		args := p.argv[1:]
		if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "/") {
			if _, err := p.read(args[n-1]); err == nil {
				d.readFile(p.argv)
				return 0
			}
		}
		if d.parseArgs(args) {
			p.stderr.WriteString(dnctlUsage)
			return 64
		}
		return 0
	})
}

// splitSingle is parse_args' single-string form: stop at '#', drop blanks
// after ',', split on whitespace.
func splitSingle(arg string) []string {
	var b strings.Builder
	copying := false
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if c == '#' {
			break
		}
		if copying {
			b.WriteByte(c)
			copying = !strings.ContainsRune(","+whitespace, rune(c))
		} else {
			copying = !strings.ContainsRune(whitespace, rune(c))
			if copying {
				b.WriteByte(c)
			}
		}
	}
	s := b.String()
	if !copying && len(s) > 0 {
		s = s[:len(s)-1]
	}
	if s == "" {
		return nil
	}
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(whitespace, r) })
}

// joinCommas joins an argument ending in ',' with the next one.
func joinCommas(old []string) []string {
	var av []string
	cur := ""
	for i, a := range old {
		cur += a
		if !strings.HasSuffix(a, ",") || i == len(old)-1 {
			av = append(av, cur)
			cur = ""
		}
	}
	return av
}

// parseArgs runs one command line. It returns true when the caller should
// print the usage text (no arguments, or getopt rejected an option).
func (d *dnctl) parseArgs(old []string) (usage bool) {
	var av []string
	switch len(old) {
	case 0:
		return true
	case 1:
		if av = splitSingle(old[0]); len(av) == 0 {
			return true
		}
	default:
		av = joinCommas(old)
	}
	// getopt with optind reset to 0 scans av[0] too; its complaints carry
	// av[0] as the program name (reference §8.1).
	optind := 0
scan:
	for optind < len(av) {
		a := av[optind]
		if a == "--" {
			optind++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for _, c := range a[1:] {
			switch c {
			case 'a', 'f':
			case 'h':
				d.stderr.WriteString(dnctlHelp)
				panic(exit(0))
			case 'n':
				d.testOnly = true
			case 'q':
				d.quiet = true
			case 's':
				// do_sort = atoi(optarg) with optarg NULL: a segfault.
				d.crashed = true
				panic(exit(139))
			case 'v':
				d.verbose = true
			default:
				fmt.Fprintf(&d.stderr, "%s: illegal option -- %c\n", av[0], c)
				return true
			}
		}
		optind++
		continue scan
	}
	av = av[optind:]
	if len(av) == 0 {
		d.errx(64, "bad arguments, for usage summary ``dnctl''")
	}
	if len(av) > 1 && isDigit(av[0]) {
		av[0], av[1] = av[1], av[0]
	}
	d.doPipe = 0
	if strings.HasPrefix("pipe", av[0]) {
		d.doPipe = 1
	} else if strings.HasPrefix("queue", av[0]) {
		d.doPipe = 2
	}
	if d.doPipe != 0 {
		av = av[1:]
	}
	if len(av) == 0 {
		d.errx(64, "missing command")
	}
	if d.doPipe > 0 && len(av) > 1 && isDigit(av[0]) {
		av[0], av[1] = av[1], av[0]
	}
	switch w := av[0]; {
	case d.doPipe != 0 && strings.HasPrefix("config", w):
		d.config(av)
	case strings.HasPrefix("delete", w):
		d.delete(av)
	case strings.HasPrefix("flush", w):
		d.flush()
	case strings.HasPrefix("print", w), strings.HasPrefix("list", w), strings.HasPrefix("show", w):
		d.list(av)
	default:
		d.errx(64, "bad command `%s'", w)
	}
	return false
}

// kernel opens the raw socket on first use; non-root callers fail here
// (reference §1.3).
func (d *dnctl) kernel() {
	if d.m.Unprivileged {
		d.err(69, "EPERM", "socket")
	}
	d.m.Dummynet.Loaded = true
}

// need is NEED1: a keyword's value is missing. The messages end in "\n"
// and errx adds another, hence the blank line (reference §1.5).
func (d *dnctl) need(av []string, msg string) {
	if len(av) == 0 {
		d.errx(64, "%s", msg)
	}
}

func (d *dnctl) config(av []string) {
	av = av[1:]
	var pipe Pipe
	var q Queue
	var fs FlowSet
	var weight int32
	var parent int32
	if len(av) > 0 && isDigit(av[0]) {
		n := atoi(av[0])
		if d.doPipe == 1 {
			pipe.Number = n
		} else {
			q.Number = uint16(n)
		}
		av = av[1:]
	}
	for len(av) > 0 {
		tok := av[0]
		av = av[1:]
		switch tok {
		case "noerror":
			fs.NoError = true
		case "plr":
			d.need(av, "plr needs argument 0..1\n")
			v := strtod(av[0])
			if v > 1 {
				v = 1
			} else if v < 0 {
				v = 0
			}
			fs.PLR = int32(v * 0x7fffffff)
			av = av[1:]
		case "queue":
			d.need(av, "queue needs queue size\n")
			v, end := strtoul(av[0], 0)
			fs.QSize = cInt(v)
			fs.Bytes = false
			if strings.HasPrefix(end, "K") || strings.HasPrefix(end, "k") {
				fs.Bytes = true
				fs.QSize *= 1024
			} else if strings.HasPrefix(end, "B") || strings.HasPrefix(end, "by") {
				fs.Bytes = true
			}
			av = av[1:]
		case "buckets":
			d.need(av, "buckets needs argument\n")
			v, _ := strtoul(av[0], 0)
			fs.RqSize = cInt(v)
			av = av[1:]
		case "mask":
			d.need(av, "mask needs mask specifier\n")
			av = d.mask(av, &fs)
		case "red", "gred":
			d.need(av, "red/gred needs w_q/min_th/max_th/max_p\n")
			fs.RED = true
			if tok == "gred" {
				fs.Gentle = true
			}
			parts := strings.Split(av[0], "/")
			if len(parts) > 0 {
				w := strtod(parts[0])
				if w > 1 || w <= 0 {
					d.errx(65, "0 < w_q <= 1")
				}
				fs.WQ = int32(w * 65536)
			}
			th := func(s string) int32 {
				v, end := strtoul(s, 0)
				n := cInt(v)
				if strings.HasPrefix(end, "K") || strings.HasPrefix(end, "k") {
					n *= 1024
				}
				return n
			}
			if len(parts) > 1 {
				fs.MinTh = th(parts[1])
			}
			if len(parts) > 2 {
				fs.MaxTh = th(parts[2])
			}
			if len(parts) > 3 {
				mp := strtod(parts[3])
				if mp > 1 || mp <= 0 {
					d.errx(65, "0 < max_p <= 1")
				}
				fs.MaxP = int32(mp * 65536)
			}
			av = av[1:]
		case "droptail":
			fs.RED, fs.Gentle = false, false
		case "bw", "bandwidth":
			d.need(av, "bw needs bandwidth or interface\n")
			if d.doPipe != 1 {
				d.errx(65, "bandwidth only valid for pipes")
			}
			if a := av[0]; a != "" && a[0] >= 'a' && a[0] <= 'z' {
				if len(a) > 15 {
					a = a[:15]
				}
				pipe.IfName, pipe.Bandwidth = a, 0
			} else {
				v, end := strtoul(a, 0)
				bw := cInt(v)
				switch {
				case strings.HasPrefix(end, "K"), strings.HasPrefix(end, "k"):
					end = end[1:]
					bw *= 1000
				case strings.HasPrefix(end, "M"):
					end = end[1:]
					bw *= 1000000
				}
				if strings.HasPrefix(end, "B") || strings.HasPrefix(end, "by") {
					bw *= 8
				}
				if bw < 0 {
					d.errx(65, "bandwidth too large")
				}
				pipe.IfName, pipe.Bandwidth = "", bw
			}
			av = av[1:]
		case "delay":
			if d.doPipe != 1 {
				d.errx(65, "delay only valid for pipes")
			}
			d.need(av, fmt.Sprintf("delay needs argument 0..%d\n", maxDelay))
			v, _ := strtoul(av[0], 0)
			pipe.Delay = cInt(v)
			av = av[1:]
		case "weight":
			if d.doPipe == 1 {
				d.errx(65, "weight only valid for queues")
			}
			d.need(av, "weight needs argument 0..100\n")
			v, _ := strtoul(av[0], 0)
			weight = cInt(v)
			av = av[1:]
		case "pipe":
			if d.doPipe == 1 {
				d.errx(65, "pipe only valid for queues")
			}
			d.need(av, "pipe needs pipe_number\n")
			v, _ := strtoul(av[0], 0)
			parent = cInt(v)
			av = av[1:]
		default:
			d.errx(65, "unrecognised option ``%s''", tok)
		}
	}
	if d.doPipe == 1 {
		if pipe.Number == 0 {
			d.errx(65, "pipe_nr must be > 0")
		}
		if pipe.Delay > maxDelay {
			d.errx(65, "delay must be < %d ms", maxDelay)
		}
	} else {
		if parent == 0 {
			d.errx(65, "pipe must be > 0")
		}
		if weight > 100 {
			d.errx(65, "weight must be <= 100")
		}
	}
	if fs.Bytes {
		if fs.QSize > 1024*1024 {
			d.errx(65, "queue size must be < 1MB")
		}
	} else if fs.QSize > 100 {
		d.errx(65, "2 <= queue size <= 100")
	}
	if fs.RED {
		if fs.MinTh >= fs.MaxTh {
			d.errx(65, "min_th %d must be < than max_th %d", fs.MinTh, fs.MaxTh)
		}
		if fs.MaxTh == 0 {
			d.errx(65, "max_th must be > 0")
		}
	}
	if d.testOnly {
		return
	}
	d.kernel()
	if d.doPipe == 1 {
		pipe.FS = fs
		d.m.configPipe(pipe)
		return
	}
	q.Parent, q.Weight, q.FS = parent, weight, fs
	if errno := d.m.configQueue(q); errno != "" {
		d.err(1, errno, "setsockopt(%s)", "IP_DUMMYNET_CONFIGURE")
	}
}

// maxDelay is MAX_DELAY = INT_MAX/1000.
const maxDelay = 2147483

// mask parses `mask FIELD VALUE …` up to the first word that is not a
// mask field, and returns the rest.
func (d *dnctl) mask(av []string, fs *FlowSet) []string {
	fs.Mask.DstIP, fs.Mask.SrcIP, fs.Mask.DstPort, fs.Mask.SrcPort, fs.Mask.Proto = 0, 0, 0, 0, 0
	for len(av) >= 1 {
		tok := av[0]
		av = av[1:]
		var kind string
		switch tok {
		case "all":
			fs.Mask = FlowMask{Proto: 0xff, SrcIP: ^uint32(0), DstIP: ^uint32(0), SrcPort: 0xffff, DstPort: 0xffff, SrcIP6Bits: 128, DstIP6Bits: 128}
			fs.HasMask = true
			return av
		case "dst-ip", "src-ip", "dst-port", "src-port", "proto":
			kind = tok
		case "dst-ip6", "dst-ipv6":
			kind = "dst-ip6"
		case "src-ip6", "src-ipv6":
			kind = "src-ip6"
		default:
			return append([]string{tok}, av...)
		}
		if len(av) < 1 {
			d.errx(64, "mask: value missing")
		}
		var a uint32
		ip6 := kind == "dst-ip6" || kind == "src-ip6"
		if strings.HasPrefix(av[0], "/") {
			v, _ := strtoul(av[0][1:], 0)
			a = uint32(cInt(v))
			if !ip6 {
				// `/N` sets the low N bits, not a netmask (reference §8.6).
				if a == 32 {
					a = ^uint32(0)
				} else {
					a = (1 << a) - 1
				}
			}
		} else {
			v, _ := strtoul(av[0], 0)
			a = uint32(cInt(v))
		}
		switch kind {
		case "dst-ip":
			fs.Mask.DstIP = a
		case "src-ip":
			fs.Mask.SrcIP = a
		case "dst-port", "src-port":
			if a > 65535 {
				d.errx(65, "mask: must be 16 bit")
			}
			if kind == "dst-port" {
				fs.Mask.DstPort = uint16(a)
			} else {
				fs.Mask.SrcPort = uint16(a)
			}
		case "dst-ip6", "src-ip6":
			if a > 128 {
				d.errx(65, "in6addr invalid mask len")
			}
			if kind == "dst-ip6" {
				fs.Mask.DstIP6Bits = int(a)
			} else {
				fs.Mask.SrcIP6Bits = int(a)
			}
		default:
			if a > 255 {
				d.errx(65, "mask: must be 8 bit")
			}
			fs.Mask.Proto = uint8(a)
		}
		if a != 0 {
			fs.HasMask = true
		}
		av = av[1:]
	}
	return av
}

// delete removes pipes (after `pipe`) or queues (after `queue`, and also
// with no word at all: bare `dnctl delete N` deletes queue N). Every
// number is tried; each failure is a warning and the exit status is 1.
func (d *dnctl) delete(av []string) {
	av = av[1:]
	failed := false
	var pipeNr int32
	var fsNr uint16
	for len(av) > 0 && isDigit(av[0]) {
		i := atoi(av[0])
		av = av[1:]
		if d.doPipe == 1 {
			pipeNr = i
		} else {
			fsNr = uint16(i)
		}
		if d.testOnly {
			continue
		}
		d.kernel()
		var errno string
		switch {
		case pipeNr == 0 && fsNr == 0:
			errno = "EINVAL"
		case pipeNr != 0:
			errno = d.m.deletePipe(pipeNr)
		default:
			errno = d.m.deleteQueue(fsNr)
		}
		if errno != "" {
			failed = true
			n := uint32(pipeNr)
			if d.doPipe != 1 {
				n = uint32(fsNr)
			}
			d.warn(errno, "rule %d: setsockopt(IP_DUMMYNET_DEL)", n)
		}
	}
	if failed {
		panic(exit(1))
	}
}

func (d *dnctl) flush() {
	force := !d.tty
	if !force && !d.quiet {
		d.stdout.WriteString("Are you sure? [yn] ")
		answer := strings.ToUpper(strings.TrimSpace(string(d.stdin())))
		d.stdout.WriteString("\n")
		if !strings.HasPrefix(answer, "Y") {
			return
		}
	}
	if !d.testOnly {
		d.kernel()
		d.m.flushDummynet()
	}
	if !d.quiet {
		d.stdout.WriteString("Flushed all pipes.\n")
	}
}

func (d *dnctl) list(av []string) {
	if d.testOnly {
		d.stderr.WriteString("Testing only, list disabled\n")
		return
	}
	av = av[1:]
	d.kernel()
	var only uint32
	if len(av) > 0 {
		v, _ := strtoul(av[0], 10)
		only = uint32(v)
	}
	writeListing(&d.stdout, d.m, only, d.verbose)
}

// readFile is dnctl's file mode: the last argument is a readable absolute
// path, each line is one command, "Line N" replaces the program name in
// messages, and the first fatal error ends the whole file.
func (d *dnctl) readFile(argv []string) {
	optind := 1
	for optind < len(argv)-1 {
		a := argv[optind]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			break
		}
		for _, c := range a[1:] {
			switch c {
			case 'n':
				d.testOnly = true
			case 'q':
				d.quiet = true
			case 'p':
				d.errx(69, "the emulator does not run preprocessors (-p)")
			default:
				fmt.Fprintf(&d.stderr, "%s: illegal option -- %c\n", argv[0], c)
				d.errx(64, "bad arguments, for usage summary ``dnctl''")
			}
		}
		optind++
	}
	if len(argv) != optind+1 {
		fmt.Fprintf(&d.stderr, "ac %d, optind %d\n", len(argv), optind)
		d.errx(64, "extraneous filename arguments")
	}
	name := argv[len(argv)-1]
	data, err := d.read(name)
	if err != nil {
		d.err(69, "ENOENT", "fopen: %s", name)
	}
	lineno := 0
	for _, line := range fgetsLines(string(data), 1024) {
		lineno++
		d.progname = fmt.Sprintf("Line %d", lineno)
		d.injectLineFault(line)
		// Each line runs parse_args with a fresh getopt, but the option
		// flags it sets stay on for the following lines.
		if d.parseArgs([]string{line}) {
			continue
		}
	}
}

// injectLineFault applies an injected fault to one line of a file, matched
// as the call "dnctl WORDS…": Fail ends the file there with the fault's
// message after "Line N: " (or the message it gives in full), as a line
// the kernel refuses does; Hang hangs the process after the lines before
// it took effect.
func (d *dnctl) injectLineFault(line string) {
	if d.lineFault == nil {
		return
	}
	words := splitSingle(line)
	if len(words) == 0 {
		return
	}
	f := d.lineFault(strings.Join(append([]string{"dnctl"}, words...), " "))
	switch {
	case f == nil:
	case f.Kind == Hang:
		d.hung = true
		panic(exit(-1))
	case f.Kind == Fail:
		if f.AfterEffect {
			d.parseArgs([]string{line})
		}
		if f.Stderr != "" {
			d.stderr.WriteString(f.Stderr)
		} else {
			d.warnx("injected failure (pfdntest)")
		}
		panic(exit(f.exitCode()))
	}
}

// fgetsLines splits text the way fgets with a buffer of size reads it:
// lines longer than size-1 bytes come in several pieces.
func fgetsLines(text string, size int) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		var line string
		if i < 0 {
			line, text = text, ""
		} else {
			line, text = text[:i+1], text[i+1:]
		}
		for len(line) > size-1 {
			out = append(out, line[:size-1])
			line = line[size-1:]
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// ipv6Mask renders an n2mask prefix length as inet_ntop does.
func ipv6Mask(bits int) string {
	var b [16]byte
	for i := 0; bits > 0 && i < 16; i++ {
		if bits >= 8 {
			b[i] = 0xff
		} else {
			b[i] = byte(0xff << (8 - bits))
		}
		bits -= 8
	}
	return netip.AddrFrom16(b).String()
}
