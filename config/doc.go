// Package config owns the daemon's TOML configuration: the schema, the one
// set of defaults (Default), strict decoding that names file, line and key on
// every error, validation, and the reference (DefaultTOML: the defaults with
// every key's one-line doc tag, as remoted -print-default-config prints
// them). It imports nothing of this module.
package config
