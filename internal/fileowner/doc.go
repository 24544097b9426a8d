// SPDX-License-Identifier: Apache-2.0

// Package fileowner tells who owns a file, where the system says: the one
// fact behind the config and state directories' "root-owned" checks.
package fileowner
