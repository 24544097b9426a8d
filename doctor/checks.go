// SPDX-License-Identifier: Apache-2.0

package doctor

// Checks are every check, in the order the report lists them.
var Checks = []Check{
	{ID: "system.user", Section: SectionSystem, Name: "user", Run: checkUser},
	{ID: "system.os", Section: SectionSystem, Name: "operating system", Run: checkOS},
	{ID: "system.backend", Section: SectionSystem, Name: "backend", Run: checkBackend},

	{ID: "pf.pfctl", Section: SectionPF, Name: "pfctl", Applies: (*Inspection).isPF, Run: checkPfctl},
	{ID: "pf.dnctl", Section: SectionPF, Name: "dnctl", Applies: (*Inspection).isPF, Run: checkDnctl},
	{ID: "pf.status", Section: SectionPF, Name: "pf status", Applies: (*Inspection).isPF, Run: checkPFStatus},
	{ID: "pf.hook", Section: SectionPF, Name: "hook line", Applies: (*Inspection).isPF, Run: checkHook},
	{ID: "pf.anchor", Section: SectionPF, Name: "macake's anchor and pipes", Applies: (*Inspection).isPF, Run: checkAnchor},
	{ID: "pf.drift", Section: SectionPF, Name: "live state", Applies: (*Inspection).isPF, Run: checkDrift},
	{ID: "pf.foreign_anchors", Section: SectionPF, Name: "other anchors", Applies: (*Inspection).isPF, Run: checkForeignAnchors},
	{ID: "pf.foreign_pipes", Section: SectionPF, Name: "other pipes", Applies: (*Inspection).isPF, Run: checkForeignPipes},
	{ID: "pf.nlc", Section: SectionPF, Name: "Network Link Conditioner", Applies: (*Inspection).isPF, Run: checkNLC},

	{ID: "tc.tools", Section: SectionTC, Name: "tc and ip", Applies: (*Inspection).isTC, Run: checkTCTools},
	{ID: "tc.kernel", Section: SectionTC, Name: "kernel qdiscs", Applies: (*Inspection).isTC, Run: checkTCKernel},
	{ID: "tc.drift", Section: SectionTC, Name: "live state", Applies: (*Inspection).isTC, Run: checkDrift},

	{ID: "net.links", Section: SectionNetwork, Name: "network", Run: checkLinks},
	{ID: "net.icmp", Section: SectionNetwork, Name: "ICMP permission", Run: checkICMP},
	{ID: "net.reflectors", Section: SectionNetwork, Name: "reflectors", Run: checkReflectors},
	{ID: "net.counters", Section: SectionNetwork, Name: "interface counters", Run: checkCounters},

	{ID: "config.policies", Section: SectionConfig, Name: "policy files", Run: checkPolicies},
	{ID: "config.settings", Section: SectionConfig, Name: "settings", Run: checkSettings},
	{ID: "config.ownership", Section: SectionConfig, Name: "ownership", Run: checkOwnership},
	{ID: "config.state", Section: SectionConfig, Name: "state file", Run: checkState},

	{ID: "daemon.installed", Section: SectionDaemon, Name: "service", Run: checkDaemonInstalled},
	{ID: "daemon.running", Section: SectionDaemon, Name: "watch", Run: checkDaemonRunning},
	{ID: "daemon.health", Section: SectionDaemon, Name: "health", Run: checkDaemonHealth},
	{ID: "daemon.bounds", Section: SectionDaemon, Name: "bounds", Run: checkBounds},
}
