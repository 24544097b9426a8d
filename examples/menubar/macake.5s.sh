#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# <xbar.title>macake</xbar.title>
# <xbar.version>v1.1</xbar.version>
# <xbar.author>macake</xbar.author>
# <xbar.desc>What macake's shapers do now: rates, round trip, bufferbloat, problems, pauses; pause and resume.</xbar.desc>
# <xbar.dependencies>macake, jq</xbar.dependencies>
# <xbar.var>string(MACAKE_STATUS_PAGE=""): The status page's URL (macake.toml status_page_listen), e.g. http://127.0.0.1:9847/</xbar.var>
# <swiftbar.hideAbout>true</swiftbar.hideAbout>
# <swiftbar.hideRunInTerminal>true</swiftbar.hideRunInTerminal>
#
# A SwiftBar/xbar plugin: the menu bar shows the first active link's
# download and upload shaper rates (orange with bufferbloat, red when
# something needs you; a pause sign and the time left while the shaping
# is paused), the menu every link's rates, round trip, counters, problems
# and pauses, and items that pause the shaping for 15 minutes or an hour
# and resume it. It reads `macake status --json` every 5 s (the file
# name's "5s"); its items run `macake pause` and `macake resume` (the menu
# runs this script again with them), which a member of the daemon's
# operator group (admin by default) may run as is; anyone else is asked
# for an administrator's password, as macOS asks.
#
# Install: copy it into the plugin folder, chmod +x. It needs jq:
# /usr/bin/jq on macOS 15 and later, else `brew install jq`. MACAKE names
# the macake binary; MACAKE_STATUS_PAGE adds an "Open status page" item.

PATH="/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:$PATH"
export PATH LC_ALL=C
macake="${MACAKE:-macake}"

# An item of the menu: pause or resume, through macake itself. When this
# user may not (exit 77), macOS asks for an administrator's password and
# runs it as root; any other failure is shown as a notification.
case "${1:-}" in
pause | resume)
	out=$("$macake" "$@" 2>&1)
	code=$?
	if [ "$code" -eq 77 ] && command -v osascript >/dev/null 2>&1; then
		# The command for `do shell script`: macake quoted for the shell,
		# then the words of the item (pause, --for, 15m, a link name).
		cmd="'$(printf '%s' "$macake" | sed "s/'/'\\\\''/g")' $*"
		cmd=$(printf '%s' "$cmd" | sed 's/[\\"]/\\&/g')
		out=$(osascript -e "do shell script \"$cmd\" with administrator privileges" 2>&1)
		code=$?
	fi
	if [ "$code" -ne 0 ] && command -v osascript >/dev/null 2>&1; then
		msg=$(printf '%s' "$out" | tr '\n"\\' "  /" | cut -c1-200)
		osascript -e "display notification \"$msg\" with title \"macake $1\"" >/dev/null 2>&1
	fi
	exit 0
	;;
esac

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

