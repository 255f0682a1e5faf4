// Package config owns the daemon's TOML configuration: the schema, the one
// set of defaults (Default), strict decoding that names file, line and key on
// every error, and validation. It imports nothing of this module.
package config
