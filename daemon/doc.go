// Package daemon owns remoted's Unix-socket HTTP API: peer-credential access
// control, the route table and error mapping, the chat WebSocket, the prompt
// service and the run hub. It builds on config, providers, provisioning,
// lxdexec and the store; nothing outside cmd/ imports it.
package daemon
