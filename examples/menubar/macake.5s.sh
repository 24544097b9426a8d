#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# <xbar.title>macake</xbar.title>
# <xbar.version>v1.0</xbar.version>
# <xbar.author>macake</xbar.author>
# <xbar.desc>What macake's shapers do now: rates, round trip, bufferbloat, problems.</xbar.desc>
# <xbar.dependencies>macake, jq</xbar.dependencies>
# <xbar.var>string(MACAKE_STATUS_PAGE=""): The status page's URL (macake.toml status_page_listen), e.g. http://127.0.0.1:9847/</xbar.var>
# <swiftbar.hideAbout>true</swiftbar.hideAbout>
# <swiftbar.hideRunInTerminal>true</swiftbar.hideRunInTerminal>
#
# A SwiftBar/xbar plugin: the menu bar shows the first active link's
# download and upload shaper rates (orange with bufferbloat, red when
# something needs you), the menu every link's rates, round trip, counters
# and problems. It reads `macake status --json` every 5 s (the file name's
# "5s"); it runs nothing else and changes nothing.
#
# Install: copy it into the plugin folder, chmod +x. It needs jq:
# /usr/bin/jq on macOS 15 and later, else `brew install jq`. MACAKE names
# the macake binary; MACAKE_STATUS_PAGE adds an "Open status page" item.

PATH="/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:$PATH"
export PATH LC_ALL=C
macake="${MACAKE:-macake}"

if ! command -v jq >/dev/null 2>&1; then
	echo "macake ? | color=#d0461f"
	echo "---"
	echo "This plugin needs jq: brew install jq (macOS 15 has /usr/bin/jq)"
	exit 0
fi
if ! status=$("$macake" status --json 2>/dev/null); then
	echo "macake ? | color=#d0461f"
	echo "---"
	echo "'$macake status --json' failed; is macake installed? | color=#d0461f"
	echo "Refresh | refresh=true"
	exit 0
fi

printf '%s\n' "$status" | jq -r --arg page "${MACAKE_STATUS_PAGE:-}" '
# A menu line is one line, and " | " starts its parameters.
def clean: gsub("\\s*\n\\s*"; " ") | gsub("\\|"; "¦");
def tenths: round as $t | "\($t / 10 | floor).\($t % 10)";
def mbit: if . == null then "–" else (. / 1e5 | tenths) end;
def ms: if . == null then "–" else (. * 1e4 | tenths) + " ms" end;
def shaper($d): (.shapers // []) | map(select(.direction == $d)) | first;
def rate($d): shaper($d) as $s
  | if $s == null then "–" elif ($s.not_shaped // "") != "" then "off" else ($s.rate_bits_per_second | mbit) end;
def rateText($d): rate($d) as $r | if $r == "–" or $r == "off" then $r else $r + " Mbit/s" end;
def bloat: .controller != null and (.controller.download.bufferbloat or .controller.upload.bufferbloat);
def trouble: ((.problems // []) | length) + ((.config_errors // []) | length) + ([.links[] | select((.error // "") != "")] | length);

(.links // []) as $links
| (if .daemon.running then "" else " (watch off)" end) as $off
| (if trouble > 0 then "#d0461f" elif ($links | map(select(bloat)) | length) > 0 then "#e08a00" else "" end) as $color
| (if $color == "" then "" else " | color=" + $color end) as $tint
| (if ($links | length) == 0 then "macake –" + $off
   else $links[0] | "↓" + rate("download") + " ↑" + rate("upload") + $off end) + $tint,
  "---",
  (if .daemon.running and .daemon.permission_denied then
     "macake watch running" + (if .daemon.pid then ", pid \(.daemon.pid)" else "" end)
     + "; its view needs root or the admin group, so this is the static picture | color=#e08a00"
   elif .daemon.running then "macake watch running, pid \(.daemon.pid)"
   else "macake watch not running: \(.daemon.note // "" | clean)" end),
  (if ($links | length) == 0 then "No active link: no policy matches the network" else empty end),
  ($links[] | . as $l
   | "---",
     "\(.name) on \(.interface): \(.mode)" + (if .controller then ", " + .controller.status else "" end)
       + (if bloat then ", bufferbloat | color=#e08a00" else "" end),
     (("download", "upload") as $d
      | (shaper($d)) as $s
      | ($l.controller[$d] // null) as $c
      | "--\($d): shaper \(rateText($d))"
        + (if $c then ", achieved \($c.achieved_bits_per_second | mbit) Mbit/s (\($c.load_percent)%)" else "" end)
        + (if $s.stats then ", \($s.stats.drops) dropped, \($s.stats.backlog_packets) queued" else "" end)),
     (if .controller and .controller.responses > 0 then "--round trip: idle \(.controller.idle_rtt_seconds | ms), delay ↓+\(.controller.download.window_average_seconds | ms) ↑+\(.controller.upload.window_average_seconds | ms)" else empty end),
     (if (.error // "") != "" then "--problem: \(.error | clean) | color=#d0461f" else empty end)),
  (if trouble > 0 then "---" else empty end),
  ((.problems // [])[] | "problem: " + clean + " | color=#d0461f"),
  ((.config_errors // [])[] | "\(.file):\(.line):\(.column): \(.message | clean) | color=#d0461f"),
  "---",
  (if $page != "" then "Open status page | href=" + $page else empty end),
  "Refresh | refresh=true"
'