printf '%s\n' "$status" | jq -r --arg page "${MACAKE_STATUS_PAGE:-}" --arg self "$0" '
# A menu line is one line, and " | " starts its parameters.
def clean: gsub("\\s*\n\\s*"; " ") | gsub("\\|"; "¦");
# An error or a problem is an object with a message (format 2).
def msg: if type == "object" then .message else . end;
def tenths: round as $t | "\($t / 10 | floor).\($t % 10)";
def mbit: if . == null then "–" else (. / 1e5 | tenths) end;
def ms: if . == null then "–" else (. * 1e4 | tenths) + " ms" end;
def shaper($d): (.shapers // []) | map(select(.direction == $d)) | first;
def rate($d): shaper($d) as $s
  | if $s == null then "–" elif ($s.not_shaped // "") != "" then "off" else ($s.rate_bits_per_second | mbit) end;
def rateText($d): rate($d) as $r | if $r == "–" or $r == "off" then $r else $r + " Mbit/s" end;
def bloat: .controller != null and (.controller.download.bufferbloat or .controller.upload.bufferbloat);
def trouble: ((.problems // []) | length) + ((.config_errors // []) | length) + ([.links[] | select(.error != null and .error != "")] | length);
# Time left: "45s", "28m", "1h05m".
def left: round as $s | if $s < 60 then "\($s)s" elif $s < 3600 then "\($s / 60 | floor)m"
  else "\($s / 3600 | floor)h\(($s % 3600) / 60 | floor | tostring | if length < 2 then "0" + . else . end)m" end;
def pauseLine: (if .link == "*" then "every link" else .link end) as $what
  | "Paused: \($what) until \(.until | sub("\\.[0-9]+"; "") | fromdateiso8601 | localtime | strftime("%H:%M:%S")) (\(.remaining_seconds | left) left"
    + (if (.by // "") != "" then "; by \(.by)" else "" end) + ")";
# A menu item that runs this script again with the words for macake.
def item($text; $words): "\($text) | shell=\"\($self)\" "
  + ([$words | to_entries[] | "param\(.key + 1)=\(.value)"] | join(" ")) + " terminal=false refresh=true";

(.links // []) as $links
| (.pauses // []) as $pauses
| .daemon.running as $running
| (if .daemon.running then "" else " (watch off)" end) as $off
| (if trouble > 0 then "#d0461f" elif ($links | map(select(bloat)) | length) > 0 then "#e08a00" else "" end) as $color
| (if $color == "" then "" else " | color=" + $color end) as $tint
| (if ($pauses | length) > 0 then
     $pauses[0] | "⏸ " + (if .link == "*" then "all" else .link end) + " " + (.remaining_seconds | left)
   elif ($links | length) == 0 then "macake –" + $off
   else $links[0] | "↓" + rate("download") + " ↑" + rate("upload") + $off end) + $tint,
  "---",
  (if .daemon.running and .daemon.permission_denied then
     "macake watch running" + (if .daemon.pid then ", pid \(.daemon.pid)" else "" end)
     + "; its view needs root or the operator group, so this is the static picture | color=#e08a00"
   elif .daemon.running then "macake watch running, pid \(.daemon.pid)"
   else "macake watch not running: \(.daemon.note // "" | clean)" end),
  ($pauses[] | pauseLine),
  (if ($links | length) == 0 then "No active link: no policy matches the network" else empty end),
  ($links[] | . as $l
   | "---",
     "\(.name) on \(.interface): \(.mode)"
       + (if (.paused_until // "") != "" then ", paused" elif .controller then ", " + .controller.status else "" end)
       + (if bloat then ", bufferbloat | color=#e08a00" else "" end),
     (("download", "upload") as $d
      | (shaper($d)) as $s
      | ($l.controller[$d] // null) as $c
      | "--\($d): shaper \(rateText($d))"
        + (if $c then ", achieved \($c.achieved_bits_per_second | mbit) Mbit/s (\($c.load_percent)%)" else "" end)
        + (if $s.stats then ", \($s.stats.drops) dropped, \($s.stats.backlog_packets) queued" else "" end)),
     (if .controller and .controller.responses > 0 then "--round trip: idle \(.controller.idle_rtt_seconds | ms), delay ↓+\(.controller.download.window_average_seconds | ms) ↑+\(.controller.upload.window_average_seconds | ms)" else empty end),
     (if .error != null and .error != "" then "--problem: \(.error | msg | clean) | color=#d0461f" else empty end),
     (if $running then
        "-----",
        item("--Pause \(.name) for 15 min"; ["pause", "--for", "15m", .name]),
        item("--Pause \(.name) for 1 h"; ["pause", "--for", "1h", .name]),
        (if (.paused_until // "") != "" then item("--Resume \(.name)"; ["resume", .name]) else empty end)
      else empty end)),
  (if trouble > 0 then "---" else empty end),
  ((.problems // [])[] | "problem: " + (msg | clean) + " | color=#d0461f"),
  ((.config_errors // [])[] | "\(.file):\(.line):\(.column): \(.message | clean) | color=#d0461f"),
  "---",
  (if $running then
     item("Pause every link for 15 min"; ["pause", "--for", "15m"]),
     item("Pause every link for 1 h"; ["pause", "--for", "1h"]),
     (if ($pauses | length) > 0 then item("Resume every link"; ["resume"]) else empty end)
   else empty end),
  (if $page != "" then "Open status page | href=" + $page else empty end),
  "Refresh | refresh=true"
'
