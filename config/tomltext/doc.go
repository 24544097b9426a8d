// SPDX-License-Identifier: Apache-2.0

// Package tomltext finds in the text of a TOML file what the TOML library
// does not report: where a key and its value stand (Source: the library
// keeps key positions unexported and only hints at them in its errors),
// nesting too deep to decode safely (TooComplex), and values with a unit
// written without their quotes (FindUnquoted). Package config places its
// problems with it, FILE:LINE:COL.
package tomltext
